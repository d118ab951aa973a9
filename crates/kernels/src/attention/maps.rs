//! The slow path for attention maps: full probability rows of a short prompt, from the naive
//! reference run on the K/V as stored (dequantized) with the queries as the kernels use them.
//! Costs O(n x kv_len) memory; analysis only.

use super::AttentionError;
use super::checks::check_call;
use super::kv::KvLayer;
use crate::SimdLevel;
use crate::reference::{AttentionShape, GateScores, causal_attention};

/// Probabilities `[n, num_heads, q_start + n]` of queries `q` (`[n, num_heads, head_dim]`) at
/// positions `q_start..q_start + n`.
pub fn attention_maps(
    shape: AttentionShape,
    q: &[f32],
    q_start: usize,
    n: usize,
    kv: &KvLayer,
) -> Result<Vec<f32>, AttentionError> {
    let mut out = vec![0.0f32; n * shape.num_heads * shape.head_dim];
    check_call(
        SimdLevel::Scalar,
        shape,
        q,
        q_start,
        n,
        kv,
        GateScores::None,
        &out,
    )?;
    let kv_len = q_start + n;
    let d = shape.head_dim;
    let k: Vec<Vec<f32>> = (0..shape.num_kv_heads)
        .map(|j| kv.dequantized_k(j)[..kv_len * d].to_vec())
        .collect();
    let v: Vec<Vec<f32>> = (0..shape.num_kv_heads)
        .map(|j| kv.dequantized_v(j)[..kv_len * d].to_vec())
        .collect();
    let k_heads: Vec<&[f32]> = k.iter().map(Vec::as_slice).collect();
    let v_heads: Vec<&[f32]> = v.iter().map(Vec::as_slice).collect();
    // The queries as the kernels use them against this cache (rounded to int8 for int8 K).
    let q = super::queries_as_used(kv.dtype(), q, d);
    let mut probs = vec![0.0f32; n * shape.num_heads * kv_len];
    causal_attention(
        shape,
        &q,
        q_start,
        n,
        &k_heads,
        &v_heads,
        kv_len,
        &mut out,
        Some(&mut probs),
    );
    Ok(probs)
}
