//! Fast RMSNorm (pulp, every SIMD level), checked against `reference::norm`.
//!
//! The reference sums the squares in one chain, a dependent add per value; over the hidden and
//! per-head norms of a prefill that was a visible share of it. Here the sum runs in 16 lanes
//! (`fixed_sum`: the same order, so the same bits, at every SIMD level; equal to the reference
//! within f32 rounding).

use pulp::{Simd, WithSimd};

use crate::SimdLevel;
use crate::dispatch::run_at;
use crate::fixed_sum;

/// Qwen3's RMSNorm of one vector, in place: `x = x / sqrt(mean(x^2) + eps) * weight`.
pub fn rms_norm_in_place(level: SimdLevel, x: &mut [f32], weight: &[f32], eps: f32) {
    assert_eq!(
        x.len(),
        weight.len(),
        "rms_norm: x and weight lengths differ"
    );
    run_at(level, RmsNormInPlace { x, weight, eps });
}

struct RmsNormInPlace<'a> {
    x: &'a mut [f32],
    weight: &'a [f32],
    eps: f32,
}

impl WithSimd for RmsNormInPlace<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let inv_rms =
            1.0 / (fixed_sum::sum_of_squares(simd, self.x) / self.x.len() as f32 + self.eps).sqrt();
        // x * inv_rms * weight, in the reference's order.
        let (x_body, x_tail) = S::as_mut_simd_f32s(self.x);
        let (w_body, w_tail) = S::as_simd_f32s(self.weight);
        let inv = simd.splat_f32s(inv_rms);
        for (v, &w) in x_body.iter_mut().zip(w_body) {
            *v = simd.mul_f32s(simd.mul_f32s(*v, inv), w);
        }
        for (v, &w) in x_tail.iter_mut().zip(w_tail) {
            *v = *v * inv_rms * w;
        }
    }
}
