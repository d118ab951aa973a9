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

/// `x` rounded to bf16 (to nearest even) and back to f32, a result below bf16's normal range
/// flushed to a zero of its sign (the AVX512-BF16 and AMX dot products read bf16 denormals as
/// zero), NaN kept NaN. The same bits as [`round_bf16_scalar`].
#[inline(always)]
pub(crate) fn round_bf16<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    let bits = simd.transmute_u32s_f32s(x);
    let odd = simd.and_u32s(
        simd.wrapping_dyn_shr_u32s(bits, simd.splat_u32s(16)),
        simd.splat_u32s(1),
    );
    let biased = simd.add_u32s(simd.add_u32s(bits, simd.splat_u32s(0x7fff)), odd);
    let rounded = simd.and_u32s(biased, simd.splat_u32s(0xffff_0000));
    let exponent = simd.and_u32s(rounded, simd.splat_u32s(0x7f80_0000));
    let sign = simd.and_u32s(rounded, simd.splat_u32s(0x8000_0000));
    let flushed = simd.select_u32s(simd.equal_u32s(exponent, simd.splat_u32s(0)), sign, rounded);
    // A NaN's mantissa could carry into its sign: keep it a (quiet) NaN instead.
    let nan = simd.or_u32s(
        simd.and_u32s(bits, simd.splat_u32s(0xffff_0000)),
        simd.splat_u32s(0x0040_0000),
    );
    let is_number = simd.equal_f32s(x, x);
    simd.transmute_f32s_u32s(simd.select_u32s(is_number, flushed, nan))
}

/// `half::bf16::from_f32(v).to_bits()` (round to nearest even, NaNs kept and made quiet),
/// written without branches so that it vectorizes (the KV cache's bf16 encoding).
#[inline(always)]
pub(crate) fn bf16_bits(v: f32) -> u32 {
    let bits = v.to_bits();
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16;
    let quiet_nan = (bits >> 16) | 0x40;
    if v.is_nan() { quiet_nan } else { rounded }
}

/// [`round_bf16`] on one value: [`bf16_bits`] with denormals flushed.
pub(crate) fn round_bf16_scalar(x: f32) -> f32 {
    let rounded = bf16_bits(x) << 16;
    if rounded & 0x7f80_0000 == 0 {
        f32::from_bits(rounded & 0x8000_0000)
    } else {
        f32::from_bits(rounded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimdLevel;
    use crate::dispatch::run_at;
    use pulp::WithSimd;

    struct Round<'a>(&'a [f32]);

    impl WithSimd for Round<'_> {
        type Output = Vec<f32>;
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> Vec<f32> {
            let mut out = self.0.to_vec();
            let (head, _) = S::as_mut_simd_f32s(&mut out);
            for x in head {
                *x = round_bf16(simd, *x);
            }
            out
        }
    }

    /// Ties, carries into the exponent, overflow to infinity, denormals, zeros, NaNs: every level
    /// gives the scalar rounding's bits, which are half's round-to-nearest-even where the result
    /// is a normal bf16 and a signed zero below that.
    #[test]
    fn bf16_rounding_is_the_same_everywhere_and_to_nearest_even() {
        let mut values: Vec<f32> = vec![
            1.0,
            -1.0,
            f32::from_bits(0x3f80_8000), // a tie, even below: down
            f32::from_bits(0x3f81_8000), // a tie, odd below: up
            f32::from_bits(0x3fff_ffff), // carries into the exponent
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE,
            f32::from_bits(0x007f_ffff), // denormal that rounds up to the smallest normal
            f32::from_bits(0x0000_0001),
            -f32::from_bits(0x0040_0000),
            0.0,
            -0.0,
            f32::NAN,
            f32::from_bits(0x7fff_ffff), // a NaN whose rounding would carry into the sign
        ];
        values.extend((0..4000u32).map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761))));
        values.resize(values.len().next_multiple_of(16), 1.5);
        let want: Vec<f32> = values.iter().map(|&x| round_bf16_scalar(x)).collect();
        for (&x, &r) in values.iter().zip(&want) {
            if x.is_nan() {
                assert!(r.is_nan(), "{x:e}");
                continue;
            }
            let nearest = half::bf16::from_f32(x).to_f32();
            if nearest.is_normal() || nearest.is_infinite() {
                assert_eq!(r.to_bits(), nearest.to_bits(), "{x:e}");
            } else {
                assert_eq!(
                    r.to_bits(),
                    (x.to_bits() & 0x8000_0000),
                    "{x:e}: a signed zero"
                );
            }
        }
        for level in SimdLevel::all_supported() {
            let got = run_at(level, Round(&values));
            for ((&x, &g), &w) in values.iter().zip(&got).zip(&want) {
                let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
                assert!(same, "{level:?}: {x:e} -> {g:e}, want {w:e}");
            }
        }
    }
}
