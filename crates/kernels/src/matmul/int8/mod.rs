//! int8 weights x int8 activations (like llama.cpp's Q8_0 x Q8_0), f32 results.
//!
//! `layout` fixes the interleaved weight format, `quantize` makes it (and the activation
//! blocks), `matrix` owns it, the microkernels compute on it, and this file blocks the work.

pub mod layout;
pub mod matrix;
pub mod quantize;
mod scalar;

#[cfg(target_arch = "x86_64")]
mod microkernel_avx2;
#[cfg(target_arch = "x86_64")]
mod microkernel_avx2_tile;
#[cfg(target_arch = "x86_64")]
mod microkernel_avx512;
#[cfg(target_arch = "aarch64")]
mod microkernel_neon;

use super::WeightMatrix;
use super::columns::ColumnBlock;
use super::driver::Inputs;
use layout::ROWS;
use matrix::Q8Matrix;
use quantize::{ActRow, Q8Activations};

/// Tokens per AVX-512 microkernel tile (activations are padded to a multiple of it).
pub(crate) const TILE_TOKENS: usize = 6;
/// Row groups per AVX-512 microkernel tile (2 x 16 = 32 output rows).
#[cfg(target_arch = "x86_64")]
const TILE_GROUPS: usize = 2;

/// Tokens per AVX2 microkernel tile (of one row group): `2 * 4` i32 sums, 2 prepared weight
/// vectors and 4 broadcast activations fit the 16 ymm registers. 3, 5 and 6 tokens, and 2 or
/// 3 tokens by 2 row groups, measured slower on a Zen 3 (docs/performance.md).
#[cfg(target_arch = "x86_64")]
const AVX2_TILE_TOKENS: usize = 4;

/// The row-group kernel of one ISA: the 16 outputs of one row group for one token.
pub(crate) trait GroupDot {
    /// # Safety
    /// The CPU has the ISA.
    unsafe fn group_dot(packed: &[u8], scales: &[f32], x: ActRow<'_>) -> [f32; ROWS];
}

pub(crate) struct DotScalar;
#[cfg(target_arch = "x86_64")]
pub(crate) struct DotAvx2;
#[cfg(target_arch = "x86_64")]
pub(crate) struct DotVnni;
#[cfg(target_arch = "aarch64")]
pub(crate) struct DotNeon;

impl GroupDot for DotScalar {
    #[inline]
    unsafe fn group_dot(packed: &[u8], scales: &[f32], x: ActRow<'_>) -> [f32; ROWS] {
        scalar::group_dot(packed, scales, x)
    }
}

#[cfg(target_arch = "x86_64")]
impl GroupDot for DotAvx2 {
    #[inline]
    unsafe fn group_dot(packed: &[u8], scales: &[f32], x: ActRow<'_>) -> [f32; ROWS] {
        // SAFETY: the caller's contract (AVX2 and FMA present).
        unsafe { microkernel_avx2::group_dot(packed, scales, x) }
    }
}

#[cfg(target_arch = "x86_64")]
impl GroupDot for DotVnni {
    #[inline]
    unsafe fn group_dot(packed: &[u8], scales: &[f32], x: ActRow<'_>) -> [f32; ROWS] {
        // SAFETY: the caller's contract (AVX-512 and VNNI present).
        unsafe { microkernel_avx512::group_dot(packed, scales, x) }
    }
}

#[cfg(target_arch = "aarch64")]
impl GroupDot for DotNeon {
    #[inline]
    unsafe fn group_dot(packed: &[u8], scales: &[f32], x: ActRow<'_>) -> [f32; ROWS] {
        // SAFETY: the caller's contract (NEON present).
        unsafe { microkernel_neon::group_dot(packed, scales, x) }
    }
}

/// The int8 weights of a job.
pub(crate) fn weights<'w>(w: &WeightMatrix<'w>) -> &'w Q8Matrix<'w> {
    let WeightMatrix::Int8(q) = *w else {
        panic!("the table gave an int8 kernel other weights");
    };
    q
}

/// The int8 weights and quantized activations of a job.
pub(crate) fn operands<'w, 'i>(
    w: &WeightMatrix<'w>,
    input: &'i Inputs<'_>,
) -> (&'w Q8Matrix<'w>, &'i Q8Activations) {
    let x = input
        .q8
        .as_ref()
        .expect("int8 weights get quantized activations");
    (weights(w), x)
}

/// Stores a row group's 16 values for `token` into the block (its columns `first ..`, fewer at
/// the block's end).
#[inline(always)]
fn store(out: &mut ColumnBlock<'_>, token: usize, first: usize, values: &[f32; ROWS]) {
    let row = &mut out.row_mut(token)[first..];
    let live = row.len().min(ROWS);
    row[..live].copy_from_slice(&values[..live]);
}

/// The mat-vec job (table entry): rows `col0 ..` (`col0` a multiple of 16) for token 0.
///
/// # Safety
/// The CPU has `D`'s ISA.
pub(crate) unsafe fn matvec_job<D: GroupDot>(
    w: &WeightMatrix<'_>,
    input: &Inputs<'_>,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    let (w, x) = operands(w, input);
    debug_assert_eq!(col0 % ROWS, 0);
    let x = x.row(0);
    for (i, chunk) in out.row_mut(0).chunks_mut(ROWS).enumerate() {
        let (packed, scales) = w.group(col0 / ROWS + i);
        // SAFETY: the caller's contract.
        let y = unsafe { D::group_dot(packed, scales, x) };
        chunk.copy_from_slice(&y[..chunk.len()]);
    }
}

/// The mat-mat job as row group after row group for each token (table entry where no tile
/// kernel exists).
///
/// # Safety
/// The CPU has `D`'s ISA.
pub(crate) unsafe fn matmat_groups_job<D: GroupDot>(
    w: &WeightMatrix<'_>,
    input: &Inputs<'_>,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    let (w, x) = operands(w, input);
    debug_assert_eq!(col0 % ROWS, 0);
    let (g0, g1) = (col0 / ROWS, (col0 + out.cols()).div_ceil(ROWS));
    for token in 0..x.m {
        let row = x.row(token);
        for g in g0..g1 {
            let (packed, scales) = w.group(g);
            // SAFETY: the caller's contract.
            let values = unsafe { D::group_dot(packed, scales, row) };
            store(out, token, g * ROWS - col0, &values);
        }
    }
}

/// The mat-mat job on AVX512-VNNI tiles of 6 tokens by 2 row groups (table entry).
///
/// # Safety
/// The CPU has AVX-512 and VNNI; the activations are padded to [`TILE_TOKENS`].
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn matmat_vnni_job(
    w: &WeightMatrix<'_>,
    input: &Inputs<'_>,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    let (w, x) = operands(w, input);
    debug_assert_eq!(col0 % ROWS, 0);
    assert!(
        x.rows.is_multiple_of(TILE_TOKENS),
        "activations padded for the VNNI tile"
    );
    let (g0, g1) = (col0 / ROWS, (col0 + out.cols()).div_ceil(ROWS));
    for tok0 in (0..x.m).step_by(TILE_TOKENS) {
        let live = TILE_TOKENS.min(x.m - tok0);
        let mut g = g0;
        while g < g1 {
            let first = g * ROWS - col0;
            // SAFETY: VNNI is present (the caller's contract).
            unsafe {
                if g + TILE_GROUPS <= g1 {
                    vnni_tile::<TILE_GROUPS, { TILE_GROUPS * ROWS }>(
                        w, x, g, tok0, live, first, out,
                    );
                    g += TILE_GROUPS;
                } else {
                    vnni_tile::<1, ROWS>(w, x, g, tok0, live, first, out);
                    g += 1;
                }
            }
        }
    }
}

/// Tokens `tok0 ..` (`live` of them) against row groups `g .. g + G` (`W = 16 G` columns, the
/// first at column `first` of the block) on one VNNI tile.
///
/// # Safety
/// The CPU has AVX-512 and VNNI; the activations are padded to [`TILE_TOKENS`].
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)] // the operands, then the tile's place
#[inline(always)]
unsafe fn vnni_tile<const G: usize, const W: usize>(
    w: &Q8Matrix<'_>,
    x: &Q8Activations,
    g: usize,
    tok0: usize,
    live: usize,
    first: usize,
    out: &mut ColumnBlock<'_>,
) {
    const { assert!(W == G * ROWS) };
    let groups = core::array::from_fn(|i| w.group(g + i));
    write_tile::<TILE_TOKENS, W>(out, tok0, live, first, |dst, ld| {
        // SAFETY: VNNI is present (the caller's contract); `write_tile` gives a destination for
        // the whole tile.
        unsafe {
            microkernel_avx512::tile::<TILE_TOKENS, G>(
                groups,
                &x.qs,
                &x.scales,
                &x.offset_fix,
                x.nb,
                tok0,
                dst,
                ld,
            )
        }
    });
}

/// Runs a microkernel tile of `MR` tokens by `W` columns, its first value at token `tok0`,
/// column `first` of the block: `kernel(dst, ld)` writes row `i` of the tile at `dst + i * ld`.
/// Where the whole tile is inside the block (`live == MR` tokens and `W` columns), that is the
/// output itself; else a buffer, whose live part is copied out.
#[inline(always)]
fn write_tile<const MR: usize, const W: usize>(
    out: &mut ColumnBlock<'_>,
    tok0: usize,
    live: usize,
    first: usize,
    kernel: impl FnOnce(*mut f32, usize),
) {
    if live == MR && first + W <= out.cols() {
        assert!(tok0 + MR <= out.rows());
        let ld = out.ld();
        // SAFETY: rows `tok0 ..` and columns `first ..` of the tile are inside the block
        // (checked above), which is this job's alone (`ColumnBlock::as_mut_ptr`).
        kernel(unsafe { out.as_mut_ptr().add(tok0 * ld + first) }, ld);
    } else {
        let mut buffer = [[0.0f32; W]; MR];
        kernel(buffer.as_mut_ptr().cast(), W);
        let cols = W.min(out.cols() - first);
        for (i, values) in buffer.iter().take(live).enumerate() {
            out.row_mut(tok0 + i)[first..first + cols].copy_from_slice(&values[..cols]);
        }
    }
}

/// The mat-mat job on AVX2 tiles of [`AVX2_TILE_TOKENS`] tokens by one row group (table
/// entry): token tile after token tile, each against every row group of the job (the job's
/// weights stay in L2 across token tiles). The last token tile runs a narrower kernel, so the
/// activations need no padding.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn matmat_avx2_job(
    w: &WeightMatrix<'_>,
    input: &Inputs<'_>,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    const {
        assert!(
            AVX2_TILE_TOKENS == 4,
            "one tail kernel below per narrower width"
        )
    };
    let (w, x) = operands(w, input);
    debug_assert_eq!(col0 % ROWS, 0);
    let mut tok0 = 0;
    while tok0 < x.m {
        let live = AVX2_TILE_TOKENS.min(x.m - tok0);
        // SAFETY: AVX2 and FMA are present (the caller's contract).
        unsafe {
            match live {
                1 => avx2_token_tile::<1>(w, x, tok0, col0, out),
                2 => avx2_token_tile::<2>(w, x, tok0, col0, out),
                3 => avx2_token_tile::<3>(w, x, tok0, col0, out),
                _ => avx2_token_tile::<AVX2_TILE_TOKENS>(w, x, tok0, col0, out),
            }
        }
        tok0 += live;
    }
}

/// Tokens `tok0 .. tok0 + MR` against every row group of the job's columns (`col0 ..`).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn avx2_token_tile<const MR: usize>(
    w: &Q8Matrix<'_>,
    x: &Q8Activations,
    tok0: usize,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    for g in col0 / ROWS..(col0 + out.cols()).div_ceil(ROWS) {
        let (packed, scales) = w.group(g);
        write_tile::<MR, ROWS>(out, tok0, MR, g * ROWS - col0, |dst, ld| {
            // SAFETY: the caller's contract (AVX2 and FMA); `write_tile` gives a destination
            // for the whole tile.
            unsafe {
                microkernel_avx2_tile::tile::<MR>(
                    packed, scales, &x.qs, &x.scales, x.nb, tok0, dst, ld,
                )
            }
        });
    }
}
