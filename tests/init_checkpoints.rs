//! `init` writes checkpoints in Hugging Face's layout that load back for every gate and dtype,
//! deterministically, and generation is reproducible from a seed.

use gattn_model::init::{Preset, tensor_specs, write_random_checkpoint};
use gattn_model::{
    GateMode, GenerateOptions, LogitsFor, Qwen3Config, Qwen3Model, Sampler, SamplingParams,
    StopReason, WeightFormat, generate,
};
use gattn_tensor::{Checkpoint, DType};

#[test]
fn every_gate_and_dtype_loads_back_with_the_right_shapes() {
    for gate in [GateMode::None, GateMode::Headwise, GateMode::Elementwise] {
        for dtype in [DType::BF16, DType::F16, DType::F32] {
            let dir = tempfile::tempdir().unwrap();
            let config = Preset::Tiny.config(gate);
            write_random_checkpoint(dir.path(), &config, dtype, 7).unwrap();
            assert_eq!(Qwen3Config::from_dir(dir.path()).unwrap(), config);
            let checkpoint = Checkpoint::open_dir(dir.path()).unwrap();
            for spec in tensor_specs(&config, dtype) {
                let view = checkpoint.view(&spec.name).unwrap();
                assert_eq!(view.shape, spec.shape, "{}", spec.name);
                assert_eq!(view.dtype, dtype);
            }
            let q_rows = checkpoint
                .view("model.layers.0.self_attn.q_proj.weight")
                .unwrap()
                .shape[0];
            let expected_rows = match gate {
                GateMode::None => 4 * 16,
                GateMode::Headwise => 4 * 16 + 4,
                GateMode::Elementwise => 2 * 4 * 16,
            };
            assert_eq!(q_rows, expected_rows);
            for format in [WeightFormat::F32, WeightFormat::Bf16] {
                let model = Qwen3Model::load(dir.path(), format).unwrap();
                let logits = model
                    .forward(&[1, 2, 3], &mut model.new_cache(8), LogitsFor::All)
                    .unwrap();
                assert_eq!(logits.len(), 3 * config.vocab_size);
                assert!(logits.iter().all(|v| v.is_finite()));
            }
            if dtype == DType::BF16 {
                let model = Qwen3Model::load(dir.path(), WeightFormat::Bf16).unwrap();
                assert!(
                    model.embed_tokens.table.is_mapped(),
                    "bf16 weights are used in place, not copied"
                );
            }
        }
    }
}

#[test]
fn the_qwen3_1_7b_preset_has_the_real_shapes() {
    let c = Preset::Qwen3_1_7b.config(GateMode::Headwise);
    assert_eq!(
        (
            c.num_hidden_layers,
            c.hidden_size,
            c.num_attention_heads,
            c.num_key_value_heads,
            c.head_dim
        ),
        (28, 2048, 16, 8, 128)
    );
    assert_eq!(
        (c.intermediate_size, c.vocab_size, c.tie_word_embeddings),
        (6144, 151936, true)
    );
    assert_eq!(c.q_proj_rows(), 2064);
    // 1.72 B parameters with tied embeddings, as Qwen3-1.7B (plus 16 gate rows per layer).
    let params = c.parameter_count() as f64 / 1e9;
    assert!((1.70..1.73).contains(&params), "{params}");
}

#[test]
fn same_seed_same_bytes_and_same_generation() {
    let write = |seed| {
        let dir = tempfile::tempdir().unwrap();
        write_random_checkpoint(
            dir.path(),
            &Preset::Tiny.config(GateMode::Elementwise),
            DType::BF16,
            seed,
        )
        .unwrap();
        dir
    };
    let (a, b, c) = (write(3), write(3), write(4));
    let bytes = |d: &tempfile::TempDir| std::fs::read(d.path().join("model.safetensors")).unwrap();
    assert_eq!(bytes(&a), bytes(&b));
    assert_ne!(bytes(&a), bytes(&c));

    let model = Qwen3Model::load(a.path(), WeightFormat::F32).unwrap();
    let run = |seed| {
        let params = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed,
        };
        let mut tokens = Vec::new();
        let options = GenerateOptions::new(16, &[]);
        generate(
            &model,
            &mut model.new_cache(64),
            &[10, 20, 30],
            &mut Sampler::new(params),
            options,
            |t| {
                tokens.push(t);
                Ok(true)
            },
        )
        .unwrap();
        tokens
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
    assert_eq!(run(1).len(), 16);
}

#[test]
fn a_131072_token_cache_grows_in_chunks_instead_of_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let config = Preset::Tiny.config(GateMode::Headwise);
    write_random_checkpoint(dir.path(), &config, DType::BF16, 1).unwrap();
    let mut model = Qwen3Model::load(dir.path(), WeightFormat::Bf16).unwrap();
    model.kv_dtype = gattn_model::KvDtype::Bf16;
    let mut cache = model.new_cache(131072);
    model
        .forward(&[1; 10], &mut cache, LogitsFor::Last)
        .unwrap();
    let full = gattn_model::KvCache::bytes_needed(&config, 131072, gattn_model::KvDtype::Bf16);
    let chunk = gattn_model::KvCache::bytes_needed(
        &config,
        gattn_model::kv_cache::GROWTH_CHUNK_TOKENS,
        gattn_model::KvDtype::Bf16,
    );
    assert_eq!(
        cache.bytes_allocated(),
        chunk,
        "one chunk after a 10-token prompt"
    );
    assert_eq!(full, 32 * chunk);
    model
        .forward(&vec![2; 4100], &mut cache, LogitsFor::Last)
        .unwrap();
    assert_eq!(cache.bytes_allocated(), 2 * chunk);
}

/// Generation stops at the first sampled end-of-sequence id (any of several), without emitting
/// it: run once without EOS ids, then again with a token of that run declared EOS.
#[test]
fn generation_stops_at_the_first_eos_token() {
    let dir = tempfile::tempdir().unwrap();
    let config = Preset::Tiny.config(GateMode::Headwise);
    write_random_checkpoint(dir.path(), &config, DType::BF16, 5).unwrap();
    let model = Qwen3Model::load(dir.path(), WeightFormat::Bf16).unwrap();
    let run = |eos: &[u32]| {
        let params = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: 9,
        };
        let mut tokens = Vec::new();
        let stats = generate(
            &model,
            &mut model.new_cache(64),
            &[10, 20, 30],
            &mut Sampler::new(params),
            GenerateOptions::new(24, eos),
            |t| {
                tokens.push(t);
                Ok(true)
            },
        )
        .unwrap();
        (tokens, stats)
    };
    let (free, stats) = run(&[]);
    assert_eq!((free.len(), stats.stop), (24, StopReason::MaxTokens));
    let eos = free[6];
    let first = free.iter().position(|&t| t == eos).unwrap();
    // An id never sampled beside it: stopping must come from `eos`, at its first occurrence.
    let unused = (0..config.vocab_size as u32)
        .find(|t| !free.contains(t))
        .unwrap();
    let (stopped, stats) = run(&[unused, eos]);
    assert_eq!(stats.stop, StopReason::Eos);
    assert_eq!(
        stopped,
        free[..first],
        "the tokens before the first EOS, not the EOS"
    );
    assert_eq!(stats.generated_tokens, first);
}
