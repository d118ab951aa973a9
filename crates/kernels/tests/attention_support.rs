//! Shared helpers of the attention tests (included with `#[path]`; no tests of its own).
#![allow(dead_code)]

use gattn_kernels::attention::{AttentionShape, AttentionStats, GateScores, KvDtype, KvLayer};
use gattn_kernels::reference::{apply_output_gate, causal_attention, sigmoid};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[path = "checks/mod.rs"]
mod checks;
#[allow(unused_imports)] // each test file uses a part
pub use checks::{
    Feature, current_test, feature_or_skip, levels_under_test, max_abs_diff, tables_under_test,
};

pub fn random_vec(rng: &mut StdRng, len: usize, amplitude: f32) -> Vec<f32> {
    (0..len)
        .map(|_| rng.random_range(-amplitude..amplitude))
        .collect()
}

/// Random K/V rows `[kv_len, kv_heads * head_dim]`.
pub fn random_kv(rng: &mut StdRng, shape: AttentionShape, kv_len: usize) -> (Vec<f32>, Vec<f32>) {
    let row = shape.num_kv_heads * shape.head_dim;
    (
        random_vec(rng, kv_len * row, 1.0),
        random_vec(rng, kv_len * row, 1.0),
    )
}

/// A layer holding `k`, `v`, appended in two pieces (as prompt chunks would be).
pub fn layer_from(dtype: KvDtype, shape: AttentionShape, k: &[f32], v: &[f32]) -> KvLayer {
    let row = shape.num_kv_heads * shape.head_dim;
    let kv_len = k.len() / row;
    let mut layer = KvLayer::new(dtype, shape.num_kv_heads, shape.head_dim).unwrap();
    let first = kv_len / 2;
    layer.reserve(first.max(1)).unwrap();
    layer.append(&k[..first * row], &v[..first * row]).unwrap();
    layer.reserve(kv_len).unwrap();
    layer.append(&k[first * row..], &v[first * row..]).unwrap();
    assert_eq!(layer.len(), kv_len);
    layer
}

/// Splits `[kv_len, kv_heads * head_dim]` rows into per-head `[kv_len, head_dim]`.
pub fn per_head(rows: &[f32], shape: AttentionShape) -> Vec<Vec<f32>> {
    let d = shape.head_dim;
    let row = shape.num_kv_heads * d;
    (0..shape.num_kv_heads)
        .map(|j| {
            rows.chunks_exact(row)
                .flat_map(|r| r[j * d..][..d].iter().copied())
                .collect()
        })
        .collect()
}

pub struct Reference {
    pub out: Vec<f32>,
    pub stats: AttentionStats,
}

/// Naive attention + gate on the given per-head K/V, and the statistics from its probabilities.
#[allow(clippy::too_many_arguments)]
pub fn reference(
    shape: AttentionShape,
    q: &[f32],
    q_start: usize,
    n: usize,
    k_heads: &[Vec<f32>],
    v_heads: &[Vec<f32>],
    gate: GateScores<'_>,
) -> Reference {
    let kv_len = q_start + n;
    let d = shape.head_dim;
    let k: Vec<&[f32]> = k_heads.iter().map(|h| &h[..kv_len * d]).collect();
    let v: Vec<&[f32]> = v_heads.iter().map(|h| &h[..kv_len * d]).collect();
    let mut out = vec![0.0; n * shape.num_heads * d];
    let mut probs = vec![0.0; n * shape.num_heads * kv_len];
    causal_attention(
        shape,
        q,
        q_start,
        n,
        &k,
        &v,
        kv_len,
        &mut out,
        Some(&mut probs),
    );
    apply_output_gate(&mut out, gate, d);

    let mut stats = AttentionStats::default();
    for row in probs.chunks_exact(kv_len) {
        stats.sink_mass_sum += row[0] as f64;
        stats.sink_rows += 1;
    }
    let per_query = |scores: &[f32]| scores.len() / n;
    let gate_values: Option<&[f32]> = match gate {
        GateScores::None => None,
        GateScores::Headwise(g) | GateScores::Elementwise(g) => Some(g),
    };
    if let Some(g) = gate_values {
        let per = per_query(g);
        for (t, chunk) in g.chunks_exact(per).enumerate() {
            for &score in chunk {
                let s = sigmoid(score);
                stats.gate_sum += s as f64;
                stats.gate_count += 1;
                stats.gate_below_0_1 += (s < 0.1) as u64;
                if q_start + t == 0 {
                    stats.first_token_gate_sum += s as f64;
                    stats.first_token_gate_count += 1;
                }
            }
        }
    }
    Reference { out, stats }
}

/// Gate scores of `n` queries for mode 0 (none), 1 (headwise), 2 (elementwise), spanning sigmoid
/// values from ~0.01 to ~0.99.
pub fn random_gate(rng: &mut StdRng, mode: u8, n: usize, shape: AttentionShape) -> Vec<f32> {
    match mode {
        0 => Vec::new(),
        1 => random_vec(rng, n * shape.num_heads, 5.0),
        _ => random_vec(rng, n * shape.num_heads * shape.head_dim, 5.0),
    }
}

pub fn gate_of(mode: u8, scores: &[f32]) -> GateScores<'_> {
    match mode {
        0 => GateScores::None,
        1 => GateScores::Headwise(scores),
        _ => GateScores::Elementwise(scores),
    }
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// Stats agree: counts exactly, sums to a relative 1e-4 of their row/gate counts.
pub fn assert_stats_close(got: &AttentionStats, want: &AttentionStats) {
    assert_eq!(got.sink_rows, want.sink_rows);
    assert_eq!(got.gate_count, want.gate_count);
    assert_eq!(got.first_token_gate_count, want.first_token_gate_count);
    assert!(
        (got.sink_mass_sum - want.sink_mass_sum).abs() <= 1e-4 * want.sink_rows as f64 + 1e-6,
        "sink mass {} vs {}",
        got.sink_mass_sum,
        want.sink_mass_sum
    );
    assert!((got.gate_sum - want.gate_sum).abs() <= 1e-5 * want.gate_count as f64 + 1e-6);
    assert!(
        (got.first_token_gate_sum - want.first_token_gate_sum).abs()
            <= 1e-5 * want.gate_count as f64 + 1e-6
    );
    // Same sigmoid code on both sides; a value within an ulp of 0.1 could still flip.
    assert!(got.gate_below_0_1.abs_diff(want.gate_below_0_1) <= 1 + want.gate_count / 10_000);
}
