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
