use gattn_kernels::dispatch::simd_level;
use gattn_kernels::{norm, reference};
use gattn_tensor::Checkpoint;

use crate::backend::Backend;
use crate::error::Result;
use crate::rows::for_each_row_mut;
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
    pub fn forward(&self, x: &[f32], out: &mut [f32], backend: Backend) {
        let dim = self.dim();
        assert_eq!(x.len(), out.len());
        for_each_row_mut(out, dim, |i, out_row| {
            out_row.copy_from_slice(&x[i * dim..][..dim]);
            self.forward_row_in_place(out_row, backend);
        });
    }

    /// One row in place (q_norm and k_norm run per head, on `head_dim` values at a time).
    pub fn forward_row_in_place(&self, x: &mut [f32], backend: Backend) {
        match backend {
            Backend::Fast => norm::rms_norm_in_place(simd_level(), x, &self.weight, self.eps),
            Backend::Reference => reference::rms_norm_in_place(x, &self.weight, self.eps),
        }
    }
}
