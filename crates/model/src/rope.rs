//! Rotary position embedding frequencies (default, linear, YaRN) as `transformers` computes them.

use crate::config::{Qwen3Config, RopeScaling, YarnParams};

/// The inverse frequencies of the `head_dim / 2` rotation pairs and the factor cos/sin carry.
#[derive(Debug, Clone)]
pub struct RotaryEmbedding {
    inv_freq: Vec<f64>,
    /// YaRN's attention factor (1 otherwise), multiplied into cos and sin as transformers does.
    attention_factor: f64,
}

/// cos and sin of every position of a chunk: `[n, head_dim / 2]` each.
#[derive(Debug, Clone, Default)]
pub struct RopeAngles {
    pub half_dim: usize,
    pub cos: Vec<f32>,
    pub sin: Vec<f32>,
}

impl RopeAngles {
    pub fn cos(&self, t: usize) -> &[f32] {
        &self.cos[t * self.half_dim..][..self.half_dim]
    }
    pub fn sin(&self, t: usize) -> &[f32] {
        &self.sin[t * self.half_dim..][..self.half_dim]
    }
}

impl RotaryEmbedding {
    pub fn new(config: &Qwen3Config) -> Self {
        Self::with_scaling(config.head_dim, config.rope_theta, &config.rope_scaling)
    }

    pub fn with_scaling(head_dim: usize, theta: f64, scaling: &RopeScaling) -> Self {
        let half = head_dim / 2;
        // base^(-2i/d): the unscaled frequencies ("extrapolation" in YaRN's terms).
        let base_inv_freq: Vec<f64> = (0..half)
            .map(|i| 1.0 / theta.powf((2 * i) as f64 / head_dim as f64))
            .collect();
        match scaling {
            RopeScaling::None => RotaryEmbedding {
                inv_freq: base_inv_freq,
                attention_factor: 1.0,
            },
            RopeScaling::Linear { factor } => RotaryEmbedding {
                inv_freq: base_inv_freq.iter().map(|f| f / factor).collect(),
                attention_factor: 1.0,
            },
            RopeScaling::Yarn(yarn) => yarn_frequencies(&base_inv_freq, head_dim, theta, yarn),
        }
    }

    pub fn attention_factor(&self) -> f64 {
        self.attention_factor
    }

    /// cos/sin for positions `start .. start + n`.
    pub fn angles(&self, start: usize, n: usize) -> RopeAngles {
        let mut angles = RopeAngles::default();
        self.angles_into(start, n, &mut angles);
        angles
    }

    /// [`angles`](Self::angles) into reused buffers (no allocation once they are large enough).
    pub fn angles_into(&self, start: usize, n: usize, angles: &mut RopeAngles) {
        let half_dim = self.inv_freq.len();
        angles.half_dim = half_dim;
        angles.cos.clear();
        angles.sin.clear();
        for position in start..start + n {
            for &f in &self.inv_freq {
                let angle = position as f64 * f;
                angles
                    .cos
                    .push((angle.cos() * self.attention_factor) as f32);
                angles
                    .sin
                    .push((angle.sin() * self.attention_factor) as f32);
            }
        }
    }
}

/// YaRN: low frequencies are interpolated (divided by `factor`), high ones kept, with a linear
/// ramp between the dimensions where `beta_fast` and `beta_slow` rotations fit the original context.
fn yarn_frequencies(
    base_inv_freq: &[f64],
    head_dim: usize,
    theta: f64,
    yarn: &YarnParams,
) -> RotaryEmbedding {
    let factor = yarn.factor;
    let attention_factor = match yarn.attention_factor {
        Some(a) => a,
        None => match (yarn.mscale, yarn.mscale_all_dim) {
            (Some(m), Some(m_all)) if m != 0.0 && m_all != 0.0 => {
                yarn_mscale(factor, m) / yarn_mscale(factor, m_all)
            }
            _ => yarn_mscale(factor, 1.0),
        },
    };
    let original = yarn.original_max_position_embeddings as f64;
    // The dimension index at which a frequency makes `rotations` turns over the original context.
    let correction_dim = |rotations: f64| {
        head_dim as f64 * (original / (rotations * 2.0 * std::f64::consts::PI)).ln()
            / (2.0 * theta.ln())
    };
    let (mut low, mut high) = (
        correction_dim(yarn.beta_fast),
        correction_dim(yarn.beta_slow),
    );
    if yarn.truncate {
        low = low.floor();
        high = high.ceil();
    }
    let low = low.max(0.0);
    let high = high.min(head_dim as f64 - 1.0);
    let high = if low == high { high + 0.001 } else { high };
    let inv_freq = base_inv_freq
        .iter()
        .enumerate()
        .map(|(i, &extrapolation)| {
            let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
            let extrapolation_share = 1.0 - ramp;
            let interpolation = extrapolation / factor;
            interpolation * (1.0 - extrapolation_share) + extrapolation * extrapolation_share
        })
        .collect();
    RotaryEmbedding {
        inv_freq,
        attention_factor,
    }
}

fn yarn_mscale(scale: f64, mscale: f64) -> f64 {
    if scale <= 1.0 {
        1.0
    } else {
        0.1 * mscale * scale.ln() + 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_scaling_divides_the_frequencies() {
        let plain = RotaryEmbedding::with_scaling(8, 10000.0, &RopeScaling::None);
        let linear =
            RotaryEmbedding::with_scaling(8, 10000.0, &RopeScaling::Linear { factor: 4.0 });
        for (p, l) in plain.inv_freq.iter().zip(&linear.inv_freq) {
            assert!((p / 4.0 - l).abs() < 1e-15);
        }
    }

    #[test]
    fn yarn_keeps_high_frequencies_and_interpolates_low_ones() {
        let yarn = YarnParams {
            factor: 4.0,
            original_max_position_embeddings: 32768,
            attention_factor: None,
            beta_fast: 32.0,
            beta_slow: 1.0,
            mscale: None,
            mscale_all_dim: None,
            truncate: true,
        };
        let plain = RotaryEmbedding::with_scaling(128, 1e6, &RopeScaling::None);
        let scaled = RotaryEmbedding::with_scaling(128, 1e6, &RopeScaling::Yarn(yarn));
        assert_eq!(scaled.inv_freq[0], plain.inv_freq[0]);
        let last = plain.inv_freq.len() - 1;
        assert!((scaled.inv_freq[last] - plain.inv_freq[last] / 4.0).abs() < 1e-18);
        assert!((scaled.attention_factor - (0.1 * 4f64.ln() + 1.0)).abs() < 1e-12);
    }
}
