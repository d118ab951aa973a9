//! Causal grouped-query attention with a materialized softmax, and the paper's output gate.

use super::activations::{sigmoid, softmax_in_place};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionShape {
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
}

impl AttentionShape {
    /// Query heads sharing one KV head.
    pub fn group_size(&self) -> usize {
        self.num_heads / self.num_kv_heads
    }
}

/// The gate scores (pre-sigmoid) of a chunk of `n` query tokens.
#[derive(Debug, Clone, Copy)]
pub enum GateScores<'a> {
    /// Baseline model: no gate.
    None,
    /// One scalar per head: `[n, num_heads]`.
    Headwise(&'a [f32]),
    /// One value per head dimension: `[n, num_heads * head_dim]`.
    Elementwise(&'a [f32]),
}

/// Causal softmax attention of `n` queries at absolute positions `q_start .. q_start + n`
/// against the keys at positions `0 .. kv_len` (`kv_len >= q_start + n`).
///
/// - `q`: `[n, num_heads, head_dim]` (after q_norm and RoPE)
/// - `k_heads[j]`, `v_heads[j]`: KV head `j` as `[kv_len, head_dim]` (at least; longer is ignored)
/// - `out`: `[n, num_heads * head_dim]`
/// - `probs_out`: if given, receives the probabilities `[n, num_heads, kv_len]` (attention maps)
///
/// Query head `h` reads KV head `h / group_size`; scores are scaled by `1/sqrt(head_dim)`.
#[allow(
    clippy::too_many_arguments,
    reason = "the oracle takes K/V as plain per-head slices, apart from any cache type"
)]
pub fn causal_attention(
    shape: AttentionShape,
    q: &[f32],
    q_start: usize,
    n: usize,
    k_heads: &[&[f32]],
    v_heads: &[&[f32]],
    kv_len: usize,
    out: &mut [f32],
    mut probs_out: Option<&mut [f32]>,
) {
    let AttentionShape {
        num_heads,
        num_kv_heads,
        head_dim,
    } = shape;
    assert_eq!(q.len(), n * num_heads * head_dim);
    assert_eq!(out.len(), n * num_heads * head_dim);
    assert_eq!(k_heads.len(), num_kv_heads);
    assert!(q_start + n <= kv_len, "queries past the end of the keys");
    let scale = 1.0 / (head_dim as f32).sqrt();
    let group = shape.group_size();
    let mut scores = vec![0.0f32; kv_len];
    for t in 0..n {
        let visible = q_start + t + 1; // causal: keys 0..=position
        for h in 0..num_heads {
            let kv = h / group;
            let q_h = &q[(t * num_heads + h) * head_dim..][..head_dim];
            for (s, score) in scores.iter_mut().enumerate() {
                *score = if s < visible {
                    let k_s = &k_heads[kv][s * head_dim..][..head_dim];
                    scale * (0..head_dim).map(|d| q_h[d] * k_s[d]).sum::<f32>()
                } else {
                    f32::NEG_INFINITY
                };
            }
            softmax_in_place(&mut scores);
            let out_h = &mut out[(t * num_heads + h) * head_dim..][..head_dim];
            out_h.iter_mut().for_each(|o| *o = 0.0);
            for (s, &p) in scores.iter().enumerate().take(visible) {
                let v_s = &v_heads[kv][s * head_dim..][..head_dim];
                for d in 0..head_dim {
                    out_h[d] += p * v_s[d];
                }
            }
            if let Some(probs) = probs_out.as_deref_mut() {
                probs[(t * num_heads + h) * kv_len..][..kv_len].copy_from_slice(&scores);
            }
        }
    }
}

/// The paper's gate: `out_h = attn_h * sigmoid(gate_h)`, in place on `[n, num_heads * head_dim]`.
pub fn apply_output_gate(attn: &mut [f32], gate: GateScores<'_>, head_dim: usize) {
    match gate {
        GateScores::None => {}
        GateScores::Headwise(scores) => {
            assert_eq!(scores.len() * head_dim, attn.len());
            for (head_out, &score) in attn.chunks_exact_mut(head_dim).zip(scores) {
                let g = sigmoid(score);
                head_out.iter_mut().for_each(|v| *v *= g);
            }
        }
        GateScores::Elementwise(scores) => {
            assert_eq!(scores.len(), attn.len());
            for (v, &score) in attn.iter_mut().zip(scores) {
                *v *= sigmoid(score);
            }
        }
    }
}
