//! One work item of AMX prefill: a block of query rows of one KV head streaming its keys.

use super::tiles::{
    self, Int8TileScales, KEY_GROUP, PvOrder, RawScores, SoftmaxLanes, TILE, TILE_WORDS,
};
use super::{DIM_CHUNK, INT8_DIM_CHUNK};
use crate::aligned::LineVec;
use crate::attention::int8_queries::Int8Queries;
use crate::attention::kv::{KvDtype, KvHeadView};
use crate::attention::prefetch::TilePrefetch;
use crate::matmul::amx::tiles::Tiles;

/// Keys per step: the scores of a pair of query tiles over a step (8 KiB) and the step's packed
/// V (16 KiB at head_dim 128) stay in L1 beside the pair's accumulators.
const KEY_STEP: usize = 64;
/// Pairs of query tiles from which a block transposes V rather than the probabilities
/// (`PvOrder::DimRows`): V's transposes are the same whatever the pairs, the probabilities'
/// grow with them (docs/performance.md has the crossing).
const DIM_ROWS_MIN_PAIRS: usize = 8;

/// A block's query rows as the kernel gets them.
pub(super) enum BlockQueries<'q> {
    /// For a bf16 cache: f32 rows, rounded to bf16 as they are packed.
    Bf16(Vec<&'q [f32]>),
    /// For an int8 cache: the rows already rounded to int8 (times `1 / sqrt(head_dim)`).
    Int8(&'q Int8Queries),
}

/// One work item: a block of query rows of one KV head, and its softmax state.
pub(super) struct Block<'a> {
    kv: KvHeadView<'a>,
    /// Query tiles, even (padding rows are zero queries at the last row's position).
    query_tiles: usize,
    /// Dim chunks of a query tile: one tile of 64 bytes a row each (32 bf16 or 64 int8 dims).
    chunks: usize,
    /// `[tile][dim chunk][pair][query]` bf16 pairs, or `[tile][dim chunk][group][query]` 4 int8.
    queries: LineVec<u32>,
    /// Int8 cache: per query tile, the scales and bias corrections of its rows; else empty.
    int8: Vec<Int8TileScales>,
    position: Vec<[i32; TILE]>,
    /// Past the last key any row of the block sees.
    key_end: usize,
    m: Vec<[f32; TILE]>,
    l: Vec<[f32; TILE]>,
    s0: Vec<[f32; TILE]>,
    /// `[tile][dim tile][dim][query]` (`DimRows`) or `[..][query][dim]`, not yet divided by `l`.
    acc: LineVec<f32>,
    order: PvOrder,
}

/// The final state of a block, row by row.
pub(super) struct BlockState {
    head_dim: usize,
    pub m: Vec<f32>,
    pub l: Vec<f32>,
    pub s0: Vec<f32>,
    acc: LineVec<f32>,
    order: PvOrder,
}

impl BlockState {
    /// Row `r`'s accumulator in dim order.
    pub(super) fn gather_row(&self, r: usize, dst: &mut [f32]) {
        let (tile, i) = (r / TILE, r % TILE);
        let tile_acc = &self.acc[tile * self.head_dim * TILE..][..self.head_dim * TILE];
        match self.order {
            // Lane i of each row (one dim) of the tile's accumulators.
            PvOrder::DimRows => {
                for (x, row) in dst.iter_mut().zip(tile_acc.chunks_exact(TILE)) {
                    *x = row[i];
                }
            }
            // Row i of each dim tile.
            PvOrder::QueryRows => {
                for (chunk, dims) in dst
                    .chunks_exact_mut(TILE)
                    .zip(tile_acc.chunks_exact(TILE_WORDS))
                {
                    chunk.copy_from_slice(&dims[i * TILE..][..TILE]);
                }
            }
        }
    }
}

impl<'a> Block<'a> {
    pub(super) fn new(
        kv: KvHeadView<'a>,
        queries: BlockQueries<'_>,
        positions: impl ExactSizeIterator<Item = usize>,
    ) -> Block<'a> {
        let d = kv.head_dim;
        let rows = positions.len();
        let query_tiles = rows.div_ceil(TILE).next_multiple_of(2);
        let positions: Vec<usize> = positions.collect();
        let last = *positions.last().expect("a block has rows");
        let position: Vec<[i32; TILE]> = (0..query_tiles)
            .map(|tile| {
                core::array::from_fn(|i| *positions.get(tile * TILE + i).unwrap_or(&last) as i32)
            })
            .collect();
        let chunks = match queries {
            BlockQueries::Bf16(_) => d / DIM_CHUNK,
            BlockQueries::Int8(_) => d / INT8_DIM_CHUNK,
        };
        let mut packed = LineVec::default();
        packed.reset(query_tiles * chunks * TILE_WORDS);
        let mut int8 = Vec::new();
        for (tile, dst) in packed.chunks_exact_mut(chunks * TILE_WORDS).enumerate() {
            let row = |i: usize| Some(tile * TILE + i).filter(|&r| r < rows);
            match &queries {
                BlockQueries::Bf16(rows_q) => {
                    let tile_rows = core::array::from_fn(|i| row(i).map(|r| rows_q[r]));
                    // SAFETY: AVX512-BF16 is present wherever AMX is (`prefill_uses_amx_tiles`).
                    unsafe { tiles::pack_queries(&tile_rows, d, dst) };
                }
                BlockQueries::Int8(rounded) => {
                    let tile_rows = core::array::from_fn(|i| row(i).map(|r| rounded.row(r)));
                    // SAFETY: AVX-512 is present wherever AMX is.
                    unsafe { tiles::pack_int8_queries(&tile_rows, d, dst) };
                    // Padding rows: zero bytes, scale and bias, so zero scores.
                    let mut scales = Int8TileScales::default();
                    for (i, r) in (0..TILE).filter_map(|i| row(i).map(|r| (i, r))) {
                        scales.scale[i] = rounded.scale(r);
                        scales.bias[i] = rounded.bias_correction(r);
                    }
                    int8.push(scales);
                }
            }
        }
        let mut acc = LineVec::default();
        acc.reset(query_tiles * d / TILE * TILE_WORDS);
        let order = if query_tiles / 2 >= DIM_ROWS_MIN_PAIRS {
            PvOrder::DimRows
        } else {
            PvOrder::QueryRows
        };
        Block {
            kv,
            query_tiles,
            chunks,
            queries: packed,
            int8,
            key_end: positions.iter().max().map_or(0, |&p| p + 1),
            position,
            m: vec![[f32::NEG_INFINITY; TILE]; query_tiles],
            l: vec![[0.0; TILE]; query_tiles],
            s0: vec![[f32::NEG_INFINITY; TILE]; query_tiles],
            acc,
            order,
        }
    }

    /// The block with `P V` in `order` whatever its size (tests of both orders).
    #[cfg(test)]
    fn with_order(self, order: PvOrder) -> Block<'a> {
        Block { order, ..self }
    }

    pub(super) fn run(mut self) -> BlockState {
        let d = self.kv.head_dim;
        let simd = pulp::x86::V4::try_new().expect("AVX-512 is present where AMX is");
        // SAFETY: `prefill_uses_amx_tiles` checked that AMX is usable by this process.
        let tiles = unsafe { Tiles::configure() };
        let mut values = LineVec::<u32>::default();
        values.reset(KEY_STEP / KEY_GROUP * d / TILE * TILE_WORDS);
        let mut scores = LineVec::<f32>::default();
        scores.reset(2 * KEY_STEP * TILE);
        let mut probs = LineVec::<u32>::default();
        probs.reset(2 * KEY_STEP / KEY_GROUP * TILE_WORDS);
        let mut tail_keys = LineVec::<u32>::default();
        let mut step_scales = StepScales::default();

        let pair_max: Vec<usize> = (0..self.query_tiles / 2)
            .map(|pair| {
                let last = |t: usize| *self.position[t].iter().max().expect("16 lanes") as usize;
                last(2 * pair).max(last(2 * pair + 1))
            })
            .collect();
        for k0 in (0..self.key_end).step_by(KEY_STEP) {
            let step_keys = KEY_STEP.min(self.key_end - k0);
            self.pack_values(k0, step_keys, &mut values);
            step_scales.fill(&self.kv, k0, step_keys);
            let (keys, stride) = self.key_rows(k0, &mut tail_keys);
            // The next step's K and V lines, a share before each pair's products: the rows
            // stream from memory (an item reads its KV head once), and without the hint each
            // step's first touch of them stalled.
            let pairs = pair_max.iter().filter(|&&p| p >= k0).count().max(1);
            let mut ahead = TilePrefetch::new(self.kv, k0 + KEY_STEP, KEY_STEP, 0);
            let lines_per_pair = (KEY_STEP * self.kv.row_words.div_ceil(16)).div_ceil(pairs);
            for (pair, &max_position) in pair_max.iter().enumerate() {
                if max_position < k0 {
                    continue;
                }
                if let Some(ahead) = ahead.as_mut() {
                    (0..lines_per_pair).for_each(|_| ahead.tick());
                }
                let groups = (max_position + 1 - k0).min(KEY_STEP).div_ceil(KEY_GROUP);
                self.pair_step(
                    simd,
                    &tiles,
                    pair,
                    k0,
                    groups,
                    keys,
                    stride,
                    &values,
                    &step_scales,
                    &mut scores,
                    &mut probs,
                );
            }
        }
        let flat = |v: Vec<[f32; TILE]>| v.into_iter().flatten().collect();
        BlockState {
            head_dim: d,
            m: flat(self.m),
            l: flat(self.l),
            s0: flat(self.s0),
            acc: self.acc,
            order: self.order,
        }
    }

    /// Where the key rows `k0 .. k0 + KEY_STEP` start, and their stride in bytes: in the cache,
    /// or (at its end) copied into `tail`, zero-padded, so tile loads stay inside the buffer.
    fn key_rows(&self, k0: usize, tail: &mut LineVec<u32>) -> (*const u8, usize) {
        let rw = self.kv.row_words;
        if k0 + KEY_STEP <= self.kv.len {
            return (self.kv.k[k0 * rw..].as_ptr().cast(), rw * 4);
        }
        tail.reset(KEY_STEP * rw);
        let live = self.kv.len - k0;
        tail[..live * rw].copy_from_slice(&self.kv.k[k0 * rw..self.kv.len * rw]);
        (tail.as_ptr().cast(), rw * 4)
    }

    /// V rows `k0 .. k0 + step_keys` (zero after) packed for `P V`.
    fn pack_values(&self, k0: usize, step_keys: usize, dst: &mut [u32]) {
        let (d, rw) = (self.kv.head_dim, self.kv.row_words);
        let group_words = d / TILE * TILE_WORDS;
        for (g, dst) in dst.chunks_exact_mut(group_words).enumerate() {
            let rows: [Option<&[u32]>; KEY_GROUP] = core::array::from_fn(|t| {
                let key = g * KEY_GROUP + t;
                (key < step_keys).then(|| &self.kv.v[(k0 + key) * rw..][..rw])
            });
            // SAFETY: AVX-512 BW is present wherever AMX is.
            unsafe {
                match self.kv.dtype {
                    KvDtype::Int8 => tiles::pack_int8_values(&rows, d, dst, self.order),
                    _ => tiles::pack_values(&rows, d, dst, self.order),
                }
            };
        }
    }

    /// Query tiles `2 pair`, `2 pair + 1` against `groups` key groups from `k0`.
    #[allow(
        clippy::too_many_arguments,
        reason = "an AMX block step: tile buffers and strides, passed in registers"
    )]
    fn pair_step(
        &mut self,
        simd: pulp::x86::V4,
        tiles: &Tiles,
        pair: usize,
        k0: usize,
        groups: usize,
        keys: *const u8,
        stride: usize,
        values: &[u32],
        step_scales: &StepScales,
        scores: &mut [f32],
        probs: &mut [u32],
    ) {
        let d = self.kv.head_dim;
        let chunks = self.chunks;
        let int8 = !self.int8.is_empty();
        let dim_tiles = d / TILE;
        let (ta, tb) = (2 * pair, 2 * pair + 1);
        let q_tile = |t: usize| {
            self.queries[t * chunks * TILE_WORDS..]
                .as_ptr()
                .cast::<u8>()
        };
        let (sa, sb) = scores.split_at_mut(KEY_STEP * TILE);
        for g in 0..groups {
            let k = keys.wrapping_add(g * KEY_GROUP * stride);
            let (qa, qb) = (q_tile(ta), q_tile(tb));
            let out_a = sa[g * KEY_GROUP * TILE..].as_mut_ptr().cast();
            let out_b = sb[g * KEY_GROUP * TILE..].as_mut_ptr().cast();
            // SAFETY: key rows k0 + 32g .. + 32 are inside `keys` (a whole step); the query
            // tiles hold `chunks` tiles; the scores hold KEY_STEP rows per tile.
            unsafe {
                if int8 {
                    tiles::scores_32x32::<true>(tiles, k, stride, qa, qb, chunks, out_a, out_b)
                } else {
                    tiles::scores_32x32::<false>(tiles, k, stride, qa, qb, chunks, out_a, out_b)
                }
            };
        }
        let acc_words = dim_tiles * TILE_WORDS;
        let prob_words = KEY_STEP / KEY_GROUP * TILE_WORDS;
        let scale = 1.0 / (d as f32).sqrt();
        for (t, s, p) in [(ta, sa, 0), (tb, sb, 1)] {
            let state = SoftmaxLanes {
                m: &mut self.m[t],
                l: &mut self.l[t],
                s0: &mut self.s0[t],
                position: &self.position[t],
            };
            let raw = match self.int8.get(t) {
                None => RawScores::Bf16 { sums: s, scale },
                Some(queries) => RawScores::Int8 {
                    sums: bytemuck::cast_slice_mut(s),
                    queries,
                    k_scale: &step_scales.k,
                    v_scale: &step_scales.v,
                },
            };
            // SAFETY: AVX512-BF16 is present wherever AMX is.
            unsafe {
                tiles::softmax_step(
                    simd,
                    state,
                    raw,
                    k0,
                    groups,
                    &mut self.acc[t * acc_words..][..acc_words],
                    &mut probs[p * prob_words..][..prob_words],
                    self.order,
                )
            };
        }
        let acc = self.acc.as_mut_ptr().cast::<u8>();
        // SAFETY: tiles ta, tb have `dim_tiles` accumulator tiles each, the probabilities
        // `groups` tiles per query tile, the packed V `groups * dim_tiles` tiles.
        unsafe {
            tiles::accumulate_pv(
                tiles,
                acc.add(ta * acc_words * 4),
                acc.add(tb * acc_words * 4),
                probs.as_ptr().cast(),
                probs[prob_words..].as_ptr().cast(),
                values.as_ptr().cast(),
                groups,
                dim_tiles,
                self.order,
            )
        };
    }
}

/// An int8 cache's K and V scales of one key step, zero past its keys (empty for other caches).
#[derive(Default)]
struct StepScales {
    k: Vec<f32>,
    v: Vec<f32>,
}

impl StepScales {
    fn fill(&mut self, kv: &KvHeadView<'_>, k0: usize, step_keys: usize) {
        if kv.dtype != KvDtype::Int8 {
            return;
        }
        for (dst, src) in [(&mut self.k, kv.k_scale), (&mut self.v, kv.v_scale)] {
            dst.clear();
            dst.extend_from_slice(&src[k0..k0 + step_keys]);
            dst.resize(KEY_STEP, 0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::int8_queries::prefill_queries;
    use crate::attention::kv::KvLayer;
    use crate::attention::pseudo_random;
    use crate::{KernelTable, SimdLevel};

    /// Both orders of `P V` leave a block in the same state: each output sums the same products
    /// over the same key pairs in the same order, only the operands' roles are swapped. With the
    /// other tests (which see mostly small blocks, `QueryRows`), this covers `DimRows` at every
    /// cache and head dim.
    #[test]
    fn both_pv_orders_agree() {
        let Some(table) = KernelTable::get(SimdLevel::Avx512, true) else {
            // As the integration tests' checks do: a required feature is never skipped.
            let required = std::env::var("GATTN_REQUIRE_SIMD").unwrap_or_default();
            assert!(
                !required.split(',').any(|f| f.trim() == "amx"),
                "GATTN_REQUIRE_SIMD lists amx, but this CPU has no AMX tiles"
            );
            eprintln!("both_pv_orders_agree skipped: no AMX (or its software model) here");
            return;
        };
        let (keys, positions, group) = (200, 40, 2);
        for dtype in [KvDtype::Bf16, KvDtype::Int8] {
            for head_dim in [64, 128] {
                let mut layer = KvLayer::new(dtype, 1, head_dim).unwrap();
                layer.reserve(keys).unwrap();
                // Keys 130..140 much larger: some rows' shifts jump there (by more than the
                // softmax's lazy margin), others' fall, so the accumulators are rescaled lane by
                // lane mid-stream.
                let mut k = pseudo_random(1, keys * head_dim, 2.0);
                k[130 * head_dim..140 * head_dim]
                    .iter_mut()
                    .for_each(|x| *x *= 30.0);
                layer
                    .append(&k, &pseudo_random(2, keys * head_dim, 2.0))
                    .unwrap();
                let head = layer.head(0);
                let q = pseudo_random(3, positions * group * head_dim, 3.0);
                let offsets = || (0..positions * group).map(|r| r * head_dim);
                let rounded = prefill_queries(table, &q, offsets(), &head);
                let state = |order: PvOrder| {
                    let queries = match &rounded {
                        Some(rounded) => BlockQueries::Int8(rounded),
                        None => {
                            BlockQueries::Bf16(offsets().map(|at| &q[at..][..head_dim]).collect())
                        }
                    };
                    let rows = (0..positions * group).map(|r| keys - positions + r / group);
                    Block::new(head, queries, rows).with_order(order).run()
                };
                let (dims, queries) = (state(PvOrder::DimRows), state(PvOrder::QueryRows));
                let case = format!("{dtype:?} cache, head_dim {head_dim}");
                assert_eq!(dims.m, queries.m, "{case}: m");
                assert_eq!(dims.l, queries.l, "{case}: l");
                assert_eq!(dims.s0, queries.s0, "{case}: s0");
                let (mut a, mut b) = (vec![0.0; head_dim], vec![0.0; head_dim]);
                for r in 0..positions * group {
                    dims.gather_row(r, &mut a);
                    queries.gather_row(r, &mut b);
                    for (x, y) in a.iter().zip(&b) {
                        assert!(
                            (x - y).abs() <= 1e-5 * (1.0 + x.abs().max(y.abs())),
                            "{case}, row {r}: {x} against {y}"
                        );
                    }
                }
            }
        }
    }
}
