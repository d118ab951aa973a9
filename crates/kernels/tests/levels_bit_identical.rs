//! The f32 kernels give the same bits with every kernel table (every SIMD level, AMX or not):
//! RMSNorm, the SwiGLU combine, and attention (decode and prefill; its scores, softmax sums and
//! V sums) sum in one fixed order (`fixed_sum`: 16 logical lanes, fused multiply-adds, a fixed
//! tree) and use one `exp`. The exception is prefill on AMX tiles (bf16 KV at head dims in whole
//! 32-dim chunks, int8 KV in whole 64-dim chunks), whose `tdpbf16ps` sums no emulation was
//! found to reproduce (`matmul::amx::bf16_order`): those cases are left out here.

#[path = "attention_support.rs"]
mod support;

use gattn_kernels::activations::silu_mul_in_place;
use gattn_kernels::attention::{
    AttentionCall, AttentionShape, DecodeScratch, KvDtype, KvLayer, decode_with_parts,
    prefill_uses_amx_tiles, prefill_with_key_parts,
};
use gattn_kernels::norm::rms_norm_in_place;
use gattn_kernels::{KernelTable, SimdLevel};
use proptest::prelude::*;
use support::{
    gate_of, layer_from, levels_under_test, random_gate, random_kv, random_vec, rng,
    tables_under_test,
};

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

fn scalar_table() -> &'static KernelTable {
    KernelTable::for_level(SimdLevel::Scalar).expect("scalar is always supported")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Lengths with and without a tail of fewer than 16, up to past the 1.7B hidden size.
    #[test]
    fn rms_norm_is_bit_identical_at_every_level(
        len in prop_oneof![1usize..40, 100usize..2100],
        seed: u64,
    ) {
        let mut rng = rng(seed);
        let x = random_vec(&mut rng, len, 30.0);
        let weight = random_vec(&mut rng, len, 2.0);
        let run = |level: SimdLevel| {
            let mut y = x.clone();
            rms_norm_in_place(level, &mut y, &weight, 1e-6);
            bits(&y)
        };
        let scalar = run(SimdLevel::Scalar);
        for level in levels_under_test() {
            prop_assert_eq!(&run(level), &scalar, "{} differs from scalar", level);
        }
    }

    /// Values past where the sigmoid saturates, both signs.
    #[test]
    fn silu_mul_is_bit_identical_at_every_level(len in 1usize..300, seed: u64) {
        let mut rng = rng(seed);
        let gate = random_vec(&mut rng, len, 40.0);
        let up = random_vec(&mut rng, len, 3.0);
        let run = |level: SimdLevel| {
            let mut y = up.clone();
            silu_mul_in_place(level, &gate, &mut y);
            bits(&y)
        };
        let scalar = run(SimdLevel::Scalar);
        for level in levels_under_test() {
            prop_assert_eq!(&run(level), &scalar, "{} differs from scalar", level);
        }
    }

    /// Decode (one and several parts) and prefill (a chunk at an offset; its keys whole and
    /// split in ranges) over a cache of every dtype, head dims of the real models and with a
    /// tail, GQA groups 1 to 8.
    #[test]
    fn attention_is_bit_identical_at_every_level(
        (kv_heads, group) in (1usize..=2, prop::sample::select(vec![1usize, 2, 4, 8])),
        head_dim in prop::sample::select(vec![64usize, 128, 72, 40]),
        dtype in prop::sample::select(vec![KvDtype::Bf16, KvDtype::Int8, KvDtype::F32]),
        gate_mode in 0u8..3,
        kv_len in prop_oneof![1usize..=80, 80usize..=400],
        seed: u64,
    ) {
        let shape = AttentionShape { num_heads: kv_heads * group, num_kv_heads: kv_heads, head_dim };
        let mut rng = rng(seed);
        let (k, v) = random_kv(&mut rng, shape, kv_len);
        let layer = layer_from(dtype, shape, &k, &v);
        // The last `n` positions are the prefill chunk; the decode query is the last position.
        let n = kv_len.min(37);
        let q = random_vec(&mut rng, n * shape.num_heads * head_dim, 4.0);
        let gate_scores = random_gate(&mut rng, gate_mode, n, shape);
        let gate = gate_of(gate_mode, &gate_scores);
        let last_q = &q[(n - 1) * shape.num_heads * head_dim..];
        let last_gate_scores = random_gate(&mut rng, gate_mode, 1, shape);
        let last_gate = gate_of(gate_mode, &last_gate_scores);

        let decode = |level: SimdLevel, parts: usize| {
            let mut out = vec![f32::NAN; last_q.len()];
            let call = AttentionCall { shape, queries: last_q, q_start: kv_len - 1, n: 1, kv: &layer, gate: last_gate };
            decode_with_parts(level, call, &mut out, None, &mut DecodeScratch::default(), parts).unwrap();
            bits(&out)
        };
        let prefill = |table: &KernelTable, layer: &KvLayer, parts: usize| {
            let mut out = vec![f32::NAN; q.len()];
            let call = AttentionCall { shape, queries: &q, q_start: kv_len - n, n, kv: layer, gate };
            prefill_with_key_parts(table, call, &mut out, None, parts).unwrap();
            bits(&out)
        };
        let (decode_one, decode_three) = (decode(SimdLevel::Scalar, 1), decode(SimdLevel::Scalar, 3));
        let (prefill_one, prefill_three) = (prefill(scalar_table(), &layer, 1), prefill(scalar_table(), &layer, 3));
        for table in tables_under_test() {
            prop_assert_eq!(&decode(table.level(), 1), &decode_one, "decode: {} differs", table);
            prop_assert_eq!(&decode(table.level(), 3), &decode_three, "decode in parts: {} differs", table);
            if !prefill_uses_amx_tiles(table, dtype, head_dim) {
                prop_assert_eq!(&prefill(table, &layer, 1), &prefill_one, "prefill: {} differs", table);
                prop_assert_eq!(&prefill(table, &layer, 3), &prefill_three, "prefill in parts: {} differs", table);
            }
        }
    }
}
