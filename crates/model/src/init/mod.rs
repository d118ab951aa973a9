//! `gattn-cpu init`: random-weight checkpoints in exactly Hugging Face's layout (config.json,
//! model.safetensors, tokenizer.json, tokenizer_config.json), for tests and benchmarks.

pub mod byte_tokenizer;
pub mod presets;
pub mod safetensors_writer;

use std::path::Path;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Normal};
use rayon::prelude::*;
use serde_json::{Value, json};

use gattn_tensor::{DType, bf16, f16};

use crate::config::{GateMode, Qwen3Config, RopeScaling};
use crate::error::{ModelError, Result};
use crate::output::{Existing, prepare_dir, write_atomic};
pub use presets::Preset;
use safetensors_writer::{TensorSpec, write_safetensors};

/// Standard deviation of the random matrices (transformers' `initializer_range` for Qwen3).
const INIT_STD: f32 = 0.02;

/// Every tensor a checkpoint of `config` holds, with its shape, in HF's names (all of `dtype`).
pub fn tensor_specs(config: &Qwen3Config, dtype: DType) -> Vec<TensorSpec> {
    let (h, d) = (config.hidden_size, config.head_dim);
    let spec = |name: String, shape: &[usize]| TensorSpec {
        name,
        shape: shape.to_vec(),
        dtype,
    };
    let mut specs = vec![spec(
        "model.embed_tokens.weight".into(),
        &[config.vocab_size, h],
    )];
    for i in 0..config.num_hidden_layers {
        let p = format!("model.layers.{i}");
        specs.push(spec(format!("{p}.input_layernorm.weight"), &[h]));
        let projections = [
            ("q_proj", config.q_proj_rows(), h),
            ("k_proj", config.kv_dim(), h),
            ("v_proj", config.kv_dim(), h),
            ("o_proj", h, config.q_dim()),
        ];
        for (name, rows, cols) in projections {
            specs.push(spec(format!("{p}.self_attn.{name}.weight"), &[rows, cols]));
            if config.attention_bias {
                specs.push(spec(format!("{p}.self_attn.{name}.bias"), &[rows]));
            }
        }
        if config.use_qk_norm {
            specs.push(spec(format!("{p}.self_attn.q_norm.weight"), &[d]));
            specs.push(spec(format!("{p}.self_attn.k_norm.weight"), &[d]));
        }
        specs.push(spec(format!("{p}.post_attention_layernorm.weight"), &[h]));
        let i_size = config.intermediate_size;
        specs.push(spec(format!("{p}.mlp.gate_proj.weight"), &[i_size, h]));
        specs.push(spec(format!("{p}.mlp.up_proj.weight"), &[i_size, h]));
        specs.push(spec(format!("{p}.mlp.down_proj.weight"), &[h, i_size]));
    }
    specs.push(spec("model.norm.weight".into(), &[h]));
    if !config.tie_word_embeddings {
        specs.push(spec("lm_head.weight".into(), &[config.vocab_size, h]));
    }
    specs
}

/// config.json as Hugging Face writes it for Qwen3, plus the paper's gate flags.
pub fn hf_config_json(config: &Qwen3Config, dtype: DType) -> Value {
    let rope_scaling = match &config.rope_scaling {
        RopeScaling::None => Value::Null,
        RopeScaling::Linear { factor } => json!({"rope_type": "linear", "factor": factor}),
        RopeScaling::Yarn(y) => json!({"rope_type": "yarn", "factor": y.factor,
            "original_max_position_embeddings": y.original_max_position_embeddings}),
    };
    json!({
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": config.rms_norm_eps,
        "rope_theta": config.rope_theta,
        "rope_scaling": rope_scaling,
        "max_position_embeddings": config.max_position_embeddings,
        "tie_word_embeddings": config.tie_word_embeddings,
        "attention_bias": config.attention_bias,
        "attention_dropout": 0.0,
        "use_qk_norm": config.use_qk_norm,
        "use_sliding_window": false,
        "sliding_window": null,
        "headwise_attn_output_gate": config.gate == GateMode::Headwise,
        "elementwise_attn_output_gate": config.gate == GateMode::Elementwise,
        "bos_token_id": config.bos_token_id,
        "eos_token_id": config.eos_token_ids,
        "torch_dtype": match dtype { DType::F32 => "float32", DType::F16 => "float16", _ => "bfloat16" },
    })
}

/// Writes a random checkpoint of `config` into `dir`, which must be new or empty. Same seed,
/// same bytes.
pub fn write_random_checkpoint(
    dir: &Path,
    config: &Qwen3Config,
    dtype: DType,
    seed: u64,
) -> Result<()> {
    write_random_checkpoint_with(dir, config, dtype, seed, Existing::Refuse)
}

/// [`write_random_checkpoint`], into a directory that may hold files already when `existing`
/// is `Replace` (`init --force`): each file is still replaced atomically.
pub fn write_random_checkpoint_with(
    dir: &Path,
    config: &Qwen3Config,
    dtype: DType,
    seed: u64,
    existing: Existing,
) -> Result<()> {
    if !matches!(dtype, DType::F32 | DType::BF16 | DType::F16) {
        return Err(ModelError::InvalidArgument(format!(
            "init writes f32, f16 or bf16 weights, not {dtype}"
        )));
    }
    if config.vocab_size < byte_tokenizer::VOCAB_SIZE {
        return Err(ModelError::InvalidArgument(format!(
            "vocab_size {} is smaller than the byte tokenizer's {} tokens",
            config.vocab_size,
            byte_tokenizer::VOCAB_SIZE
        )));
    }
    prepare_checkpoint_dir(dir, existing)?;
    write_json(&dir.join("config.json"), &hf_config_json(config, dtype))?;
    write_json(
        &dir.join("tokenizer.json"),
        &byte_tokenizer::tokenizer_json(),
    )?;
    write_json(
        &dir.join("tokenizer_config.json"),
        &byte_tokenizer::tokenizer_config_json(),
    )?;

    let specs = tensor_specs(config, dtype);
    write_safetensors(
        &dir.join("model.safetensors"),
        &specs,
        &[("format", "pt")],
        |index, bytes| {
            let spec = &specs[index];
            let values = if spec.shape.len() == 1 && spec.name.ends_with("norm.weight") {
                vec![1.0; spec.numel()] // RMSNorm scales start at one, as in transformers
            } else {
                random_normal(spec.numel(), seed, index as u64)
            };
            encode(&values, dtype, bytes);
            Ok(())
        },
    )
}

/// Deterministic N(0, INIT_STD) values, generated in parallel chunks with their own seeds.
fn random_normal(len: usize, seed: u64, tensor_index: u64) -> Vec<f32> {
    const CHUNK: usize = 1 << 16;
    let normal = Normal::new(0.0f32, INIT_STD).expect("valid std");
    let mut values = vec![0.0f32; len];
    values
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(chunk, out)| {
            let stream =
                seed ^ tensor_index.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((chunk as u64) << 40);
            let mut rng = StdRng::seed_from_u64(stream);
            out.iter_mut().for_each(|v| *v = normal.sample(&mut rng));
        });
    values
}

fn encode(values: &[f32], dtype: DType, bytes: &mut Vec<u8>) {
    match dtype {
        DType::F32 => values
            .iter()
            .for_each(|v| bytes.extend_from_slice(&v.to_le_bytes())),
        DType::BF16 => values
            .iter()
            .for_each(|v| bytes.extend_from_slice(&bf16::from_f32(*v).to_le_bytes())),
        DType::F16 => values
            .iter()
            .for_each(|v| bytes.extend_from_slice(&f16::from_f32(*v).to_le_bytes())),
        DType::I8 | DType::U8 => unreachable!("checked by write_random_checkpoint"),
    }
}

/// Creates the output directory of a checkpoint writer (new or empty unless `Replace`). Weight
/// files that the single `model.safetensors` written next would not replace (shards, an
/// index) are refused even with `Replace`: the directory would hold two checkpoints.
pub(crate) fn prepare_checkpoint_dir(dir: &Path, existing: Existing) -> Result<()> {
    prepare_dir(dir, existing)?;
    let entries = std::fs::read_dir(dir).map_err(|source| ModelError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.contains(".safetensors") && name != gattn_tensor::checkpoint::SINGLE_FILE {
            return Err(ModelError::InvalidArgument(format!(
                "{}: holds {name}, which this checkpoint would not replace (the directory would \
                 hold two checkpoints); remove it or give another directory",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Writes `value` atomically, replacing `path`: callers check the directory first.
pub(crate) fn write_json(path: &Path, value: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("JSON values serialize");
    Ok(write_atomic(
        path,
        (text + "\n").as_bytes(),
        Existing::Replace,
    )?)
}
