//! Blocking: a block of query rows (all query heads of one KV head, for one or more positions)
//! streams a range of keys of that KV head in tiles of `KEY_TILE`, keeping an online softmax per
//! row: running max `m`, running sum `l`, and the f32 accumulator rescaled whenever `m` grows.
//! Each K/V tile is loaded once for the whole block and stays in L1 while its rows use it.

#![allow(clippy::needless_range_loop)] // indexing small const-size register arrays reads clearest

use super::int8_queries::Int8Queries;
use super::kv::{KvDtype, KvHeadView};
use super::layout::{permute_scaled, permuted_len};
use super::microkernel::{
    WordFormat, accumulate_rows, dot_rows, exp_shifted_sum, max_of, scale_row, steps_per_key,
};
use super::prefetch::TilePrefetch;
use crate::dispatch::table::Int8Scores;
use pulp::Simd;
use std::ops::Range;

/// Keys per tile: 64 rows of K (16 KiB at head_dim 128 in bf16) plus as many of V fit in L1
/// beside the accumulators. A multiple of every lane count, so score rows need no tails.
pub(crate) const KEY_TILE: usize = 64;

/// The running softmax state of a block of rows after a key range, in the permuted slot order.
#[derive(Debug, Clone, Default)]
pub(crate) struct PartialRows {
    /// Slots per row in `acc`.
    pub row_len: usize,
    /// Lanes and elements per word of the permutation (for `layout::slot_of`).
    pub lanes: usize,
    pub elems_per_word: usize,
    pub m: Vec<f32>,
    pub l: Vec<f32>,
    /// Scaled score of key 0 (-inf if key 0 was not in the range).
    pub s0: Vec<f32>,
    /// `[rows, row_len]`, not yet divided by `l`.
    pub acc: Vec<f32>,
}

/// One query row: where its (unscaled) query vector starts in `q`, and its absolute position.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueryRow {
    pub q_offset: usize,
    pub position: usize,
}

/// The buffers of [`attend_range`], kept by the caller so that a decode allocates nothing once
/// they have grown to its rows: the result, and the working state beside it.
#[derive(Debug, Clone, Default)]
pub(crate) struct TileScratch {
    /// The result: the rows' softmax state after the key range.
    pub partial: PartialRows,
    /// `[rows, row_len]`: the permuted, scaled queries (as the `S::f32s` words of the kernel).
    q: Vec<f32>,
    position: Vec<usize>,
    p: Vec<f32>,
    visible: Vec<usize>,
    /// One query row in f32 after its int8 rounding.
    rounded: Vec<f32>,
    int8_queries: Int8Queries,
}

struct Block<'s, S: Simd> {
    row_len_vecs: usize,
    q: &'s mut [S::f32s],
    acc: &'s mut [S::f32s],
    position: Vec<usize>,
    m: Vec<f32>,
    l: Vec<f32>,
    s0: Vec<f32>,
    /// `[rows, KEY_TILE]`: scores, then probabilities, of the current tile.
    p: Vec<f32>,
    /// Visible keys of each row in the current tile.
    visible: Vec<usize>,
    /// Int8 K: the queries rounded to int8 (`q` holds their integers, for the f32 path).
    int8_queries: Option<Int8Queries>,
    /// Int8 K where the kernel table has an integer score loop (`int8_queries::scores_vnni`).
    int8_scores: Option<Int8Scores>,
}

/// The first `len` values of `buffer` set to `value` (grown if shorter; never shrunk).
fn filled<T: Copy>(buffer: &mut Vec<T>, len: usize, value: T) -> &mut [T] {
    buffer.clear();
    buffer.resize(len, value);
    &mut buffer[..]
}

/// Runs the online softmax of `rows` over keys `keys` of one KV head into `scratch.partial`
/// (`int8_scores`: the kernel table's integer score loop, for int8 K only).
#[inline(always)]
pub(crate) fn attend_range<S: Simd, F: WordFormat>(
    simd: S,
    kv: KvHeadView<'_>,
    q: &[f32],
    rows: &[QueryRow],
    keys: Range<usize>,
    int8_scores: Option<Int8Scores>,
    scratch: &mut TileScratch,
) {
    let lanes = S::F32_LANES;
    let row_len = permuted_len(kv.row_words, F::ELEMS, lanes);
    let vecs = row_len / lanes;
    let scale = 1.0 / (kv.head_dim as f32).sqrt();
    let TileScratch {
        partial,
        q: q_buffer,
        position,
        p,
        visible,
        rounded,
        int8_queries,
    } = scratch;
    let int8 = kv.dtype == KvDtype::Int8;
    if int8 {
        let offsets = rows.iter().map(|row| row.q_offset);
        int8_queries.fill(q, offsets, kv.head_dim, kv.row_words, scale);
    }
    position.clear();
    position.extend(rows.iter().map(|r| r.position));
    let mut block = Block::<S> {
        row_len_vecs: vecs,
        q: bytemuck::cast_slice_mut(filled(q_buffer, rows.len() * row_len, 0.0)),
        acc: bytemuck::cast_slice_mut(filled(&mut partial.acc, rows.len() * row_len, 0.0)),
        position: std::mem::take(position),
        m: std::mem::take(&mut partial.m),
        l: std::mem::take(&mut partial.l),
        s0: std::mem::take(&mut partial.s0),
        p: std::mem::take(p),
        visible: std::mem::take(visible),
        int8_queries: int8.then(|| std::mem::take(int8_queries)),
        int8_scores,
    };
    filled(&mut block.m, rows.len(), f32::NEG_INFINITY);
    filled(&mut block.l, rows.len(), 0.0);
    filled(&mut block.s0, rows.len(), f32::NEG_INFINITY);
    filled(&mut block.p, rows.len() * KEY_TILE, 0.0);
    filled(&mut block.visible, rows.len(), 0);
    filled(rounded, kv.head_dim, 0.0);
    for (r, row) in rows.iter().enumerate() {
        let dst: &mut [f32] = bytemuck::cast_slice_mut(&mut block.q[r * vecs..][..vecs]);
        match &block.int8_queries {
            Some(queries) => {
                queries.integer_row(r, rounded);
                permute_scaled(rounded, 1.0, F::ELEMS, lanes, dst);
            }
            None => permute_scaled(
                &q[row.q_offset..][..kv.head_dim],
                scale,
                F::ELEMS,
                lanes,
                dst,
            ),
        }
    }
    let mut k0 = keys.start;
    while k0 < keys.end {
        let ntok = KEY_TILE.min(keys.end - k0);
        block.tile::<F>(simd, kv, k0, ntok);
        k0 += ntok;
    }
    // The working buffers go back to the scratch for the next call.
    *position = block.position;
    *p = block.p;
    *visible = block.visible;
    if let Some(queries) = block.int8_queries {
        *int8_queries = queries;
    }
    partial.row_len = row_len;
    partial.lanes = lanes;
    partial.elems_per_word = F::ELEMS;
    partial.m = block.m;
    partial.l = block.l;
    partial.s0 = block.s0;
}

/// Splits `rows` rows into register-blocked chunks of 4, 2 and 1 and calls `$body` with a
/// const `R` for each: `$body!(start, R)`.
macro_rules! for_row_chunks {
    ($rows:expr, |$start:ident, $r:ident| $body:block) => {{
        let mut $start = 0usize;
        while $start < $rows {
            let left = $rows - $start;
            if left >= 4 {
                const $r: usize = 4;
                $body;
                $start += 4;
            } else if left >= 2 {
                const $r: usize = 2;
                $body;
                $start += 2;
            } else {
                const $r: usize = 1;
                $body;
                $start += 1;
            }
        }
    }};
}

impl<S: Simd> Block<'_, S> {
    /// Scores of rows `start .. start + R` against keys `k0 .. k0 + ntok` into `p`, in f32:
    /// each key row decoded once for the R rows.
    #[inline(always)]
    fn scores_f32<F: WordFormat, const R: usize>(
        &mut self,
        simd: S,
        kv: KvHeadView<'_>,
        start: usize,
        k0: usize,
        ntok: usize,
    ) {
        let (vecs, rw) = (self.row_len_vecs, kv.row_words);
        let q: [&[S::f32s]; R] = core::array::from_fn(|r| &self.q[(start + r) * vecs..][..vecs]);
        // Int8 K: `q` holds the rounded queries' integers, so the dots are exact integers and the
        // score is the integer score loop's `dot * (q_scale * k_scale)`, bit for bit.
        let q_scale: [f32; R] = core::array::from_fn(|r| match &self.int8_queries {
            Some(queries) => queries.scale(start + r),
            None => 1.0,
        });
        for t in 0..ntok {
            let key = k0 + t;
            let dots = dot_rows::<S, F, R>(simd, q, &kv.k[key * rw..][..rw]);
            let k_scale = if kv.k_scale.is_empty() {
                1.0
            } else {
                kv.k_scale[key]
            };
            for r in 0..R {
                self.p[(start + r) * KEY_TILE + t] = dots[r] * (q_scale[r] * k_scale);
            }
        }
    }

    /// Keys `k0 .. k0 + ntok`: scores, online-softmax update, then the V accumulation.
    #[inline(always)]
    fn tile<F: WordFormat>(&mut self, simd: S, kv: KvHeadView<'_>, k0: usize, ntok: usize) {
        let rows = self.m.len();
        let vecs = self.row_len_vecs;
        let rw = kv.row_words;
        for (vis, &pos) in self.visible.iter_mut().zip(&self.position) {
            *vis = (pos + 1).saturating_sub(k0).min(ntok);
        }

        for_row_chunks!(rows, |start, R| {
            let chunk_visible = self.visible[start..start + R]
                .iter()
                .copied()
                .max()
                .unwrap_or(0);
            match (self.int8_queries.as_ref(), self.int8_scores) {
                // SAFETY: the queries were rounded for this head's rows; the keys are cached
                // (< kv.len), the rows exist, p is [rows, KEY_TILE].
                (Some(queries), Some(scores)) => unsafe {
                    scores.run(
                        queries,
                        start,
                        R,
                        kv,
                        k0,
                        chunk_visible,
                        &mut self.p,
                        KEY_TILE,
                    )
                },
                _ => self.scores_f32::<F, R>(simd, kv, start, k0, chunk_visible),
            }
        });

        for r in 0..rows {
            let p = &mut self.p[r * KEY_TILE..][..KEY_TILE];
            let vis = self.visible[r];
            // Masked and past-the-range slots become -inf: exp gives them exactly 0.
            p[vis..].iter_mut().for_each(|x| *x = f32::NEG_INFINITY);
            let tile_max = max_of(simd, p);
            if tile_max == f32::NEG_INFINITY {
                // Nothing visible (or every score -inf): this tile adds nothing to the row.
                p.iter_mut().for_each(|x| *x = 0.0);
                continue;
            }
            if k0 == 0 {
                self.s0[r] = p[0];
            }
            let m_new = self.m[r].max(tile_max);
            if m_new > self.m[r] {
                // exp(-inf) = 0 on the first tile: the empty accumulator is simply reset.
                let alpha = (self.m[r] - m_new).exp();
                self.l[r] *= alpha;
                scale_row(simd, &mut self.acc[r * vecs..][..vecs], alpha);
                self.m[r] = m_new;
            }
            self.l[r] += exp_shifted_sum(simd, p, m_new);
            if !kv.v_scale.is_empty() {
                for (x, s) in p[..vis].iter_mut().zip(&kv.v_scale[k0..k0 + vis]) {
                    *x *= s;
                }
            }
        }

        let values = &kv.v[k0 * rw..(k0 + ntok) * rw];
        for_row_chunks!(rows, |start, R| {
            let chunk_visible = self.visible[start..start + R]
                .iter()
                .copied()
                .max()
                .unwrap_or(0);
            if chunk_visible > 0 {
                let mut acc_rows =
                    self.acc[start * vecs..(start + R) * vecs].chunks_exact_mut(vecs);
                let acc: [&mut [S::f32s]; R] =
                    core::array::from_fn(|_| acc_rows.next().expect("R rows"));
                let p: [&[f32]; R] =
                    core::array::from_fn(|r| &self.p[(start + r) * KEY_TILE..][..KEY_TILE]);
                // The first chunk's V sums also ask for the next tile's rows (see `prefetch`).
                let steps = steps_per_key::<S, F, R>(rw) * chunk_visible;
                let mut next_tile = (start == 0)
                    .then(|| TilePrefetch::new(kv, k0 + KEY_TILE, KEY_TILE, steps))
                    .flatten();
                accumulate_rows::<S, F, R>(
                    simd,
                    acc,
                    p,
                    values,
                    rw,
                    chunk_visible,
                    next_tile.as_mut(),
                );
            }
        });
    }
}
