//! The inner loops, generic over pulp's `Simd` (so one source serves scalar, AVX2, AVX-512 and
//! NEON) and over the storage format of the K/V words.
//!
//! Lane order: a block of `L` storage words (one SIMD register) holds `L * E` elements; decoding
//! sub-vector `j` of the block yields elements `E * (b * L + i) + j` for lanes `i`. Rather than
//! shuffling them back, queries and accumulators live in that same permuted order (see `layout`),
//! so the decode is one or two integer ops per register and no shuffle.
//!
//! Everything here is `#[inline(always)]`: it must be inlined into the `WithSimd` entry point for
//! the target features to apply.

#![allow(clippy::needless_range_loop)] // indexing small const-size register arrays reads clearest

use pulp::Simd;

use super::prefetch::TilePrefetch;
use crate::fixed_sum;
use crate::simd_math::exp_nonpositive;

/// How elements are packed in 32-bit storage words.
pub(crate) trait WordFormat: Copy + Send + Sync + 'static {
    /// Elements per word (`E`).
    const ELEMS: usize;
    /// Sub-vector `j < ELEMS` of a block of words, as f32 (before any int8 scale).
    fn decode<S: Simd>(simd: S, words: S::u32s, j: usize) -> S::f32s;
}

#[derive(Clone, Copy)]
pub(crate) struct F32Words;
#[derive(Clone, Copy)]
pub(crate) struct Bf16Words;
#[derive(Clone, Copy)]
pub(crate) struct Int8Words;

impl WordFormat for F32Words {
    const ELEMS: usize = 1;
    #[inline(always)]
    fn decode<S: Simd>(simd: S, words: S::u32s, _j: usize) -> S::f32s {
        simd.transmute_f32s_u32s(words)
    }
}

impl WordFormat for Bf16Words {
    const ELEMS: usize = 2;
    #[inline(always)]
    fn decode<S: Simd>(simd: S, words: S::u32s, j: usize) -> S::f32s {
        // A bf16 is the top half of an f32: shift the low one up, mask the high one in place.
        let bits = if j == 0 {
            simd.wrapping_dyn_shl_u32s(words, simd.splat_u32s(16))
        } else {
            simd.and_u32s(words, simd.splat_u32s(0xffff_0000))
        };
        simd.transmute_f32s_u32s(bits)
    }
}

/// 2^23 + 128: or-ing a byte into the mantissa of 2^23 gives 2^23 + byte exactly, and the bias of
/// the stored int8 is removed by the same subtraction.
const INT8_MAGIC_BITS: u32 = 0x4b00_0000;
const INT8_MAGIC_OFFSET: f32 = 8_388_736.0;

impl WordFormat for Int8Words {
    const ELEMS: usize = 4;
    #[inline(always)]
    fn decode<S: Simd>(simd: S, words: S::u32s, j: usize) -> S::f32s {
        // Byte 0 needs no shift and byte 3 no mask (j is a constant after unrolling).
        let shifted = if j == 0 {
            words
        } else {
            simd.wrapping_dyn_shr_u32s(words, simd.splat_u32s(8 * j as u32))
        };
        let byte = if j == 3 {
            shifted
        } else {
            simd.and_u32s(shifted, simd.splat_u32s(0xff))
        };
        let biased = simd.or_u32s(byte, simd.splat_u32s(INT8_MAGIC_BITS));
        simd.sub_f32s(
            simd.transmute_f32s_u32s(biased),
            simd.splat_f32s(INT8_MAGIC_OFFSET),
        )
    }
}

/// Block `b` of a row (`L` words, or fewer, zero-filled, at the end of the row).
#[inline(always)]
pub(crate) fn load_block<S: Simd>(simd: S, row: &[u32], b: usize) -> S::u32s {
    let lanes = S::U32_LANES;
    let start = b * lanes;
    let end = (start + lanes).min(row.len());
    if end - start == lanes {
        S::as_simd_u32s(&row[start..end]).0[0]
    } else {
        simd.partial_load_u32s(&row[start..end])
    }
}

/// Dot products of `R` permuted query rows with one stored key row (the raw sums: the caller
/// applies the int8 scale). `qs[r]` has `blocks * ELEMS` vectors, zero past the head dim.
///
/// The sums run in the order of `fixed_sum` at every level: register block `b` is part
/// `b % regs` of logical block `b / regs` (16 words), whose sub-vector `j` goes to the 16-lane
/// accumulator of its parity, so lane `i` of a logical block holds the same elements at every
/// width.
#[inline(always)]
pub(crate) fn dot_rows<S: Simd, F: WordFormat, const R: usize>(
    simd: S,
    qs: [&[S::f32s]; R],
    row: &[u32],
) -> [f32; R] {
    let regs = fixed_sum::regs::<S>();
    let blocks = row.len().div_ceil(S::U32_LANES);
    // Two accumulators per row so consecutive FMAs do not wait on each other.
    let mut acc = [[fixed_sum::zeros(simd); 2]; R];
    // `part` runs in an inner loop of constant length so that it indexes the accumulators with
    // constants: a runtime index kept all 16 logical registers in memory (docs/performance.md).
    for logical in 0..blocks.div_ceil(regs) {
        for part in 0..regs {
            let b = logical * regs + part;
            if b == blocks {
                break;
            }
            let words = load_block(simd, row, b);
            for j in 0..F::ELEMS {
                let k = F::decode(simd, words, j);
                let slot = b * F::ELEMS + j;
                let parity = (logical * F::ELEMS + j) & 1;
                for r in 0..R {
                    acc[r][parity][part] = simd.mul_add_f32s(qs[r][slot], k, acc[r][parity][part]);
                }
            }
        }
    }
    // No closures here: they would not inherit the target features of the pulp entry point.
    let mut sums = [0.0f32; R];
    for r in 0..R {
        let mut both = acc[r][0];
        for part in 0..regs {
            both[part] = simd.add_f32s(acc[r][0][part], acc[r][1][part]);
        }
        sums[r] = fixed_sum::tree_sum(simd, both);
    }
    sums
}

/// Register columns [`accumulate_rows`] takes together for `R` rows of format `F`: as many as
/// keep `R * ELEMS * C` accumulators within 8 registers (one column at a time left a decode's
/// few rows with 4 multiply-adds per step of loop overhead).
#[inline(always)]
const fn columns_per_step<F: WordFormat, const R: usize>() -> usize {
    match 8 / (R * F::ELEMS) {
        0 | 1 => 1,
        2 | 3 => 2,
        _ => 4,
    }
}

/// Steps of [`accumulate_rows`] per key of a tile (what a [`TilePrefetch`] spreads its lines
/// over): the register columns of a stored row of `row_words` words, `columns_per_step` at a time.
#[inline(always)]
pub(crate) fn steps_per_key<S: Simd, F: WordFormat, const R: usize>(row_words: usize) -> usize {
    let (blocks, c) = (row_words.div_ceil(S::U32_LANES), columns_per_step::<F, R>());
    blocks / c + blocks % c
}

/// `acc[r] += sum_t p[r][t] * v_t` over the `ntok` value rows of a tile (row `t` at
/// `values[t * row_words..]`). Walks the tile a few register columns at a time, so each
/// accumulator register is loaded and stored once per tile rather than once per token. Each step
/// (columns and token) ticks `prefetch`, the next tile's rows.
#[inline(always)]
pub(crate) fn accumulate_rows<S: Simd, F: WordFormat, const R: usize>(
    simd: S,
    acc: [&mut [S::f32s]; R],
    p: [&[f32]; R],
    values: &[u32],
    row_words: usize,
    ntok: usize,
    prefetch: Option<&mut TilePrefetch<'_>>,
) {
    match columns_per_step::<F, R>() {
        1 => accumulate_columns::<S, F, R, 1>(simd, acc, p, values, row_words, ntok, prefetch),
        2 => accumulate_columns::<S, F, R, 2>(simd, acc, p, values, row_words, ntok, prefetch),
        _ => accumulate_columns::<S, F, R, 4>(simd, acc, p, values, row_words, ntok, prefetch),
    }
}

/// [`accumulate_rows`] with `C` register columns a step, then single columns for the rest (a
/// constant count, so the accumulators stay in registers).
#[inline(always)]
fn accumulate_columns<S: Simd, F: WordFormat, const R: usize, const C: usize>(
    simd: S,
    mut acc: [&mut [S::f32s]; R],
    p: [&[f32]; R],
    values: &[u32],
    row_words: usize,
    ntok: usize,
    mut prefetch: Option<&mut TilePrefetch<'_>>,
) {
    let blocks = row_words.div_ceil(S::U32_LANES);
    let mut b0 = 0;
    while b0 + C <= blocks {
        columns_step::<S, F, R, C>(
            simd,
            &mut acc,
            p,
            values,
            row_words,
            ntok,
            b0,
            &mut prefetch,
        );
        b0 += C;
    }
    while b0 < blocks {
        columns_step::<S, F, R, 1>(
            simd,
            &mut acc,
            p,
            values,
            row_words,
            ntok,
            b0,
            &mut prefetch,
        );
        b0 += 1;
    }
}

/// Register columns `b0 .. b0 + C` of the tile's `ntok` value rows into the accumulators.
#[allow(
    clippy::too_many_arguments,
    reason = "accumulate_columns' arguments and the column, forwarded"
)]
#[inline(always)]
fn columns_step<S: Simd, F: WordFormat, const R: usize, const C: usize>(
    simd: S,
    acc: &mut [&mut [S::f32s]; R],
    p: [&[f32]; R],
    values: &[u32],
    row_words: usize,
    ntok: usize,
    b0: usize,
    prefetch: &mut Option<&mut TilePrefetch<'_>>,
) {
    let mut a = [[[simd.splat_f32s(0.0); 4]; C]; R];
    for r in 0..R {
        for c in 0..C {
            for j in 0..F::ELEMS {
                a[r][c][j] = acc[r][(b0 + c) * F::ELEMS + j];
            }
        }
    }
    for t in 0..ntok {
        if let Some(prefetch) = prefetch.as_mut() {
            prefetch.tick();
        }
        let row = &values[t * row_words..][..row_words];
        let mut weights = [simd.splat_f32s(0.0); R];
        for r in 0..R {
            weights[r] = simd.splat_f32s(p[r][t]);
        }
        for c in 0..C {
            let words = load_block(simd, row, b0 + c);
            for j in 0..F::ELEMS {
                let v = F::decode(simd, words, j);
                for r in 0..R {
                    a[r][c][j] = simd.mul_add_f32s(weights[r], v, a[r][c][j]);
                }
            }
        }
    }
    for r in 0..R {
        for c in 0..C {
            for j in 0..F::ELEMS {
                acc[r][(b0 + c) * F::ELEMS + j] = a[r][c][j];
            }
        }
    }
}

/// `x *= factor` on a whole accumulator row.
#[inline(always)]
pub(crate) fn scale_row<S: Simd>(simd: S, x: &mut [S::f32s], factor: f32) {
    let f = simd.splat_f32s(factor);
    for v in x {
        *v = simd.mul_f32s(*v, f);
    }
}

/// Largest value of `x` (-inf if empty).
#[inline(always)]
pub(crate) fn max_of<S: Simd>(simd: S, x: &[f32]) -> f32 {
    let (body, tail) = S::as_simd_f32s(x);
    let mut m = simd.splat_f32s(f32::NEG_INFINITY);
    for v in body {
        m = simd.max_f32s(m, *v);
    }
    let mut max = simd.reduce_max_f32s(m);
    for &v in tail {
        max = max.max(v);
    }
    max
}

/// `p[t] = exp(s[t] - max)` in place, returning the sum (in the order of `fixed_sum`). Arguments
/// below -87 (and -inf) give exactly 0, so masked scores drop out without NaN.
#[inline(always)]
pub(crate) fn exp_shifted_sum<S: Simd>(simd: S, scores: &mut [f32], max: f32) -> f32 {
    let m = simd.splat_f32s(max);
    let mut acc = fixed_sum::zeros(simd);
    // Whole chunks of 16 (every tile but a row's last partial one): exp and sum in one pass.
    let mut chunks = scores.chunks_exact_mut(fixed_sum::LANES);
    for chunk in &mut chunks {
        let (regs, _) = S::as_mut_simd_f32s(chunk);
        for (a, x) in acc.iter_mut().zip(regs) {
            *x = exp_nonpositive(simd, simd.sub_f32s(*x, m));
            *a = simd.add_f32s(*a, *x);
        }
    }
    let rest = chunks.into_remainder();
    for x in rest.iter_mut() {
        let e = exp_nonpositive(simd, simd.splat_f32s(*x - max));
        *x = simd.reduce_max_f32s(e);
    }
    fixed_sum::add_last_chunk(simd, &mut acc, rest);
    fixed_sum::tree_sum(simd, acc)
}
