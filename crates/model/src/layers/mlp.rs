use gattn_tensor::Checkpoint;

use crate::backend::Backend;
use crate::config::Qwen3Config;
use crate::error::Result;
use crate::scratch::{MlpScratch, sized};
use crate::weights::{Linear, WeightFormat};

/// SwiGLU feed-forward: `down(silu(gate(x)) * up(x))`.
#[derive(Debug, Clone)]
pub struct Mlp {
    pub gate_proj: Linear,
    pub up_proj: Linear,
    pub down_proj: Linear,
}

impl Mlp {
    pub fn load(
        checkpoint: &Checkpoint,
        prefix: &str,
        config: &Qwen3Config,
        format: WeightFormat,
    ) -> Result<Mlp> {
        let (h, i) = (config.hidden_size, config.intermediate_size);
        Ok(Mlp {
            gate_proj: Linear::load(
                checkpoint,
                &format!("{prefix}.gate_proj"),
                h,
                i,
                false,
                format,
            )?,
            up_proj: Linear::load(
                checkpoint,
                &format!("{prefix}.up_proj"),
                h,
                i,
                false,
                format,
            )?,
            down_proj: Linear::load(
                checkpoint,
                &format!("{prefix}.down_proj"),
                i,
                h,
                false,
                format,
            )?,
        })
    }

    /// x: `[n, hidden]` -> out: `[n, hidden]`.
    pub fn forward(
        &self,
        x: &[f32],
        n: usize,
        out: &mut [f32],
        backend: Backend,
        scratch: &mut MlpScratch,
    ) -> Result<()> {
        // a = silu(gate_proj(x)) * up_proj(x): [n, intermediate]
        let activation = sized(&mut scratch.activation, n * self.gate_proj.out_features);
        Linear::gate_up_silu(
            &self.gate_proj,
            &self.up_proj,
            x,
            n,
            activation,
            backend,
            &mut scratch.up,
        )?;
        // out = down_proj(a): [n, hidden]
        self.down_proj.forward(activation, n, out, backend)
    }

    pub fn bytes(&self) -> usize {
        self.gate_proj.bytes() + self.up_proj.bytes() + self.down_proj.bytes()
    }
}
