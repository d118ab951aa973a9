//! `gattn-cpu quantize`: writes an int8 checkpoint (format in `q8_checkpoint.rs`) that loads by
//! mmap with no re-quantizing. Every linear weight is quantized exactly as `--weights int8`
//! does at load (same function), so both give the same logits; embeddings, norms and biases are
//! copied byte for byte; a tied lm_head gets its own int8 copy as `lm_head.weight`.

use std::path::Path;

use serde_json::{Value, json};

use gattn_kernels::matmul::int8::layout::BLOCK;
use gattn_kernels::matmul::{Q8_FORMAT, Q8Matrix};
use gattn_tensor::{Checkpoint, DType};

use crate::config::{QUANTIZATION_KEY, Qwen3Config, read_json_object};
use crate::error::{ModelError, Result};
use crate::init::safetensors_writer::{TensorSpec, write_safetensors};
use crate::init::{prepare_checkpoint_dir, tensor_specs, write_json};
use crate::model::check_gate_matches_q_proj;
use crate::output::{Existing, write_atomic};
use crate::q8_checkpoint::{self, PACKED_SUFFIX, SCALES_SUFFIX};
use crate::weights::{WeightData, WeightFormat, load_matrix};

/// Files besides the weights that a checkpoint directory may hold; copied as they are.
const COPIED_FILES: [&str; 7] = [
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
];

/// What [`quantize_checkpoint`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantizeSummary {
    /// Linear weights stored int8 (a tied lm_head counts).
    pub quantized: usize,
    /// Tensors copied as they were (embeddings, norms, biases).
    pub copied: usize,
    /// Bytes of the written model.safetensors.
    pub file_bytes: u64,
}

/// One output tensor and where its bytes come from.
enum Source {
    /// The packed bytes of source tensor `name` `[n, k]`, quantized.
    Packed { name: String, n: usize, k: usize },
    /// The scales of the matrix quantized for the `Packed` entry just before.
    Scales,
    /// A source tensor's bytes, unchanged.
    Copy(String),
}

/// Quantizes the checkpoint in `src` into the new directory `out` (which must not exist or be
/// empty): config.json with `gattn_quantization` added, the tokenizer and generation files
/// copied, one `model.safetensors`.
pub fn quantize_checkpoint(src: &Path, out: &Path) -> Result<QuantizeSummary> {
    quantize_checkpoint_with(src, out, Existing::Refuse)
}

/// [`quantize_checkpoint`] into a directory that may hold files already when `existing` is
/// `Replace` (`quantize --force`); every file is written atomically either way.
pub fn quantize_checkpoint_with(
    src: &Path,
    out: &Path,
    existing: Existing,
) -> Result<QuantizeSummary> {
    let config_path = src.join("config.json");
    let config = Qwen3Config::from_json_file(&config_path)?;
    if config.quantized_int8 {
        return Err(ModelError::Config {
            path: config_path,
            field: QUANTIZATION_KEY.into(),
            reason: "is set: this checkpoint is already int8".into(),
        });
    }
    let checkpoint = Checkpoint::open_dir(src)?;
    check_gate_matches_q_proj(&config, &checkpoint, false)?;
    let (specs, sources) = output_tensors(&config, &checkpoint)?;
    prepare_checkpoint_dir(out, existing)?;

    let mut config_json = Value::Object(read_json_object(&config_path)?);
    if let Value::Object(object) = &mut config_json {
        object.insert(
            QUANTIZATION_KEY.into(),
            json!({"format": Q8_FORMAT, "block": BLOCK}),
        );
    }
    write_json(&out.join("config.json"), &config_json)?;
    for name in COPIED_FILES {
        let from = src.join(name);
        if from.exists() {
            let bytes = std::fs::read(&from).map_err(|source| ModelError::Io {
                path: from.clone(),
                source,
            })?;
            write_atomic(&out.join(name), &bytes, Existing::Replace)?;
        }
    }

    let weights_path = out.join(gattn_tensor::checkpoint::SINGLE_FILE);
    let block = BLOCK.to_string();
    let metadata = [
        ("format", "pt"),
        (q8_checkpoint::FORMAT_KEY, Q8_FORMAT),
        (q8_checkpoint::BLOCK_KEY, block.as_str()),
    ];
    let mut current: Option<Q8Matrix<'static>> = None;
    write_safetensors(&weights_path, &specs, &metadata, |index, bytes| {
        match &sources[index] {
            Source::Packed { name, n, k } => {
                let WeightData::Int8(q) =
                    load_matrix(&checkpoint, name, &[*n, *k], WeightFormat::Int8)?
                else {
                    unreachable!("a checkpoint without int8 metadata quantizes at load");
                };
                bytes.extend_from_slice(q.to_parts().0);
                current = Some(std::sync::Arc::unwrap_or_clone(q));
            }
            Source::Scales => {
                let q = current.take().expect("scales follow their packed bytes");
                bytes.extend_from_slice(q.scale_bytes());
            }
            Source::Copy(name) => bytes.extend_from_slice(checkpoint.view(name)?.bytes),
        }
        Ok(())
    })?;
    let file_bytes = std::fs::metadata(&weights_path)
        .map_err(|source| ModelError::Io {
            path: weights_path.clone(),
            source,
        })?
        .len();
    let quantized = sources
        .iter()
        .filter(|s| matches!(s, Source::Packed { .. }))
        .count();
    Ok(QuantizeSummary {
        quantized,
        copied: sources.len() - 2 * quantized,
        file_bytes,
    })
}

/// The tensors of the int8 file in write order, each shape checked against the config first:
/// the int8 parts (lengths multiples of 64 bytes), then 4-byte and 2-byte tensors, so that
/// every tensor starts aligned to its dtype and the scales can be used in place.
fn output_tensors(
    config: &Qwen3Config,
    checkpoint: &Checkpoint,
) -> Result<(Vec<TensorSpec>, Vec<Source>)> {
    let mut quantized = Vec::new();
    let mut copied = Vec::new();
    let embed = "model.embed_tokens.weight";
    for spec in tensor_specs(config, DType::F32) {
        let view = checkpoint.view(&spec.name)?;
        view.expect_shape(&spec.shape)?;
        if view.dtype != DType::BF16 && view.dtype != DType::F16 {
            view.expect_dtype(DType::F32)?;
        }
        // Checked before anything is written: `run` would refuse the copy's NaN at the first
        // token, far from the tensor that holds it.
        view.expect_finite()?;
        if spec.shape.len() == 2 && spec.name != embed {
            quantized.push((spec.name.clone(), spec.shape[0], spec.shape[1]));
        }
        if spec.shape.len() == 1 || spec.name == embed {
            copied.push(TensorSpec {
                dtype: view.dtype,
                ..spec
            });
        }
    }
    if config.tie_word_embeddings {
        // Stored under lm_head's name so that loading never quantizes; read from the embedding.
        quantized.push((embed.to_string(), config.vocab_size, config.hidden_size));
    }
    copied.sort_by_key(|spec| std::cmp::Reverse(spec.dtype.size_in_bytes()));

    let mut specs = Vec::new();
    let mut sources = Vec::new();
    for (name, n, k) in quantized {
        let stored = if name == embed {
            "lm_head.weight"
        } else {
            &name
        };
        specs.push(TensorSpec {
            name: format!("{stored}{PACKED_SUFFIX}"),
            shape: q8_checkpoint::packed_shape(n, k).to_vec(),
            dtype: DType::U8,
        });
        specs.push(TensorSpec {
            name: format!("{stored}{SCALES_SUFFIX}"),
            shape: q8_checkpoint::scales_shape(n, k).to_vec(),
            dtype: DType::F32,
        });
        sources.push(Source::Packed { name, n, k });
        sources.push(Source::Scales);
    }
    for spec in copied {
        sources.push(Source::Copy(spec.name.clone()));
        specs.push(spec);
    }
    Ok((specs, sources))
}
