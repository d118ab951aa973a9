//! Fast RMSNorm (pulp, every SIMD level), checked against `reference::norm`.
//!
//! The reference sums the squares in one chain, a dependent add per value; over the hidden and
//! per-head norms of a prefill that was a visible share of it. Here the sum runs in
//! four vector accumulators (a different order: equal to the reference within f32 rounding).

use pulp::{Simd, WithSimd};

use crate::SimdLevel;
use crate::dispatch::run_at;

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
        let inv_rms = 1.0 / (sum_of_squares(simd, self.x) / self.x.len() as f32 + self.eps).sqrt();
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

#[inline(always)]
fn sum_of_squares<S: Simd>(simd: S, x: &[f32]) -> f32 {
    let (body, tail) = S::as_simd_f32s(x);
    let zero = simd.splat_f32s(0.0);
    let mut sums = [zero; 4];
    let quads = body.chunks_exact(4);
    let rest = quads.remainder();
    for quad in quads {
        for (sum, &v) in sums.iter_mut().zip(quad) {
            *sum = simd.mul_add_e_f32s(v, v, *sum);
        }
    }
    for (sum, &v) in sums.iter_mut().zip(rest) {
        *sum = simd.mul_add_e_f32s(v, v, *sum);
    }
    let total = simd.add_f32s(
        simd.add_f32s(sums[0], sums[1]),
        simd.add_f32s(sums[2], sums[3]),
    );
    simd.reduce_sum_f32s(total) + tail.iter().map(|v| v * v).sum::<f32>()
}
