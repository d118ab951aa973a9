//! How far lane prefill over a bf16 or int8 cache lands from the naive reference on the same
//! stored K/V and queries as used, on a few long shapes (random values, 4 query heads on 2 KV
//! heads, head_dim 128, no gate): the largest error over the largest |v|, and the RMS error over
//! the RMS output. What docs/performance.md compares the rounding of `P V`'s weights with:
//! `cargo run --release -p gattn-kernels --example prefill_error -- [bf16|int8]` (`GATTN_SIMD`
//! picks the level).

#[path = "../tests/attention_support.rs"]
mod support;

use gattn_kernels::KernelTable;
use gattn_kernels::attention::{
    AttentionCall, AttentionShape, KvDtype, prefill_on, queries_as_used,
};
use gattn_kernels::reference::GateScores;
use half::bf16;
use support::{layer_from, random_kv, random_vec, reference, rng};

const SHAPE: AttentionShape = AttentionShape {
    num_heads: 4,
    num_kv_heads: 2,
    head_dim: 128,
};

fn main() {
    let dtype = match std::env::args().nth(1).as_deref() {
        None | Some("int8") => KvDtype::Int8,
        Some("bf16") => KvDtype::Bf16,
        Some(other) => panic!("no cache dtype {other:?}: bf16 or int8"),
    };
    let table = KernelTable::current();
    println!("{dtype:?} cache, {table}");
    // (query amplitude, keys in all, queries at the end of them)
    for (amplitude, keys, n) in [
        (0.5f32, 4096usize, 64usize),
        (4.0, 4096, 64),
        (30.0, 4096, 64),
        (4.0, 600, 200),
    ] {
        let d = SHAPE.head_dim;
        let mut rng = rng(11);
        let (k, v) = random_kv(&mut rng, SHAPE, keys);
        let q = random_vec(&mut rng, n * SHAPE.num_heads * d, amplitude);
        let layer = layer_from(dtype, SHAPE, &k, &v);
        let used = match dtype {
            KvDtype::Bf16 => q.iter().map(|&x| bf16::from_f32(x).to_f32()).collect(),
            _ => queries_as_used(dtype, &q, d).into_owned(),
        };
        let stored_k: Vec<Vec<f32>> = (0..SHAPE.num_kv_heads)
            .map(|j| layer.dequantized_k(j))
            .collect();
        let stored_v: Vec<Vec<f32>> = (0..SHAPE.num_kv_heads)
            .map(|j| layer.dequantized_v(j))
            .collect();
        let q_start = keys - n;
        let want = reference(
            SHAPE,
            &used,
            q_start,
            n,
            &stored_k,
            &stored_v,
            GateScores::None,
        )
        .out;
        let mut got = vec![0.0; want.len()];
        let call = AttentionCall {
            shape: SHAPE,
            queries: &q,
            q_start,
            n,
            kv: &layer,
            gate: GateScores::None,
        };
        prefill_on(table, call, &mut got, None).expect("a valid call");
        let largest_v = stored_v
            .iter()
            .flatten()
            .fold(0.0f32, |m, x| m.max(x.abs()));
        let rms = |x: &mut dyn Iterator<Item = f32>| {
            let (sum, count) = x.fold((0.0f64, 0usize), |(s, c), v| {
                (s + (v as f64).powi(2), c + 1)
            });
            (sum / count as f64).sqrt()
        };
        let largest_error = got
            .iter()
            .zip(&want)
            .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        let rms_error = rms(&mut got.iter().zip(&want).map(|(a, b)| a - b));
        let rms_out = rms(&mut want.iter().copied());
        println!(
            "amplitude {amplitude:>4}, {n} queries after {} keys: largest error / largest |v| {:.2e}, RMS error / RMS output {:.2e}",
            keys - n,
            largest_error / largest_v,
            rms_error / rms_out
        );
    }
}
