//! Whole-model checks at Qwen3's head_dim of 128, on a random checkpoint that `init` writes:
//! decoding past 3072 keys in a 4-thread pool splits each head's keys into several parts
//! (split-K decode, which the shorter fixtures never reach), and the fast path's logits equal the
//! reference backend's on the same cache; a short prompt's prefill agrees on every position.

use gattn_kernels::attention::decode_parts;
use gattn_model::init::{Preset, write_random_checkpoint};
use gattn_model::{Backend, GateMode, KvDtype, LogitsFor, Qwen3Model, WeightFormat};
use gattn_tensor::DType;
use gattn_tests::max_abs_diff;

const THREADS: usize = 4;

/// Tiny, but with Qwen3's head_dim and one KV head (so one head's keys must feed every thread).
fn head_dim_128_checkpoint(dir: &std::path::Path) -> gattn_model::Qwen3Config {
    let mut config = Preset::Tiny.config(GateMode::Elementwise);
    config.hidden_size = 128;
    config.intermediate_size = 256;
    config.num_attention_heads = 2;
    config.num_key_value_heads = 1;
    config.head_dim = 128;
    write_random_checkpoint(dir, &config, DType::F32, 29).unwrap();
    config
}

fn prompt(len: usize) -> Vec<u32> {
    (0..len as u32).map(|i| 3 + (i * 7919) % 250).collect()
}

#[test]
fn split_decode_at_head_dim_128_equals_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let config = head_dim_128_checkpoint(dir.path());
    let prompt_len = 3100;
    // The precondition of this test: the decode steps below run in 3 parts per head.
    let parts = decode_parts(config.num_key_value_heads, prompt_len + 1, THREADS);
    assert_eq!(parts, 3, "the decode below would not split its keys");

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(THREADS)
        .build()
        .unwrap();
    pool.install(|| {
        for kv in [KvDtype::F32, KvDtype::Bf16] {
            let mut model = Qwen3Model::load(dir.path(), WeightFormat::F32).unwrap();
            model.kv_dtype = kv;
            model.backend = Backend::Fast;
            let mut cache = model.new_cache(prompt_len + 8);
            model
                .forward(&prompt(prompt_len), &mut cache, LogitsFor::Last)
                .unwrap();
            // Each step: the fast decode, then the same token again from the same cache on the
            // reference backend (materialized softmax over every key, no parts).
            for token in [5u32, 77, 200] {
                let len = cache.len();
                model.backend = Backend::Fast;
                let fast = model
                    .forward(&[token], &mut cache, LogitsFor::Last)
                    .unwrap();
                cache.truncate(len);
                model.backend = Backend::Reference;
                let reference = model
                    .forward(&[token], &mut cache, LogitsFor::Last)
                    .unwrap();
                let err = max_abs_diff(&fast, &reference);
                assert!(
                    err <= 1e-4,
                    "{kv:?} at {len} keys: split decode differs from the reference by {err}"
                );
            }
        }
    });
}

#[test]
fn prefill_at_head_dim_128_equals_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    head_dim_128_checkpoint(dir.path());
    let tokens = prompt(70);
    let run = |backend| {
        let mut model = Qwen3Model::load(dir.path(), WeightFormat::F32).unwrap();
        model.backend = backend;
        let mut cache = model.new_cache(tokens.len());
        model.forward(&tokens, &mut cache, LogitsFor::All).unwrap()
    };
    let err = max_abs_diff(&run(Backend::Fast), &run(Backend::Reference));
    assert!(
        err <= 1e-4,
        "fast prefill differs from the reference by {err}"
    );
}
