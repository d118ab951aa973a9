//! The tile microkernels of AMX prefill attention and the AVX-512 steps between them.
//!
//! Scores are computed transposed, `S^T = K Q^T` (keys by queries): the K rows of the cache are
//! the first operand as stored (16 keys by 32 dims of bf16, no packing), the queries are packed
//! once per block into the pair-interleaved second operand. A score tile then holds one key per
//! row and one query per lane, so the online softmax is lane-wise AVX-512 with no horizontal
//! reduction. The probabilities come out of it rounded to bf16 and paired along keys in the same
//! lanes: one pair of keys per row, one query per lane. `P V` then runs in one of two orders
//! ([`PvOrder`]), each with one operand transposed on the vector units:
//! - `O^T += V^T P^T` (dims by queries): the probabilities are its second operand as they come,
//!   and V, transposed into dims by pairs of keys, its first; V is packed once per key step for
//!   every query tile of the block, so this is the order of blocks with many query tiles. The
//!   accumulators hold one query per lane, as the softmax state does.
//! - `O += P V`: the probabilities are transposed into query rows, each query tile at each step,
//!   and V, pair-interleaved along keys, is the second operand. This is the order of blocks with
//!   few query tiles, where transposing V would cost more than it saves.
//!
//! Over an int8 cache the scores are `tdpbusd` products instead: the stored key bytes (+128,
//! unsigned) by the queries rounded to int8 (signed), 64 dims a tile; the i32 sums lose the
//! bias and take the query and key scales on their way into the softmax. `P V` stays a bf16
//! product: V's integers are exact in bf16, and each key's V scale is folded into its
//! probability before the rounding (`RawScores`).
//!
//! Buffer layouts (u32 words hold bf16 pairs, low half first, or 4 int8; every tile is 16 rows of
//! 64 bytes):
//! - queries `[query tile][dim chunk of 32 (int8: 64)][pair p (int8: group of 4)][query i]`;
//! - scores `[query tile of the pair][key][query i]` (f32, or i32 over an int8 cache);
//! - probabilities `[query tile of the pair][key group of 32][key pair p][query i]` (`DimRows`),
//!   `[..][query i][key pair p]` (`QueryRows`);
//! - V `[key group of 32][dim chunk of 16][dim d][key pair p]` (`DimRows`),
//!   `[..][key pair p][dim d]` (`QueryRows`);
//! - output accumulators `[query tile][dim chunk of 16][dim d][query i]` (f32; `DimRows`),
//!   `[..][query i][dim d]` (`QueryRows`).

use core::arch::x86_64::*;

use super::{DIM_CHUNK, INT8_DIM_CHUNK};
use crate::matmul::amx::tiles::Tiles;
use crate::matmul::amx::transpose::transpose16;

/// Rows (queries or keys) of a tile, and f32 lanes of a register.
pub(super) const TILE: usize = 16;
/// Keys of one `P V` tile product (16 pairs).
pub(super) const KEY_GROUP: usize = 32;
/// Which operand of `P V` the vector units transpose (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PvOrder {
    /// `O^T += V^T P^T`: V, once per key step for the whole block.
    DimRows,
    /// `O += P V`: the probabilities, per query tile and key step.
    QueryRows,
}

/// Words (or f32) of one tile.
pub(super) const TILE_WORDS: usize = TILE * TILE;
const TILE_BYTES: usize = TILE_WORDS * 4;
const ROW_BYTES: usize = 64;

/// `S^T` of 32 keys (`k`: 16 + 16 rows of `k_stride` bytes) by 32 queries (packed tiles `qa`,
/// `qb`) over `chunks` dim chunks of 64 bytes, stored to `sa` / `sb` (`[32 keys][16 queries]`
/// each): f32 sums of bf16 pairs, or with `INT8` i32 sums of the key bytes (unsigned) by the
/// query bytes (signed).
///
/// # Safety
/// The 32 key rows must be readable for `chunks * 64` bytes each; `qa`, `qb` hold `chunks` tiles;
/// `sa`, `sb` are writable for 32 rows of 64 bytes.
#[allow(
    clippy::too_many_arguments,
    reason = "an AMX microkernel: tile buffers and strides, passed in registers"
)]
#[inline]
pub(super) unsafe fn scores_32x32<const INT8: bool>(
    tiles: &Tiles,
    k: *const u8,
    k_stride: usize,
    qa: *const u8,
    qb: *const u8,
    chunks: usize,
    sa: *mut u8,
    sb: *mut u8,
) {
    tiles.zero::<0>();
    tiles.zero::<1>();
    tiles.zero::<2>();
    tiles.zero::<3>();
    let k1 = k.wrapping_add(TILE * k_stride);
    for c in 0..chunks {
        // SAFETY: the caller's contract.
        unsafe {
            tiles.load::<4>(k.add(c * ROW_BYTES), k_stride);
            tiles.load::<5>(k1.add(c * ROW_BYTES), k_stride);
            tiles.load::<6>(qa.add(c * TILE_BYTES), ROW_BYTES);
            tiles.load::<7>(qb.add(c * TILE_BYTES), ROW_BYTES);
        }
        score_product::<INT8, 0, 4, 6>(tiles);
        score_product::<INT8, 1, 5, 6>(tiles);
        score_product::<INT8, 2, 4, 7>(tiles);
        score_product::<INT8, 3, 5, 7>(tiles);
    }
    // SAFETY: the caller's contract: keys 0..16 then 16..32 of each query tile.
    unsafe {
        tiles.store::<0>(sa, ROW_BYTES);
        tiles.store::<1>(sa.add(TILE_BYTES), ROW_BYTES);
        tiles.store::<2>(sb, ROW_BYTES);
        tiles.store::<3>(sb.add(TILE_BYTES), ROW_BYTES);
    }
}

/// The scores' tile product `C += A B`: `tdpbusd` (key bytes by int8 queries) with `INT8`, else
/// `tdpbf16ps`.
#[inline(always)]
pub(crate) fn score_product<const INT8: bool, const C: u8, const A: u8, const B: u8>(
    tiles: &Tiles,
) {
    if INT8 {
        tiles.dot_u8_i8::<C, A, B>();
    } else {
        tiles.dot_bf16::<C, A, B>();
    }
}

/// `P V` in `order` for two query tiles (`oa`, `ob`: `dim_tiles` accumulator tiles each; `pa`,
/// `pb`: `groups` probability tiles each) over `groups` key groups of packed V (`v`).
///
/// # Safety
/// The buffers must hold those tiles (layouts in the module doc); `dim_tiles` is even.
#[allow(
    clippy::too_many_arguments,
    reason = "an AMX microkernel: tile buffers and strides, passed in registers"
)]
#[inline]
pub(super) unsafe fn accumulate_pv(
    tiles: &Tiles,
    oa: *mut u8,
    ob: *mut u8,
    pa: *const u8,
    pb: *const u8,
    v: *const u8,
    groups: usize,
    dim_tiles: usize,
    order: PvOrder,
) {
    for c in (0..dim_tiles).step_by(2) {
        // SAFETY: the caller's contract; tiles c and c + 1 exist since dim_tiles is even.
        unsafe {
            tiles.load::<0>(oa.add(c * TILE_BYTES), ROW_BYTES);
            tiles.load::<1>(oa.add((c + 1) * TILE_BYTES), ROW_BYTES);
            tiles.load::<2>(ob.add(c * TILE_BYTES), ROW_BYTES);
            tiles.load::<3>(ob.add((c + 1) * TILE_BYTES), ROW_BYTES);
        }
        for g in 0..groups {
            let vg = v.wrapping_add((g * dim_tiles + c) * TILE_BYTES);
            // SAFETY: the caller's contract.
            unsafe {
                tiles.load::<4>(pa.add(g * TILE_BYTES), ROW_BYTES);
                tiles.load::<5>(pb.add(g * TILE_BYTES), ROW_BYTES);
                tiles.load::<6>(vg, ROW_BYTES);
                tiles.load::<7>(vg.add(TILE_BYTES), ROW_BYTES);
            }
            match order {
                PvOrder::DimRows => {
                    tiles.dot_bf16::<0, 6, 4>();
                    tiles.dot_bf16::<1, 7, 4>();
                    tiles.dot_bf16::<2, 6, 5>();
                    tiles.dot_bf16::<3, 7, 5>();
                }
                PvOrder::QueryRows => {
                    tiles.dot_bf16::<0, 4, 6>();
                    tiles.dot_bf16::<1, 4, 7>();
                    tiles.dot_bf16::<2, 5, 6>();
                    tiles.dot_bf16::<3, 5, 7>();
                }
            }
        }
        // SAFETY: as above.
        unsafe {
            tiles.store::<0>(oa.add(c * TILE_BYTES), ROW_BYTES);
            tiles.store::<1>(oa.add((c + 1) * TILE_BYTES), ROW_BYTES);
            tiles.store::<2>(ob.add(c * TILE_BYTES), ROW_BYTES);
            tiles.store::<3>(ob.add((c + 1) * TILE_BYTES), ROW_BYTES);
        }
    }
}

/// Packs one query tile: `rows[i]` is query `i`'s `head_dim` values (None: a padding row, zero),
/// rounded to bf16 and transposed into `dst` (`head_dim / 32` tiles).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(super) fn pack_queries(rows: &[Option<&[f32]>; TILE], head_dim: usize, dst: &mut [u32]) {
    transpose_query_chunks(rows, DIM_CHUNK, head_dim, dst, |x| {
        // SAFETY: a chunk holds 32 f32.
        let (lo, hi) = unsafe {
            (
                _mm512_loadu_ps(x.as_ptr()),
                _mm512_loadu_ps(x.as_ptr().add(TILE)),
            )
        };
        // Dims 2p and 2p + 1 as word p, low half first.
        _mm512_castsi512_ps(m512bh_bits(_mm512_cvtne2ps_pbh(hi, lo)))
    });
}

/// Packs a key group of V for `order`: `rows[2p]`, `rows[2p + 1]` (None: zero) interleaved into
/// pair words per dim (and for `DimRows` transposed, dims by pairs), `head_dim / 16` tiles into
/// `dst`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) fn pack_values(
    rows: &[Option<&[u32]>; KEY_GROUP],
    head_dim: usize,
    dst: &mut [u32],
    order: PvOrder,
) {
    // Element e of the result takes bf16 e / 2 of the first row (even e) or of the second (odd e),
    // offset by 16 for the upper 16 dims of the 32 loaded.
    let lo_index = _mm512_set_epi16(
        47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37, 5, 36, 4,
        35, 3, 34, 2, 33, 1, 32, 0,
    );
    let hi_index = _mm512_add_epi16(lo_index, _mm512_set1_epi16(16));
    let chunks = head_dim / DIM_CHUNK;
    assert!(dst.len() >= 2 * chunks * TILE_WORDS);
    match order {
        // Row p of tiles 2c and 2c + 1 from one load of the two rows.
        PvOrder::QueryRows => {
            for p in 0..TILE {
                for c in 0..chunks {
                    let (a, b) = (load_words(rows[2 * p], c), load_words(rows[2 * p + 1], c));
                    for (tile, index) in [(2 * c, lo_index), (2 * c + 1, hi_index)] {
                        let row = &mut dst[tile * TILE_WORDS + p * TILE..][..TILE];
                        let words = _mm512_permutex2var_epi16(a, index, b);
                        // SAFETY: row holds 16 words.
                        unsafe { _mm512_storeu_si512(row.as_mut_ptr().cast(), words) };
                    }
                }
            }
        }
        PvOrder::DimRows => {
            for c in 0..chunks {
                for (tile, index) in [(2 * c, lo_index), (2 * c + 1, hi_index)] {
                    let mut words = [_mm512_setzero_ps(); TILE];
                    for (p, w) in words.iter_mut().enumerate() {
                        let (a, b) = (load_words(rows[2 * p], c), load_words(rows[2 * p + 1], c));
                        *w = _mm512_castsi512_ps(_mm512_permutex2var_epi16(a, index, b));
                    }
                    transpose16(&mut words);
                    store_tile(&words, &mut dst[tile * TILE_WORDS..][..TILE_WORDS]);
                }
            }
        }
    }
}

/// Packs one query tile of int8 queries: `rows[i]` is query `i`'s bytes (`head_dim` of them, a
/// multiple of 64; None: a padding row, zero), transposed into `dst` (`head_dim / 64` tiles) so
/// that row `p` of a tile holds bytes `4p .. 4p + 4` of every query.
#[target_feature(enable = "avx512f")]
pub(super) fn pack_int8_queries(rows: &[Option<&[u8]>; TILE], head_dim: usize, dst: &mut [u32]) {
    transpose_query_chunks(rows, INT8_DIM_CHUNK, head_dim, dst, |x| {
        // SAFETY: a chunk holds 64 bytes.
        unsafe { _mm512_loadu_ps(x.as_ptr().cast()) }
    });
}

/// For each chunk of `chunk` values of the rows, one register a row (`load` of the row's
/// chunk; a padding row's is zero), transposed so that word `p` of every row is one tile row,
/// and stored as tile `c` of `dst`.
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose_query_chunks<T>(
    rows: &[Option<&[T]>; TILE],
    chunk: usize,
    head_dim: usize,
    dst: &mut [u32],
    load: impl Fn(&[T]) -> __m512,
) {
    for c in 0..head_dim / chunk {
        let mut regs = [_mm512_setzero_ps(); TILE];
        for (reg, row) in regs.iter_mut().zip(rows) {
            if let Some(row) = row {
                *reg = load(&row[c * chunk..][..chunk]);
            }
        }
        transpose16(&mut regs);
        store_tile(&regs, &mut dst[c * TILE_WORDS..][..TILE_WORDS]);
    }
}

/// Packs a key group of an int8 cache's V as [`pack_values`] packs bf16 rows: `rows[2p]`,
/// `rows[2p + 1]` (stored bytes, +128; None: zero) as bf16 integers (exact: `|n| <= 128`),
/// interleaved into pair words per dim (and transposed for `DimRows`). The V scales are applied
/// to the probabilities instead.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) fn pack_int8_values(
    rows: &[Option<&[u32]>; KEY_GROUP],
    head_dim: usize,
    dst: &mut [u32],
    order: PvOrder,
) {
    let bias = _mm512_set1_epi32(128);
    let high_half = _mm512_set1_epi32(0xffff_0000u32 as i32);
    // 16 stored bytes (dims 16 c ..) as the bits of f32 integers; a bf16 is the upper half.
    let integers = |row: Option<&[u32]>, c: usize| -> __m512i {
        match row {
            Some(row) => {
                let words = &row[c * TILE / 4..][..TILE / 4];
                // SAFETY: 16 bytes.
                let bytes = unsafe { _mm_loadu_si128(words.as_ptr().cast()) };
                let n = _mm512_sub_epi32(_mm512_cvtepu8_epi32(bytes), bias);
                _mm512_castps_si512(_mm512_cvtepi32_ps(n))
            }
            None => _mm512_setzero_si512(),
        }
    };
    // Pair p's words for dims 16 c .. 16 c + 16.
    let words = |p: usize, c: usize| {
        let even = integers(rows[2 * p], c);
        let odd = integers(rows[2 * p + 1], c);
        _mm512_or_si512(
            _mm512_srli_epi32::<16>(even),
            _mm512_and_si512(odd, high_half),
        )
    };
    let tiles = head_dim / TILE;
    assert!(dst.len() >= tiles * TILE_WORDS);
    match order {
        PvOrder::QueryRows => {
            for p in 0..TILE {
                for c in 0..tiles {
                    let row = &mut dst[c * TILE_WORDS + p * TILE..][..TILE];
                    // SAFETY: row holds 16 words.
                    unsafe { _mm512_storeu_si512(row.as_mut_ptr().cast(), words(p, c)) };
                }
            }
        }
        PvOrder::DimRows => {
            for c in 0..tiles {
                let mut regs = [_mm512_setzero_ps(); TILE];
                for (p, reg) in regs.iter_mut().enumerate() {
                    *reg = _mm512_castsi512_ps(words(p, c));
                }
                transpose16(&mut regs);
                store_tile(&regs, &mut dst[c * TILE_WORDS..][..TILE_WORDS]);
            }
        }
    }
}

/// Words `16 c .. 16 c + 16` of a stored row (None: zeros).
#[inline]
#[target_feature(enable = "avx512f")]
fn load_words(row: Option<&[u32]>, c: usize) -> __m512i {
    match row {
        Some(row) => {
            let words = &row[c * TILE..][..TILE];
            // SAFETY: 16 words.
            unsafe { _mm512_loadu_si512(words.as_ptr().cast()) }
        }
        None => _mm512_setzero_si512(),
    }
}

/// The online-softmax state of one query tile (one lane per query).
pub(super) struct SoftmaxLanes<'a> {
    /// The shift the probabilities are taken against (natural-log units, already scaled).
    pub m: &'a mut [f32; TILE],
    pub l: &'a mut [f32; TILE],
    /// Scaled score of key 0 (set at the key step starting at 0).
    pub s0: &'a mut [f32; TILE],
    pub position: &'a [i32; TILE],
}

/// A row's shift is only raised when a score exceeds it by more than this: probabilities stay
/// below e^8 (far from overflow in f32 and bf16 sums), and the accumulators are rescaled only
/// when the maximum jumps, not at every small increase.
const LAZY_RESCALE: f32 = 8.0;

/// A query tile's raw sums over a key step (`[keys][16 queries]`), and how they become scores.
/// `softmax_step` takes the scores in two factors, a per-key part in place of the sums and a
/// per-query (lane) factor folded into the exponential's argument, so they take no other buffer.
pub(super) enum RawScores<'a> {
    /// f32 sums of bf16 products; the score is the sum times `scale` (`1 / sqrt(head_dim)`).
    Bf16 { sums: &'a mut [f32], scale: f32 },
    /// i32 sums of key bytes (+128) by int8 queries (already times `1 / sqrt(head_dim)`):
    /// score = `((sum - bias) * k_scale) * q_scale`, the vector kernels' `dot * (q_scale *
    /// k_scale)` in another order. `k_scale`, `v_scale`: the step's keys (zero past the cache).
    Int8 {
        sums: &'a mut [i32],
        queries: &'a Int8TileScales,
        k_scale: &'a [f32],
        v_scale: &'a [f32],
    },
}

/// Per query of a tile over an int8 cache: its scale, and `128 * sum(q)`, what the keys' +128
/// bias adds to a sum.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Int8TileScales {
    pub scale: [f32; TILE],
    pub bias: [i32; TILE],
}

/// One key step of a query tile: the `raw` sums of keys `k0..` (`groups * 32` of them) are
/// masked causally and reduced to their key factor (in place), exponentiated against the
/// (possibly raised) shift ([`exp2_weight`] of `key part * lane factor * log2(e) - shift *
/// log2(e)`, one fused multiply-add) and written as bf16 probabilities to `probs` (`groups`
/// tiles, transposed into query rows for `QueryRows`); `l` sums the probabilities before that
/// rounding (and, over an int8 cache, before each is multiplied by its key's V scale). If a
/// shift rises, that query's accumulators `acc` (`dim_tiles` tiles in `order`'s layout) and `l`
/// are rescaled first.
#[allow(
    clippy::too_many_arguments,
    reason = "an AMX microkernel: tile buffers and strides, passed in registers"
)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(super) fn softmax_step(
    simd: pulp::x86::V4,
    state: SoftmaxLanes<'_>,
    raw: RawScores<'_>,
    k0: usize,
    groups: usize,
    acc: &mut [f32],
    probs: &mut [u32],
    order: PvOrder,
) {
    let keys = groups * KEY_GROUP;
    let position = load_i32(state.position);
    let min_position = *state.position.iter().min().expect("16 lanes") as usize;
    let minus_inf = _mm512_set1_ps(f32::NEG_INFINITY);
    // The lanes (queries) that must not see key `key`: only near the diagonal.
    let hidden = |key: usize| -> __mmask16 {
        if k0 + key > min_position {
            _mm512_cmplt_epi32_mask(position, _mm512_set1_epi32((k0 + key) as i32))
        } else {
            0
        }
    };
    // Four running maxima: one would wait on each `vmaxps` before the next.
    let mut maxima = [minus_inf; 4];
    let mut v_scale = None;
    // Pass 1: the key parts of the scores in place of the sums (`[key][16 queries]`, -inf where
    // hidden) and their largest; the lane factor each score still takes (>= 0).
    let (parts, lane_factor): (&mut [f32], __m512) = match raw {
        RawScores::Bf16 { sums, scale } => {
            assert!(sums.len() >= keys * TILE);
            for key0 in (0..keys).step_by(4) {
                for (j, max) in maxima.iter_mut().enumerate() {
                    let key = key0 + j;
                    // SAFETY: sums holds `keys` rows of 16 (checked above).
                    unsafe {
                        let at = sums.as_mut_ptr().add(key * TILE);
                        let s = _mm512_loadu_ps(at);
                        let hide = hidden(key);
                        if hide != 0 {
                            _mm512_mask_storeu_ps(at, hide, minus_inf);
                        }
                        *max = _mm512_mask_max_ps(*max, !hide, *max, s);
                    }
                }
            }
            (sums, _mm512_set1_ps(scale))
        }
        RawScores::Int8 {
            sums,
            queries,
            k_scale,
            v_scale: values,
        } => {
            assert!(sums.len() >= keys * TILE && k_scale.len() >= keys);
            let q_bias = load_i32(&queries.bias);
            for key0 in (0..keys).step_by(4) {
                for (j, max) in maxima.iter_mut().enumerate() {
                    let key = key0 + j;
                    // SAFETY: sums holds `keys` rows of 16 (checked above); each row is read
                    // as i32 sums and written back as f32 key parts.
                    unsafe {
                        let at = sums.as_mut_ptr().add(key * TILE);
                        let dot = _mm512_cvtepi32_ps(_mm512_sub_epi32(
                            _mm512_loadu_si512(at.cast()),
                            q_bias,
                        ));
                        let mut part = _mm512_mul_ps(dot, _mm512_set1_ps(k_scale[key]));
                        let hide = hidden(key);
                        if hide != 0 {
                            part = _mm512_mask_mov_ps(part, hide, minus_inf);
                        }
                        *max = _mm512_max_ps(*max, part);
                        _mm512_storeu_ps(at.cast(), part);
                    }
                }
            }
            v_scale = Some(&values[..keys]);
            (bytemuck::cast_slice_mut(sums), load_f32(&queries.scale))
        }
    };
    let part = |key: usize| {
        // SAFETY: parts holds `keys` rows of 16 (checked above), key < keys.
        unsafe { _mm512_loadu_ps(parts.as_ptr().add(key * TILE)) }
    };
    if k0 == 0 {
        // Key 0 is visible to every row.
        store_f32(_mm512_mul_ps(part(0), lane_factor), state.s0);
    }
    let part_max = _mm512_max_ps(
        _mm512_max_ps(maxima[0], maxima[1]),
        _mm512_max_ps(maxima[2], maxima[3]),
    );
    // The factor is >= 0, so it keeps the order: the step's largest score. (A zero factor on a
    // step hidden from the row gives NaN here, which raises nothing.)
    let tile_max = _mm512_mul_ps(part_max, lane_factor);
    let m = load_f32(state.m);
    let raise =
        _mm512_cmp_ps_mask::<_CMP_GT_OQ>(tile_max, _mm512_add_ps(m, _mm512_set1_ps(LAZY_RESCALE)));
    let mut l = load_f32(state.l);
    let m = if raise != 0 {
        let m_new = _mm512_mask_max_ps(m, raise, m, tile_max);
        // exp(-inf) = 0 on a row's first step: its (zero) accumulators are simply reset.
        let alpha = exp(simd, _mm512_sub_ps(m, m_new));
        l = _mm512_mul_ps(l, alpha);
        rescale_rows(acc, alpha, order);
        store_f32(m_new, state.m);
        m_new
    } else {
        m
    };
    // In base 2: `part * factor_log2 - shift_log2`. A row that has seen nothing has the shift
    // -inf and only hidden (-inf) parts so far, whose argument is NaN: weight 0.
    let log2e = _mm512_set1_ps(std::f32::consts::LOG2_E);
    let factor_log2 = _mm512_mul_ps(lane_factor, log2e);
    let minus_shift_log2 = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(m, log2e));
    let weight =
        |key: usize| exp2_weight(_mm512_fmadd_ps(part(key), factor_log2, minus_shift_log2));
    // Pairs of keys (2p, 2p + 1) rounded to bf16 and interleaved into words, lane = query.
    let pair_index = _mm512_set_epi16(
        31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4,
        19, 3, 18, 2, 17, 1, 16, 0,
    );
    for g in 0..groups {
        let mut words = [_mm512_setzero_ps(); TILE];
        for (p, w) in words.iter_mut().enumerate() {
            let key = g * KEY_GROUP + 2 * p;
            let (even, odd) = (weight(key), weight(key + 1));
            l = _mm512_add_ps(l, _mm512_add_ps(even, odd));
            let (even, odd) = match v_scale {
                None => (even, odd),
                // V holds integers: its scale goes into the weights, one rounding each.
                Some(v_scale) => (
                    _mm512_mul_ps(even, _mm512_set1_ps(v_scale[key])),
                    _mm512_mul_ps(odd, _mm512_set1_ps(v_scale[key + 1])),
                ),
            };
            let halves = m512bh_bits(_mm512_cvtne2ps_pbh(odd, even));
            let pair = _mm512_permutexvar_epi16(pair_index, halves);
            *w = _mm512_castsi512_ps(pair);
        }
        if order == PvOrder::QueryRows {
            transpose16(&mut words);
        }
        store_tile(&words, &mut probs[g * TILE_WORDS..][..TILE_WORDS]);
    }
    store_f32(l, state.l);
}

/// Query `i`'s accumulators times `alpha[i]`, in `order`'s layout: every row (one dim of 16
/// queries) by the lanes' factors, or every query's row by its own.
#[target_feature(enable = "avx512f")]
fn rescale_rows(acc: &mut [f32], alpha: __m512, order: PvOrder) {
    let mut lanes = [0.0f32; TILE];
    store_f32(alpha, &mut lanes);
    for (r, row) in acc.chunks_exact_mut(TILE).enumerate() {
        let factor = match order {
            PvOrder::DimRows => alpha,
            PvOrder::QueryRows => _mm512_set1_ps(lanes[r % TILE]),
        };
        // SAFETY: row holds 16 f32.
        unsafe {
            let v = _mm512_loadu_ps(row.as_ptr());
            _mm512_storeu_ps(row.as_mut_ptr(), _mm512_mul_ps(v, factor));
        }
    }
}

/// `2^y` lane-wise to [`super::AMX_PREFILL_EXP_REL_ERROR`] (`y >= -124`), for the
/// probabilities that are rounded to bf16 next (8 bits): `2^n 2^f` with `n = round(y)`, `2^f` by
/// a degree-4 polynomial and `vscalefps`; 0 below -124 (where `2^n` would leave f32's normal
/// range), for -inf, and for NaN: a row whose scores so far are all -inf (overflowed) has the
/// shift -inf, and `-inf - -inf` must weigh nothing (the epilogue writes zeros for a row whose
/// weights are all 0). About half the operations of [`exp`], which keeps f32 accuracy for the
/// rescale factors.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn exp2_weight(y: __m512) -> __m512 {
    // ">= -124" (ordered) is false for NaN too.
    let normal = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(y, _mm512_set1_ps(-124.0));
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(y);
    let f = _mm512_sub_ps(y, n);
    // ln(2)^i / i!, i = 4 .. 0.
    let mut p = _mm512_set1_ps(9.618_129e-3);
    for c in [5.550_411e-2, 2.402_265e-1, 6.931_472e-1, 1.0] {
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c));
    }
    _mm512_maskz_scalef_ps(normal, p, n)
}

/// `exp(x)` lane-wise (`x <= LAZY_RESCALE`; -inf gives 0), the softmax's own polynomial.
#[inline]
#[target_feature(enable = "avx512f")]
fn exp(simd: pulp::x86::V4, x: __m512) -> __m512 {
    // SAFETY: both are 16 f32 in a 64-byte value.
    let x: pulp::f32x16 = unsafe { core::mem::transmute(x) };
    let e = crate::simd_math::exp_nonpositive(simd, x);
    // SAFETY: as above.
    unsafe { core::mem::transmute(e) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn m512bh_bits(x: __m512bh) -> __m512i {
    // SAFETY: 32 bf16 in a 64-byte value, reinterpreted as its bits.
    unsafe { core::mem::transmute(x) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn store_tile(regs: &[__m512; TILE], dst: &mut [u32]) {
    assert!(dst.len() >= TILE_WORDS);
    for (i, r) in regs.iter().enumerate() {
        // SAFETY: dst holds 16 rows of 16 words (checked above).
        unsafe { _mm512_storeu_ps(dst.as_mut_ptr().add(i * TILE).cast(), *r) };
    }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn load_f32(x: &[f32; TILE]) -> __m512 {
    // SAFETY: 16 f32.
    unsafe { _mm512_loadu_ps(x.as_ptr()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn store_f32(v: __m512, x: &mut [f32; TILE]) {
    // SAFETY: 16 f32.
    unsafe { _mm512_storeu_ps(x.as_mut_ptr(), v) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn load_i32(x: &[i32; TILE]) -> __m512i {
    // SAFETY: 16 i32.
    unsafe { _mm512_loadu_si512(x.as_ptr().cast()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::AMX_PREFILL_EXP_REL_ERROR;

    /// `exp2_weight` of 16 lanes.
    fn exp2_weight_of(y: [f32; 16]) -> [f32; 16] {
        let mut got = [0.0f32; 16];
        // SAFETY: the callers checked AVX-512F.
        unsafe { _mm512_storeu_ps(got.as_mut_ptr(), exp2_weight(_mm512_loadu_ps(y.as_ptr()))) };
        got
    }

    /// Over a dense sweep of `[-124, LAZY_RESCALE log2(e)]`, within the stated relative error of
    /// the f64 power of two and in f32's normal range; below -124, at -inf and for NaN exactly 0.
    #[test]
    fn exp2_weight_is_within_its_stated_error() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        let (low, high) = (-124.0, LAZY_RESCALE as f64 * std::f64::consts::LOG2_E);
        let steps = 1_000_000;
        let mut worst = 0.0f64;
        for i in (0..=steps).step_by(16) {
            let y: [f32; 16] = core::array::from_fn(|j| {
                (low + (high - low) * ((i + j).min(steps)) as f64 / steps as f64) as f32
            });
            for (y, got) in y.iter().zip(exp2_weight_of(y)) {
                let want = (*y as f64).exp2();
                worst = worst.max((got as f64 - want).abs() / want);
                assert!(got.is_normal(), "exp2_weight({y}) = {got}");
            }
        }
        assert!(
            worst <= AMX_PREFILL_EXP_REL_ERROR as f64,
            "relative error {worst}"
        );
        let y = [
            f32::NAN,
            f32::NEG_INFINITY,
            -1e30,
            -124.001,
            -124.0,
            0.0,
            1.0,
            8.0,
        ];
        let mut lanes = [0.0f32; 16];
        lanes[..y.len()].copy_from_slice(&y);
        let got = exp2_weight_of(lanes);
        assert_eq!(&got[..4], &[0.0; 4]);
        assert!(got[4] > 0.0 && got[5] == 1.0, "{got:?}");
    }
}
