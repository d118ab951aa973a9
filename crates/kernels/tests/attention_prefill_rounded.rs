//! Prefill over a bf16 or int8 cache, with every kernel table (AMX tiles, and the query rows in
//! the vector lanes at every level, on `vdpbf16ps`, `vpdpbusd`/`vpdpwssd`, `vpmaddwd` or fused
//! multiply-adds and integer loops), equals
//! naive attention + gate on the queries as the kernels use them (rounded to bf16, or to int8),
//! on the stored K/V, within a bound derived from the rounding of the weights of `P V`: shapes
//! with tails (head dims 64 and 128, and 40, 72 and 65 for the vector lanes; lengths not multiples
//! of the 16-key tiles, the 64-key steps or the key pairs), chunks on top of a cache, GQA groups
//! 1, 2 and 4, every gate; the keys of each work item whole or split in ranges (split-K, merged
//! before the epilogue: the same bound, as each range's weights are steps of its own tiles).
//!
//! The bound of a bf16 cache: the kernels weigh key `k` by `p_k (1 + d_k)`, `|d_k| <= u = 2^-8`
//! (bf16 rounding to nearest), and divide by the sum of the weights as rounded, so each
//! normalized weight `w_k` moves by at most `w_k * 2u / (1 - u)` and an output element by at most
//! `2u / (1 - u) * sum_k w_k |v_k|` (the sigmoid gate only shrinks it).
//!
//! The bound of an int8 cache: `P V` multiplies V's integers `n_k` (`v_k = s_k n_k`) by integer
//! weights, `w_k s_k` in steps of `m_T / 32767` for each row and block `T` of 64 keys (`m_T` the
//! block's largest `w_k s_k`), so each weight moves by at most half a step and an output element
//! by at most `sum_T m_T / 65534 * sum_{k in T} |n_k|`: at most `2^-10 max_k |v_k|` (64 keys of
//! at most 127 a block, and the blocks' largest weights sum to at most 1), below the cache's own
//! rounding of V (half of `s_k`).
//!
//! The bound on AMX tiles (both caches): the probabilities come from an exponential with
//! relative error `e_k`, `|e_k| <= r` (`AMX_PREFILL_EXP_REL_ERROR`), and `P V` is a bf16
//! product of V (over an int8 cache: of V's integers `n_k`, exact in bf16, with each key's scale
//! `s_k` in its weight) by the weights rounded to bf16, `p_k (1 + e_k) (1 + d_k)` with `|d_k| <=
//! u`, divided by the sum of the `p_k (1 + e_k)` before rounding. So each normalized weight
//! moves by at most `w_k ((1 + r)(1 + u) / (1 - r) - 1)`, about `(u + 2r) w_k`, and an output
//! element by that times `sum_k w_k |v_k|`: about `2^-8 max_k |v_k|`, the cache's own rounding
//! of V for an int8 cache (half of `s_k`, `max |v| / 254`). (Quantizing `P` to u8 for `tdpbusd`
//! instead would move weights by half of `m_T / 255` over blocks of 64 keys: up to `2^-3 max_k
//! |v_k|`.)
//!
//! All: the scores are exact products (bf16 values summed in f32, or integers), whose error,
//! like the vector kernels' exponential's (~1e-7 relative), is covered by a relative slack of
//! 1e-5 of `sum_k w_k |v_k|` and 1e-6 absolute.

#[path = "attention_support.rs"]
mod support;

use gattn_kernels::attention::{
    AMX_PREFILL_EXP_REL_ERROR, AttentionCall, AttentionShape, AttentionStats, KvDtype,
    prefill_key_parts, prefill_on, prefill_uses_amx_tiles, prefill_with_key_parts, queries_as_used,
};
use gattn_kernels::reference::{apply_output_gate, causal_attention};
use gattn_kernels::{KernelTable, SimdLevel};
use half::bf16;
use proptest::prelude::*;
use support::*;

const BF16_UNIT_ROUNDOFF: f32 = 1.0 / 256.0;
/// An int8 cache's weights of `P V`: integers up to this, a row and block of keys.
const INT8_WEIGHT_STEPS: f32 = 32767.0;
/// The blocks of keys those steps are set for (lane prefill's key tiles, from key 0).
const INT8_WEIGHT_BLOCK: usize = 64;

/// The int8 bound's term of one output row, `[head_dim]`: `sum_T m_T / (2 * 32767) * sum_{k in
/// T} |n_k,e|` over the blocks `T` of the row's weights `w` and its head's stored values
/// `v` (`[keys, d]`, `s_k` its rows' largest magnitude / 127).
fn int8_weight_steps_bound(w: &[f32], v: &[f32], d: usize) -> Vec<f32> {
    let rows: Vec<&[f32]> = v.chunks_exact(d).take(w.len()).collect();
    let scales: Vec<f32> = rows
        .iter()
        .map(|row| row.iter().fold(0.0f32, |m, x| m.max(x.abs())) / 127.0)
        .collect();
    let mut bound = vec![0.0f32; d];
    let block = INT8_WEIGHT_BLOCK;
    for ((weights, scales), rows) in w
        .chunks(block)
        .zip(scales.chunks(block))
        .zip(rows.chunks(block))
    {
        let largest = weights
            .iter()
            .zip(scales)
            .fold(0.0f32, |m, (w, s)| m.max(w * s));
        let half_step = largest / (2.0 * INT8_WEIGHT_STEPS);
        // `|n_k,e| = |v_k,e| / s_k` (a zero row adds nothing).
        for (row, &s) in rows.iter().zip(scales).filter(|(_, s)| **s > 0.0) {
            for (x, value) in bound.iter_mut().zip(row.iter()) {
                *x += half_step * value.abs() / s;
            }
        }
    }
    bound
}

#[derive(Debug, Clone)]
struct Case {
    dtype: KvDtype,
    num_kv_heads: usize,
    group: usize,
    head_dim: usize,
    gate_mode: u8,
    /// Keys in the cache (some past the chunk, which causality hides).
    kv_len: usize,
    q_start: usize,
    n: usize,
    q_amplitude: f32,
    seed: u64,
    /// Key ranges per work item of the vector kernels (1: whole).
    parts: usize,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        (1usize..=2, prop::sample::select(vec![1usize, 2, 4])),
        (
            prop::sample::select(vec![KvDtype::Bf16, KvDtype::Int8]),
            prop::sample::select(vec![64usize, 128, 40, 72, 65]),
        ),
        0u8..3,
        prop_oneof![3 => 1usize..=200, 1 => 200usize..=1500],
        0usize..40,
        any::<u64>(),
        (
            prop::sample::select(vec![0.5f32, 2.0, 8.0, 30.0]),
            1usize..=4,
        ),
    )
        .prop_flat_map(
            |((kvh, group), (dtype, d), gate_mode, end, extra, seed, (amp, parts))| {
                let max_n = if end > 200 { 24 } else { 80 }.min(end);
                (1..=max_n).prop_map(move |n| Case {
                    dtype,
                    num_kv_heads: kvh,
                    group,
                    head_dim: d,
                    gate_mode,
                    kv_len: end + extra,
                    q_start: end - n,
                    n,
                    q_amplitude: amp,
                    seed,
                    parts,
                })
            },
        )
}

/// The AVX-512 kernel table with the AMX entries, where this machine has them.
fn amx_table() -> Option<&'static KernelTable> {
    KernelTable::get(SimdLevel::Avx512, true)
}

/// Reports the skip (a failure under `GATTN_REQUIRE_SIMD=amx`) where AMX is missing.
fn amx_available() -> bool {
    feature_or_skip(&current_test(), Feature::Amx)
}

fn round_to_bf16(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| bf16::from_f32(v).to_f32()).collect()
}

fn check(case: &Case, table: &KernelTable) -> Result<(), TestCaseError> {
    let shape = AttentionShape {
        num_heads: case.num_kv_heads * case.group,
        num_kv_heads: case.num_kv_heads,
        head_dim: case.head_dim,
    };
    let (n, d, heads) = (case.n, shape.head_dim, shape.num_heads);
    let mut rng = rng(case.seed);
    let (k, v) = random_kv(&mut rng, shape, case.kv_len);
    let q = random_vec(&mut rng, n * heads * d, case.q_amplitude);
    let gate_scores = random_gate(&mut rng, case.gate_mode, n, shape);
    let gate = gate_of(case.gate_mode, &gate_scores);
    let layer = layer_from(case.dtype, shape, &k, &v);
    let queries_used = match case.dtype {
        KvDtype::Bf16 => round_to_bf16(&q),
        dtype => queries_as_used(dtype, &q, d).into_owned(),
    };

    // The reference on the stored K/V and the rounded queries, with its probabilities.
    let keys = case.q_start + n;
    let stored_k: Vec<Vec<f32>> = (0..shape.num_kv_heads)
        .map(|j| layer.dequantized_k(j))
        .collect();
    let stored_v: Vec<Vec<f32>> = (0..shape.num_kv_heads)
        .map(|j| layer.dequantized_v(j))
        .collect();
    let k_heads: Vec<&[f32]> = stored_k.iter().map(|h| &h[..keys * d]).collect();
    let v_heads: Vec<&[f32]> = stored_v.iter().map(|h| &h[..keys * d]).collect();
    let mut want = vec![0.0; n * heads * d];
    let mut probs = vec![0.0; n * heads * keys];
    causal_attention(
        shape,
        &queries_used,
        case.q_start,
        n,
        &k_heads,
        &v_heads,
        keys,
        &mut want,
        Some(&mut probs),
    );
    apply_output_gate(&mut want, gate, d);

    let mut out = vec![f32::NAN; want.len()];
    let mut stats = AttentionStats::default();
    prefill_with_key_parts(
        table,
        AttentionCall {
            shape,
            queries: &q,
            q_start: case.q_start,
            n,
            kv: &layer,
            gate,
        },
        &mut out,
        Some(&mut stats),
        case.parts,
    )
    .unwrap();

    let u = BF16_UNIT_ROUNDOFF;
    let on_tiles = prefill_uses_amx_tiles(table, case.dtype, d);
    let r = AMX_PREFILL_EXP_REL_ERROR;
    let factor = match case.dtype {
        _ if on_tiles => (1.0 + r) * (1.0 + u) / (1.0 - r) - 1.0 + 1e-5,
        KvDtype::Int8 => 1e-5,
        _ => 2.0 * u / (1.0 - u) + 1e-5,
    };
    for row in 0..n * heads {
        let (h, w) = (row % heads, &probs[row * keys..][..keys]);
        let vh = v_heads[h / case.group];
        let steps = match case.dtype {
            KvDtype::Int8 if !on_tiles => int8_weight_steps_bound(w, vh, d),
            _ => vec![0.0; d],
        };
        for e in 0..d {
            let weighted: f32 = w
                .iter()
                .enumerate()
                .map(|(s, p)| p * vh[s * d + e].abs())
                .sum();
            let bound = factor * weighted + steps[e] + 1e-6;
            let (got, expected) = (out[row * d + e], want[row * d + e]);
            prop_assert!(
                (got - expected).abs() <= bound,
                "{}: row {row} dim {e}: {got} vs {expected}, bound {bound}",
                table.name()
            );
        }
    }

    // Statistics: the sink share of each row moves by at most `factor` of itself (an int8
    // cache's probabilities are summed as computed).
    let sink_want: f64 = probs.chunks_exact(keys).map(|r| r[0] as f64).sum();
    prop_assert_eq!(stats.sink_rows, (n * heads) as u64);
    prop_assert!(
        (stats.sink_mass_sum - sink_want).abs() <= factor as f64 * sink_want + 1e-5,
        "{}: sink mass {} vs {}",
        table.name(),
        stats.sink_mass_sum,
        sink_want
    );
    let gates_want = if case.gate_mode == 0 {
        0
    } else {
        gate_scores.len() as u64
    };
    prop_assert_eq!(stats.gate_count, gates_want);

    // Without statistics the output is the same.
    let mut plain = vec![f32::NAN; want.len()];
    prefill_with_key_parts(
        table,
        AttentionCall {
            shape,
            queries: &q,
            q_start: case.q_start,
            n,
            kv: &layer,
            gate,
        },
        &mut plain,
        None,
        case.parts,
    )
    .unwrap();
    prop_assert_eq!(plain, out);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn rounded_prefill_matches_reference_within_bound(case in cases()) {
        for table in tables_under_test() {
            check(&case, table)?;
        }
    }
}

/// A long chunk on top of a cache: several blocks per KV head and several 64-key steps, the
/// diagonal steps masked inside a tile.
#[test]
fn rounded_prefill_long_chunk_on_a_cache() {
    let shapes = [(2, 128, 1u8), (4, 64, 2), (1, 128, 0)];
    for ((group, head_dim, gate_mode), dtype) in
        shapes
            .into_iter()
            .zip([KvDtype::Bf16, KvDtype::Int8, KvDtype::Bf16])
    {
        let case = Case {
            dtype,
            num_kv_heads: 2,
            group,
            head_dim,
            gate_mode,
            kv_len: 700,
            q_start: 347,
            n: 333,
            q_amplitude: 4.0,
            seed: 7 + group as u64,
            parts: 1,
        };
        for table in tables_under_test() {
            for parts in [1, 2, 5] {
                check(
                    &Case {
                        parts,
                        ..case.clone()
                    },
                    table,
                )
                .unwrap();
            }
        }
    }
}

/// Other shapes run the vector kernel: head dims that are not whole chunks of 64 bytes (32 bf16
/// or 64 int8 dims), an f32 cache, other levels.
#[test]
fn amx_prefill_takes_bf16_and_int8_in_whole_chunks() {
    if !amx_available() {
        return;
    }
    let amx = amx_table().expect("checked above");
    assert!(prefill_uses_amx_tiles(amx, KvDtype::Bf16, 128));
    assert!(prefill_uses_amx_tiles(amx, KvDtype::Bf16, 96));
    assert!(!prefill_uses_amx_tiles(amx, KvDtype::Bf16, 72));
    assert!(prefill_uses_amx_tiles(amx, KvDtype::Int8, 128));
    assert!(prefill_uses_amx_tiles(amx, KvDtype::Int8, 64));
    assert!(!prefill_uses_amx_tiles(amx, KvDtype::Int8, 96));
    assert!(!prefill_uses_amx_tiles(amx, KvDtype::F32, 128));
    let plain = KernelTable::get(SimdLevel::Avx512, false).expect("AMX implies AVX-512");
    assert!(!prefill_uses_amx_tiles(plain, KvDtype::Bf16, 128));
}

/// The split a prefill call takes by itself: whole items where they give each thread two, key
/// ranges of at least 2048 keys for a short chunk deep in the cache on few KV heads; and
/// `prefill_on` runs that split (the bits of the explicit call), within the bound.
#[test]
fn prefill_splits_keys_where_items_are_too_few() {
    let qwen3_1_7b = AttentionShape {
        num_heads: 16,
        num_kv_heads: 8,
        head_dim: 128,
    };
    assert_eq!(prefill_key_parts(qwen3_1_7b, 512, 32768 + 512, 2), 1);
    assert_eq!(prefill_key_parts(qwen3_1_7b, 16, 32768, 8), 2);
    let one_kv_head = AttentionShape {
        num_heads: 8,
        num_kv_heads: 1,
        head_dim: 64,
    };
    assert_eq!(prefill_key_parts(one_kv_head, 16, 32768, 2), 4);
    assert_eq!(
        prefill_key_parts(one_kv_head, 16, 5000, 2),
        2,
        "no part under 2048 keys"
    );
    assert_eq!(prefill_key_parts(one_kv_head, 16, 1000, 8), 1);
    assert_eq!(
        prefill_key_parts(one_kv_head, 16, 5000, 1),
        2,
        "one thread, two items"
    );

    let (n, kv_len) = (16, 5000);
    let case = Case {
        dtype: KvDtype::Int8,
        num_kv_heads: 1,
        group: 8,
        head_dim: 64,
        gate_mode: 1,
        kv_len,
        q_start: kv_len - n,
        n,
        q_amplitude: 8.0,
        seed: 11,
        parts: 2,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    for dtype in [KvDtype::Int8, KvDtype::Bf16] {
        let case = Case {
            dtype,
            ..case.clone()
        };
        let mut rng = rng(case.seed);
        let shape = one_kv_head;
        let (k, v) = random_kv(&mut rng, shape, kv_len);
        let q = random_vec(&mut rng, n * shape.num_heads * shape.head_dim, 8.0);
        let layer = layer_from(dtype, shape, &k, &v);
        for table in tables_under_test() {
            check(&case, table).unwrap();
            let call = AttentionCall {
                shape,
                queries: &q,
                q_start: case.q_start,
                n,
                kv: &layer,
                gate: gate_of(0, &[]),
            };
            let (mut by_itself, mut split) = (vec![0.0; q.len()], vec![0.0; q.len()]);
            pool.install(|| prefill_on(table, call, &mut by_itself, None))
                .unwrap();
            prefill_with_key_parts(table, call, &mut split, None, 2).unwrap();
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&by_itself), bits(&split), "{}", table.name());
        }
    }
}
