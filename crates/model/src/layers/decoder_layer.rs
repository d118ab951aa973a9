use gattn_tensor::Checkpoint;

use crate::backend::Backend;
use crate::config::Qwen3Config;
use crate::error::Result;
use crate::kv_cache::LayerKvCache;
use crate::layers::attention::LayerProbe;
use crate::layers::{Attention, Mlp, RmsNorm};
use crate::rope::RopeAngles;
use crate::rows::for_each_row_mut;
use crate::scratch::{LayerScratch, sized};
use crate::weights::WeightFormat;

/// One transformer block: pre-norm attention and pre-norm SwiGLU MLP, each with a residual.
#[derive(Debug, Clone)]
pub struct DecoderLayer {
    pub input_layernorm: RmsNorm,
    pub self_attn: Attention,
    pub post_attention_layernorm: RmsNorm,
    pub mlp: Mlp,
}

impl DecoderLayer {
    pub fn load(
        checkpoint: &Checkpoint,
        index: usize,
        config: &Qwen3Config,
        format: WeightFormat,
    ) -> Result<Self> {
        let prefix = format!("model.layers.{index}");
        let (h, eps) = (config.hidden_size, config.rms_norm_eps);
        Ok(DecoderLayer {
            input_layernorm: RmsNorm::load(
                checkpoint,
                &format!("{prefix}.input_layernorm.weight"),
                h,
                eps,
            )?,
            self_attn: Attention::load(checkpoint, &format!("{prefix}.self_attn"), config, format)?,
            post_attention_layernorm: RmsNorm::load(
                checkpoint,
                &format!("{prefix}.post_attention_layernorm.weight"),
                h,
                eps,
            )?,
            mlp: Mlp::load(checkpoint, &format!("{prefix}.mlp"), config, format)?,
        })
    }

    /// hidden: `[n, hidden]`, updated in place.
    #[allow(
        clippy::too_many_arguments,
        reason = "the chunk, its cache, backend, probe and scratch: each a different owner"
    )]
    pub fn forward(
        &self,
        hidden: &mut [f32],
        n: usize,
        rope: &RopeAngles,
        cache: &mut LayerKvCache,
        backend: Backend,
        probe: LayerProbe<'_>,
        scratch: &mut LayerScratch,
    ) -> Result<()> {
        let hidden_size = self.input_layernorm.dim();
        let normed = sized(&mut scratch.normed, hidden.len());
        let update = sized(&mut scratch.update, hidden.len());

        // h = h + Attention(RMSNorm(h))
        self.input_layernorm.forward(hidden, normed, backend);
        self.self_attn.forward(
            normed,
            n,
            rope,
            cache,
            backend,
            update,
            probe,
            &mut scratch.attention,
        )?;
        add_in_place(hidden, update, hidden_size);

        // h = h + MLP(RMSNorm(h))
        self.post_attention_layernorm
            .forward(hidden, normed, backend);
        self.mlp
            .forward(normed, n, update, backend, &mut scratch.mlp)?;
        add_in_place(hidden, update, hidden_size);
        Ok(())
    }

    pub fn bytes(&self) -> usize {
        self.self_attn.bytes() + self.mlp.bytes() + 4 * (2 * self.input_layernorm.dim())
    }
}

/// `x += y` for `[n, hidden]` rows.
fn add_in_place(x: &mut [f32], y: &[f32], hidden: usize) {
    for_each_row_mut(x, hidden, |i, row| {
        for (a, b) in row.iter_mut().zip(&y[i * hidden..][..hidden]) {
            *a += b;
        }
    });
}
