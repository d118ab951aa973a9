use gattn_kernels::reference;
use gattn_tensor::Checkpoint;

use crate::error::Result;
use crate::weights::load_vector;

/// RMSNorm with a learned scale, applied to each row of `[n, dim]`.
#[derive(Debug, Clone)]
pub struct RmsNorm {
    pub weight: Vec<f32>,
    pub eps: f32,
}

impl RmsNorm {
    pub fn load(checkpoint: &Checkpoint, name: &str, dim: usize, eps: f32) -> Result<RmsNorm> {
        Ok(RmsNorm {
            weight: load_vector(checkpoint, name, dim)?,
            eps,
        })
    }

    pub fn dim(&self) -> usize {
        self.weight.len()
    }

    /// x, out: `[n, dim]`.
    pub fn forward(&self, x: &[f32], out: &mut [f32]) {
        let dim = self.dim();
        for (x_row, out_row) in x.chunks_exact(dim).zip(out.chunks_exact_mut(dim)) {
            reference::rms_norm(x_row, &self.weight, self.eps, out_row);
        }
    }

    /// In place on `[n, dim]` (q_norm and k_norm run per head on `[n * heads, head_dim]`).
    pub fn forward_in_place(&self, x: &mut [f32]) {
        let dim = self.dim();
        let mut row = vec![0.0; dim];
        for x_row in x.chunks_exact_mut(dim) {
            reference::rms_norm(x_row, &self.weight, self.eps, &mut row);
            x_row.copy_from_slice(&row);
        }
    }
}
