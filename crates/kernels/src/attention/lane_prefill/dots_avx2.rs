//! The AVX2 integer dot products of lane prefill, for CPUs without AVX512-VNNI: both products
//! over an int8 cache on `vpmaddwd`. A tile's stored keys are widened once to pairs of i16
//! ([`widen_int8_keys`], shared by the blocks that go over the tile); each query row holds the
//! same pairs of its int8 integers, and one `vpmaddwd` multiplies 8 rows by a broadcast pair
//! (16 products, against 8 for an f32 FMA) with an exact i32 sum. `P V` the same way: a tile's
//! values as i16 pairs of two keys ([`pack_int8_value_pairs`]) times each row's integer weights
//! of the two (also the AVX-512 `vpdpwssd` kernel's operands).
//!
//! Integer sums are exact in any order, so the scores are the generic path's bits (the f32 sums
//! of the same integers are exact below 2^24: 127^2 x head_dim is for head dims up to 1040).
//! Why not `vpmaddubsw`: it takes one operand unsigned, and the stored keys' bias of 128 would
//! saturate its 16-bit sums (255 x 127 x 2 > 2^15).

#![allow(clippy::needless_range_loop)] // indexing small const-size register arrays reads clearest

use core::arch::x86_64::*;

use super::dots_avx512::{Words, operands_fit, over_column_tiles};

/// Row registers of a register tile: the block's 32 rows, 8 a register.
const ROW_REGISTERS: usize = 4;
/// Broadcast columns per register tile: 4 x 2 accumulators, the 2 broadcasts, a row register
/// and a product (4 x 3 needs 17: LLVM spilled an accumulator, slower; docs/performance.md).
const COLS: usize = 2;

/// The pair of i16 elements `(lo, hi)` as one word, `lo` in the low half.
pub(super) fn pair_word(lo: i16, hi: i16) -> u32 {
    (lo as u16 as u32) | ((hi as u16 as u32) << 16)
}

/// Stored int8 key rows (`row_words` words of four biased bytes each) as pairs of i16, the bias
/// removed: `dst[t * 2 row_words + p]` holds elements `2p` (low half) and `2p + 1` of key `t`.
///
/// Panics if `dst` is shorter than the rows' pairs.
#[target_feature(enable = "avx2")]
pub(super) fn widen_int8_keys(rows: &[u32], row_words: usize, dst: &mut [u32]) {
    let pairs = 2 * row_words;
    assert!(dst.len() >= rows.len() / row_words * pairs);
    let bias = _mm256_set1_epi16(128);
    for (row, out) in rows
        .chunks_exact(row_words)
        .zip(dst.chunks_exact_mut(pairs))
    {
        let bytes: &[u8] = bytemuck::cast_slice(row);
        let mut start = 0;
        while start + 16 <= bytes.len() {
            // SAFETY: 16 bytes from `start` are inside the row, and their 8 pairs inside `out`.
            unsafe {
                let biased = _mm_loadu_si128(bytes.as_ptr().add(start).cast());
                let values = _mm256_sub_epi16(_mm256_cvtepu8_epi16(biased), bias);
                _mm256_storeu_si256(out.as_mut_ptr().add(start / 2).cast(), values);
            }
            start += 16;
        }
        let value = |i: usize| bytes[i] as i16 - 128;
        for p in start / 2..pairs {
            out[p] = pair_word(value(2 * p), value(2 * p + 1));
        }
    }
}

/// `c[col][r] = sum_k a[k][r] . b(k, col)` as f32 for the 32 rows `r` and every `col < cols`,
/// each word a pair of i16 (`vpmaddwd`'s): the exact integer dot products (the int8 scores).
///
/// Panics if a slice is too short for `depth` and `cols`.
#[target_feature(enable = "avx2,fma")]
pub(super) fn dot_int8_pairs(a: &[u32], b: Words<'_>, c: &mut [f32], cols: usize, depth: usize) {
    if cols == 0 {
        return;
    }
    assert!(a.len() >= depth * 32 && c.len() >= cols * 32);
    if depth == 0 {
        c[..cols * 32].fill(0.0);
        return;
    }
    b.check(cols, depth);
    over_column_tiles!(cols, COLS, tile_pairs(a, b, None, c; depth));
}

/// `c[col][r] += step[r] * sum_k a[k][r] . b(k, col)` for the 32 rows `r` and every
/// `col < cols`, each word a pair of i16 (`P V` over int8 values: the `vpdpwssd` kernel's
/// result, bit for bit, on `vpmaddwd`).
///
/// Panics if a slice is too short for `depth` and `cols`.
#[target_feature(enable = "avx2,fma")]
pub(super) fn dot_int16_scaled(
    a: &[u32],
    b: Words<'_>,
    step: &[f32; 32],
    c: &mut [f32],
    cols: usize,
    depth: usize,
) {
    if operands_fit(a, b, c, cols, depth) {
        over_column_tiles!(cols, COLS, tile_pairs(a, b, Some(step), c; depth));
    }
}

/// One register tile of pair products, the sums stored as f32 (`step` None) or scaled into `c`
/// with a fused multiply-add.
///
/// # Safety
/// `a` holds `depth * 32` words, `c` `(col + NC) * 32` values, and `b`'s word
/// `(depth - 1, col + NC - 1)` is inside `b.words`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_pairs<const NC: usize>(
    a: &[u32],
    b: Words<'_>,
    step: Option<&[f32; 32]>,
    c: &mut [f32],
    col: usize,
    depth: usize,
) {
    // SAFETY: every pointer below stays inside the slices by the caller's contract.
    unsafe {
        let mut acc = [[_mm256_setzero_si256(); ROW_REGISTERS]; NC];
        let b_first = b.words.as_ptr().add(col * b.col_stride);
        for k in 0..depth {
            let mut broadcast = [_mm256_setzero_si256(); NC];
            for n in 0..NC {
                let word = *b_first.add(k * b.k_stride + n * b.col_stride);
                broadcast[n] = _mm256_set1_epi32(word as i32);
            }
            for v in 0..ROW_REGISTERS {
                let rows = _mm256_loadu_si256(a.as_ptr().add(k * 32 + v * 8).cast());
                for n in 0..NC {
                    acc[n][v] = _mm256_add_epi32(acc[n][v], _mm256_madd_epi16(rows, broadcast[n]));
                }
            }
        }
        let c_ptr = c.as_mut_ptr().add(col * 32);
        for n in 0..NC {
            for v in 0..ROW_REGISTERS {
                let (out, sum) = (c_ptr.add(n * 32 + v * 8), _mm256_cvtepi32_ps(acc[n][v]));
                let value = match step {
                    None => sum,
                    Some(step) => {
                        let step = _mm256_loadu_ps(step.as_ptr().add(v * 8));
                        _mm256_fmadd_ps(step, sum, _mm256_loadu_ps(out))
                    }
                };
                _mm256_storeu_ps(out, value);
            }
        }
    }
}

/// Stored int8 value rows (`row_words` words of four biased bytes) as i16 pairs of two keys, the
/// bias removed, in lane prefill's slot order: `dst[i * slots + j * row_words + w]` holds byte
/// `j` of word `w` of keys `2i` (low half) and `2i + 1`, `slots = 4 row_words`; an odd last key
/// is paired with a zero key.
///
/// Panics if `dst` is shorter than the rows' pairs.
#[target_feature(enable = "avx2")]
pub(super) fn pack_int8_value_pairs(rows: &[u32], row_words: usize, dst: &mut [u32]) {
    let (keys, slots) = (rows.len() / row_words, 4 * row_words);
    assert!(dst.len() >= keys.div_ceil(2) * slots);
    let value = |word: u32, byte: usize| ((word >> (8 * byte)) & 0xff) as i32 - 128;
    let pair = |even: i32, odd: i32| (even as u32 & 0xffff) | ((odd as u32) << 16);
    for (i, out) in dst
        .chunks_exact_mut(slots)
        .take(keys.div_ceil(2))
        .enumerate()
    {
        let even = &rows[2 * i * row_words..][..row_words];
        match rows.get((2 * i + 1) * row_words..(2 * i + 2) * row_words) {
            Some(odd) => {
                for (j, out) in out.chunks_exact_mut(row_words).enumerate() {
                    for ((o, &e), &d) in out.iter_mut().zip(even).zip(odd) {
                        *o = pair(value(e, j), value(d, j));
                    }
                }
            }
            None => {
                for (j, out) in out.chunks_exact_mut(row_words).enumerate() {
                    for (o, &e) in out.iter_mut().zip(even) {
                        *o = pair(value(e, j), 0);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The widened pairs are the stored bytes minus the bias, in element order, at row lengths
    /// with and without a tail shorter than 16 bytes.
    #[test]
    fn widened_keys_are_the_signed_values_in_pairs() {
        if !is_x86_feature_detected!("avx2") {
            eprintln!("skipped: no AVX2");
            return;
        }
        for row_words in [1usize, 4, 5, 17, 32] {
            let keys = 3;
            let bytes: Vec<u8> = (0..keys * row_words * 4)
                .map(|i| (i * 37 % 255 + 1) as u8)
                .collect();
            let rows: Vec<u32> = bytes
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
                .collect();
            let mut got = vec![0u32; keys * 2 * row_words];
            // SAFETY: AVX2 was detected above.
            unsafe { widen_int8_keys(&rows, row_words, &mut got) };
            let want: Vec<u32> = bytes
                .chunks_exact(2)
                .map(|p| pair_word(p[0] as i16 - 128, p[1] as i16 - 128))
                .collect();
            assert_eq!(got, want, "row_words {row_words}");
        }
    }
}
