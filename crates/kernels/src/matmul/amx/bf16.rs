//! bf16 weights times activations rounded to bf16 on AMX tiles (`tdpbf16ps`, f32 sums): the
//! matrix-matrix path of bf16 checkpoints where AMX is present.
//!
//! The weights are used as stored: 16 weight rows by 32 k values is a tile loaded straight from
//! the checkpoint (row stride `2k` bytes), so nothing is packed per call. The activations are
//! packed once per matmul ([`AmxBf16Activations`]) into the pair-interleaved layout the second
//! operand needs, so a result tile is 16 weight rows by 16 tokens; it is transposed on its way
//! to the output rows. The microkernel holds 2 x 2 result tiles (32 rows by 32 tokens) over the
//! whole of k; blocking keeps a block of tokens in L2 while every 32-row strip of the job's
//! columns passes over it.

use core::arch::x86_64::*;

use half::bf16;

use super::tiles::Tiles;
use super::transpose::transpose16;
use crate::aligned::{Aligned, LineVec};
use crate::matmul::float::{FloatWeight, bf16dot};
use crate::matmul::{WeightMatrix, columns::ColumnBlock, driver::Inputs};

/// Tokens per tile, weight rows per tile, and k values per tile step.
const TOKENS: usize = super::TILE_TOKENS;
const ROWS: usize = 16;
const STEP: usize = 32;
/// Bytes of packed activations a token block may take (it stays in L2 beside a weight strip).
const TOKEN_BLOCK_BYTES: usize = 768 << 10;

/// Can the AMX bf16 kernel take a `[n, k]` weight matrix? Its tiles read k in steps of 32.
pub(crate) fn fits(k: usize) -> bool {
    k.is_multiple_of(STEP)
}

/// Activations `[m, k]` rounded to bf16 (to nearest even) and packed for the tile's second
/// operand: `[token tile][k step][pair p][token t]`, one u32 holding the bf16 pair
/// `x[16 * tile + t][32 * step + 2p .. + 2]`. Token tiles are padded with zero tokens to an even
/// count (the microkernel takes two).
#[derive(Debug, Default)]
pub(crate) struct AmxBf16Activations {
    /// On a cache line (see `aligned`), so each 64-byte tile row is one line.
    packed: LineVec<u32>,
    m: usize,
    k: usize,
    tiles: usize,
}

impl AmxBf16Activations {
    fn steps(&self) -> usize {
        self.k / STEP
    }

    /// The packed block of token tile `tile`, all steps (`steps * 1 KiB`).
    fn tile_ptr(&self, tile: usize) -> *const u8 {
        self.packed[tile * self.steps() * ROWS * TOKENS..]
            .as_ptr()
            .cast()
    }
}

/// Packs `x` (`[m, k]`, `fits(k)`) into `out`, reusing its buffer.
pub(crate) fn pack_activations_into(x: &[f32], m: usize, k: usize, out: &mut AmxBf16Activations) {
    assert!(fits(k) && x.len() == m * k);
    let tiles = m.div_ceil(TOKENS).next_multiple_of(2);
    let steps = k / STEP;
    out.packed.reset(tiles * steps * ROWS * TOKENS);
    (out.m, out.k, out.tiles) = (m, k, tiles);
    super::pack_token_tiles(
        x,
        m,
        k,
        &mut out.packed,
        steps * ROWS * TOKENS,
        |x, live, dst| {
            // SAFETY: AVX512-BF16 comes with AMX-BF16 (the caller's dispatch); rows past `live`
            // (padding) are zero.
            unsafe { pack_tile(x, live, k, dst) }
        },
    );
}

/// One token tile: for each step, 16 token rows of 32 values converted to 16 pairs each, then
/// transposed so that pair p of all 16 tokens is one 64-byte row.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn pack_tile(x: &[f32], live: usize, k: usize, dst: &mut [u32]) {
    for s in 0..k / STEP {
        let mut rows = [_mm512_setzero_ps(); TOKENS];
        for (t, row) in rows.iter_mut().enumerate().take(live) {
            // SAFETY: token t < live has k values in x, and 32 * s + 32 <= k.
            unsafe {
                let p = x.as_ptr().add(t * k + s * STEP);
                let pairs = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(p.add(16)), _mm512_loadu_ps(p));
                *row = core::mem::transmute::<__m512bh, __m512>(pairs);
            }
        }
        transpose16(&mut rows);
        for (p, row) in rows.iter().enumerate() {
            // SAFETY: dst holds steps * 256 u32; this is row p of step s.
            unsafe { _mm512_storeu_ps(dst.as_mut_ptr().add((s * ROWS + p) * TOKENS).cast(), *row) };
        }
    }
}

/// The bf16 mat-mat job on AMX tiles (table entry), or with the AVX512-BF16 dot product where
/// k is not a multiple of 32 (the driver then rounded the activations instead of packing them).
///
/// # Safety
/// AMX is usable (the CPU has it, the OS granted the tile state) and so is AVX512-BF16.
pub(crate) unsafe fn matmat_job(
    w: &WeightMatrix<'_>,
    input: &Inputs<'_>,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    let Some(x) = input.amx_bf16.as_ref() else {
        // SAFETY: AVX512-BF16 per the caller's contract.
        return unsafe { bf16dot::matmat_job(w, input, col0, out) };
    };
    let (w, k) = bf16::weights(w);
    assert_eq!(out.rows(), x.m);
    let (cols, ld) = (out.cols(), out.ld());
    // SAFETY: AMX per the caller's contract; the block is valid for y[i * ld + j], i < m,
    // j < cols, and this job's alone.
    unsafe { matmat_cols(w, k, x, col0, cols, out.as_mut_ptr(), ld) }
}

/// Columns `col0 .. col0 + cols` of `y = x w^T`, written through `y` (column `col0` of token 0)
/// with row stride `ld`.
///
/// # Safety
/// AMX must be usable (see [`matmat_job`]). `y` must be valid for writes of
/// `y[i * ld + j]`, `i < x.m`, `j < cols`, and no other thread may access those elements.
pub(crate) unsafe fn matmat_cols(
    w: &[bf16],
    k: usize,
    x: &AmxBf16Activations,
    col0: usize,
    cols: usize,
    y: *mut f32,
    ld: usize,
) {
    assert!(fits(k) && x.k == k && cols > 0 && w.len() >= (col0 + cols) * k);
    let block_tiles = (TOKEN_BLOCK_BYTES / (TOKENS * k * 2)).max(2) / 2 * 2;
    let strip_rows = 2 * ROWS;
    let mut strip_copy = Vec::new();
    // SAFETY: the caller's contract on AMX.
    let tiles = unsafe { Tiles::configure() };
    for tile0 in (0..x.tiles).step_by(block_tiles) {
        for r0 in (0..cols).step_by(strip_rows) {
            let live_rows = strip_rows.min(cols - r0);
            let strip = &w[(col0 + r0) * k..(col0 + r0 + live_rows) * k];
            // A strip shorter than 32 rows (the panel's end) is copied into 32 zero-padded
            // rows, so the tile loads never read past the matrix.
            let strip_ptr: *const u8 = if live_rows == strip_rows {
                strip.as_ptr().cast()
            } else {
                strip_copy.clear();
                strip_copy.extend_from_slice(strip);
                strip_copy.resize(strip_rows * k, bf16::ZERO);
                strip_copy.as_ptr().cast()
            };
            for tile in (tile0..(tile0 + block_tiles).min(x.tiles)).step_by(2) {
                let mut out = Aligned([[[0.0f32; TOKENS]; ROWS]; 4]);
                // SAFETY: the strip holds 32 rows of k values at stride 2k bytes; the
                // activations hold tiles `tile`, `tile + 1` (their count is even).
                unsafe {
                    microkernel(
                        &tiles,
                        strip_ptr,
                        2 * k,
                        x.tile_ptr(tile),
                        x.tile_ptr(tile + 1),
                        x.steps(),
                        &mut out.0,
                    )
                };
                // SAFETY: the caller's contract on y; only live tokens and rows are written.
                unsafe { write_out(&out.0, tile * TOKENS, x.m, r0, live_rows, y, ld) };
            }
        }
    }
}

/// 32 weight rows (two tiles of 16 at `w` and `w + 16 * w_stride`) by 32 tokens (token tiles
/// `x0`, `x1`), over `steps` steps of 32 k values. `out[2a + b][r][t]`: row `16a + r`, token
/// `16b + t`.
///
/// # Safety
/// The rows and packed tiles must be readable over all steps.
#[inline]
unsafe fn microkernel(
    tiles: &Tiles,
    w: *const u8,
    w_stride: usize,
    x0: *const u8,
    x1: *const u8,
    steps: usize,
    out: &mut [[[f32; TOKENS]; ROWS]; 4],
) {
    const STEP_BYTES: usize = STEP * 2;
    const X_TILE_BYTES: usize = ROWS * TOKENS * 4;
    tiles.zero::<0>();
    tiles.zero::<1>();
    tiles.zero::<2>();
    tiles.zero::<3>();
    let w1 = w.wrapping_add(ROWS * w_stride);
    for s in 0..steps {
        // SAFETY: the caller's contract.
        unsafe {
            tiles.load::<4>(w.add(s * STEP_BYTES), w_stride);
            tiles.load::<5>(w1.add(s * STEP_BYTES), w_stride);
            tiles.load::<6>(x0.add(s * X_TILE_BYTES), TOKENS * 4);
            tiles.load::<7>(x1.add(s * X_TILE_BYTES), TOKENS * 4);
        }
        tiles.dot_bf16::<0, 4, 6>();
        tiles.dot_bf16::<1, 4, 7>();
        tiles.dot_bf16::<2, 5, 6>();
        tiles.dot_bf16::<3, 5, 7>();
    }
    // SAFETY: each out[i] is 16 rows of 64 bytes.
    unsafe {
        tiles.store::<0>(out[0].as_mut_ptr().cast(), TOKENS * 4);
        tiles.store::<1>(out[1].as_mut_ptr().cast(), TOKENS * 4);
        tiles.store::<2>(out[2].as_mut_ptr().cast(), TOKENS * 4);
        tiles.store::<3>(out[3].as_mut_ptr().cast(), TOKENS * 4);
    }
}

/// Writes the four result tiles (rows by tokens) transposed into y (tokens by columns):
/// token `tok0 + 16b + t` (if `< m`), column `r0 + 16a + r` (if `r < live_rows - 16a`).
///
/// # Safety
/// As for `matmat_cols`' y.
#[target_feature(enable = "avx512f")]
unsafe fn write_out(
    out: &[[[f32; TOKENS]; ROWS]; 4],
    tok0: usize,
    m: usize,
    r0: usize,
    live_rows: usize,
    y: *mut f32,
    ld: usize,
) {
    for (i, tile) in out.iter().enumerate() {
        let (a, b) = (i / 2, i % 2);
        let rows = live_rows.saturating_sub(a * ROWS).min(ROWS);
        let first_token = tok0 + b * TOKENS;
        let tokens = m.saturating_sub(first_token).min(TOKENS);
        if rows == 0 || tokens == 0 {
            continue;
        }
        let mut v: [__m512; 16] = core::array::from_fn(|r| {
            // SAFETY: tile[r] holds 16 f32.
            unsafe { _mm512_loadu_ps(tile[r].as_ptr()) }
        });
        transpose16(&mut v);
        let mask: __mmask16 = ((1u32 << rows) - 1) as u16;
        for (t, row) in v.iter().enumerate().take(tokens) {
            // SAFETY: token first_token + t < m and columns r0 + 16a + (0..rows) < cols.
            unsafe {
                _mm512_mask_storeu_ps(y.add((first_token + t) * ld + r0 + a * ROWS), mask, *row)
            };
        }
    }
}
