//! Elementwise math on pulp vectors, shared by the attention softmax and the activations.
//!
//! Every multiply-add is fused (`mul_add_f32s`; pulp's `mul_add_e` is unfused at the scalar
//! level), so each lane gives the same bits at every SIMD level.

use pulp::Simd;

/// `exp(x)` for `x <= ~88` (here always `<= 0`): Cody-Waite reduction to `r in [-ln2/2, ln2/2]`,
/// a degree-6 polynomial (relative error ~1e-7), and `2^n` built in the exponent bits. The
/// rounding of `x * log2(e)` uses the 1.5 * 2^23 trick, whose low mantissa bits then hold `n`.
#[inline(always)]
pub(crate) fn exp_nonpositive<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const ROUND_MAGIC: f32 = 12_582_912.0;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const FLOOR: f32 = -87.0;
    let underflow = simd.less_than_f32s(x, simd.splat_f32s(FLOOR));
    let x = simd.max_f32s(x, simd.splat_f32s(FLOOR));
    let t = simd.mul_add_f32s(x, simd.splat_f32s(LOG2E), simd.splat_f32s(ROUND_MAGIC));
    let n = simd.sub_f32s(t, simd.splat_f32s(ROUND_MAGIC));
    let r = simd.mul_add_f32s(n, simd.splat_f32s(-LN2_HI), x);
    let r = simd.mul_add_f32s(n, simd.splat_f32s(-LN2_LO), r);
    let mut poly = simd.splat_f32s(1.0 / 720.0);
    for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        poly = simd.mul_add_f32s(poly, r, simd.splat_f32s(c));
    }
    let exponent = simd.add_u32s(simd.transmute_u32s_f32s(t), simd.splat_u32s(127));
    let pow2n = simd.transmute_f32s_u32s(simd.wrapping_dyn_shl_u32s(exponent, simd.splat_u32s(23)));
    simd.select_f32s(underflow, simd.splat_f32s(0.0), simd.mul_f32s(poly, pow2n))
}
