//! The AVX-512 dot-product kernels of lane prefill, for the CPUs that have them: `vdpbf16ps` for
//! a bf16 cache (both products), `vpdpbusd` for int8 keys (the scores) and `vpdpwssd` for int8
//! values (`P V`, on i16 pairs of two keys' values and of their integer weights). They run on
//! register tiles like [`super::product`]'s (two registers of 16 query rows by [`COLS`]
//! broadcast columns) and broadcast the cache's words as stored (a bf16 word is a pair, an int8
//! word four bytes) or the value pairs.
//!
//! Each gives the generic path's bits. `vdpbf16ps` adds a pair's odd product, then its even one,
//! each rounded to nearest (a product of two bf16 is exact in f32): the paired
//! [`super::product::Order`]s with fused multiply-adds. Integer dot products are exact either
//! way. By the instruction's definition `vdpbf16ps` also reads bf16 denormals as zero (the
//! generic path flushes them before it multiplies) and flushes a partial sum below 2^-126 to
//! zero, which the generic path does not: only such a sum can differ, in bits far below 1e-38.

#![allow(clippy::needless_range_loop)] // indexing small const-size register arrays reads clearest

use core::arch::x86_64::*;

use crate::word_dots::vpdpwssd;

/// Broadcast columns per register tile: 2 x 8 accumulators, the 2 row operands and the 8
/// broadcasts fit the 32 registers; 8 divides the tile's 64 keys and the slots of the usual head
/// dims.
const COLS: usize = 8;

/// The broadcast operand: word `(k, col)` at `words[k * k_stride + col * col_stride]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Words<'a> {
    pub words: &'a [u32],
    pub k_stride: usize,
    pub col_stride: usize,
}

impl Words<'_> {
    pub(super) fn check(&self, cols: usize, depth: usize) {
        assert!((depth - 1) * self.k_stride + (cols - 1) * self.col_stride < self.words.len());
    }
}

/// The bounds of a kernel's operands: `a` holds `depth` rows of 32 words, `c` `cols` columns of
/// 32 values, `b` words `(depth - 1, cols - 1)`. False where there is nothing to do.
///
/// Panics if a slice is too short.
pub(super) fn operands_fit(a: &[u32], b: Words<'_>, c: &[f32], cols: usize, depth: usize) -> bool {
    if cols == 0 || depth == 0 {
        return false;
    }
    assert!(a.len() >= depth * 32 && c.len() >= cols * 32);
    b.check(cols, depth);
    true
}

/// The inner loop of a register tile (inside a tile function, whose const `NC` it reads): for
/// each `k < $depth`, the two registers of rows of `a` and each column's broadcast word
/// `b(k, $col + n)`, `$acc[n][half] = $step` with `$x` the accumulator, `$rows` the row register
/// and `$word` the broadcast (`__m512i` each).
macro_rules! over_depth {
    (
        $acc:ident, $a:expr, $b:expr, $col:expr, $depth:expr,
        |$x:ident, $rows:ident, $word:ident| $step:expr
    ) => {{
        let b_first = $b.words.as_ptr().add($col * $b.col_stride);
        for k in 0..$depth {
            let rows = [
                _mm512_loadu_si512($a.as_ptr().add(k * 32).cast()),
                _mm512_loadu_si512($a.as_ptr().add(k * 32 + 16).cast()),
            ];
            for n in 0..NC {
                let $word =
                    _mm512_set1_epi32(*b_first.add(k * $b.k_stride + n * $b.col_stride) as i32);
                for half in 0..2 {
                    let ($x, $rows) = ($acc[n][half], rows[half]);
                    $acc[n][half] = $step;
                }
            }
        }
    }};
}

/// `$tile::<$wide>(args.., col, depth)` on each whole register tile of `$wide` columns below
/// `$cols`, then `$tile::<1>` on each column left; the caller has checked the slices' bounds
/// for every column below `$cols` (the tiles' safety contract).
macro_rules! over_column_tiles {
    ($cols:expr, $wide:expr, $tile:ident($($arg:expr),* ; $depth:expr)) => {{
        let mut col = 0;
        while col + $wide <= $cols {
            // SAFETY: the bounds were checked for every column below `$cols`.
            unsafe { $tile::<$wide>($($arg,)* col, $depth) };
            col += $wide;
        }
        while col < $cols {
            // SAFETY: as above.
            unsafe { $tile::<1>($($arg,)* col, $depth) };
            col += 1;
        }
    }};
}
pub(super) use over_column_tiles;

/// `c[col][r] += sum_k a[k][r] . b(k, col)` for the 32 rows `r` and every `col < cols`, each
/// word a pair of bf16 (low half the even element).
///
/// Panics if a slice is too short for `depth` and `cols`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(super) fn dot_bf16(a: &[u32], b: Words<'_>, c: &mut [f32], cols: usize, depth: usize) {
    if operands_fit(a, b, c, cols, depth) {
        over_column_tiles!(cols, COLS, tile_bf16(a, b, c; depth));
    }
}

/// # Safety
/// `a` holds `depth * 32` words, `c` `(col + NC) * 32` values, and `b`'s word
/// `(depth - 1, col + NC - 1)` is inside `b.words`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn tile_bf16<const NC: usize>(
    a: &[u32],
    b: Words<'_>,
    c: &mut [f32],
    col: usize,
    depth: usize,
) {
    // SAFETY: every pointer below stays inside the slices by the caller's contract.
    unsafe {
        let c_ptr = c.as_mut_ptr().add(col * 32);
        let mut acc = [[_mm512_setzero_ps(); 2]; NC];
        for n in 0..NC {
            acc[n][0] = _mm512_loadu_ps(c_ptr.add(n * 32));
            acc[n][1] = _mm512_loadu_ps(c_ptr.add(n * 32 + 16));
        }
        over_depth!(acc, a, b, col, depth, |x, rows, word| {
            _mm512_dpbf16_ps(x, as_bh(rows), as_bh(word))
        });
        for n in 0..NC {
            _mm512_storeu_ps(c_ptr.add(n * 32), acc[n][0]);
            _mm512_storeu_ps(c_ptr.add(n * 32 + 16), acc[n][1]);
        }
    }
}

/// `c[col][r] = (sum_k a[k][r] . b(k, col) - 128 a_sums[r]) * (a_scales[r] * b_scales[col])`
/// as f32 for the 32 rows `r` and every `col < cols`: `a`'s words hold four signed bytes, `b`'s
/// four unsigned ones with the int8 cache's bias of 128, so the sum is the exact dot product of
/// the signed values (exact in f32 below 2^24, which 127^2 x head_dim is for head dims up to
/// 1040), then scaled as the generic path scales it.
///
/// Panics if a slice is too short for `depth` and `cols`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn dot_int8(
    a: &[u32],
    a_sums: &[i32; 32],
    scales: (&[f32; 32], &[f32]),
    b: Words<'_>,
    c: &mut [f32],
    cols: usize,
    depth: usize,
) {
    if operands_fit(a, b, c, cols, depth) {
        assert!(scales.1.len() >= cols);
        over_column_tiles!(cols, COLS, tile_int8(a, a_sums, scales, b, c; depth));
    }
}

/// # Safety
/// As [`tile_bf16`]'s, and `scales.1` holds `col + NC` values.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile_int8<const NC: usize>(
    a: &[u32],
    a_sums: &[i32; 32],
    (a_scales, b_scales): (&[f32; 32], &[f32]),
    b: Words<'_>,
    c: &mut [f32],
    col: usize,
    depth: usize,
) {
    // SAFETY: every pointer below stays inside the slices by the caller's contract.
    unsafe {
        // The sums start at minus the bias (128 times each row's sum), not subtracted at the end.
        let minus_bias = |half: usize| {
            let sums = _mm512_loadu_si512(a_sums.as_ptr().add(16 * half).cast());
            _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32::<7>(sums))
        };
        let mut acc = [[minus_bias(0), minus_bias(1)]; NC];
        // The cache's biased bytes are the unsigned operand.
        over_depth!(acc, a, b, col, depth, |x, rows, word| {
            _mm512_dpbusd_epi32(x, word, rows)
        });
        let a_scales = [
            _mm512_loadu_ps(a_scales.as_ptr()),
            _mm512_loadu_ps(a_scales.as_ptr().add(16)),
        ];
        let c_ptr = c.as_mut_ptr().add(col * 32);
        for n in 0..NC {
            let b_scale = _mm512_set1_ps(*b_scales.get_unchecked(col + n));
            for half in 0..2 {
                let exact = _mm512_cvtepi32_ps(acc[n][half]);
                let scale = _mm512_mul_ps(a_scales[half], b_scale);
                _mm512_storeu_ps(c_ptr.add(n * 32 + half * 16), _mm512_mul_ps(exact, scale));
            }
        }
    }
}

/// `c[col][r] += step[r] * sum_k a[k][r] . b(k, col)` for the 32 rows `r` and every
/// `col < cols`, each word a pair of i16 (`vpdpwssd`'s): the integer dot product is exact (below
/// 2^31: 32767 x 128 x 2 a pair, 2^14 pairs), then converted and added with one fused
/// multiply-add, as the generic path does.
///
/// Panics if a slice is too short for `depth` and `cols`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn dot_int16_scaled(
    a: &[u32],
    b: Words<'_>,
    step: &[f32; 32],
    c: &mut [f32],
    cols: usize,
    depth: usize,
) {
    if operands_fit(a, b, c, cols, depth) {
        over_column_tiles!(cols, COLS, tile_int16_scaled(a, b, step, c; depth));
    }
}

/// # Safety
/// As [`tile_bf16`]'s.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile_int16_scaled<const NC: usize>(
    a: &[u32],
    b: Words<'_>,
    step: &[f32; 32],
    c: &mut [f32],
    col: usize,
    depth: usize,
) {
    // SAFETY: every pointer below stays inside the slices by the caller's contract.
    unsafe {
        let mut acc = [[_mm512_setzero_si512(); 2]; NC];
        over_depth!(acc, a, b, col, depth, |x, rows, word| {
            vpdpwssd(x, rows, word)
        });
        let step = [
            _mm512_loadu_ps(step.as_ptr()),
            _mm512_loadu_ps(step.as_ptr().add(16)),
        ];
        let c_ptr = c.as_mut_ptr().add(col * 32);
        for n in 0..NC {
            for half in 0..2 {
                let out = c_ptr.add(n * 32 + half * 16);
                let sum = _mm512_cvtepi32_ps(acc[n][half]);
                _mm512_storeu_ps(out, _mm512_fmadd_ps(step[half], sum, _mm512_loadu_ps(out)));
            }
        }
    }
}

/// Two rows of bf16 values (in f32) as one row of pairs, `even` in the low halves. (Here, not in
/// the block, for the AVX-512 code generation: inlined into the block it came out slower.)
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) fn pack_value_pairs(even: &[f32], odd: &[f32], pairs: &mut [u32]) {
    for ((&a, &b), pair) in even.iter().zip(odd).zip(pairs) {
        *pair = (a.to_bits() >> 16) | (b.to_bits() & 0xffff_0000);
    }
}

/// Two keys' stored bf16 rows as pairs: `low[w]` holds element `2w` of both, `high[w]` element
/// `2w + 1`, the even key in the low half.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) fn pack_word_pairs(even: &[u32], odd: &[u32], low: &mut [u32], high: &mut [u32]) {
    for (((&a, &b), low), high) in even.iter().zip(odd).zip(low).zip(high) {
        *low = (a & 0xffff) | (b << 16);
        *high = (a >> 16) | (b & 0xffff_0000);
    }
}

#[inline(always)]
fn as_bh(v: __m512i) -> __m512bh {
    // SAFETY: 32 bf16 in a 64-byte value, reinterpreted as its bits.
    unsafe { core::mem::transmute(v) }
}
