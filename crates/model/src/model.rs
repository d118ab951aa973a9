//! The Qwen3 decoder: `forward()` reads as the equations, one call per layer step.

use std::path::Path;

use gattn_tensor::Checkpoint;

use crate::config::{GateMode, Qwen3Config, RopeScaling};
use crate::error::{ModelError, Result};
use crate::kv_cache::KvCache;
use crate::layer_stats::LayerStats;
use crate::layers::attention::{AttentionPath, LayerProbe};
use crate::layers::{DecoderLayer, Embedding, RmsNorm};
use crate::rope::RotaryEmbedding;
use crate::weights::{Linear, WeightFormat, load_matrix};
use gattn_kernels::attention::KvDtype;

/// What a forward pass reports besides the logits.
enum Probes<'a> {
    None,
    Maps(&'a mut Vec<Vec<f32>>),
    Stats(&'a mut [LayerStats]),
}

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
    /// Storage of new KV caches (`--kv`); f32 unless set.
    pub kv_dtype: KvDtype,
    /// Fused kernel (default) or the naive reference attention.
    pub attention_path: AttentionPath,
}

impl Qwen3Model {
    /// Loads `dir/config.json` and the safetensors weights beside it.
    pub fn load(dir: &Path, format: WeightFormat) -> Result<Qwen3Model> {
        let config = Qwen3Config::from_dir(dir)?;
        let checkpoint = Checkpoint::open_dir(dir)?;
        Self::from_checkpoint(config, &checkpoint, format)
    }

    pub fn from_checkpoint(
        config: Qwen3Config,
        checkpoint: &Checkpoint,
        format: WeightFormat,
    ) -> Result<Qwen3Model> {
        check_gate_matches_q_proj(&config, checkpoint)?;
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
            // The table is looked up as bf16 but multiplied as int8.
            let weight = load_matrix(checkpoint, "model.embed_tokens.weight", &[vocab, h], format)?;
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
        Ok(Qwen3Model {
            config,
            embed_tokens,
            layers,
            norm,
            lm_head,
            rope,
            format,
            kv_dtype: KvDtype::F32,
            attention_path: AttentionPath::Fused,
        })
    }

    /// Runs `tokens` (the next positions after what `cache` holds) through the model, appending
    /// their keys and values to `cache`. Returns logits `[1 or n, vocab_size]`.
    pub fn forward(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_for: LogitsFor,
    ) -> Result<Vec<f32>> {
        self.forward_with_maps(tokens, cache, logits_for, None)
    }

    /// As [`forward`](Self::forward); if `attention_maps` is given it receives, per layer, the
    /// probabilities `[n, num_heads, kv_len]` (slow path, for short prompts).
    pub fn forward_with_maps(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_for: LogitsFor,
        attention_maps: Option<&mut Vec<Vec<f32>>>,
    ) -> Result<Vec<f32>> {
        match attention_maps {
            Some(maps) => self.forward_probed(tokens, cache, logits_for, Probes::Maps(maps)),
            None => self.forward_probed(tokens, cache, logits_for, Probes::None),
        }
    }

    /// As [`forward`](Self::forward), accumulating into `stats[layer]` each layer's attention-sink
    /// share and gate statistics (streamed by the fused kernel: any prompt length) and the largest
    /// hidden-state activation it leaves in the residual stream.
    pub fn forward_with_stats(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_for: LogitsFor,
        stats: &mut [LayerStats],
    ) -> Result<Vec<f32>> {
        assert_eq!(stats.len(), self.layers.len(), "one LayerStats per layer");
        self.forward_probed(tokens, cache, logits_for, Probes::Stats(stats))
    }

    fn forward_probed(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_for: LogitsFor,
        mut probes: Probes<'_>,
    ) -> Result<Vec<f32>> {
        let n = tokens.len();
        if n == 0 {
            return Err(ModelError::EmptyPrompt);
        }
        cache.check_room(n)?;
        let (h, vocab) = (self.config.hidden_size, self.config.vocab_size);
        let start = cache.len();
        let rope = self.rope.angles(start, n);

        // x = embed(tokens): [n, hidden]
        let mut hidden = vec![0.0; n * h];
        self.embed_tokens.forward(tokens, &mut hidden)?;

        for (index, layer) in self.layers.iter().enumerate() {
            let mut maps = match probes {
                Probes::Maps(_) => vec![0.0; n * self.config.num_attention_heads * (start + n)],
                _ => Vec::new(),
            };
            let probe = match &mut probes {
                Probes::None => LayerProbe::None,
                Probes::Maps(_) => LayerProbe::Maps(&mut maps),
                Probes::Stats(stats) => LayerProbe::Stats(&mut stats[index].attention),
            };
            let cache_layer = cache.layer_mut(index);
            layer.forward(
                &mut hidden,
                n,
                &rope,
                cache_layer,
                self.attention_path,
                probe,
            )?;
            check_finite(&hidden, h, index, "hidden state", start)?;
            match &mut probes {
                Probes::Maps(all) => all.push(maps),
                Probes::Stats(stats) => stats[index].observe_hidden(&hidden, h, start),
                Probes::None => {}
            }
        }

        // logits = lm_head(RMSNorm(x)) for the wanted rows.
        let rows = match logits_for {
            LogitsFor::All => &hidden[..],
            LogitsFor::Last => &hidden[(n - 1) * h..],
        };
        let m = rows.len() / h;
        let mut normed = vec![0.0; rows.len()];
        self.norm.forward(rows, &mut normed);
        let mut logits = vec![0.0; m * vocab];
        self.lm_head.forward(&normed, m, &mut logits)?;
        check_finite(
            &logits,
            vocab,
            self.layers.len() - 1,
            "logits after the final norm",
            start,
        )?;
        Ok(logits)
    }

    /// Replaces the checkpoint's RoPE scaling (`--rope-scaling yarn:4` to extend the context).
    pub fn set_rope_scaling(&mut self, scaling: RopeScaling) {
        if let RopeScaling::Yarn(y) = &scaling {
            self.config.max_position_embeddings =
                (y.factor * y.original_max_position_embeddings as f64) as usize;
        }
        self.config.rope_scaling = scaling;
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
/// naming the mode the weights imply.
fn check_gate_matches_q_proj(config: &Qwen3Config, checkpoint: &Checkpoint) -> Result<()> {
    let name = "model.layers.0.self_attn.q_proj.weight";
    let Ok(view) = checkpoint.view(name) else {
        return Ok(()); // the layer loader reports the missing tensor
    };
    let rows = view.shape.first().copied().unwrap_or(0);
    if rows == config.q_proj_rows() {
        return Ok(());
    }
    let implied = [GateMode::None, GateMode::Headwise, GateMode::Elementwise]
        .into_iter()
        .find(|&mode| {
            Qwen3Config {
                gate: mode,
                ..config.clone()
            }
            .q_proj_rows()
                == rows
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
            config.q_proj_rows(),
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
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(ModelError::NonFinite {
            layer,
            stage,
            position: start + i / row_len,
        }),
    }
}
