//! Shared helpers of the criterion benchmarks (the bench targets are added beside this file). The
//! read-bandwidth probe they report against lives in `gattn_kernels::bandwidth`, shared with
//! `gattn-cpu bench`.

use std::time::Instant;

/// Median wall time of `runs` calls of `f`, after one untimed warm-up call. The benches print
/// these beside criterion's estimates so that ratios compare numbers taken moments apart.
pub fn median_seconds(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Writes a random checkpoint of the Qwen3-1.7B shape (bf16, seed 0) with `gate` into `dir`.
/// The same seed for every gate: the weights the variants share are the same.
pub fn write_random_qwen3_1_7b(dir: &std::path::Path, gate: gattn_model::GateMode) {
    use gattn_model::init::{Preset, write_random_checkpoint};
    eprintln!(
        "writing a random Qwen3-1.7B-shape checkpoint ({} gate) to {}",
        gate.name(),
        dir.display()
    );
    write_random_checkpoint(
        dir,
        &Preset::Qwen3_1_7b.config(gate),
        gattn_tensor::DType::BF16,
        0,
    )
    .expect("writing the checkpoint");
}

/// A model with a cache of `depth` tokens of seeded synthetic keys and values in every layer
/// (a decode step's cost does not depend on their values), stepped one token at a time at
/// that depth: after each step the cache is truncated back.
pub struct DecodeAtDepth<'m> {
    pub model: &'m gattn_model::Qwen3Model,
    cache: gattn_model::KvCache,
    pub depth: usize,
}

impl<'m> DecodeAtDepth<'m> {
    pub fn new(model: &'m gattn_model::Qwen3Model, depth: usize) -> Self {
        let mut cache = model.new_cache(depth + 1);
        gattn_model::bench::fill_synthetic(&model.config, &mut cache, depth, 0)
            .expect("the cache has room for depth tokens");
        DecodeAtDepth {
            model,
            cache,
            depth,
        }
    }

    /// One decode step (token 17), attending over `depth + 1` rows.
    pub fn step(&mut self) {
        let logits = self
            .model
            .forward(&[17], &mut self.cache, gattn_model::LogitsFor::Last)
            .expect("a decode step");
        std::hint::black_box(logits);
        for layer in 0..self.model.config.num_hidden_layers {
            self.cache.layer_mut(layer).storage.truncate(self.depth);
        }
    }

    /// Bytes one step reads (weights + KV, as `gattn-cpu bench` counts them).
    pub fn traffic(&self) -> gattn_model::bench::DecodeTraffic {
        gattn_model::bench::DecodeTraffic::of_decode(self.model, self.depth, 1)
    }
}

/// Deterministic values in [-1, 1) without an RNG over hundreds of millions of elements.
pub fn fill(seed: usize, out: &mut [f32]) {
    let mut x = (seed as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for v in out {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *v = (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
    }
}

/// One layer's KV cache of `shape` holding `tokens` rows of [`fill`]ed keys and values, appended
/// 1024 tokens at a time.
pub fn kv_layer(
    dtype: gattn_kernels::attention::KvDtype,
    shape: gattn_kernels::attention::AttentionShape,
    tokens: usize,
) -> gattn_kernels::attention::KvLayer {
    let row = shape.num_kv_heads * shape.head_dim;
    let mut layer =
        gattn_kernels::attention::KvLayer::new(dtype, shape.num_kv_heads, shape.head_dim).unwrap();
    layer.reserve(tokens).unwrap();
    let chunk = 1024;
    let (mut k, mut v) = (vec![0.0; chunk * row], vec![0.0; chunk * row]);
    let mut done = 0;
    while done < tokens {
        let n = chunk.min(tokens - done);
        fill(2 * done + 1, &mut k[..n * row]);
        fill(2 * done + 2, &mut v[..n * row]);
        layer.append(&k[..n * row], &v[..n * row]).unwrap();
        done += n;
    }
    layer
}

/// The KV dtypes `GATTN_BENCH_ATTN_DTYPES` names (default bf16,int8).
pub fn attention_dtypes() -> Vec<gattn_kernels::attention::KvDtype> {
    std::env::var("GATTN_BENCH_ATTN_DTYPES")
        .unwrap_or_else(|_| "bf16,int8".into())
        .split(',')
        .filter_map(gattn_kernels::attention::KvDtype::parse)
        .collect()
}
