//! Quantization of weights (at load) and of activations (per call) to int8 blocks of 64.
//!
//! Both are symmetric with scale = amax / 127 per block and round-to-nearest-even, so
//! `|x - q * scale| <= scale / 2` for every value: the error bound the proptests check.

use rayon::prelude::*;

use super::layout::{self, BLOCK, ROWS, TILE_BYTES};
use crate::aligned::LineVec;
use crate::dispatch::KernelTable;

/// Quantizes one token `x` into `qs` (blocks of 64), `scales` and `fix` (one per block), the
/// kernel table's "activation quantize" entry (the same code compiled per ISA).
///
/// # Safety
/// The CPU has the instructions the kernel was compiled for.
pub(crate) type QuantizeRowFn =
    unsafe fn(x: &[f32], qs: &mut [i8], scales: &mut [f32], fix: &mut [i32]);

/// `1.5 * 2^23`: adding it to a float of magnitude below 2^22 rounds the sum to an integer
/// (to nearest, ties to even) held in the low mantissa bits.
const MAGIC: f32 = 12_582_912.0;

/// `round_ties_even(v)` as an i32, for |v| < 2^22, with a float add and an integer subtract:
/// unlike `v.round_ties_even() as i32` (a saturating conversion) it vectorizes at every level.
#[inline(always)]
fn round_to_i32(v: f32) -> i32 {
    (v + MAGIC).to_bits() as i32 - MAGIC.to_bits() as i32
}

/// Quantizes one block (up to 64 values) into `q`; returns the scale. Non-finite input gives
/// a non-finite scale, which poisons only the outputs that use this block.
#[inline(always)]
fn quantize_block(values: &[f32], q: &mut [i8; BLOCK]) -> f32 {
    // Full blocks (all but a ragged last one) take a fixed-size path the compiler vectorizes.
    if let Ok(full) = <&[f32; BLOCK]>::try_from(values) {
        return quantize_full_block(full, q);
    }
    let mut padded = [0.0f32; BLOCK];
    padded[..values.len()].copy_from_slice(values);
    quantize_full_block(&padded, q)
}

#[inline(always)]
fn quantize_full_block(values: &[f32; BLOCK], q: &mut [i8; BLOCK]) -> f32 {
    let mut amax = [0.0f32; 16];
    for chunk in values.chunks_exact(16) {
        for (a, v) in amax.iter_mut().zip(chunk) {
            *a = a.max(v.abs());
        }
    }
    let amax = amax.iter().fold(0.0f32, |a, v| a.max(*v));
    if amax == 0.0 {
        *q = [0; BLOCK];
        return 0.0;
    }
    let inv = 127.0 / amax;
    for (out, v) in q.iter_mut().zip(values) {
        *out = round_to_i32(v * inv).clamp(-127, 127) as i8;
    }
    amax / 127.0
}

/// Quantizes all `n` rows (each read by `read_row` into a k-sized buffer) into the packed
/// layout; parallel over groups of 16 rows.
pub(crate) fn quantize_weight_rows(
    n: usize,
    k: usize,
    read_row: impl Fn(usize, &mut [f32]) + Sync,
) -> (Vec<u8>, Vec<f32>) {
    let nb = layout::blocks(k);
    let mut packed = vec![128u8; layout::packed_len(n, k)];
    let mut scales = vec![0.0f32; layout::scales_len(n, k)];
    packed
        .par_chunks_mut(nb * TILE_BYTES)
        .zip(scales.par_chunks_mut(nb * ROWS))
        .enumerate()
        .for_each(|(g, (packed, scales))| {
            let mut row_values = vec![0.0f32; k];
            let mut q = [0i8; BLOCK];
            for r in 0..ROWS {
                let row = g * ROWS + r;
                if row >= n {
                    break;
                }
                read_row(row, &mut row_values);
                for b in 0..nb {
                    let values = &row_values[b * BLOCK..((b + 1) * BLOCK).min(k)];
                    scales[b * ROWS + r] = quantize_block(values, &mut q);
                    for (c, &v) in q.iter().enumerate() {
                        // Offset within the group: same formula as layout::packed_index.
                        let (t, j) = (c / 4, c % 4);
                        packed[(b * BLOCK / 4 + t) * ROWS * 4 + r * 4 + j] = (v as i16 + 128) as u8;
                    }
                }
            }
        });
    (packed, scales)
}

/// Activations `[m, k]` quantized to int8 blocks of 64 for the int8 kernels.
///
/// Rows are padded to a multiple of the microkernel height with zero tokens, and each row to
/// `blocks * BLOCK` values with zeros, so kernels never branch on tails.
#[derive(Debug, Clone, Default)]
pub struct Q8Activations {
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) rows: usize,
    pub(crate) nb: usize,
    /// `[rows][nb * 64]`
    pub(crate) qs: Vec<i8>,
    /// `[rows][nb]`
    pub(crate) scales: Vec<f32>,
    /// `[rows][nb]`: `-128 * sum(q)` of the block, which cancels the weights' +128 offset in VNNI.
    pub(crate) offset_fix: Vec<i32>,
    /// The same `qs` in the AMX kernel's tile order (token block by token block,
    /// `[block][token tile][16][64]`; see `amx::int8::order_tiles`), where that kernel runs
    /// (empty otherwise): each tile it loads is then 1 KiB in one piece.
    pub(crate) tile_order: LineVec<i8>,
    /// `scales` in the same order (`[block][token tile][16]`): a tile's 16 scales in one line.
    pub(crate) scales_tile_order: Vec<f32>,
}

impl Q8Activations {
    /// Tokens (rows of x) quantized.
    pub fn m(&self) -> usize {
        self.m
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// The quantized value and scale of x(row, col): `x ≈ q * scale`.
    pub fn get(&self, row: usize, col: usize) -> (i8, f32) {
        (
            self.qs[row * self.nb * BLOCK + col],
            self.scales[row * self.nb + col / BLOCK],
        )
    }

    pub(crate) fn row(&self, row: usize) -> ActRow<'_> {
        let kp = self.nb * BLOCK;
        ActRow {
            qs: &self.qs[row * kp..(row + 1) * kp],
            scales: &self.scales[row * self.nb..(row + 1) * self.nb],
            offset_fix: &self.offset_fix[row * self.nb..(row + 1) * self.nb],
        }
    }
}

/// One quantized token.
#[derive(Clone, Copy)]
pub(crate) struct ActRow<'a> {
    pub qs: &'a [i8],
    pub scales: &'a [f32],
    pub offset_fix: &'a [i32],
}

/// Quantizes x `[m, k]` (row-major) to int8 blocks of 64; rows are padded to a multiple of 16.
/// Panics if `x.len() != m * k` (the entry points check shapes first).
pub fn quantize_activations(x: &[f32], m: usize, k: usize) -> Q8Activations {
    let mut out = Q8Activations::default();
    quantize_activations_into(KernelTable::current(), x, m, k, 1, &mut out);
    out
}

/// As [`quantize_activations`], reusing `out`'s buffers, padding rows to a multiple of `pad_rows`,
/// with `table`'s kernel (the code is the same; wider vectors where the table's level allows).
pub(crate) fn quantize_activations_into(
    table: &KernelTable,
    x: &[f32],
    m: usize,
    k: usize,
    pad_rows: usize,
    out: &mut Q8Activations,
) {
    assert_eq!(x.len(), m * k, "x must be [m, k]");
    let nb = layout::blocks(k);
    let rows = m.div_ceil(pad_rows.max(1)) * pad_rows.max(1);
    out.m = m;
    out.k = k;
    out.rows = rows;
    out.nb = nb;
    out.qs.clear();
    out.qs.resize(rows * nb * BLOCK, 0);
    out.scales.clear();
    out.scales.resize(rows * nb, 0.0);
    out.offset_fix.clear();
    out.offset_fix.resize(rows * nb, 0);
    let kp = nb * BLOCK;
    type RowJob<'b> = (usize, ((&'b mut [i8], &'b mut [f32]), &'b mut [i32]));
    let work = |(row, ((qs, scales), fix)): RowJob<'_>| {
        table.quantize_row(&x[row * k..(row + 1) * k], qs, scales, fix);
    };
    let iter = out.qs[..m * kp]
        .par_chunks_mut(kp)
        .zip(out.scales[..m * nb].par_chunks_mut(nb))
        .zip(out.offset_fix[..m * nb].par_chunks_mut(nb))
        .enumerate();
    if m * k >= 1 << 16 {
        iter.for_each(work);
    } else {
        iter.with_min_len(usize::MAX).for_each(work);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn quantize_row_avx512(x: &[f32], qs: &mut [i8], scales: &mut [f32], fix: &mut [i32]) {
    quantize_row_generic(x, qs, scales, fix)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) fn quantize_row_avx2(x: &[f32], qs: &mut [i8], scales: &mut [f32], fix: &mut [i32]) {
    quantize_row_generic(x, qs, scales, fix)
}

#[inline(always)]
pub(crate) fn quantize_row_generic(x: &[f32], qs: &mut [i8], scales: &mut [f32], fix: &mut [i32]) {
    let mut q = [0i8; BLOCK];
    for (b, values) in x.chunks(BLOCK).enumerate() {
        scales[b] = quantize_block(values, &mut q);
        qs[b * BLOCK..(b + 1) * BLOCK].copy_from_slice(&q);
        fix[b] = -128 * q.iter().map(|&v| v as i32).sum::<i32>();
    }
}
