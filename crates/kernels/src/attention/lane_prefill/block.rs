//! One block of lane prefill: up to [`BLOCK_ROWS`] query rows of one KV head, row `r` in lane
//! `r % L` of register `r / L`, streaming the head's keys in tiles of [`KEY_TILE`]. Per tile: the
//! stored K and V rows are decoded to f32 once for all rows, `S^T = K Q^T` and `O^T += V^T P^T`
//! run on the lane microkernel, and the online softmax between them works on whole registers
//! (a max over keys is a vector max, never a horizontal reduction).
//!
//! Element order: a stored row of `row_words` words of `E` elements is decoded to "slots", slot
//! `j * row_words + w` holding element `E * w + j` (sub-vector `j` of a word block lands on
//! consecutive slots, at any width). The queries are laid out in the same slots, so the dot
//! products sum over slots in that one order at every level.

#![allow(clippy::needless_range_loop)] // one register of each per-row array at a time reads clearest

use pulp::{Simd, WithSimd};

use super::product::{Broadcast, product};
use crate::attention::int8_queries::Int8Queries;
use crate::attention::kv::{KvDtype, KvHeadView};
use crate::attention::microkernel::{Bf16Words, F32Words, Int8Words, WordFormat, load_block};
use crate::attention::tile::QueryRow;
use crate::simd_math::exp_nonpositive;

/// Query rows per block (32 = 4 AVX2 or 2 AVX-512 registers: every lane count divides it).
pub(super) const BLOCK_ROWS: usize = 32;
/// Keys per tile: the tile's decoded K and V (32 KiB each at head_dim 128) stay in L2, and the
/// queries (16 KiB) and the tile's scores (8 KiB) in L1 while the microkernel reads them.
const KEY_TILE: usize = 64;

/// A block's rows against the keys they see (`0 ..= position` for each row), to run with
/// [`crate::dispatch::run_at`].
pub(super) struct LaneBlock<'a> {
    pub kv: KvHeadView<'a>,
    /// `[.., head_dim]` rows after q_norm and RoPE, unscaled.
    pub q: &'a [f32],
    /// At most [`BLOCK_ROWS`], at least one.
    pub rows: &'a [QueryRow],
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
    /// Row `r`'s accumulator in element order (`dst.len()` = head_dim).
    pub(super) fn gather_row(&self, r: usize, dst: &mut [f32]) {
        let (rw, epw) = (self.row_words, self.elems_per_word);
        for (e, x) in dst.iter_mut().enumerate() {
            *x = self.acc[slot(e, rw, epw) * BLOCK_ROWS + r];
        }
    }
}

/// The slot of element `e` (see the module doc).
fn slot(e: usize, row_words: usize, elems_per_word: usize) -> usize {
    (e % elems_per_word) * row_words + e / elems_per_word
}

impl WithSimd for LaneBlock<'_> {
    type Output = BlockState;

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> BlockState {
        match self.kv.dtype {
            KvDtype::F32 => run::<S, F32Words>(simd, self),
            KvDtype::Bf16 => run::<S, Bf16Words>(simd, self),
            KvDtype::Int8 => run::<S, Int8Words>(simd, self),
        }
    }
}

/// The block's working set: the operands and accumulators of the microkernel as registers of
/// `rv = BLOCK_ROWS / L` lanes each.
struct Lanes<S: Simd> {
    rv: usize,
    slots: usize,
    /// `[slot][rv]`: the queries (scaled by 1/sqrt(head_dim); int8 K: their integers).
    qt: Vec<S::f32s>,
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
    /// `[key][slot]`: the tile's K and V rows in f32 (int8: the stored integers).
    k_tile: Vec<f32>,
    v_tile: Vec<f32>,
}

#[inline(always)]
fn run<S: Simd, F: WordFormat>(simd: S, block: LaneBlock<'_>) -> BlockState {
    let LaneBlock { kv, q, rows } = block;
    assert!(!rows.is_empty() && rows.len() <= BLOCK_ROWS);
    let lanes = S::F32_LANES;
    let rv = BLOCK_ROWS / lanes;
    let rw = kv.row_words;
    let slots = F::ELEMS * rw;
    let zero = simd.splat_f32s(0.0);
    let mut state = Lanes::<S> {
        rv,
        slots,
        qt: vec![zero; slots * rv],
        q_scale: vec![simd.splat_f32s(1.0); rv],
        position: vec![zero; rv],
        m: vec![simd.splat_f32s(f32::NEG_INFINITY); rv],
        l: vec![zero; rv],
        s0: vec![simd.splat_f32s(f32::NEG_INFINITY); rv],
        st: vec![zero; KEY_TILE * rv],
        ot: vec![zero; slots * rv],
        k_tile: vec![0.0; KEY_TILE * slots],
        v_tile: vec![0.0; KEY_TILE * slots],
    };
    state.load_queries(kv, q, rows);
    let first = rows.iter().map(|r| r.position).min().expect("rows");
    let key_end = rows.iter().map(|r| r.position).max().expect("rows") + 1;
    let mut k0 = 0;
    while k0 < key_end {
        let ntok = KEY_TILE.min(key_end - k0);
        decode_rows::<S, F>(
            simd,
            &kv.k[k0 * rw..(k0 + ntok) * rw],
            rw,
            &mut state.k_tile,
        );
        decode_rows::<S, F>(
            simd,
            &kv.v[k0 * rw..(k0 + ntok) * rw],
            rw,
            &mut state.v_tile,
        );
        state.scores(simd, kv, k0, ntok);
        if k0 + ntok > first + 1 {
            state.mask(simd, k0, ntok);
        }
        state.softmax(simd, kv, k0, ntok);
        state.accumulate(simd, ntok);
        k0 += ntok;
    }
    state.finish(rw, F::ELEMS)
}

/// Decodes whole stored rows (`rows.len()` a multiple of `row_words`) into `dst`, row `t` at
/// `t * slots`, in slot order.
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
                let values = F::decode(simd, words, j);
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

impl<S: Simd> Lanes<S> {
    /// The rows' queries into `qt` (and int8 K: their scales), their positions; lanes past the
    /// rows get zero queries at the last row's position.
    fn load_queries(&mut self, kv: KvHeadView<'_>, q: &[f32], rows: &[QueryRow]) {
        let (d, rw) = (kv.head_dim, kv.row_words);
        let epw = self.slots / rw;
        let scale = 1.0 / (d as f32).sqrt();
        let qt: &mut [f32] = bytemuck::cast_slice_mut(&mut self.qt);
        if kv.dtype == KvDtype::Int8 {
            // Against int8 K the queries are rounded to int8 too: their integers here, the
            // scale applied to the (exact) integer dot products.
            let mut rounded = Int8Queries::default();
            rounded.fill(q, rows.iter().map(|r| r.q_offset), d, rw, scale);
            let mut integers = vec![0.0f32; d];
            let q_scale: &mut [f32] = bytemuck::cast_slice_mut(&mut self.q_scale);
            for r in 0..rows.len() {
                rounded.integer_row(r, &mut integers);
                for (e, &x) in integers.iter().enumerate() {
                    qt[slot(e, rw, epw) * BLOCK_ROWS + r] = x;
                }
                q_scale[r] = rounded.scale(r);
            }
        } else {
            for (r, row) in rows.iter().enumerate() {
                for (e, &x) in q[row.q_offset..][..d].iter().enumerate() {
                    qt[slot(e, rw, epw) * BLOCK_ROWS + r] = x * scale;
                }
            }
        }
        let position: &mut [f32] = bytemuck::cast_slice_mut(&mut self.position);
        let last = rows[rows.len() - 1].position;
        for (r, p) in position.iter_mut().enumerate() {
            // Positions up to 2^24 are exact in f32 (a context is far below).
            *p = rows.get(r).map_or(last, |row| row.position) as f32;
        }
    }

    /// `st[t] = q . k_t` for the tile's keys (int8: times the query and key scales).
    #[inline(always)]
    fn scores(&mut self, simd: S, kv: KvHeadView<'_>, k0: usize, ntok: usize) {
        let rv = self.rv;
        let st = &mut self.st[..ntok * rv];
        st.fill(simd.splat_f32s(0.0));
        let keys = Broadcast {
            values: &self.k_tile,
            k_stride: 1,
            col_stride: self.slots,
        };
        product::<S>(simd, &self.qt, keys, st, ntok, self.slots);
        if !kv.k_scale.is_empty() {
            // The integer score loop's `dot * (q_scale * k_scale)`, bit for bit.
            for (t, scores) in st.chunks_exact_mut(rv).enumerate() {
                let k_scale = simd.splat_f32s(kv.k_scale[k0 + t]);
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
        for v in 0..rv {
            let mut tile_max = minus_inf;
            for t in 0..ntok {
                tile_max = simd.max_f32s(tile_max, self.st[t * rv + v]);
            }
            let m_new = simd.max_f32s(self.m[v], tile_max);
            // A row that has seen nothing yet keeps m = -inf: subtracting 0 instead leaves its
            // scores at -inf, whose exp is exactly 0 (never -inf - -inf = NaN).
            let shift = simd.select_f32s(simd.equal_f32s(m_new, minus_inf), zero, m_new);
            alpha[v] = exp_nonpositive(simd, simd.sub_f32s(self.m[v], shift));
            let mut tile_sum = zero;
            for t in 0..ntok {
                let p = exp_nonpositive(simd, simd.sub_f32s(self.st[t * rv + v], shift));
                self.st[t * rv + v] = p;
                tile_sum = simd.add_f32s(tile_sum, p);
            }
            self.l[v] = simd.add_f32s(simd.mul_f32s(self.l[v], alpha[v]), tile_sum);
            self.m[v] = m_new;
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
        if !kv.v_scale.is_empty() {
            for (t, p) in self.st[..ntok * rv].chunks_exact_mut(rv).enumerate() {
                let v_scale = simd.splat_f32s(kv.v_scale[k0 + t]);
                for x in p.iter_mut() {
                    *x = simd.mul_f32s(*x, v_scale);
                }
            }
        }
    }

    /// `ot += sum_t p[t] v_t` over the tile.
    #[inline(always)]
    fn accumulate(&mut self, simd: S, ntok: usize) {
        let values = Broadcast {
            values: &self.v_tile,
            k_stride: self.slots,
            col_stride: 1,
        };
        product::<S>(
            simd,
            &self.st[..ntok * self.rv],
            values,
            &mut self.ot,
            self.slots,
            ntok,
        );
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
