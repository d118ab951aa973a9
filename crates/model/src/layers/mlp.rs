use gattn_kernels::reference::silu;
use gattn_tensor::Checkpoint;

use crate::config::Qwen3Config;
use crate::error::Result;
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
    pub fn forward(&self, x: &[f32], n: usize, out: &mut [f32]) -> Result<()> {
        let intermediate = self.gate_proj.out_features;
        let mut gate = vec![0.0; n * intermediate];
        let mut up = vec![0.0; n * intermediate];
        self.gate_proj.forward(x, n, &mut gate)?;
        self.up_proj.forward(x, n, &mut up)?;
        for (g, u) in gate.iter_mut().zip(&up) {
            *g = silu(*g) * u;
        }
        self.down_proj.forward(&gate, n, out)
    }

    pub fn bytes(&self) -> usize {
        self.gate_proj.bytes() + self.up_proj.bytes() + self.down_proj.bytes()
    }
}
