//! int8 weights on AMX bf16 tiles: the other AMX path for the int8 layout, chosen with
//! `GATTN_AMX_INT8=bf16` (see `dispatch`). Each job first widens its column panel to bf16
//! (`q * scale`, rounded to nearest even), and the tiles then multiply that panel by the
//! activations rounded to bf16 over the whole of k (`tdpbf16ps`, f32 sums).
//!
//! Why: `int8` (`tdpbssd`) must take its i32 sums out of the tiles after every block of 64 to
//! scale them (both operands have a scale per block), and that epilogue and its tile stores,
//! not the products, bound it. Here the scales are inside the bf16 weights, so the results leave
//! the tiles once, at the end of k, straight into the output; the price is half the tile rate
//! of `tdpbssd` and one widening pass over the job's weights (about 20 vector operations per 64
//! weights, against `2 * tokens` FLOP per weight on the tiles). Which path is faster is measured
//! on the AMX host (`docs/performance.md`). Activations in bf16 also err less than int8 blocks;
//! the widened weights add at most 2^-8 of each weight (bf16 keeps 8 bits) to the format's own
//! rounding.
//!
//! Layouts, all in 1 KiB tiles: activations `[token tile][k step][16 tokens][32 bf16]` (the
//! first operand: one token per tile row), the panel `[row group][k step][pair p][16 rows]` of
//! bf16 pairs (the second operand: `k = 32 step + 2p, + 1` of each row in one 32-bit lane). A
//! result tile is 16 tokens by 16 weight rows, as the output wants it.

use core::arch::x86_64::*;
use std::cell::RefCell;

use super::tiles::Tiles;
use crate::aligned::{Aligned, LineVec};
use crate::matmul::int8::layout::{BLOCK, ROWS, TILE_BYTES};
use crate::matmul::int8::matrix::Q8Matrix;
use crate::matmul::{WeightMatrix, columns::ColumnBlock, driver::Inputs};

/// Tokens per tile, and k values per tile step (32 bf16 are one 64-byte tile row).
const TOKENS: usize = super::TILE_TOKENS;
const STEP: usize = 32;
/// bf16 values (u16) in one 1 KiB tile.
const TILE_VALUES: usize = 512;
/// Bytes of packed activations a token block may take (it stays in L2 beside the job's panel).
const TOKEN_BLOCK_BYTES: usize = 768 << 10;

/// Activations `[m, k]` rounded to bf16 (to nearest even) in token tiles, zero past m and k; the
/// tile count is even (the microkernel takes two).
#[derive(Debug, Default)]
pub(crate) struct AmxBf16Rows {
    /// On a cache line, so each 64-byte tile row is one line.
    packed: LineVec<u16>,
    m: usize,
    steps: usize,
    tiles: usize,
}

impl AmxBf16Rows {
    /// Token tile `tile`, all steps (`steps` KiB).
    fn tile_ptr(&self, tile: usize) -> *const u8 {
        self.packed[tile * self.steps * TILE_VALUES..]
            .as_ptr()
            .cast()
    }
}

/// Packs `x` (`[m, k]`) into `out`, reusing its buffer.
pub(crate) fn pack_rows_into(x: &[f32], m: usize, k: usize, out: &mut AmxBf16Rows) {
    assert_eq!(x.len(), m * k);
    let steps = k.div_ceil(STEP);
    let tiles = m.div_ceil(TOKENS).next_multiple_of(2);
    // Every value is written below (padding tokens as zeros): no zeroing pass first.
    out.packed.reuse(tiles * steps * TILE_VALUES);
    (out.m, out.steps, out.tiles) = (m, steps, tiles);
    super::pack_token_tiles(
        x,
        m,
        k,
        &mut out.packed,
        steps * TILE_VALUES,
        |x, live, dst| {
            // SAFETY: AVX512-BF16 comes with AMX-BF16 (the table's check); dst holds the tile.
            unsafe { pack_token_tile(x, live, k, dst) }
        },
    );
}

/// One token tile: row t of step s is token t's values `32 s .. 32 s + 32` in bf16 (zero past
/// k; rows past `live` zero).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn pack_token_tile(x: &[f32], live: usize, k: usize, dst: &mut [u16]) {
    for s in 0..k.div_ceil(STEP) {
        dst[(s * TOKENS + live) * STEP..(s + 1) * TOKENS * STEP].fill(0);
    }
    for t in 0..live {
        let row = &x[t * k..(t + 1) * k];
        for s in 0..k.div_ceil(STEP) {
            let first = s * STEP;
            let lo = (k - first).min(16);
            let hi = (k - first).saturating_sub(16).min(16);
            // SAFETY: the masks cover values first .. first + lo (+ 16 .. + hi) of the row.
            unsafe {
                let p = row.as_ptr().add(first);
                let lo = _mm512_maskz_loadu_ps(((1u32 << lo) - 1) as __mmask16, p);
                let hi = _mm512_maskz_loadu_ps(((1u32 << hi) - 1) as __mmask16, p.add(16));
                let pairs = bf16_bits(_mm512_cvtne2ps_pbh(hi, lo));
                let at = (s * TOKENS + t) * STEP;
                _mm512_storeu_si512(dst[at..at + STEP].as_mut_ptr().cast(), pairs);
            }
        }
    }
}

thread_local! {
    /// The job's panel of bf16 weight pairs (see the module comment), an even number of groups.
    static PANEL: RefCell<LineVec<u32>> = RefCell::new(LineVec::default());
}

/// The mat-mat job (table entry of the `GATTN_AMX_INT8=bf16` table).
///
/// # Safety
/// AMX is usable (the CPU has it, the OS granted the tile state) and so is AVX512-BF16.
pub(crate) unsafe fn matmat_job(
    w: &WeightMatrix<'_>,
    input: &Inputs<'_>,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    let w = crate::matmul::int8::weights(w);
    let x = input
        .amx_bf16_rows
        .as_ref()
        .expect("this table packs an int8 mat-mat's activations as bf16 rows");
    assert_eq!(out.rows(), x.m);
    let (cols, ld) = (out.cols(), out.ld());
    // SAFETY: AMX and AVX512-BF16 per the caller's contract; the block is valid for
    // y[i * ld + j], i < m, j < cols, and this job's alone.
    unsafe { matmat_cols(w, x, col0, cols, out.as_mut_ptr(), ld) }
}

/// Columns `col0 .. col0 + cols` (`col0` a multiple of 16) of `y = x w^T` for all tokens,
/// through `y` (column `col0` of token 0) with row stride `ld`.
///
/// # Safety
/// As for [`matmat_job`]; `y` must be valid for writes of `y[i * ld + j]`, `i < x.m`,
/// `j < cols`, and no other thread may access those elements.
unsafe fn matmat_cols(
    w: &Q8Matrix<'_>,
    x: &AmxBf16Rows,
    col0: usize,
    cols: usize,
    y: *mut f32,
    ld: usize,
) {
    assert!(col0.is_multiple_of(ROWS) && cols > 0 && col0 + cols <= w.n());
    assert_eq!(
        x.steps,
        w.k().div_ceil(STEP),
        "activations packed for this k"
    );
    let (g0, g1) = (col0 / ROWS, (col0 + cols).div_ceil(ROWS));
    let groups = (g1 - g0).next_multiple_of(2);
    // A group's steps in the panel: every step of its blocks (the activations' steps are the
    // first `x.steps` of them).
    let group_steps = 2 * w.blocks();
    let group_values = group_steps * TILE_VALUES / 2;
    PANEL.with_borrow_mut(|panel| {
        // Every group is written below (an odd count's padding group as zeros): no zeroing pass.
        panel.reuse(groups * group_values);
        for (g, dst) in (g0..g1).zip(panel.chunks_exact_mut(group_values)) {
            // SAFETY: AVX512-BF16 per the caller's contract.
            unsafe { widen_group(w, g, dst) };
        }
        panel[(g1 - g0) * group_values..].fill(0);
        let panel = &panel[..];
        let block_tiles = (TOKEN_BLOCK_BYTES / (x.steps * TILE_BYTES)).max(2) / 2 * 2;
        // SAFETY: the caller's contract on AMX.
        let tiles = unsafe { Tiles::configure() };
        for tile0 in (0..x.tiles).step_by(block_tiles) {
            for pair in (0..groups).step_by(2) {
                let weights = [
                    panel[pair * group_values..].as_ptr().cast::<u8>(),
                    panel[(pair + 1) * group_values..].as_ptr().cast::<u8>(),
                ];
                for tile in (tile0..(tile0 + block_tiles).min(x.tiles)).step_by(2) {
                    let tokens = [x.tile_ptr(tile), x.tile_ptr(tile + 1)];
                    // SAFETY: both groups hold x.steps (<= group_steps) tiles, both token
                    // tiles exist (their count is even).
                    unsafe { microkernel(&tiles, tokens, weights, x.steps) };
                    let first_row = (g0 + pair) * ROWS - col0;
                    // SAFETY: the caller's contract on y; `store_results` writes only live
                    // tokens (< m) and columns (< cols).
                    unsafe { store_results(&tiles, tile * TOKENS, x.m, first_row, cols, y, ld) };
                }
            }
        }
    });
}

/// Group `g`'s weights widened to bf16 pairs into `dst` (`2 * blocks` KiB). Block b's 16
/// 4-byte steps `t` (each: 4 k values of all 16 rows, `int8::layout`) become pair rows
/// `2 (t % 8)` and `2 (t % 8) + 1` of k step `2 b + t / 8`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn widen_group(w: &Q8Matrix<'_>, g: usize, dst: &mut [u32]) {
    let (packed, scales) = w.group(g);
    // Lane r of the bf16 pair vector: element 2r from the first source, 2r + 1 from the second
    // (`_mm512_cvtne2ps_pbh` puts the first 16 elements in the low half).
    let interleave = _mm512_set_epi16(
        31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4,
        19, 3, 18, 2, 17, 1, 16, 0,
    );
    let flip = _mm512_set1_epi8(i8::MIN);
    for b in 0..w.blocks() {
        // SAFETY: a group holds `blocks` tiles and 16 scales a block.
        let scale = unsafe { _mm512_loadu_ps(scales[b * ROWS..].as_ptr()) };
        for t in 0..BLOCK / 4 {
            // SAFETY: step t of block b is 64 bytes inside the group's tile.
            let stored =
                unsafe { _mm512_loadu_si512(packed[b * TILE_BYTES + t * 64..].as_ptr().cast()) };
            // Offset-binary bytes to signed: q = u - 128 is the top bit flipped.
            let q = _mm512_xor_si512(stored, flip);
            // Byte j of each 32-bit lane (k = 4t + j of row r), sign-extended, times the
            // row's scale.
            let (v0, v1, v2, v3) = (
                scaled(_mm512_srai_epi32::<24>(_mm512_slli_epi32::<24>(q)), scale),
                scaled(_mm512_srai_epi32::<24>(_mm512_slli_epi32::<16>(q)), scale),
                scaled(_mm512_srai_epi32::<24>(_mm512_slli_epi32::<8>(q)), scale),
                scaled(_mm512_srai_epi32::<24>(q), scale),
            );
            let row = (2 * b + t / 8) * ROWS * ROWS + 2 * (t % 8) * ROWS;
            for (i, (even, odd)) in [(v0, v1), (v2, v3)].into_iter().enumerate() {
                let pairs = bf16_bits(_mm512_cvtne2ps_pbh(odd, even));
                let pairs = _mm512_permutexvar_epi16(interleave, pairs);
                // SAFETY: pair row 2 (t % 8) + i of step 2b + t/8: 16 lanes inside dst.
                unsafe {
                    _mm512_storeu_si512(dst[row + i * ROWS..][..ROWS].as_mut_ptr().cast(), pairs)
                };
            }
        }
    }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn scaled(ints: __m512i, scale: __m512) -> __m512 {
    _mm512_mul_ps(_mm512_cvtepi32_ps(ints), scale)
}

/// The 32 bf16 of a vector as integer lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512bf16")]
fn bf16_bits(v: __m512bh) -> __m512i {
    // SAFETY: both are 64 bytes of plain bits.
    unsafe { core::mem::transmute::<__m512bh, __m512i>(v) }
}

/// Tiles 0..4 = two token tiles (4, 5) by two weight groups (6, 7), over `steps` k steps:
/// result tile `2a + b` is token tile a by group b.
///
/// # Safety
/// Both token tiles and both groups hold `steps` consecutive 1 KiB tiles.
#[inline]
unsafe fn microkernel(
    tiles: &Tiles,
    tokens: [*const u8; 2],
    weights: [*const u8; 2],
    steps: usize,
) {
    tiles.zero::<0>();
    tiles.zero::<1>();
    tiles.zero::<2>();
    tiles.zero::<3>();
    for s in 0..steps {
        // SAFETY: the caller's contract.
        unsafe {
            tiles.load::<4>(tokens[0].add(s * TILE_BYTES), 64);
            tiles.load::<5>(tokens[1].add(s * TILE_BYTES), 64);
            tiles.load::<6>(weights[0].add(s * TILE_BYTES), 64);
            tiles.load::<7>(weights[1].add(s * TILE_BYTES), 64);
        }
        tiles.dot_bf16::<0, 4, 6>();
        tiles.dot_bf16::<1, 4, 7>();
        tiles.dot_bf16::<2, 5, 6>();
        tiles.dot_bf16::<3, 5, 7>();
    }
}

/// Writes result tiles 0..4 (tokens `tok0 ..` by columns `first_row ..` of the job): a whole
/// 16 x 16 block straight from the tile into y, a ragged one (past m or cols) through a buffer.
///
/// # Safety
/// As for `matmat_cols`' y: tokens < m, columns < cols are this job's.
#[target_feature(enable = "avx512f")]
unsafe fn store_results(
    tiles: &Tiles,
    tok0: usize,
    m: usize,
    first_row: usize,
    cols: usize,
    y: *mut f32,
    ld: usize,
) {
    let mut ragged = Aligned([[0.0f32; ROWS]; TOKENS]);
    for i in 0..4 {
        let (a, b) = (i / 2, i % 2);
        let (token, col) = (tok0 + a * TOKENS, first_row + b * ROWS);
        let tokens = m.saturating_sub(token).min(TOKENS);
        let live = cols.saturating_sub(col).min(ROWS);
        if tokens == 0 || live == 0 {
            continue;
        }
        let whole = tokens == TOKENS && live == ROWS;
        // A whole block's 16 rows of 64 bytes are y[(token + t) * ld + col ..][..16], this
        // job's; a ragged one goes to the buffer first.
        let (dst, stride) = if whole {
            (y.wrapping_add(token * ld + col), ld * 4)
        } else {
            (ragged.0.as_mut_ptr().cast::<f32>(), ROWS * 4)
        };
        // SAFETY: as above: dst's 16 rows at stride are writable and not aliased.
        unsafe {
            match i {
                0 => tiles.store::<0>(dst.cast(), stride),
                1 => tiles.store::<1>(dst.cast(), stride),
                2 => tiles.store::<2>(dst.cast(), stride),
                _ => tiles.store::<3>(dst.cast(), stride),
            }
        }
        if !whole {
            let mask = ((1u32 << live) - 1) as __mmask16;
            for (t, row) in ragged.0.iter().enumerate().take(tokens) {
                // SAFETY: token + t < m and columns col .. col + live < cols.
                unsafe {
                    _mm512_mask_storeu_ps(
                        y.add((token + t) * ld + col),
                        mask,
                        _mm512_loadu_ps(row.as_ptr()),
                    )
                };
            }
        }
    }
}
