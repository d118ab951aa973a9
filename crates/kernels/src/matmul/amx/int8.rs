//! int8 weights (the interleaved layout of `int8::layout`) times int8 activations on AMX tiles
//! (`tdpbssd`, i32 sums): the matrix-matrix path of int8 checkpoints where AMX is present.
//!
//! The weight layout was made for this: a (row group, block) tile of 16 rows by 64 k values is
//! 1 KiB in exactly the layout of the tile instruction's second operand (4 bytes of one row per
//! 32-bit lane). A job first copies its column panel with the +128 offset removed (u8 to i8, a
//! flip of the top bit), so the tiles multiply signed by signed and no offset correction is left
//! for the epilogue; the copy is also the L2-resident panel that every token block reuses. The
//! first operand is 16 tokens by 64 quantized activations, copied once per call into tile order
//! (`order_tiles`). A result tile is 16 tokens by 16 weight rows: one vector per token, as the
//! output wants it.
//!
//! Each block of 64 has its own scales, so the i32 sums leave the tiles after every block and
//! are scaled into f32 sums with AVX-512 (the epilogue: 3 vector operations per 16 results,
//! against one tile product per 256). A tile product's result is only readable after the
//! product and a tile store have finished, so the microkernel keeps a pair of weight tiles (one
//! block of two row groups) in place while it runs through a block of token tiles, alternating
//! two sets of activation and result tiles, and scales each token tile's results two token
//! tiles later, while other products run.
//!
//! The tile stores and the epilogue, not the tile products, bound this kernel.

use core::arch::x86_64::*;
use std::cell::RefCell;

use rayon::prelude::*;

use super::tiles::Tiles;
use crate::aligned::{Aligned, LineVec};
use crate::matmul::int8::layout::{BLOCK, ROWS, TILE_BYTES};
use crate::matmul::int8::matrix::Q8Matrix;
use crate::matmul::int8::quantize::Q8Activations;
use crate::matmul::{WeightMatrix, columns::ColumnBlock, driver::Inputs};

/// Tokens per tile; the microkernel takes two tiles, so activations are padded to 32 tokens.
const TOKENS: usize = 16;
pub(crate) const TOKEN_PADDING: usize = 2 * TOKENS;
/// Bytes of quantized activations a token block may take (it stays in L2 beside the panel).
const TOKEN_BLOCK_BYTES: usize = 512 << 10;
/// At most this many tokens a block (their f32 sums, 128 bytes a token, stay in L1).
const MAX_BLOCK_TOKENS: usize = 256;
/// Staging slots for results between their tile store and their epilogue (see `microkernel`).
const STAGING_SLOTS: usize = 4;

/// Tokens per block for activations of `kp` bytes a token (a multiple of the padding).
fn block_tokens(kp: usize) -> usize {
    (TOKEN_BLOCK_BYTES / kp).clamp(TOKEN_PADDING, MAX_BLOCK_TOKENS) / TOKEN_PADDING * TOKEN_PADDING
}

/// Fills `x.tile_order` and `x.scales_tile_order` from `x.qs` and `x.scales`: token block by
/// token block (of [`block_tokens`]), `[block b][token tile][16 tokens][64 values]` (and
/// `[b][tile][16]` scales), so that the tiles the microkernel loads one after another, every
/// token tile of one block, are consecutive KiBs. (With the tiles of a token tile together
/// instead, they would be `nb` KiB apart, all in the same L1 sets.)
pub(crate) fn order_tiles(x: &mut Q8Activations) {
    assert!(x.rows.is_multiple_of(TOKEN_PADDING));
    let nb = x.nb;
    let kp = nb * BLOCK;
    let block = block_tokens(kp);
    x.tile_order.reset(x.rows * kp);
    x.scales_tile_order.clear();
    x.scales_tile_order.resize(x.rows * nb, 0.0);
    let (qs, scales) = (&x.qs, &x.scales);
    x.tile_order
        .par_chunks_mut(block * kp)
        .zip(x.scales_tile_order.par_chunks_mut(block * nb))
        .enumerate()
        .for_each(|(i, (dst, dst_scales))| {
            let tok0 = i * block;
            let tiles = dst.len() / (TOKENS * kp);
            for b in 0..nb {
                for tile in 0..tiles {
                    let at = b * tiles + tile;
                    for t in 0..TOKENS {
                        let token = tok0 + tile * TOKENS + t;
                        dst[(at * TOKENS + t) * BLOCK..][..BLOCK]
                            .copy_from_slice(&qs[token * kp + b * BLOCK..][..BLOCK]);
                        dst_scales[at * TOKENS + t] = scales[token * nb + b];
                    }
                }
            }
        });
}

thread_local! {
    /// The job's column panel as signed bytes (see the module comment), padded to an even
    /// number of row groups with zero weights.
    static SIGNED_PANEL: RefCell<LineVec<i8>> = RefCell::new(LineVec::default());
    /// The f32 sums of a token block: `[token][group of the pair]`, 16 rows each.
    static SUMS: RefCell<LineVec<f32>> = RefCell::new(LineVec::default());
}

/// The int8 mat-mat job on AMX tiles (table entry).
///
/// # Safety
/// AMX is usable (the CPU has it, the OS granted the tile state) and so is AVX-512.
pub(crate) unsafe fn matmat_job(
    w: &WeightMatrix<'_>,
    input: &Inputs<'_>,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    let (w, x) = crate::matmul::int8::operands(w, input);
    assert_eq!(out.rows(), x.m);
    let (cols, ld) = (out.cols(), out.ld());
    // SAFETY: AMX per the caller's contract; the table's input forms padded the activations to
    // TOKEN_PADDING and put them in tile order (checked by `matmat_cols`); the block is valid
    // for y[i * ld + j], i < m, j < cols, and this job's alone.
    unsafe { matmat_cols(w, x, col0, cols, out.as_mut_ptr(), ld) }
}

/// Columns `col0 .. col0 + cols` (`col0` a multiple of 16) of `y = x w^T` for all tokens,
/// through `y` (column `col0` of token 0) with row stride `ld`.
///
/// # Safety
/// AMX must be usable (see [`matmat_job`]) and `x` padded to
/// [`TOKEN_PADDING`] tokens, in tile order ([`order_tiles`]). `y` must be valid for writes of
/// `y[i * ld + j]`, `i < x.m`, `j < cols`, and no other thread may access those elements.
pub(crate) unsafe fn matmat_cols(
    w: &Q8Matrix<'_>,
    x: &Q8Activations,
    col0: usize,
    cols: usize,
    y: *mut f32,
    ld: usize,
) {
    assert!(col0.is_multiple_of(ROWS) && x.rows.is_multiple_of(TOKEN_PADDING));
    assert_eq!(
        x.tile_order.len(),
        x.qs.len(),
        "activations in tile order (order_tiles)"
    );
    let (g0, g1) = (col0 / ROWS, (col0 + cols).div_ceil(ROWS));
    let nb = x.nb;
    let group_bytes = nb * TILE_BYTES;
    let kp = nb * BLOCK;
    let block_tokens = block_tokens(kp);
    // An odd number of row groups pairs its last group with zero weights and these scales.
    let zero_scales = if (g1 - g0).is_multiple_of(2) {
        Vec::new()
    } else {
        vec![0.0f32; nb * ROWS]
    };
    SIGNED_PANEL.with_borrow_mut(|panel| {
        SUMS.with_borrow_mut(|sums| {
            panel.reset((g1 - g0).next_multiple_of(2) * group_bytes);
            let panel = &mut panel[..];
            for (g, dst) in (g0..g1).zip(panel.chunks_exact_mut(group_bytes)) {
                let (packed, _) = w.group(g);
                for (d, u) in dst.iter_mut().zip(packed) {
                    *d = (u ^ 0x80) as i8;
                }
            }
            sums.reset(block_tokens * 2 * ROWS);
            let sums: &mut [[[f32; ROWS]; 2]] = bytemuck::cast_slice_mut(&mut sums[..]);
            let panel = &*panel;
            let group = |g: usize| -> (&[i8], &[f32]) {
                let scales = if g < g1 { w.group(g).1 } else { &zero_scales };
                (&panel[(g - g0) * group_bytes..][..group_bytes], scales)
            };
            // SAFETY: the caller's contract on AMX.
            let tiles = unsafe { Tiles::configure() };
            for tok0 in (0..x.m).step_by(block_tokens) {
                let tokens = block_tokens.min(x.m - tok0);
                let token_tiles = tokens.div_ceil(TOKENS);
                for g in (g0..g1).step_by(2) {
                    let sums = &mut sums[..token_tiles * TOKENS];
                    sums.fill([[0.0; ROWS]; 2]);
                    // SAFETY: both groups span nb blocks; the token tiles are within the
                    // padded activations.
                    unsafe {
                        microkernel(
                            &tiles,
                            [group(g), group(g + 1)],
                            x,
                            tok0,
                            block_tokens,
                            sums,
                        )
                    };
                    for (i, pair) in sums.iter().take(tokens).enumerate() {
                        for (gi, values) in pair.iter().enumerate() {
                            if g + gi >= g1 {
                                break;
                            }
                            let first = (g + gi) * ROWS - col0;
                            let live = (cols - first).min(ROWS);
                            // SAFETY: the caller's contract on y: token < m, columns < cols;
                            // AVX-512 comes with AMX.
                            unsafe { store_row(values, live, y.add((tok0 + i) * ld + first)) };
                        }
                    }
                }
            }
        })
    });
}

/// The first `live` of 16 values to `dst`, one masked vector store (not a `memcpy` call).
///
/// # Safety
/// `dst` valid for `live` writes.
#[target_feature(enable = "avx512f")]
unsafe fn store_row(values: &[f32; ROWS], live: usize, dst: *mut f32) {
    let mask = ((1u32 << live) - 1) as __mmask16;
    // SAFETY: the mask covers only the `live` elements the caller vouches for.
    unsafe { _mm512_mask_storeu_ps(dst, mask, _mm512_loadu_ps(values.as_ptr())) };
}

/// Two row groups by `sums.len() / 16` token tiles from `tok0`, over all blocks, added into
/// `sums[token - tok0][group]`.
///
/// Tiles: weights 6, 7 (the two groups, one block at a time); for even token tiles activations
/// 4 and sums 0, 1 (one per group), for odd ones 5 and 2, 3.
///
/// # Safety
/// Both groups' `weights` (signed) and `scales` span all `x.nb` blocks; the token tiles exist
/// in `x` (padded).
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn microkernel(
    tiles: &Tiles,
    groups: [(&[i8], &[f32]); 2],
    x: &Q8Activations,
    tok0: usize,
    block_tokens: usize,
    sums: &mut [[[f32; ROWS]; 2]],
) {
    let nb = x.nb;
    let token_tiles = sums.len() / TOKENS;
    // Token tiles in this block's part of the tile order (the last block's may hold padding).
    let layout_tiles = block_tokens.min(x.rows - tok0) / TOKENS;
    for (weights, scales) in &groups {
        assert!(weights.len() >= nb * TILE_BYTES && scales.len() >= nb * ROWS);
    }
    let tokens_end = tok0 + sums.len();
    assert!(
        token_tiles <= layout_tiles
            && tok0.is_multiple_of(TOKENS)
            && x.tile_order.len() >= tokens_end * nb * BLOCK
            && x.scales_tile_order.len() >= tokens_end * nb
    );
    // Every pointer is taken here, once: the tile stores are opaque to the compiler, so any
    // value it kept in memory (a field behind `x`, say) is loaded again after each of them,
    // and a load after a tile store waits until the store is done, stalling the next tile's
    // products behind it.
    let weights = [groups[0].0.as_ptr(), groups[1].0.as_ptr()];
    let weight_scales = [groups[0].1.as_ptr(), groups[1].1.as_ptr()];
    // This token block's first tile, and the scales in the same order.
    let first_tile = x.tile_order[tok0 * nb * BLOCK..].as_ptr();
    let first_scales = x.scales_tile_order[tok0 * nb..].as_ptr();
    // Where token tile tt's results leave the tiles, slot tt % 4: [slot][group][token][row].
    let mut staged = Aligned([[[[0i32; ROWS]; TOKENS]; 2]; STAGING_SLOTS]);
    let staged_ptr = staged.0.as_mut_ptr();
    let sums_ptr = sums.as_mut_ptr();
    for b in 0..nb {
        // SAFETY: (all) offsets within the caller's contract; each staging set is read only
        // after the tile stores of its token tile.
        unsafe {
            tiles.load::<6>(weights[0].add(b * TILE_BYTES).cast(), 64);
            tiles.load::<7>(weights[1].add(b * TILE_BYTES).cast(), 64);
            let ws = [
                _mm512_loadu_ps(weight_scales[0].add(b * ROWS)),
                _mm512_loadu_ps(weight_scales[1].add(b * ROWS)),
            ];
            // Token tile tt of block b: activations at (b * layout_tiles + tt) KiB, scales
            // likewise (`order_tiles`).
            let epilogue = |tt: usize| {
                let set = staged_ptr.add(tt % STAGING_SLOTS);
                let tile_scales = first_scales.add((b * layout_tiles + tt) * TOKENS);
                for t in 0..TOKENS {
                    let xs = _mm512_set1_ps(*tile_scales.add(t));
                    let sum = sums_ptr.add(tt * TOKENS + t).cast::<f32>();
                    for (g, ws_g) in ws.iter().enumerate() {
                        let ints = _mm512_loadu_si512((*set)[g][t].as_ptr().cast());
                        let acc = _mm512_loadu_ps(sum.add(g * ROWS));
                        let scale = _mm512_mul_ps(*ws_g, xs);
                        let acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ints), scale, acc);
                        _mm512_storeu_ps(sum.add(g * ROWS), acc);
                    }
                }
            };
            for tt in 0..token_tiles {
                let a = first_tile
                    .add((b * layout_tiles + tt) * TOKENS * BLOCK)
                    .cast::<u8>();
                let out = staged_ptr
                    .add(tt % STAGING_SLOTS)
                    .cast::<[[i32; ROWS]; TOKENS]>();
                if tt.is_multiple_of(2) {
                    tiles.load::<4>(a, BLOCK);
                    tiles.zero::<0>();
                    tiles.zero::<1>();
                    tiles.dot_i8::<0, 4, 6>();
                    tiles.dot_i8::<1, 4, 7>();
                } else {
                    tiles.load::<5>(a, BLOCK);
                    tiles.zero::<2>();
                    tiles.zero::<3>();
                    tiles.dot_i8::<2, 5, 6>();
                    tiles.dot_i8::<3, 5, 7>();
                }
                // While these products run, the results of token tile tt - 2 are scaled: stored
                // an iteration ago, after products that ran during the last epilogue, so their
                // loads wait for nothing. (With tt - 1, each epilogue waited for the previous
                // tile's products and store to finish.) Then these results leave their tiles.
                if tt >= 2 {
                    epilogue(tt - 2);
                }
                if tt.is_multiple_of(2) {
                    tiles.store::<0>(out.cast(), 64);
                    tiles.store::<1>(out.add(1).cast(), 64);
                } else {
                    tiles.store::<2>(out.cast(), 64);
                    tiles.store::<3>(out.add(1).cast(), 64);
                }
            }
            if token_tiles >= 2 {
                epilogue(token_tiles - 2);
            }
            epilogue(token_tiles - 1);
        }
    }
}
