use gattn_kernels::reference;
use gattn_tensor::Checkpoint;

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
    pub fn forward(&self, x: &[f32], out: &mut [f32]) {
        let dim = self.dim();
        assert_eq!(x.len(), out.len());
        for_each_row_mut(out, dim, |i, out_row| {
            reference::rms_norm(&x[i * dim..][..dim], &self.weight, self.eps, out_row);
        });
    }

    /// One row in place (q_norm and k_norm run per head, on `head_dim` values at a time);
    /// the same arithmetic, in the same order, as [`reference::rms_norm`].
    pub fn forward_row_in_place(&self, x: &mut [f32]) {
        assert_eq!(x.len(), self.dim());
        let mean_square = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
        let inv_rms = 1.0 / (mean_square + self.eps).sqrt();
        for (v, w) in x.iter_mut().zip(&self.weight) {
            *v = *v * inv_rms * w;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_row_equals_the_reference_bit_for_bit() {
        let norm = RmsNorm {
            weight: (0..8).map(|i| 0.5 + i as f32 * 0.25).collect(),
            eps: 1e-6,
        };
        let x: Vec<f32> = (0..8).map(|i| (i as f32 - 3.3) * 1.7).collect();
        let mut expected = vec![0.0; 8];
        reference::rms_norm(&x, &norm.weight, norm.eps, &mut expected);
        let mut row = x.clone();
        norm.forward_row_in_place(&mut row);
        assert_eq!(row, expected);
    }
}
