//! An int8 cache's `P V` in integers: each row's weights of a tile, `p_k s_k` (V's scale
//! folded in), become integers of 15 bits, [`WEIGHT_STEPS`] steps to the row's largest weight of
//! the tile; they multiply V's integers in exact i32 sums (`vpdpwssd`, `vpmaddwd`, or the plain
//! loop here), added to the f32 accumulators times the step with one fused multiply-add. Integer
//! sums are exact in any order, so every level gives the same bits. Each weight moves by at most
//! half a step: the bound is in docs/performance.md, "Error bound".

use pulp::Simd;

use super::{BLOCK_ROWS, DecodedTile, Lanes, ValueDots};
#[cfg(target_arch = "x86_64")]
use crate::attention::lane_prefill::{dots_avx2, dots_avx512};

/// Steps from zero to a row's largest weight of a tile in an int8 cache's integer `P V`: the
/// most an i16 holds, so that the weights are `vpdpwssd`'s operands as they are.
pub(super) const WEIGHT_STEPS: f32 = 32767.0;
/// 1.5 * 2^23: see [`Lanes::in_steps`].
const ROUNDING_BIAS: f32 = 12_582_912.0;

impl<S: Simd> Lanes<S> {
    /// An int8 cache's steps of the tile's weights, a row: `weight_step` (the row's `largest`
    /// weight over [`WEIGHT_STEPS`]) and its inverse `steps_per_weight` (zero where the row
    /// weighs nothing).
    #[inline(always)]
    pub(super) fn set_weight_steps(&mut self, simd: S, largest: &[S::f32s]) {
        let (zero, steps) = (simd.splat_f32s(0.0), simd.splat_f32s(WEIGHT_STEPS));
        for (v, &largest) in largest.iter().enumerate() {
            let nothing = simd.equal_f32s(largest, zero);
            let inverse = simd.select_f32s(nothing, zero, simd.div_f32s(steps, largest));
            self.steps_per_weight[v] = inverse;
            self.weight_step[v] = simd.div_f32s(largest, steps);
        }
    }

    /// An int8 cache's weight `x` in steps, rounded to an integer: adding 1.5 * 2^23 to a value
    /// below 2^22 leaves the integer nearest to it (ties to even) in the sum's low mantissa bits,
    /// the same at every width. Returns that sum; minus 1.5 * 2^23 it is the integer.
    #[inline(always)]
    fn in_steps(simd: S, x: S::f32s, steps_per_weight: S::f32s) -> S::f32s {
        simd.add_f32s(
            simd.mul_f32s(x, steps_per_weight),
            simd.splat_f32s(ROUNDING_BIAS),
        )
    }

    /// An int8 cache's `P V` without a pair kernel: the tile's weights in steps, rounded to
    /// integers `w` in `st`, then `ot += step * sum_t w[t] v_t` with V's integers (`values`,
    /// decoded to f32), the sums in i32, exact in any order: the pair kernels' bits.
    #[inline(always)]
    pub(super) fn accumulate_integers(&mut self, simd: S, values: &[f32], ntok: usize) {
        let (rv, slots) = (self.rv, self.slots);
        let bias = simd.splat_f32s(ROUNDING_BIAS);
        for w in self.st[..ntok * rv].chunks_exact_mut(rv) {
            for (x, &inverse) in w.iter_mut().zip(&self.steps_per_weight) {
                *x = simd.sub_f32s(Self::in_steps(simd, *x, inverse), bias);
            }
        }
        let weights: &[f32] = bytemuck::cast_slice(&self.st[..ntok * rv]);
        let steps: &[f32] = bytemuck::cast_slice(&self.weight_step);
        let ot: &mut [f32] = bytemuck::cast_slice_mut(&mut self.ot);
        let mut sums = [0i32; BLOCK_ROWS];
        for (slot, out) in ot.chunks_exact_mut(BLOCK_ROWS).enumerate() {
            sums.fill(0);
            for (t, w) in weights.chunks_exact(BLOCK_ROWS).enumerate() {
                let value = values[t * slots + slot] as i32;
                for (sum, &w) in sums.iter_mut().zip(w) {
                    *sum += w as i32 * value;
                }
            }
            for ((o, &sum), &step) in out.iter_mut().zip(&sums).zip(steps) {
                *o = step.mul_add(sum as f32, *o);
            }
        }
    }

    /// `P V` of an int8 cache on an integer pair kernel (`p_words` packed): the tile's `pairs`
    /// pairs of keys from `decoded` (an odd last key beside a zero key, or beside the tile's next
    /// key, which this block does not see: its weight is zero, so is the product).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn accumulate_int16_pairs(&mut self, decoded: &DecodedTile, pairs: usize) {
        let slots = self.slots;
        let values = dots_avx512::Words {
            words: &decoded.v_pairs,
            k_stride: slots,
            col_stride: 1,
        };
        let step: &[f32; BLOCK_ROWS] = bytemuck::cast_slice(&self.weight_step)
            .try_into()
            .expect("BLOCK_ROWS lanes");
        let ot: &mut [f32] = bytemuck::cast_slice_mut(&mut self.ot);
        let weights = &self.p_words;
        // SAFETY: `value_dots` comes from a kernel table, which proved the CPU has the kernel's
        // features (AVX512-VNNI for `vpdpwssd`, AVX2 and FMA for `vpmaddwd`).
        unsafe {
            if self.value_dots == ValueDots::Int16 {
                dots_avx512::dot_int16_scaled(weights, values, step, ot, slots, pairs);
            } else {
                dots_avx2::dot_int16_scaled(weights, values, step, ot, slots, pairs);
            }
        }
    }

    /// `P V` on integer pairs: the tile's first `depth` (even) weights of int8 values in steps
    /// ([`Lanes::in_steps`], the generic path's integers), as i16 pairs of keys `(2i, 2i + 1)`,
    /// the even key in the low half.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn pack_integer_weights(&mut self, simd: S, depth: usize) {
        let (rv, low, sixteen) = (self.rv, simd.splat_u32s(0xffff), simd.splat_u32s(16));
        let (pairs, _) = S::as_mut_simd_u32s(&mut self.p_words[..depth / 2 * BLOCK_ROWS]);
        for (i, pair) in pairs.chunks_exact_mut(rv).enumerate() {
            for v in 0..rv {
                let inverse = self.steps_per_weight[v];
                let even = Self::in_steps(simd, self.st[2 * i * rv + v], inverse);
                let odd = Self::in_steps(simd, self.st[(2 * i + 1) * rv + v], inverse);
                let (even, odd) = (
                    simd.transmute_u32s_f32s(even),
                    simd.transmute_u32s_f32s(odd),
                );
                let high = simd.wrapping_dyn_shl_u32s(odd, sixteen);
                pair[v] = simd.or_u32s(simd.and_u32s(even, low), high);
            }
        }
    }
}
