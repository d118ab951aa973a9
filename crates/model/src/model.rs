//! The Qwen3 decoder: `forward()` reads as the equations, one call per layer step.

use std::path::Path;

use gattn_tensor::Checkpoint;
use rayon::prelude::*;

use crate::backend::Backend;
use crate::config::{GateMode, Qwen3Config, RopeScaling};
use crate::error::{ModelError, Result};
use crate::kv_cache::KvCache;
use crate::layer_stats::LayerStats;
use crate::layers::attention::LayerProbe;
use crate::layers::{DecoderLayer, Embedding, RmsNorm};
use crate::q8_checkpoint;
use crate::rope::RotaryEmbedding;
use crate::scratch::{ForwardScratch, sized};
use crate::weights::{Linear, WeightFormat, load_matrix};
use gattn_kernels::attention::KvDtype;
use gattn_kernels::parallel;

/// What a forward pass reports besides the logits.
enum Probes<'a> {
    None,
    Maps(&'a mut Vec<Vec<f32>>),
    Stats(&'a mut [LayerStats]),
}

/// Where a chunk's logits go.
enum ChunkLogits<'a> {
    /// Not wanted (a prefill chunk before the last).
    None,
    /// The last row only: `[vocab_size]`.
    Last(&'a mut [f32]),
    /// Every row: `[n, vocab_size]`.
    All(&'a mut [f32]),
}

/// How a chunked prefill ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefillEnd {
    Complete,
    /// `on_chunk` asked to stop; the cache holds the first `tokens_done` tokens.
    Stopped {
        tokens_done: usize,
    },
}

/// Tokens per forward chunk unless set: large enough for the matrix-matrix kernels to reuse each
/// weight panel across many tokens, small enough that the activations stay a few MB.
pub const DEFAULT_PREFILL_CHUNK: usize = 512;

/// Which positions of a chunk need logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitsFor {
    /// Only the last token (generation): skips the lm_head of the others.
    Last,
    /// Every token (`gattn-cpu logits`, parity tests).
    All,
}

pub struct Qwen3Model {
    pub config: Qwen3Config,
    pub embed_tokens: Embedding,
    pub layers: Vec<DecoderLayer>,
    pub norm: RmsNorm,
    /// `[vocab_size, hidden]`; shares the embedding's storage when tied.
    pub lm_head: Linear,
    pub rope: RotaryEmbedding,
    pub format: WeightFormat,
    /// The naive references or the SIMD kernels, for every step of the forward pass
    /// ([`Backend::for_format`] of the weights unless set).
    pub backend: Backend,
    /// Storage of new KV caches (`--kv`); [`Backend::default_kv_dtype`] of the backend unless set.
    pub kv_dtype: KvDtype,
    /// Most tokens one forward chunk runs (`--prefill-chunk`); longer inputs are split.
    pub prefill_chunk: usize,
}

impl Qwen3Model {
    /// Loads `dir/config.json` and the safetensors weights beside it.
    pub fn load(dir: &Path, format: WeightFormat) -> Result<Qwen3Model> {
        Self::load_as(dir, Some(format))
    }

    /// As [`load`](Self::load); with `None`, in the checkpoint's own format
    /// ([`WeightFormat::native_to`]: int8 for an int8 checkpoint, bf16 for bf16, else f32).
    pub fn load_as(dir: &Path, format: Option<WeightFormat>) -> Result<Qwen3Model> {
        let config = Qwen3Config::from_dir(dir)?;
        let checkpoint = Checkpoint::open_dir(dir)?;
        let format = format.unwrap_or_else(|| WeightFormat::native_to(&config, &checkpoint));
        Self::from_checkpoint(config, &checkpoint, format)
    }

    pub fn from_checkpoint(
        config: Qwen3Config,
        checkpoint: &Checkpoint,
        format: WeightFormat,
    ) -> Result<Qwen3Model> {
        let stored_int8 = q8_checkpoint::is_stored_int8(&config, checkpoint)?;
        if stored_int8 && format != WeightFormat::Int8 {
            return Err(ModelError::Int8Checkpoint {
                path: checkpoint.files()[0].path().to_path_buf(),
                reason: format!(
                    "the linear weights are stored int8 (`gattn-cpu quantize`); they load only \
                     as int8, not {} (use the original checkpoint for bf16 or f32)",
                    format.name()
                ),
            });
        }
        check_gate_matches_q_proj(&config, checkpoint, stored_int8)?;
        let (vocab, h) = (config.vocab_size, config.hidden_size);
        let embed_tokens = Embedding::load(
            checkpoint,
            "model.embed_tokens.weight",
            vocab,
            h,
            embedding_format(format),
        )?;
        let layers = (0..config.num_hidden_layers)
            .map(|i| DecoderLayer::load(checkpoint, i, &config, format))
            .collect::<Result<Vec<_>>>()?;
        let norm = RmsNorm::load(checkpoint, "model.norm.weight", h, config.rms_norm_eps)?;
        let lm_head = if config.tie_word_embeddings && format == WeightFormat::Int8 {
            // The table is looked up as bf16 but multiplied as int8; an int8 checkpoint stores
            // that int8 copy as `lm_head.weight`.
            let name = if stored_int8 {
                "lm_head.weight"
            } else {
                "model.embed_tokens.weight"
            };
            let weight = load_matrix(checkpoint, name, &[vocab, h], format)?;
            Linear {
                weight,
                bias: None,
                in_features: h,
                out_features: vocab,
            }
        } else if config.tie_word_embeddings {
            Linear {
                weight: embed_tokens.table.clone(),
                bias: None,
                in_features: h,
                out_features: vocab,
            }
        } else {
            Linear::load(checkpoint, "lm_head", h, vocab, false, format)?
        };
        let rope = RotaryEmbedding::new(&config);
        let backend = Backend::for_format(format);
        Ok(Qwen3Model {
            config,
            embed_tokens,
            layers,
            norm,
            lm_head,
            rope,
            format,
            backend,
            kv_dtype: backend.default_kv_dtype(),
            prefill_chunk: DEFAULT_PREFILL_CHUNK,
        })
    }

    /// Runs `tokens` (the next positions after what `cache` holds) through the model, appending
    /// their keys and values to `cache`. Returns logits `[1 or n, vocab_size]`.
    /// Long inputs run in chunks of [`prefill_chunk`](Self::prefill_chunk) tokens.
    pub fn forward(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_for: LogitsFor,
    ) -> Result<Vec<f32>> {
        let mut logits = Vec::new();
        self.forward_into(tokens, cache, logits_for, &mut logits)?;
        Ok(logits)
    }

    /// As [`forward`](Self::forward), into `logits` (resized; reusing it across calls, as the
    /// generation loop does, means decoding allocates nothing after the first step: see
    /// [`crate::scratch`]).
    pub fn forward_into(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_for: LogitsFor,
        logits: &mut Vec<f32>,
    ) -> Result<()> {
        self.forward_chunked(tokens, cache, logits_for, logits, Probes::None, &mut |_| {
            true
        })?;
        Ok(())
    }

    /// As [`forward_into`](Self::forward_into), calling `on_chunk(tokens_done)` after each chunk
    /// (a progress bar); when it returns `false` before the last chunk, stops there, leaving the
    /// chunks done in `cache`.
    pub fn prefill(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_for: LogitsFor,
        logits: &mut Vec<f32>,
        mut on_chunk: impl FnMut(usize) -> bool,
    ) -> Result<PrefillEnd> {
        self.forward_chunked(
            tokens,
            cache,
            logits_for,
            logits,
            Probes::None,
            &mut on_chunk,
        )
    }

    /// As [`forward`](Self::forward); if `attention_maps` is given it receives, per layer, the
    /// probabilities `[n, num_heads, kv_len]` (one chunk: for short prompts). Only the reference
    /// backend materializes them: asked of the fast one, this is an error.
    pub fn forward_with_maps(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_for: LogitsFor,
        attention_maps: Option<&mut Vec<Vec<f32>>>,
    ) -> Result<Vec<f32>> {
        let probes = match attention_maps {
            Some(maps) => Probes::Maps(maps),
            None => Probes::None,
        };
        self.check_probe_backend(&probes)?;
        let mut logits = Vec::new();
        self.forward_chunked(tokens, cache, logits_for, &mut logits, probes, &mut |_| {
            true
        })?;
        Ok(logits)
    }

    /// As [`forward`](Self::forward), accumulating into `stats[layer]` each layer's attention-sink
    /// share and gate statistics (streamed by the fused kernel: any prompt length) and the largest
    /// hidden-state activation it leaves in the residual stream. Only the fast backend's kernel
    /// computes them: asked of the reference one, this is an error.
    pub fn forward_with_stats(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_for: LogitsFor,
        stats: &mut [LayerStats],
    ) -> Result<Vec<f32>> {
        assert_eq!(stats.len(), self.layers.len(), "one LayerStats per layer");
        let mut logits = Vec::new();
        let probes = Probes::Stats(stats);
        self.check_probe_backend(&probes)?;
        self.forward_chunked(tokens, cache, logits_for, &mut logits, probes, &mut |_| {
            true
        })?;
        Ok(logits)
    }

    /// A probe asked of the backend that cannot give it is refused before the cache is touched.
    fn check_probe_backend(&self, probes: &Probes<'_>) -> Result<()> {
        let (probe, needs) = match probes {
            Probes::None => return Ok(()),
            Probes::Maps(_) => ("attention maps", Backend::Reference),
            Probes::Stats(_) => ("attention statistics", Backend::Fast),
        };
        if self.backend == needs {
            Ok(())
        } else {
            Err(ModelError::ProbeNeedsBackend {
                probe,
                backend: needs,
            })
        }
    }

    /// Splits `tokens` into chunks of at most `prefill_chunk` (one chunk for attention maps) and
    /// runs them in order, each attending to everything cached before it.
    fn forward_chunked(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_for: LogitsFor,
        logits: &mut Vec<f32>,
        mut probes: Probes<'_>,
        on_chunk: &mut dyn FnMut(usize) -> bool,
    ) -> Result<PrefillEnd> {
        let n = tokens.len();
        if n == 0 {
            return Err(ModelError::EmptyPrompt);
        }
        cache.check_room(n)?;
        let vocab = self.config.vocab_size;
        let logit_rows = match logits_for {
            LogitsFor::All => n,
            LogitsFor::Last => 1,
        };
        logits.clear();
        logits.resize(logit_rows * vocab, 0.0);
        let chunk = match probes {
            Probes::Maps(_) => n,
            _ => self.prefill_chunk.max(1),
        };

        let mut done = 0;
        while done < n {
            let len = chunk.min(n - done);
            let last_chunk = done + len == n;
            let chunk_logits = match logits_for {
                LogitsFor::All => ChunkLogits::All(&mut logits[done * vocab..][..len * vocab]),
                LogitsFor::Last if last_chunk => ChunkLogits::Last(&mut logits[..]),
                LogitsFor::Last => ChunkLogits::None,
            };
            let chunk_tokens = &tokens[done..done + len];
            if len == 1 {
                // A decode step: ~140 short parallel loops, run by workers that spin between them.
                let probes = &mut probes;
                parallel::with_spinning_workers(|| {
                    self.forward_chunk(chunk_tokens, cache, chunk_logits, probes)
                })?;
            } else {
                self.forward_chunk(chunk_tokens, cache, chunk_logits, &mut probes)?;
            }
            done += len;
            if !on_chunk(done) && !last_chunk {
                return Ok(PrefillEnd::Stopped { tokens_done: done });
            }
        }
        Ok(PrefillEnd::Complete)
    }

    /// One chunk: `[n]` tokens -> hidden `[n, hidden]` through every layer -> the wanted logits.
    fn forward_chunk(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits: ChunkLogits<'_>,
        probes: &mut Probes<'_>,
    ) -> Result<()> {
        let n = tokens.len();
        let (h, vocab) = (self.config.hidden_size, self.config.vocab_size);
        let start = cache.len();
        let (layer_caches, scratch) = cache.layers_and_scratch_mut();
        let ForwardScratch {
            hidden,
            final_normed,
            rope,
            layer: layer_scratch,
        } = scratch;
        self.rope.angles_into(start, n, rope);

        // x = embed(tokens): [n, hidden]
        let hidden = sized(hidden, n * h);
        self.embed_tokens.forward(tokens, hidden)?;

        // x = layer(x) for each decoder layer, keys and values appended to its cache.
        for (index, (layer, layer_cache)) in self.layers.iter().zip(layer_caches).enumerate() {
            let mut maps = match probes {
                Probes::Maps(_) => vec![0.0; n * self.config.num_attention_heads * (start + n)],
                _ => Vec::new(),
            };
            let probe = match probes {
                Probes::None => LayerProbe::None,
                Probes::Maps(_) => LayerProbe::Maps(&mut maps),
                Probes::Stats(stats) => LayerProbe::Stats(&mut stats[index].attention),
            };
            layer.forward(
                hidden,
                n,
                rope,
                layer_cache,
                self.backend,
                probe,
                layer_scratch,
            )?;
            check_finite(hidden, h, index, "hidden state", start)?;
            match probes {
                Probes::Maps(all) => all.push(maps),
                Probes::Stats(stats) => stats[index].observe_hidden(hidden, h, start),
                Probes::None => {}
            }
        }

        // logits = lm_head(RMSNorm(x)) for the wanted rows.
        let (rows, logits) = match logits {
            ChunkLogits::None => return Ok(()),
            ChunkLogits::Last(logits) => (&hidden[(n - 1) * h..], logits),
            ChunkLogits::All(logits) => (&hidden[..], logits),
        };
        let normed = sized(final_normed, rows.len());
        self.norm.forward(rows, normed, self.backend);
        self.lm_head
            .forward(normed, rows.len() / h, logits, self.backend)?;
        check_finite(
            logits,
            vocab,
            self.layers.len() - 1,
            "logits after the final norm",
            start,
        )
    }

    /// Replaces the checkpoint's RoPE scaling (`--rope-scaling yarn:4` to extend the context).
    pub fn set_rope_scaling(&mut self, scaling: RopeScaling) {
        self.config.set_rope_scaling(scaling);
        self.rope = RotaryEmbedding::new(&self.config);
    }

    /// An empty KV cache for up to `ctx` tokens in `self.kv_dtype`; it grows in chunks as used.
    pub fn new_cache(&self, ctx: usize) -> KvCache {
        KvCache::new(&self.config, ctx, self.kv_dtype)
            .expect("a validated config has KV heads and head_dim > 0")
    }

    /// Bytes of weights held (mmapped bf16 counts, tied lm_head counted once).
    pub fn weight_bytes(&self) -> usize {
        let lm_head = if self.config.tie_word_embeddings && self.format != WeightFormat::Int8 {
            0
        } else {
            self.lm_head.bytes()
        };
        self.embed_tokens.table.bytes()
            + self.layers.iter().map(DecoderLayer::bytes).sum::<usize>()
            + lm_head
            + 4 * self.norm.dim()
    }
}

/// Embeddings are read a row at a time, which int8 blocks do not allow: they stay bf16.
fn embedding_format(format: WeightFormat) -> WeightFormat {
    match format {
        WeightFormat::Int8 => WeightFormat::Bf16,
        other => other,
    }
}

/// A gate flag that does not match q_proj's rows would silently mis-split queries: refuse it,
/// naming the mode the weights imply. Stored int8 rows are padded to 16, so compare padded.
pub(crate) fn check_gate_matches_q_proj(
    config: &Qwen3Config,
    checkpoint: &Checkpoint,
    stored_int8: bool,
) -> Result<()> {
    let name = if stored_int8 {
        "model.layers.0.self_attn.q_proj.weight.q8_packed"
    } else {
        "model.layers.0.self_attn.q_proj.weight"
    };
    let stored_rows = |config: &Qwen3Config| match stored_int8 {
        true => q8_checkpoint::packed_shape(config.q_proj_rows(), config.hidden_size)[0],
        false => config.q_proj_rows(),
    };
    let Ok(view) = checkpoint.view(name) else {
        return Ok(()); // the layer loader reports the missing tensor
    };
    let rows = view.shape.first().copied().unwrap_or(0);
    if rows == stored_rows(config) {
        return Ok(());
    }
    let implied = [GateMode::None, GateMode::Headwise, GateMode::Elementwise]
        .into_iter()
        .find(|&mode| {
            stored_rows(&Qwen3Config {
                gate: mode,
                ..config.clone()
            }) == rows
        });
    let Some(implied) = implied else {
        return Ok(()); // an ordinary shape mismatch: the layer loader names expected and found
    };
    Err(ModelError::Config {
        path: checkpoint.dir().join("config.json"),
        field: "headwise_attn_output_gate / elementwise_attn_output_gate".into(),
        reason: format!(
            "say the gate is {}, but {name} has {rows} rows, which is the layout of a {} model \
             (expected {} rows for {})",
            config.gate.name(),
            implied.name(),
            stored_rows(config),
            config.gate.name()
        ),
    })
}

fn check_finite(
    values: &[f32],
    row_len: usize,
    layer: usize,
    stage: &'static str,
    start: usize,
) -> Result<()> {
    // Rows in parallel, each checked whole (a loop that vectorizes; one that stops at the first
    // non-finite value does not): a prefill chunk's hidden state is checked after every layer.
    let finite = |row: &[f32]| row.iter().fold(true, |ok, v| ok & v.is_finite());
    match values
        .par_chunks(row_len)
        .position_first(|row| !finite(row))
    {
        None => Ok(()),
        Some(row) => Err(ModelError::NonFinite {
            layer,
            stage,
            position: start + row,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_finite_names_the_first_row_with_a_non_finite_value() {
        let (rows, row_len) = (300, 7);
        assert!(check_finite(&vec![1.0; rows * row_len], row_len, 2, "x", 10).is_ok());
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut values = vec![1.0f32; rows * row_len];
            values[250 * row_len + 6] = bad;
            values[123 * row_len] = bad;
            let err = check_finite(&values, row_len, 2, "x", 10).unwrap_err();
            assert!(
                matches!(
                    err,
                    ModelError::NonFinite {
                        layer: 2,
                        stage: "x",
                        position: 133
                    }
                ),
                "{err}"
            );
        }
    }
}
