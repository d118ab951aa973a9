//! Blocks of lane prefill: up to [`BLOCK_ROWS`] query rows of one KV head, row `r` in lane
//! `r % L` of register `r / L`, streaming the head's keys in tiles of [`KEY_TILE`] (a few blocks
//! of the same head together, [`BLOCKS_PER_TILE`], so that a tile is read once). Per tile: the
//! stored K and V rows are decoded once for all those blocks' rows, where their kernels do not
//! take them as stored (to f32; int8 keys on AVX2 widened to i16 pairs for `vpmaddwd`; int8
//! values to i16 pairs of two keys for `vpdpwssd`/`vpmaddwd`), `S^T = K Q^T` and `O^T += V^T P^T`
//! run on the lane microkernel or the dot-product kernels, and the online softmax between them
//! works on whole registers
//! (a max over keys is a vector max, never a horizontal reduction).
//!
//! Element order: a stored row of `row_words` words of `E` elements is decoded to "slots", slot
//! `j * row_words + w` holding element `E * w + j` (sub-vector `j` of a word block lands on
//! consecutive slots, at any width). The queries are laid out in the same slots, so the dot
//! products sum over slots in one order at every level.
//!
//! A bf16 cache: the queries (unscaled) and the probabilities are rounded to bf16 (as the AMX
//! tiles do), and both products sum bf16 pairs in `vdpbf16ps`'s order (a word's odd element, then
//! its even one; two keys' pairs for `P V`), so that the AVX512-BF16 kernels (`dots_avx512`),
//! which multiply the stored words as they are, give the bits of every other level. An int8
//! cache: the scores are exact integer dot products (`vpdpbusd`, or f32 sums below 2^24), and so
//! is `P V` (`integer_values`: the weights as integers of 15 bits, one step a row and tile).

#![allow(clippy::needless_range_loop)] // one register of each per-row array at a time reads clearest

use std::ops::Range;

use pulp::{Simd, WithSimd};

use super::LaneDots;
use super::product::{Broadcast, Order, product};
use super::value_pairs::ValuesKey;
use crate::attention::int8_queries::Int8Queries;
use crate::attention::kv::{KvDtype, KvHeadView};
use crate::attention::merge::merge_row;
use crate::attention::microkernel::{Bf16Words, F32Words, Int8Words, WordFormat, load_block};
use crate::attention::tile::QueryRow;
use crate::simd_math::{exp_nonpositive, round_bf16, round_bf16_scalar};

mod integer_values;

/// Query rows per block (32 = 4 AVX2 or 2 AVX-512 registers: every lane count divides it).
pub(super) const BLOCK_ROWS: usize = 32;
/// Keys per tile: the tile's decoded K and V (32 KiB each at head_dim 128) stay in L2, and the
/// queries (16 KiB) and the tile's scores (8 KiB) in L1 while the microkernel reads them.
pub(super) const KEY_TILE: usize = 64;
/// Blocks that go over the keys together (each tile read from memory and decoded once for all
/// of them): over a 32768-key head, the two products of one block at a time waited on memory (a
/// scratch program of the same loops: 0.53 of the `vdpbf16ps` peak; four at a time, 0.73), and
/// eight share a tile's decoding twice as far as four (their states, ~40 KiB each, stay in L2;
/// see docs/performance.md).
pub(super) const BLOCKS_PER_TILE: usize = 8;

/// A block's rows against the keys they see (`0 ..= position` for each row), to run with
/// [`crate::dispatch::run_at`].
pub(super) struct LaneBlock<'a> {
    pub kv: KvHeadView<'a>,
    /// `[.., head_dim]` rows after q_norm and RoPE, unscaled.
    pub q: &'a [f32],
    /// At least one; run in blocks of [`BLOCK_ROWS`] (one [`BlockState`] each).
    pub rows: &'a [QueryRow],
    /// An int8 cache's: `rows`' queries times 1/sqrt(head_dim), rounded to int8, row `i` of
    /// `rows` at row `i` ([`Int8Queries::fill_with`]); `None` for the other caches.
    pub int8_queries: Option<&'a Int8Queries>,
    /// The dot-product kernels the CPU has (the caller's kernel table proved it).
    pub dots: LaneDots,
    /// This call's KV head, under which the thread's packed value pairs are shared.
    pub values: ValuesKey,
    /// The keys this run goes over (a part of a split, starting on a [`KEY_TILE`]; all:
    /// `0..usize::MAX`), each row still only those up to its position.
    pub keys: Range<usize>,
}

/// The final softmax state of a block's rows (not yet divided by `l`).
pub(super) struct BlockState {
    pub m: [f32; BLOCK_ROWS],
    pub l: [f32; BLOCK_ROWS],
    /// Scaled score of key 0 (every row sees it).
    pub s0: [f32; BLOCK_ROWS],
    /// `[slot][BLOCK_ROWS]`.
    acc: Vec<f32>,
    row_words: usize,
    elems_per_word: usize,
}

impl BlockState {
    /// The state of the same rows over the union of `parts`' keys (each part a [`run`] over
    /// its own key range): with `m = max m_p`, `l = sum l_p e^(m_p - m)` and `acc = sum acc_p
    /// e^(m_p - m)`, in part order; a part whose row saw no keys (`m_p = -inf`) weighs 0.
    pub(super) fn merge(parts: &[&BlockState]) -> BlockState {
        let first = parts.first().expect("at least one part");
        let mut merged = BlockState {
            m: [f32::NEG_INFINITY; BLOCK_ROWS],
            l: [0.0; BLOCK_ROWS],
            s0: [f32::NEG_INFINITY; BLOCK_ROWS],
            acc: vec![0.0; first.acc.len()],
            row_words: first.row_words,
            elems_per_word: first.elems_per_word,
        };
        for r in 0..BLOCK_ROWS {
            let states = parts.iter().map(|p| (p.m[r], p.l[r], p.s0[r]));
            let acc = &mut merged.acc;
            (merged.m[r], merged.l[r], merged.s0[r]) = merge_row(states, |p, weight| {
                // `acc` is `[slot][BLOCK_ROWS]`: row r is every BLOCK_ROWS-th value.
                let rows = acc.chunks_exact_mut(BLOCK_ROWS);
                for (slot, part_slot) in rows.zip(parts[p].acc.chunks_exact(BLOCK_ROWS)) {
                    slot[r] += part_slot[r] * weight;
                }
            });
        }
        merged
    }

    /// Row `r`'s accumulator in element order (`dst.len()` = head_dim).
    pub(super) fn gather_row(&self, r: usize, dst: &mut [f32]) {
        match self.elems_per_word {
            1 => self.gather::<1>(r, dst),
            2 => self.gather::<2>(r, dst),
            4 => self.gather::<4>(r, dst),
            epw => unreachable!("no word format of {epw} elements"),
        }
    }

    /// [`BlockState::gather_row`] for words of `E` elements: element `E * w + j` is at slot
    /// `j * row_words + w` (constant `E`: this runs for every row of every block).
    fn gather<const E: usize>(&self, r: usize, dst: &mut [f32]) {
        let column = &self.acc[r..];
        for (w, elems) in dst.chunks_mut(E).enumerate() {
            for (j, e) in elems.iter_mut().enumerate() {
                *e = column[(j * self.row_words + w) * BLOCK_ROWS];
            }
        }
    }
}

/// Calls `f(element, slot)` for the `len` elements of one row (`row_words` words of
/// `elems_per_word`), word by word: no division per element (this runs for every row of every
/// block).
#[inline(always)]
fn for_each_slot(
    len: usize,
    row_words: usize,
    elems_per_word: usize,
    mut f: impl FnMut(usize, usize),
) {
    for w in 0..len.div_ceil(elems_per_word) {
        for j in 0..elems_per_word.min(len - w * elems_per_word) {
            f(w * elems_per_word + j, j * row_words + w);
        }
    }
}

impl WithSimd for LaneBlock<'_> {
    type Output = Vec<BlockState>;

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> Vec<BlockState> {
        match self.kv.dtype {
            KvDtype::F32 => run::<S, F32Words>(simd, self),
            KvDtype::Bf16 => run::<S, Bf16Words>(simd, self),
            KvDtype::Int8 => run::<S, Int8Words>(simd, self),
        }
    }
}

/// The block's working set: the operands and accumulators of the microkernel as registers of
/// `rv = BLOCK_ROWS / L` lanes each.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the dot-product fields are x86-64's
struct Lanes<S: Simd> {
    rv: usize,
    slots: usize,
    dtype: KvDtype,
    /// The products that run on `dots_avx512`: the scores on `vdpbf16ps` (a bf16 cache) or
    /// `vpdpbusd` (int8).
    bf16_scores: bool,
    int8_scores: bool,
    /// The scores over int8 keys on `vpmaddwd` (`dots_avx2`).
    int8_pair_scores: bool,
    value_dots: ValueDots,
    /// `[slot][rv]`: the queries (f32 K: scaled by 1/sqrt(head_dim); bf16 K: rounded to bf16,
    /// unscaled; int8 K: their integers); empty where a dot-product kernel takes `q_words`.
    qt: Vec<S::f32s>,
    /// For a dot-product kernel, `[word][BLOCK_ROWS]`: the queries as the cache's words (bf16
    /// pairs or four int8) or as pairs of i16 (`vpmaddwd`), and for `vpdpbusd` each row's sum
    /// of its integers.
    q_words: Vec<u32>,
    q_sums: [i32; BLOCK_ROWS],
    /// Int8 K: each row's query scale (1 elsewhere).
    q_scale: Vec<S::f32s>,
    position: Vec<S::f32s>,
    m: Vec<S::f32s>,
    l: Vec<S::f32s>,
    s0: Vec<S::f32s>,
    /// `[key][rv]`: the tile's scores, then its probabilities.
    st: Vec<S::f32s>,
    /// `[slot][rv]`: `sum_t p[t] v[t]`.
    ot: Vec<S::f32s>,
    /// `[rv]`: an int8 cache's weight step of the current tile, a row (its largest weight /
    /// [`integer_values::WEIGHT_STEPS`]), and steps per unit of weight.
    weight_step: Vec<S::f32s>,
    steps_per_weight: Vec<S::f32s>,
    /// `[2][slot]`: a tile's odd last value row in f32 beside a zero row (the pair it ends with).
    last_values: Vec<f32>,
    /// `P V` on pairs: `[key pair][BLOCK_ROWS]` weights as pairs of two keys (bf16, or i16 for
    /// int8 values); the values' pairs come from the decoded tile (int8) or `value_pairs`
    /// (bf16), but for a bf16 tile's last odd key (`last_pair`, `[slot]`, with a zero key).
    p_words: Vec<u32>,
    last_pair: Vec<u32>,
    values: ValuesKey,
}

/// The kernel a tile's scores ran on: none (the generic path is to run), or one that wrote
/// them unscaled, or scaled by the int8 query and key scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the kernels are x86-64's
enum ScoresKernel {
    None,
    Unscaled,
    Scaled,
}

/// The kernel `P V` runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueDots {
    /// The generic lane product (f32 and bf16 caches), or an i32 loop (int8).
    Generic,
    /// `vdpbf16ps` on bf16 pairs of keys (a bf16 cache).
    Bf16,
    /// `vpdpwssd` (AVX512-VNNI) on i16 pairs of keys (an int8 cache).
    Int16,
    /// `vpmaddwd` (AVX2) on the same pairs.
    Int16Pairs,
}

impl ValueDots {
    /// An integer pair kernel, which takes a tile's values as i16 pairs.
    fn int16(self) -> bool {
        matches!(self, ValueDots::Int16 | ValueDots::Int16Pairs)
    }
}

/// A tile's K and V rows decoded once for all the blocks that go over it (where their kernels
/// take them decoded), `[key][slot]` in f32 (int8: the stored integers). Each block uses the
/// first keys of it that it sees.
struct DecodedTile {
    /// Empty where the scores take the stored words or the pairs.
    k: Vec<f32>,
    /// `[key][pair]` int8 keys widened to i16 pairs (`vpmaddwd` scores), else empty.
    k_pairs: Vec<u32>,
    /// Empty where `P V` runs on pairs.
    v: Vec<f32>,
    /// `[key pair][slot]` int8 values as i16 pairs of two keys (`vpdpwssd`, `vpmaddwd`), else
    /// empty.
    v_pairs: Vec<u32>,
}

impl DecodedTile {
    /// Buffers for the rows that blocks of `lanes`' kind decode.
    fn for_blocks<S: Simd>(lanes: &Lanes<S>) -> Self {
        let rows = |decoded: bool| if decoded { KEY_TILE * lanes.slots } else { 0 };
        let stored_or_pairs = lanes.bf16_scores || lanes.int8_scores || lanes.int8_pair_scores;
        DecodedTile {
            k: vec![0.0; rows(!stored_or_pairs)],
            // Two pairs of i16 a stored word of four bytes.
            k_pairs: vec![0; rows(lanes.int8_pair_scores) / 2],
            v: vec![0.0; rows(lanes.value_dots == ValueDots::Generic)],
            v_pairs: vec![0; rows(lanes.value_dots.int16()) / 2],
        }
    }

    /// Keys and values `k0 .. k0 + ntok` of `kv`, as far as they are decoded.
    #[inline(always)]
    fn load<S: Simd, F: WordFormat>(
        &mut self,
        simd: S,
        kv: KvHeadView<'_>,
        k0: usize,
        ntok: usize,
    ) {
        let rw = kv.row_words;
        let rows = k0 * rw..(k0 + ntok) * rw;
        if !self.k.is_empty() {
            decode_rows::<S, F>(simd, &kv.k[rows.clone()], rw, &mut self.k);
        }
        #[cfg(target_arch = "x86_64")]
        if !self.k_pairs.is_empty() {
            // SAFETY: only blocks whose kernel table has `int8_pairs` widen, on a CPU with AVX2.
            unsafe {
                super::dots_avx2::widen_int8_keys(&kv.k[rows.clone()], rw, &mut self.k_pairs)
            };
        }
        #[cfg(target_arch = "x86_64")]
        if !self.v_pairs.is_empty() {
            // SAFETY: only blocks whose kernel table has a pair kernel for int8 values pack
            // them, on a CPU with AVX2.
            unsafe {
                super::dots_avx2::pack_int8_value_pairs(&kv.v[rows.clone()], rw, &mut self.v_pairs)
            };
        }
        if !self.v.is_empty() {
            decode_rows::<S, F>(simd, &kv.v[rows], rw, &mut self.v);
        }
    }
}

/// The item's rows in blocks of [`BLOCK_ROWS`], [`BLOCKS_PER_TILE`] blocks at a time going over
/// the keys together: each K and V tile, read from memory by the first block, is still in cache
/// for the others.
#[inline(always)]
fn run<S: Simd, F: WordFormat>(simd: S, block: LaneBlock<'_>) -> Vec<BlockState> {
    let LaneBlock {
        kv,
        q,
        rows,
        int8_queries,
        dots,
        values,
        keys,
    } = block;
    assert!(!rows.is_empty());
    assert!(
        keys.start.is_multiple_of(KEY_TILE),
        "a part starts on a key tile"
    );
    let mut done = Vec::with_capacity(rows.len().div_ceil(BLOCK_ROWS));
    for (g, group) in rows.chunks(BLOCKS_PER_TILE * BLOCK_ROWS).enumerate() {
        // A plain loop, not a `map` closure: closures do not inherit the target features, and
        // the query layout's vector code would be calls.
        let mut blocks: Vec<(Lanes<S>, usize, usize)> = Vec::with_capacity(BLOCKS_PER_TILE);
        for (b, rows) in group.chunks(BLOCK_ROWS).enumerate() {
            let first = rows.iter().map(|r| r.position).min().expect("rows");
            let key_end = rows.iter().map(|r| r.position).max().expect("rows") + 1;
            let mut lanes = Lanes::<S>::new::<F>(simd, kv, dots, values);
            let first_row = (g * BLOCKS_PER_TILE + b) * BLOCK_ROWS;
            let rounded = int8_queries.map(|queries| (queries, first_row));
            lanes.load_queries(simd, kv, q, rows, rounded);
            blocks.push((lanes, first, key_end));
        }
        let key_end = blocks.iter().map(|b| b.2).max().expect("blocks");
        let mut decoded = DecodedTile::for_blocks(&blocks[0].0);
        // A part's end is on a key tile too, so no tile straddles two parts.
        for k0 in (keys.start..key_end.min(keys.end)).step_by(KEY_TILE) {
            decoded.load::<S, F>(simd, kv, k0, KEY_TILE.min(key_end - k0));
            for (lanes, first, key_end) in &mut blocks {
                if k0 < *key_end {
                    let ntok = KEY_TILE.min(*key_end - k0);
                    lanes.tile::<F>(simd, kv, &decoded, k0, ntok, *first);
                }
            }
        }
        done.extend(
            blocks
                .into_iter()
                .map(|(lanes, ..)| lanes.finish(kv.row_words, F::ELEMS)),
        );
    }
    done
}

/// Decodes whole stored rows (`rows.len()` a multiple of `row_words`) into `dst`, row `t` at
/// `t * slots`, in slot order; bf16 denormals read as zero, as `vdpbf16ps` reads them.
#[inline(always)]
fn decode_rows<S: Simd, F: WordFormat>(simd: S, rows: &[u32], row_words: usize, dst: &mut [f32]) {
    let lanes = S::U32_LANES;
    let slots = F::ELEMS * row_words;
    for (row, out) in rows
        .chunks_exact(row_words)
        .zip(dst.chunks_exact_mut(slots))
    {
        for b in 0..row_words.div_ceil(lanes) {
            let words = load_block(simd, row, b);
            let (start, live) = (b * lanes, lanes.min(row_words - b * lanes));
            for j in 0..F::ELEMS {
                let mut values = F::decode(simd, words, j);
                if F::ELEMS == 2 {
                    values = flush_denormal(simd, values);
                }
                let target = &mut out[j * row_words + start..][..live];
                if live == lanes {
                    S::as_mut_simd_f32s(target).0[0] = values;
                } else {
                    simd.partial_store_f32s(target, values);
                }
            }
        }
    }
}

/// `x` rounded to bf16 ([`round_bf16`]) into `out` (as long), a register at a time.
#[inline(always)]
fn round_row<S: Simd>(simd: S, x: &[f32], out: &mut [f32]) {
    let (xs, x_tail) = S::as_simd_f32s(x);
    let (outs, out_tail) = S::as_mut_simd_f32s(out);
    for (y, &v) in outs.iter_mut().zip(xs) {
        *y = round_bf16(simd, v);
    }
    for (y, &v) in out_tail.iter_mut().zip(x_tail) {
        *y = round_bf16_scalar(v);
    }
}

/// `x` with denormals replaced by a zero of their sign.
#[inline(always)]
fn flush_denormal<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    let bits = simd.transmute_u32s_f32s(x);
    let exponent = simd.and_u32s(bits, simd.splat_u32s(0x7f80_0000));
    let sign = simd.and_u32s(bits, simd.splat_u32s(0x8000_0000));
    let tiny = simd.equal_u32s(exponent, simd.splat_u32s(0));
    simd.transmute_f32s_u32s(simd.select_u32s(tiny, sign, bits))
}

impl<S: Simd> Lanes<S> {
    /// The empty state of a block over `kv`'s keys, with the buffers its kernels use.
    #[inline(always)]
    fn new<F: WordFormat>(simd: S, kv: KvHeadView<'_>, dots: LaneDots, values: ValuesKey) -> Self {
        let rv = BLOCK_ROWS / S::F32_LANES;
        let rw = kv.row_words;
        let slots = F::ELEMS * rw;
        let zero = simd.splat_f32s(0.0);
        let bf16_scores = dots.bf16 && kv.dtype == KvDtype::Bf16;
        let int8_scores = dots.int8 && kv.dtype == KvDtype::Int8;
        let int8_pair_scores = dots.int8_pairs && !int8_scores && kv.dtype == KvDtype::Int8;
        let value_dots = match kv.dtype {
            KvDtype::Bf16 if dots.bf16 => ValueDots::Bf16,
            KvDtype::Int8 if dots.int8 => ValueDots::Int16,
            KvDtype::Int8 if dots.int8_pairs => ValueDots::Int16Pairs,
            _ => ValueDots::Generic,
        };
        let weight_pairs = if value_dots == ValueDots::Generic {
            0
        } else {
            KEY_TILE / 2
        };
        let last_pair = if value_dots == ValueDots::Bf16 {
            slots
        } else {
            0
        };
        let query_words = if int8_pair_scores {
            2 * rw * BLOCK_ROWS
        } else if bf16_scores || int8_scores {
            rw * BLOCK_ROWS
        } else {
            0
        };
        Lanes {
            rv,
            slots,
            dtype: kv.dtype,
            bf16_scores,
            int8_scores,
            int8_pair_scores,
            value_dots,
            qt: vec![zero; if query_words > 0 { 0 } else { slots * rv }],
            q_words: vec![0; query_words],
            q_sums: [0; BLOCK_ROWS],
            q_scale: vec![simd.splat_f32s(1.0); rv],
            position: vec![zero; rv],
            m: vec![simd.splat_f32s(f32::NEG_INFINITY); rv],
            l: vec![zero; rv],
            s0: vec![simd.splat_f32s(f32::NEG_INFINITY); rv],
            st: vec![zero; (KEY_TILE + 1) * rv],
            ot: vec![zero; slots * rv],
            weight_step: vec![zero; rv],
            steps_per_weight: vec![zero; rv],
            last_values: vec![0.0; 2 * slots],
            p_words: vec![0; weight_pairs * BLOCK_ROWS],
            last_pair: vec![0; last_pair],
            values,
        }
    }

    /// One tile of keys `k0 .. k0 + ntok` (`decoded` from `k0` on, at least `ntok` keys) for
    /// rows whose first position is `first`: scores, causal mask (only where a key lies after a
    /// row), online softmax, `P V`.
    #[inline(always)]
    fn tile<F: WordFormat>(
        &mut self,
        simd: S,
        kv: KvHeadView<'_>,
        decoded: &DecodedTile,
        k0: usize,
        ntok: usize,
        first: usize,
    ) {
        let rw = kv.row_words;
        self.scores(
            simd,
            kv,
            decoded,
            &kv.k[k0 * rw..(k0 + ntok) * rw],
            k0,
            ntok,
        );
        if k0 + ntok > first + 1 {
            self.mask(simd, k0, ntok);
        }
        self.softmax(simd, kv, k0, ntok);
        self.accumulate::<F>(simd, kv, decoded, k0, ntok);
    }

    /// The rows' queries into `qt`, or for a dot-product kernel straight into `q_words` (and int8
    /// K: their scales, from `rounded`, the rounded queries whose row `first` is `rows[0]`'s),
    /// their positions; lanes past the rows get zero queries at the last row's position.
    #[inline(always)]
    fn load_queries(
        &mut self,
        simd: S,
        kv: KvHeadView<'_>,
        q: &[f32],
        rows: &[QueryRow],
        rounded: Option<(&Int8Queries, usize)>,
    ) {
        let (d, rw) = (kv.head_dim, kv.row_words);
        let epw = self.slots / rw;
        let scale = 1.0 / (d as f32).sqrt();
        let qt: &mut [f32] = bytemuck::cast_slice_mut(&mut self.qt);
        let q_scale: &mut [f32] = bytemuck::cast_slice_mut(&mut self.q_scale);
        if kv.dtype == KvDtype::Int8 {
            // Against int8 K the queries are rounded to int8 too: their integers here, the
            // scale applied to the (exact) integer dot products.
            let (rounded, first) = rounded.expect("an int8 cache's block gets rounded queries");
            for r in 0..rows.len() {
                let bytes = rounded.row(first + r);
                if self.int8_scores {
                    // Four bytes a word, in the stored K rows' order (zero past head_dim).
                    for (w, word) in bytes.chunks_exact(4).take(rw).enumerate() {
                        self.q_words[w * BLOCK_ROWS + r] =
                            u32::from_le_bytes(word.try_into().expect("4 bytes"));
                    }
                    self.q_sums[r] = rounded.bias_correction(first + r) / 128;
                } else if self.int8_pair_scores {
                    #[cfg(target_arch = "x86_64")]
                    for (p, pair) in bytes.chunks_exact(2).take(2 * rw).enumerate() {
                        let value = |byte: u8| byte as i8 as i16;
                        self.q_words[p * BLOCK_ROWS + r] =
                            super::dots_avx2::pair_word(value(pair[0]), value(pair[1]));
                    }
                } else {
                    for_each_slot(d, rw, epw, |e, slot| {
                        qt[slot * BLOCK_ROWS + r] = bytes[e] as i8 as f32
                    });
                }
                q_scale[r] = rounded.scale(first + r);
            }
        } else {
            // bf16 K: rounded as the dot-product instructions take them, the scale applied to
            // the scores (as the AMX tiles do).
            let bf16 = kv.dtype == KvDtype::Bf16;
            let mut values = vec![0.0f32; d];
            for (r, row) in rows.iter().enumerate() {
                let query = &q[row.q_offset..][..d];
                if bf16 {
                    round_row(simd, query, &mut values);
                } else {
                    values
                        .iter_mut()
                        .zip(query)
                        .for_each(|(v, &x)| *v = x * scale);
                }
                if self.bf16_scores {
                    // A word is the pair (2w, 2w + 1), the even element in the low half.
                    let bits = |e: usize| values.get(e).map_or(0, |x| x.to_bits());
                    for w in 0..rw {
                        self.q_words[w * BLOCK_ROWS + r] =
                            (bits(2 * w) >> 16) | (bits(2 * w + 1) & 0xffff_0000);
                    }
                    continue;
                }
                for_each_slot(d, rw, epw, |e, slot| qt[slot * BLOCK_ROWS + r] = values[e]);
            }
        }
        let position: &mut [f32] = bytemuck::cast_slice_mut(&mut self.position);
        let last = rows[rows.len() - 1].position;
        for (r, p) in position.iter_mut().enumerate() {
            // Positions up to 2^24 are exact in f32 (a context is far below).
            *p = rows.get(r).map_or(last, |row| row.position) as f32;
        }
    }

    /// `st[t] = q . k_t` for the tile's keys `k_rows` (as stored; `decoded.k` decoded), times
    /// 1/sqrt(head_dim) for bf16 K and the query and key scales for int8 K.
    #[inline(always)]
    fn scores(
        &mut self,
        simd: S,
        kv: KvHeadView<'_>,
        decoded: &DecodedTile,
        k_rows: &[u32],
        k0: usize,
        ntok: usize,
    ) {
        let rv = self.rv;
        let rw = kv.row_words;
        let k_scales = (!kv.k_scale.is_empty()).then(|| &kv.k_scale[k0..k0 + ntok]);
        let kernel = self.hardware_scores(decoded, k_rows, k_scales, rw, ntok);
        if kernel == ScoresKernel::None {
            self.st[..ntok * rv].fill(simd.splat_f32s(0.0));
            let keys = Broadcast {
                values: &decoded.k,
                k_stride: 1,
                col_stride: self.slots,
            };
            let st = &mut self.st[..ntok * rv];
            if self.dtype == KvDtype::Bf16 {
                product::<S, { Order::SPLIT_PAIRS }>(simd, &self.qt, keys, st, ntok, self.slots);
            } else {
                product::<S, { Order::SEQUENTIAL }>(simd, &self.qt, keys, st, ntok, self.slots);
            }
        }
        if self.dtype == KvDtype::Bf16 {
            let scale = simd.splat_f32s(1.0 / (kv.head_dim as f32).sqrt());
            for s in &mut self.st[..ntok * rv] {
                *s = simd.mul_f32s(*s, scale);
            }
        }
        if let Some(k_scales) = k_scales.filter(|_| kernel != ScoresKernel::Scaled) {
            // The integer score loop's `dot * (q_scale * k_scale)`, bit for bit.
            for (t, scores) in self.st[..ntok * rv].chunks_exact_mut(rv).enumerate() {
                let k_scale = simd.splat_f32s(k_scales[t]);
                for (s, &q_scale) in scores.iter_mut().zip(&self.q_scale) {
                    *s = simd.mul_f32s(*s, simd.mul_f32s(q_scale, k_scale));
                }
            }
        }
    }

    /// Causal mask: key `k0 + t` is -inf for the rows before it.
    #[inline(always)]
    fn mask(&mut self, simd: S, k0: usize, ntok: usize) {
        let rv = self.rv;
        let minus_inf = simd.splat_f32s(f32::NEG_INFINITY);
        for (t, scores) in self.st[..ntok * rv].chunks_exact_mut(rv).enumerate() {
            let key = simd.splat_f32s((k0 + t) as f32);
            for (s, &position) in scores.iter_mut().zip(&self.position) {
                *s = simd.select_f32s(simd.less_than_f32s(position, key), minus_inf, *s);
            }
        }
    }

    /// The online softmax update of every row over the tile: new max `m`, `st` turned into
    /// probabilities, `l` and the accumulators rescaled, int8 V's scales folded into `st`.
    #[inline(always)]
    fn softmax(&mut self, simd: S, kv: KvHeadView<'_>, k0: usize, ntok: usize) {
        let rv = self.rv;
        let minus_inf = simd.splat_f32s(f32::NEG_INFINITY);
        let zero = simd.splat_f32s(0.0);
        if k0 == 0 {
            self.s0.copy_from_slice(&self.st[..rv]);
        }
        let mut alpha = [simd.splat_f32s(1.0); BLOCK_ROWS];
        // Int8 V: the weights of its integers, `p * v_scale`, and each row's largest.
        let v_scales = (!kv.v_scale.is_empty()).then(|| &kv.v_scale[k0..k0 + ntok]);
        let mut largest = [zero; BLOCK_ROWS];
        for v in 0..rv {
            // Four running maxima: one would wait on each `vmaxps` before the next.
            let mut maxima = [minus_inf; 4];
            for t in 0..ntok {
                maxima[t % 4] = simd.max_f32s(maxima[t % 4], self.st[t * rv + v]);
            }
            let tile_max = simd.max_f32s(
                simd.max_f32s(maxima[0], maxima[1]),
                simd.max_f32s(maxima[2], maxima[3]),
            );
            let m_new = simd.max_f32s(self.m[v], tile_max);
            // A row that has seen nothing yet keeps m = -inf: subtracting 0 instead leaves its
            // scores at -inf, whose exp is exactly 0 (never -inf - -inf = NaN).
            let shift = simd.select_f32s(simd.equal_f32s(m_new, minus_inf), zero, m_new);
            alpha[v] = exp_nonpositive(simd, simd.sub_f32s(self.m[v], shift));
            let (mut tile_sum, mut row_largest) = (zero, zero);
            for t in 0..ntok {
                let mut p = exp_nonpositive(simd, simd.sub_f32s(self.st[t * rv + v], shift));
                if self.dtype == KvDtype::Bf16 {
                    // Summed as rounded, so that the weights stay normalized.
                    p = round_bf16(simd, p);
                }
                tile_sum = simd.add_f32s(tile_sum, p);
                if let Some(v_scales) = v_scales {
                    p = simd.mul_f32s(p, simd.splat_f32s(v_scales[t]));
                    row_largest = simd.max_f32s(row_largest, p);
                }
                self.st[t * rv + v] = p;
            }
            self.l[v] = simd.add_f32s(simd.mul_f32s(self.l[v], alpha[v]), tile_sum);
            self.m[v] = m_new;
            largest[v] = row_largest;
        }
        let alpha = &alpha[..rv];
        let factors: &[f32] = bytemuck::cast_slice(alpha);
        if factors.iter().any(|&a| a != 1.0) {
            for acc in self.ot.chunks_exact_mut(rv) {
                for (x, &a) in acc.iter_mut().zip(alpha) {
                    *x = simd.mul_f32s(*x, a);
                }
            }
        }
        if v_scales.is_some() {
            self.set_weight_steps(simd, &largest[..rv]);
        }
    }

    /// The scores on a dot-product kernel where the CPU has one for this cache (of the stored
    /// `k_rows`, or of `decoded`'s pairs; `vpdpbusd` scales them by the int8 `k_scales` too),
    /// written over the tile's `st`; which kernel ran.
    #[inline(always)]
    fn hardware_scores(
        &mut self,
        decoded: &DecodedTile,
        k_rows: &[u32],
        k_scales: Option<&[f32]>,
        rw: usize,
        ntok: usize,
    ) -> ScoresKernel {
        #[cfg(target_arch = "x86_64")]
        if self.int8_pair_scores {
            let keys = super::dots_avx512::Words {
                words: &decoded.k_pairs,
                k_stride: 1,
                col_stride: 2 * rw,
            };
            let st: &mut [f32] = bytemuck::cast_slice_mut(&mut self.st[..ntok * self.rv]);
            // SAFETY: `dots` comes from a kernel table, which proved the CPU has AVX2 and FMA.
            unsafe { super::dots_avx2::dot_int8_pairs(&self.q_words, keys, st, ntok, 2 * rw) };
            return ScoresKernel::Unscaled;
        }
        #[cfg(target_arch = "x86_64")]
        if self.bf16_scores || self.int8_scores {
            use super::dots_avx512::{Words, dot_bf16, dot_int8};
            let keys = Words {
                words: k_rows,
                k_stride: 1,
                col_stride: rw,
            };
            let st: &mut [f32] = bytemuck::cast_slice_mut(&mut self.st[..ntok * self.rv]);
            // SAFETY: `dots` comes from a kernel table, which proved the CPU has the features.
            unsafe {
                if self.bf16_scores {
                    st.fill(0.0);
                    dot_bf16(&self.q_words, keys, st, ntok, rw);
                    return ScoresKernel::Unscaled;
                }
                let q_scale: &[f32; BLOCK_ROWS] = bytemuck::cast_slice(&self.q_scale)
                    .try_into()
                    .expect("BLOCK_ROWS lanes");
                let k_scales = k_scales.expect("an int8 cache has key scales");
                let scales = (q_scale, k_scales);
                dot_int8(&self.q_words, &self.q_sums, scales, keys, st, ntok, rw);
                return ScoresKernel::Scaled;
            }
        }
        let _ = (decoded, k_rows, k_scales, rw, ntok);
        ScoresKernel::None
    }

    /// `ot += sum_t p[t] v_t` over the values of keys `k0 .. k0 + ntok` (`decoded.v` decoded
    /// where no pair kernel takes the shared pairs). bf16: in bf16 pairs of keys (the
    /// probabilities rounded already), an odd tile padded with a zero key; int8: in integers.
    #[inline(always)]
    fn accumulate<F: WordFormat>(
        &mut self,
        simd: S,
        kv: KvHeadView<'_>,
        decoded: &DecodedTile,
        k0: usize,
        ntok: usize,
    ) {
        let (rv, slots) = (self.rv, self.slots);
        let depth = ntok.next_multiple_of(2);
        self.st[ntok * rv..depth * rv].fill(simd.splat_f32s(0.0));
        #[cfg(target_arch = "x86_64")]
        if self.value_dots.int16() {
            self.pack_integer_weights(simd, depth);
            self.accumulate_int16_pairs(decoded, depth / 2);
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if self.value_dots == ValueDots::Bf16 {
            self.pack_probabilities(depth);
            self.accumulate_pairs(kv, k0, ntok);
            return;
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (kv, k0); // only the value pairs read the stored rows
        let values = |values| Broadcast::rows(values, slots);
        match self.dtype {
            KvDtype::F32 => {
                let st = &self.st[..ntok * rv];
                let v = values(&decoded.v);
                product::<S, { Order::SEQUENTIAL }>(simd, st, v, &mut self.ot, slots, ntok);
            }
            KvDtype::Int8 => self.accumulate_integers(simd, &decoded.v, ntok),
            KvDtype::Bf16 => {
                // The whole pairs from the shared tile, then an odd last key beside a zero key
                // (the shared tile's next row may be a key this block does not see): two calls
                // sum each output in the order of one.
                let whole = ntok & !1;
                let (st, v) = (&self.st[..whole * rv], values(&decoded.v));
                product::<S, { Order::ADJACENT_PAIRS }>(simd, st, v, &mut self.ot, slots, whole);
                if whole < ntok {
                    let (last, zero) = self.last_values.split_at_mut(slots);
                    last.copy_from_slice(&decoded.v[whole * slots..][..slots]);
                    zero.fill(0.0);
                    let (st, v) = (&self.st[whole * rv..depth * rv], values(&self.last_values));
                    product::<S, { Order::ADJACENT_PAIRS }>(simd, st, v, &mut self.ot, slots, 2);
                }
            }
        }
    }

    /// `vdpbf16ps` P V of a bf16 cache (`p_words` packed): its whole pairs of keys from the
    /// thread's shared value pairs, then an odd last key paired with a zero key. Two calls sum
    /// each output in the order of one.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn accumulate_pairs(&mut self, kv: KvHeadView<'_>, k0: usize, ntok: usize) {
        use super::dots_avx512::{Words, dot_bf16};
        use super::value_pairs::{pack_pair, with_pairs};
        let (slots, rw) = (self.slots, kv.row_words);
        let (first_pair, whole_pairs) = (k0 / 2, ntok / 2);
        let ot: &mut [f32] = bytemuck::cast_slice_mut(&mut self.ot);
        if whole_pairs > 0 {
            // SAFETY: `value_dots` comes from a kernel table, which proved the CPU has
            // AVX512-BF16 (and so AVX-512).
            unsafe {
                with_pairs(
                    self.values,
                    kv,
                    slots,
                    first_pair..first_pair + whole_pairs,
                    |pairs| {
                        let values = Words {
                            words: pairs,
                            k_stride: slots,
                            col_stride: 1,
                        };
                        dot_bf16(&self.p_words, values, ot, slots, whole_pairs)
                    },
                )
            };
        }
        if ntok % 2 == 1 {
            let last = &kv.v[(k0 + ntok - 1) * rw..][..rw];
            // SAFETY: as above.
            unsafe {
                pack_pair(last, None, &mut self.last_pair);
                let values = Words {
                    words: &self.last_pair,
                    k_stride: slots,
                    col_stride: 1,
                };
                let p_last = &self.p_words[whole_pairs * BLOCK_ROWS..];
                dot_bf16(p_last, values, ot, slots, 1);
            }
        }
    }

    /// `vdpbf16ps` P V: the tile's first `depth` (even) probabilities, bf16 already, as pairs of
    /// keys `(2i, 2i + 1)`, the even key in the low half.
    #[cfg(target_arch = "x86_64")]
    fn pack_probabilities(&mut self, depth: usize) {
        let st: &[f32] = bytemuck::cast_slice(&self.st[..depth * self.rv]);
        for (pair, keys) in self
            .p_words
            .chunks_exact_mut(BLOCK_ROWS)
            .zip(st.chunks_exact(2 * BLOCK_ROWS))
        {
            let (even, odd) = keys.split_at(BLOCK_ROWS);
            // SAFETY: only the `vdpbf16ps` path packs, on a CPU with AVX-512.
            unsafe { super::dots_avx512::pack_value_pairs(even, odd, pair) };
        }
    }

    fn finish(self, row_words: usize, elems_per_word: usize) -> BlockState {
        let lanes = |x: &[S::f32s]| -> [f32; BLOCK_ROWS] {
            let values: &[f32] = bytemuck::cast_slice(x);
            values.try_into().expect("BLOCK_ROWS lanes")
        };
        BlockState {
            m: lanes(&self.m),
            l: lanes(&self.l),
            s0: lanes(&self.s0),
            acc: bytemuck::cast_slice(&self.ot).to_vec(),
            row_words,
            elems_per_word,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimdLevel;
    use crate::attention::kv::KvLayer;
    use crate::attention::pseudo_random;
    use crate::dispatch::{cpu_features, run_at};

    /// Every combination of dot-product kernels this CPU has (a VNNI-only CPU uses `vpdpbusd`
    /// without `vdpbf16ps`, say; an AVX2 one `vpmaddwd`) gives the generic path's bits at its
    /// level, on a tile tail (odd keys) and a head dim that is not a multiple of the words'
    /// elements.
    #[test]
    fn every_combination_of_dot_kernels_gives_the_generic_bits() {
        let features = cpu_features();
        let mut cases = Vec::new();
        if SimdLevel::Avx2.is_supported() {
            let pairs = LaneDots {
                int8_pairs: true,
                ..LaneDots::default()
            };
            cases.push((SimdLevel::Avx2, pairs));
        }
        if SimdLevel::Avx512.is_supported() {
            for (bf16, int8, int8_pairs) in [
                (features.avx512_bf16, false, false),
                (false, features.avx512_vnni, false),
                (features.avx512_bf16, features.avx512_vnni, false),
                (features.avx512_bf16, false, true),
            ] {
                let dots = LaneDots {
                    bf16,
                    int8,
                    int8_pairs,
                };
                cases.push((SimdLevel::Avx512, dots));
            }
        }
        if cases.is_empty() {
            eprintln!("skipped: no AVX2 (the dot-product kernels are AVX2's and AVX-512's)");
            return;
        }
        for dtype in [KvDtype::Bf16, KvDtype::Int8] {
            for head_dim in [128usize, 72, 65] {
                let kv_len = 203;
                let mut layer = KvLayer::new(dtype, 1, head_dim).unwrap();
                layer.reserve(kv_len).unwrap();
                let k = pseudo_random(1, kv_len * head_dim, 1.0);
                let v = pseudo_random(2, kv_len * head_dim, 1.0);
                layer.append(&k, &v).unwrap();
                let q = pseudo_random(3, 5 * head_dim, 4.0);
                let rows: Vec<QueryRow> = (0..5)
                    .map(|t| QueryRow {
                        q_offset: t * head_dim,
                        position: kv_len - 5 + t,
                    })
                    .collect();
                let rounded = (dtype == KvDtype::Int8).then(|| {
                    let offsets = rows.iter().map(|r| r.q_offset);
                    let factor = 1.0 / (head_dim as f32).sqrt();
                    Int8Queries::new(&q, offsets, head_dim, layer.head(0).row_words, factor)
                });
                let run = |level: SimdLevel, dots: LaneDots| {
                    let block = LaneBlock {
                        kv: layer.head(0),
                        q: &q,
                        rows: &rows,
                        int8_queries: rounded.as_ref(),
                        dots,
                        values: ValuesKey::for_call()(0),
                        keys: 0..usize::MAX,
                    };
                    let state = &run_at(level, block)[0];
                    let mut acc = vec![0.0; head_dim];
                    let mut bits: Vec<u32> = Vec::new();
                    for r in 0..rows.len() {
                        state.gather_row(r, &mut acc);
                        bits.extend(acc.iter().map(|x| x.to_bits()));
                        bits.extend([state.m[r], state.l[r], state.s0[r]].map(f32::to_bits));
                    }
                    bits
                };
                for &(level, dots) in &cases {
                    let generic = run(level, LaneDots::default());
                    assert!(
                        run(level, dots) == generic,
                        "{dtype:?}, head_dim {head_dim}, {level:?}: {dots:?}"
                    );
                }
            }
        }
    }
}
