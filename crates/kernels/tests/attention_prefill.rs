//! The fused prefill kernel equals naive attention + gate at every SIMD level, for f32 KV exactly
//! up to rounding, and for f32, bf16 and int8 KV within a stated bound against the original f32
//! K/V; random GQA shapes, head dims (odd included), chunks and offsets. Against a bf16 or int8
//! cache as stored the kernels round the probabilities to bf16: that bound is tested in
//! attention_prefill_rounded.rs.

#[path = "attention_support.rs"]
mod support;

use gattn_kernels::SimdLevel;
use gattn_kernels::attention::{
    AttentionCall, AttentionError, AttentionShape, AttentionStats, KvDtype, prefill,
    queries_as_used,
};
use proptest::prelude::*;
use support::*;

/// Against the reference on the stored (dequantized) K/V: only summation order differs.
const TOL_STORED: f32 = 1e-4;
/// Against the reference on the original f32 K/V, with score scale <= 2 (|q| <= 2, |k| <= 1).
const TOL_ORIGINAL_BF16: f32 = 2e-2;
const TOL_ORIGINAL_INT8: f32 = 4e-2;

#[derive(Debug, Clone)]
struct Case {
    num_kv_heads: usize,
    group: usize,
    head_dim: usize,
    dtype: KvDtype,
    gate_mode: u8,
    kv_len: usize,
    q_start: usize,
    n: usize,
    q_amplitude: f32,
    seed: u64,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        (1usize..=2, prop::sample::select(vec![1usize, 2, 4, 8])),
        prop::sample::select(vec![64usize, 128, 40, 72, 65]),
        prop::sample::select(vec![KvDtype::F32, KvDtype::Bf16, KvDtype::Int8]),
        0u8..3,
        // Mostly short, sometimes long key ranges; crossing the 64-key tiles either way.
        prop_oneof![3 => 1usize..=300, 1 => 300usize..=4096],
        any::<u64>(),
        prop::sample::select(vec![0.5f32, 2.0, 8.0]),
    )
        .prop_flat_map(|((kvh, group), d, dtype, gate_mode, kv_len, seed, amp)| {
            // Long ranges get short chunks so the naive reference stays cheap.
            let max_n = if kv_len > 300 { 8 } else { 70 }.min(kv_len);
            (1..=max_n).prop_map(move |n| Case {
                num_kv_heads: kvh,
                group,
                head_dim: d,
                dtype,
                gate_mode,
                kv_len,
                q_start: kv_len - n,
                n,
                q_amplitude: amp,
                seed,
            })
        })
}

fn check(case: &Case) {
    let shape = AttentionShape {
        num_heads: case.num_kv_heads * case.group,
        num_kv_heads: case.num_kv_heads,
        head_dim: case.head_dim,
    };
    let mut rng = rng(case.seed);
    let (k, v) = random_kv(&mut rng, shape, case.kv_len);
    let q = random_vec(
        &mut rng,
        case.n * shape.num_heads * shape.head_dim,
        case.q_amplitude,
    );
    let gate_scores = random_gate(&mut rng, case.gate_mode, case.n, shape);
    let gate = gate_of(case.gate_mode, &gate_scores);
    let layer = layer_from(case.dtype, shape, &k, &v);

    let stored_k: Vec<Vec<f32>> = (0..shape.num_kv_heads)
        .map(|j| layer.dequantized_k(j))
        .collect();
    let stored_v: Vec<Vec<f32>> = (0..shape.num_kv_heads)
        .map(|j| layer.dequantized_v(j))
        .collect();
    let q_used = queries_as_used(case.dtype, &q, shape.head_dim);
    let want = reference(
        shape,
        &q_used,
        case.q_start,
        case.n,
        &stored_k,
        &stored_v,
        gate,
    );
    let original = (case.dtype != KvDtype::F32 && case.q_amplitude <= 2.0).then(|| {
        reference(
            shape,
            &q,
            case.q_start,
            case.n,
            &per_head(&k, shape),
            &per_head(&v, shape),
            gate,
        )
    });

    for level in levels_under_test() {
        let mut out = vec![f32::NAN; want.out.len()];
        let mut stats = AttentionStats::default();
        prefill(
            level,
            AttentionCall {
                shape,
                queries: &q,
                q_start: case.q_start,
                n: case.n,
                kv: &layer,
                gate,
            },
            &mut out,
            Some(&mut stats),
        )
        .unwrap();
        if case.dtype == KvDtype::F32 {
            let diff = max_abs_diff(&out, &want.out);
            assert!(
                diff <= TOL_STORED,
                "{level}: max diff {diff} vs reference on stored K/V"
            );
            assert_stats_close(&stats, &want.stats);
        }
        if let Some(original) = &original {
            let tol = if case.dtype == KvDtype::Bf16 {
                TOL_ORIGINAL_BF16
            } else {
                TOL_ORIGINAL_INT8
            };
            let diff = max_abs_diff(&out, &original.out);
            assert!(
                diff <= tol,
                "{level}: max diff {diff} vs reference on original f32 K/V"
            );
        }
        // Without stats the output is the same.
        let mut plain = vec![f32::NAN; want.out.len()];
        prefill(
            level,
            AttentionCall {
                shape,
                queries: &q,
                q_start: case.q_start,
                n: case.n,
                kv: &layer,
                gate,
            },
            &mut plain,
            None,
        )
        .unwrap();
        assert_eq!(plain, out, "{level}: stats changed the output");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn prefill_matches_reference(case in cases()) {
        check(&case);
    }

    /// Chunks in the middle of the keys: the kernel ignores keys past the chunk (causality).
    #[test]
    fn prefill_chunk_at_offset_ignores_later_keys(extra in 1usize..100, seed in any::<u64>()) {
        let case = Case { num_kv_heads: 2, group: 2, head_dim: 64, dtype: KvDtype::F32, gate_mode: 1,
            kv_len: 150, q_start: 80, n: 70, q_amplitude: 2.0, seed };
        let shape = AttentionShape { num_heads: 4, num_kv_heads: 2, head_dim: 64 };
        let mut rng = rng(seed);
        let (k, v) = random_kv(&mut rng, shape, case.kv_len + extra);
        let q = random_vec(&mut rng, case.n * 4 * 64, 2.0);
        let g = random_gate(&mut rng, 1, case.n, shape);
        let layer = layer_from(KvDtype::F32, shape, &k, &v);
        let want = reference(shape, &q, case.q_start, case.n, &per_head(&k, shape), &per_head(&v, shape), gate_of(1, &g));
        for level in levels_under_test() {
            let mut out = vec![0.0; want.out.len()];
            prefill(level, AttentionCall { shape, queries: &q, q_start: case.q_start, n: case.n, kv: &layer, gate: gate_of(1, &g) }, &mut out, None).unwrap();
            prop_assert!(max_abs_diff(&out, &want.out) <= TOL_STORED);
        }
    }
}

#[test]
fn prefill_rejects_bad_arguments() {
    let shape = AttentionShape {
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: 8,
    };
    let layer = layer_from(KvDtype::Bf16, shape, &[0.5; 3 * 16], &[0.5; 3 * 16]);
    let q = vec![0.0; 2 * 32];
    let mut out = vec![0.0; 2 * 32];
    let level = SimdLevel::Scalar;
    let none = gattn_kernels::attention::GateScores::None;
    let call = |shape, queries, q_start, gate| AttentionCall {
        shape,
        queries,
        q_start,
        n: 2,
        kv: &layer,
        gate,
    };
    let err = prefill(level, call(shape, &q, 2, none), &mut out, None).unwrap_err();
    assert!(
        matches!(
            err,
            AttentionError::QueriesPastKeys {
                q_end: 4,
                kv_len: 3
            }
        ),
        "past the keys: {err}"
    );
    let err = prefill(level, call(shape, &q[1..], 0, none), &mut out, None).unwrap_err();
    assert!(
        matches!(
            err,
            AttentionError::BadLength {
                what: "q",
                got: 63,
                expected: 64
            }
        ),
        "q length: {err}"
    );
    let bad = AttentionShape {
        num_heads: 3,
        ..shape
    };
    let err = prefill(level, call(bad, &q, 0, none), &mut out, None).unwrap_err();
    assert!(
        matches!(err, AttentionError::BadShape(s) if s == bad),
        "heads % kv heads: {err}"
    );
    let gate = gattn_kernels::attention::GateScores::Headwise(&[0.0; 3]);
    let err = prefill(level, call(shape, &q, 0, gate), &mut out, None).unwrap_err();
    assert!(
        matches!(
            err,
            AttentionError::BadLength {
                what: "headwise gate",
                got: 3,
                expected: 8
            }
        ),
        "gate length: {err}"
    );
    assert!(prefill(level, call(shape, &q, 0, none), &mut out, None).is_ok());
}
