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

/// Chunks of 16 logical lanes of `x`, the last zero-padded (so every level adds the same zeros).
#[inline(always)]
fn padded_chunk(x: &[f32]) -> [f32; LANES] {
    let mut chunk = [0.0f32; LANES];
    chunk[..x.len()].copy_from_slice(x);
    chunk
}

/// `sum(x[i]^2)` in the fixed order.
#[inline(always)]
pub(crate) fn sum_of_squares<S: Simd>(simd: S, x: &[f32]) -> f32 {
    let mut acc = zeros(simd);
    let chunks = x.chunks_exact(LANES);
    let rest = padded_chunk(chunks.remainder());
    for chunk in chunks.chain(std::iter::once(&rest[..])) {
        let (regs_of_chunk, _) = S::as_simd_f32s(chunk);
        for (a, &v) in acc.iter_mut().zip(regs_of_chunk) {
            *a = simd.mul_add_f32s(v, v, *a);
        }
    }
    tree_sum(simd, acc)
}

/// `sum(x[i])` in the fixed order.
#[inline(always)]
pub(crate) fn sum<S: Simd>(simd: S, x: &[f32]) -> f32 {
    let mut acc = zeros(simd);
    let chunks = x.chunks_exact(LANES);
    let rest = padded_chunk(chunks.remainder());
    for chunk in chunks.chain(std::iter::once(&rest[..])) {
        let (regs_of_chunk, _) = S::as_simd_f32s(chunk);
        for (a, &v) in acc.iter_mut().zip(regs_of_chunk) {
            *a = simd.add_f32s(*a, v);
        }
    }
    tree_sum(simd, acc)
}
