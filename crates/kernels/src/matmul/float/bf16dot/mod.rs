//! bf16 weights (as stored, `[n, k]`) times activations rounded to bf16, with AVX512-BF16
//! `vdpbf16ps` and f32 accumulation: the matrix-vector and matrix-matrix paths for bf16
//! checkpoints.
//!
//! The activations are converted once per matmul call ([`Bf16Activations`], shared by every
//! job and every fused matrix); a job computes one column panel (weight rows). Blocking: k in
//! blocks of [`K_BLOCK`] (a 6-token tile of such a block stays in L1), token tiles outside and
//! 4-row tiles inside, so the panel's block streams from L2 once per token tile.

#[cfg(target_arch = "x86_64")]
mod microkernel_avx512;

use half::bf16;
use rayon::prelude::*;

use crate::aligned::LineVec;
#[cfg(target_arch = "x86_64")]
use crate::matmul::{WeightMatrix, columns::ColumnBlock, driver::Inputs, float::FloatWeight};

/// Tokens per microkernel tile (the activations are padded to a multiple of it).
const TILE_TOKENS: usize = 6;
/// Weight rows per microkernel tile.
const TILE_ROWS: usize = 4;
/// k values per block: 6 tokens x 2048 bf16 = 24 KiB of activations in L1.
const K_BLOCK: usize = 2048;
/// k values per `vdpbf16ps`; rows of the converted activations are padded to a multiple of it.
const STEP: usize = 32;

/// The activations `[m, k]` rounded to bf16 (to nearest even), stored as bits in
/// `[rows, kp]`: k padded with zeros to a multiple of 32, tokens with zero rows to a multiple of
/// the token tile (a single token, the mat-vec's, is not padded).
#[derive(Debug, Default)]
pub(crate) struct Bf16Activations {
    /// On a cache line (see `aligned`), as is each row (kp is a multiple of 32).
    bits: LineVec<u16>,
    m: usize,
    rows: usize,
    k: usize,
    kp: usize,
}

/// Converts `x` (`[m, k]`) into `out` (reusing its buffer). Only where the CPU has AVX512-BF16
/// (the tables that hold these kernels).
pub(crate) fn convert_activations_into(x: &[f32], m: usize, k: usize, out: &mut Bf16Activations) {
    let features = crate::dispatch::cpu_features();
    assert!(
        features.avx512_bf16 && crate::SimdLevel::Avx512.is_supported(),
        "the bf16 dot-product kernel needs AVX512-BF16"
    );
    assert_eq!(x.len(), m * k);
    let kp = k.next_multiple_of(STEP);
    // The mat-vec reads one token: no tile to pad for.
    let rows = if m == 1 {
        1
    } else {
        m.next_multiple_of(TILE_TOKENS)
    };
    out.bits.reset(rows * kp);
    (out.m, out.rows, out.k, out.kp) = (m, rows, k, kp);
    out.bits
        .par_chunks_mut(kp)
        .zip(x.par_chunks(k))
        .with_min_len(16)
        .for_each(|(dst, src)| {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: AVX512-BF16 is present (asserted above).
            unsafe {
                microkernel_avx512::convert_row(src, &mut dst[..k])
            };
            #[cfg(not(target_arch = "x86_64"))]
            for (d, s) in dst.iter_mut().zip(src) {
                *d = bf16::from_f32(*s).to_bits();
            }
        });
}

/// The mat-vec job (table entry): rows `col0 ..` of the bf16 weights dotted with the single
/// rounded token, row after row (the panel's rows are contiguous, one linear stream; see
/// `row_dot`). `EVERY_LINE`: the software prefetch asks for every line of a row, else one in 8.
///
/// # Safety
/// The CPU has AVX512-BF16.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn matvec_job<const EVERY_LINE: bool>(
    w: &WeightMatrix<'_>,
    input: &Inputs<'_>,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    let (w, k) = bf16::weights(w);
    let x = input
        .bf16
        .as_ref()
        .expect("bf16 weights get rounded activations");
    let out = out.row_mut(0);
    assert!(w.len() >= (col0 + out.len()) * k);
    assert!(x.m == 1 && x.k == k && x.bits.len() >= x.kp);
    let (wp, xp) = (w.as_ptr().cast::<u16>(), x.bits.as_ptr());
    for (r, y) in out.iter_mut().enumerate() {
        // SAFETY: AVX512-BF16 per the caller's contract; row col0 + r holds k values inside w;
        // x holds kp = k rounded up to 32 values, zero past k.
        *y = unsafe { microkernel_avx512::row_dot::<EVERY_LINE>(wp.add((col0 + r) * k), k, xp) };
    }
}

/// The mat-mat job (table entry).
///
/// # Safety
/// The CPU has AVX512-BF16.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn matmat_job(
    w: &WeightMatrix<'_>,
    input: &Inputs<'_>,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    let (w, k) = bf16::weights(w);
    let x = input
        .bf16
        .as_ref()
        .expect("bf16 weights get rounded activations");
    assert_eq!(out.rows(), x.m);
    let (cols, ld) = (out.cols(), out.ld());
    // SAFETY: AVX512-BF16 per the caller's contract; the block is valid for y[i * ld + j],
    // i < m, j < cols, and this job's alone.
    unsafe { matmat_cols(w, k, x, col0, cols, out.as_mut_ptr(), ld) }
}

/// Columns `col0 .. col0 + cols` of `y = x w^T`, written through `y` (column `col0` of token 0)
/// with row stride `ld`.
///
/// # Safety
/// The CPU has AVX512-BF16. `y` must be valid for writes of `y[i * ld + j]`, `i < x.m`,
/// `j < cols`, and no other thread may access those elements.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn matmat_cols(
    w: &[bf16],
    k: usize,
    x: &Bf16Activations,
    col0: usize,
    cols: usize,
    y: *mut f32,
    ld: usize,
) {
    assert!(cols > 0 && w.len() >= (col0 + cols) * k);
    assert!(x.k == k && x.rows.is_multiple_of(TILE_TOKENS) && x.bits.len() == x.rows * x.kp);
    let wp = w.as_ptr().cast::<u16>();
    let xp = x.bits.as_ptr();
    for kb in (0..k).step_by(K_BLOCK) {
        let kc = K_BLOCK.min(k - kb);
        for tok0 in (0..x.m).step_by(TILE_TOKENS) {
            let live = TILE_TOKENS.min(x.m - tok0);
            for r0 in (0..cols).step_by(TILE_ROWS) {
                let live_rows = TILE_ROWS.min(cols - r0);
                // Rows past the panel's end repeat its last row; their results are dropped.
                let rows: [*const u16; TILE_ROWS] = core::array::from_fn(|r| {
                    let row = col0 + r0 + r.min(live_rows - 1);
                    // SAFETY: row < col0 + cols, and w holds (col0 + cols) * k values.
                    unsafe { wp.add(row * k + kb) }
                });
                let mut out = [[0.0f32; TILE_ROWS]; TILE_TOKENS];
                // SAFETY: AVX512-BF16 per the caller's contract; each row has kc values left
                // from kb; the tile's tokens are < x.rows and kb + kc rounded up to 32 <= kp.
                unsafe {
                    microkernel_avx512::tile::<TILE_TOKENS>(
                        rows,
                        kc,
                        xp.add(tok0 * x.kp + kb),
                        x.kp,
                        &mut out,
                    )
                };
                for (t, out_t) in out.iter().take(live).enumerate() {
                    for (r, v) in out_t.iter().take(live_rows).enumerate() {
                        // SAFETY: token tok0 + t < m and column r0 + r < cols: the caller's
                        // contract.
                        unsafe {
                            let p = y.add((tok0 + t) * ld + r0 + r);
                            *p = if kb == 0 { *v } else { *p + *v };
                        }
                    }
                }
            }
        }
    }
}
