//! The one order every f32 reduction of the fast kernels sums in, whatever the SIMD width, so a
//! result has the same bits at every level: element `i` goes to logical lane `i % 16` (in order,
//! with a fused multiply-add where a product is involved), then the lanes are folded by a fixed
//! tree: lane `i` plus lane `i + 8`, then `+ 4`, `+ 2`, `+ 1`. AVX-512 holds the 16 lanes in one
//! register, AVX2 in two, NEON in four, scalar in sixteen.

use pulp::Simd;

/// Logical lanes of every reduction.
pub(crate) const LANES: usize = 16;

/// Registers holding the 16 logical lanes at this level (register `g`, lane `i` is logical lane
/// `g * S::F32_LANES + i`).
#[inline(always)]
pub(crate) fn regs<S: Simd>() -> usize {
    debug_assert!(LANES.is_multiple_of(S::F32_LANES));
    LANES / S::F32_LANES
}

/// 16 logical f32 lanes: the first [`regs`] registers are used.
pub(crate) type Lanes<S> = [<S as Simd>::f32s; LANES];

#[inline(always)]
pub(crate) fn zeros<S: Simd>(simd: S) -> Lanes<S> {
    [simd.splat_f32s(0.0); LANES]
}

/// The fixed tree over the 16 logical lanes of `acc`.
#[inline(always)]
pub(crate) fn tree_sum<S: Simd>(simd: S, mut acc: Lanes<S>) -> f32 {
    let mut n = regs::<S>();
    while n > 1 {
        n /= 2;
        for g in 0..n {
            acc[g] = simd.add_f32s(acc[g], acc[g + n]);
        }
    }
    match S::F32_LANES {
        // pulp's x86 sums fold the high half onto the low half down to one lane: the same tree.
        16 | 8 | 1 => simd.reduce_sum_f32s(acc[0]),
        _ => {
            let mut lanes = [0.0f32; LANES];
            simd.partial_store_f32s(&mut lanes[..S::F32_LANES], acc[0]);
            let mut n = S::F32_LANES;
            while n > 1 {
                n /= 2;
                for i in 0..n {
                    lanes[i] += lanes[i + n];
                }
            }
            lanes[0]
        }
    }
}

/// Adds the last, short chunk of a sum (fewer than 16 values), zero-padded to 16 lanes: every
/// sum ends with one such chunk, empty or not, so every level adds the same zeros.
#[inline(always)]
pub(crate) fn add_last_chunk<S: Simd>(simd: S, acc: &mut Lanes<S>, rest: &[f32]) {
    let mut padded = [0.0f32; LANES];
    padded[..rest.len()].copy_from_slice(rest);
    let (regs_of_chunk, _) = S::as_simd_f32s(&padded);
    for (a, &v) in acc.iter_mut().zip(regs_of_chunk) {
        *a = simd.add_f32s(*a, v);
    }
}

/// `sum(x[i]^2)` in the fixed order (the squares fused into the sums, the last chunk
/// zero-padded as in [`add_last_chunk`]).
#[inline(always)]
pub(crate) fn sum_of_squares<S: Simd>(simd: S, x: &[f32]) -> f32 {
    let mut acc = zeros(simd);
    let chunks = x.chunks_exact(LANES);
    let mut padded = [0.0f32; LANES];
    padded[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    for chunk in chunks.chain(std::iter::once(&padded[..])) {
        let (regs_of_chunk, _) = S::as_simd_f32s(chunk);
        for (a, &v) in acc.iter_mut().zip(regs_of_chunk) {
            *a = simd.mul_add_f32s(v, v, *a);
        }
    }
    tree_sum(simd, acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimdLevel;
    use crate::dispatch::run_at;
    use pulp::WithSimd;

    struct SumOfSquares<'a>(&'a [f32]);

    impl WithSimd for SumOfSquares<'_> {
        type Output = f32;
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> f32 {
            sum_of_squares(simd, self.0)
        }
    }

    /// The definition in the module doc, in plain Rust (zero-padded to whole chunks of 16, plus
    /// one when `x` fills its last).
    fn definition(x: &[f32]) -> f32 {
        let mut lanes = [0.0f32; LANES];
        for i in 0..(x.len() / LANES + 1) * LANES {
            let v = x.get(i).copied().unwrap_or(0.0);
            lanes[i % LANES] = v.mul_add(v, lanes[i % LANES]);
        }
        for n in [8, 4, 2, 1] {
            for i in 0..n {
                lanes[i] += lanes[i + n];
            }
        }
        lanes[0]
    }

    #[test]
    fn every_level_sums_as_the_definition() {
        let x: Vec<f32> = (0..300)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 1.37e-3 * (1.0 + (i % 13) as f32))
            .collect();
        for len in [0, 1, 7, 15, 16, 17, 31, 64, 100, 300] {
            let want = definition(&x[..len]).to_bits();
            for level in SimdLevel::all_supported() {
                let got = run_at(level, SumOfSquares(&x[..len]));
                assert_eq!(got.to_bits(), want, "{level}, len {len}");
            }
        }
    }
}
