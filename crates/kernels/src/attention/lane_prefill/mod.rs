//! Prefill on the vector units (every level without AMX tiles for the cache, scalar included):
//! flash attention with the query rows in the SIMD lanes. A block of 32 rows (query positions
//! times the query heads of one KV head: GQA shares every K/V tile) multiplies each K and V tile
//! as two small matrix products on register tiles (`product`; the dot-product instructions of
//! `dots_avx512` and `dots_avx2` where the CPU has them, same bits), with the online softmax of
//! all its rows on whole registers between them (`block`); the gate is fused in the shared
//! epilogue.
//!
//! Why the rows in the lanes: the dot products then need no horizontal sums, each lane sums in
//! one order whatever the width (so every level gives the same bits), and each stored K/V row is
//! decoded once per block instead of once per row.
//!
//! Work split (this file): items of (KV head, `BLOCKS_PER_TILE` blocks of positions) over rayon;
//! where they are too few for the threads, each item's keys split into ranges (split-K), whose
//! softmax states are merged before the epilogue.

mod block;
#[cfg(target_arch = "x86_64")]
mod dots_avx2;
#[cfg(target_arch = "x86_64")]
mod dots_avx512;
mod product;
mod value_pairs;

use std::ops::Range;

use rayon::prelude::*;

use super::int8_queries::{Int8Queries, prefill_queries};
use super::prefill::{self, scatter_items};
use super::stats::AttentionStats;
use super::tile::QueryRow;
use super::{AttentionCall, AttentionError};
use crate::dispatch::run_at;
use crate::reference::{AttentionShape, GateScores};
use crate::{KernelTable, SimdLevel};
use block::{BLOCK_ROWS, BLOCKS_PER_TILE, BlockState, KEY_TILE, LaneBlock};
use value_pairs::ValuesKey;

/// The dot-product kernels a kernel table lets lane prefill use (`dots_avx512`, `dots_avx2`):
/// each gives the bits of the generic path, faster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LaneDots {
    /// `vdpbf16ps` for both products over a bf16 cache.
    pub bf16: bool,
    /// `vpdpbusd` for the scores over int8 keys, `vpdpwssd` for `P V` over int8 values.
    pub int8: bool,
    /// `vpmaddwd` (AVX2) for both products over an int8 cache, on i16 pairs, where `int8` is
    /// not set.
    pub int8_pairs: bool,
}

/// Work items wanted per thread, so that stealing evens out uneven threads (as in decode).
const ITEMS_PER_THREAD: usize = 2;
/// Keys of the shortest part of a split: twice decode's floor, as a part here also sets up its
/// blocks' queries and states and is merged row by row (not tuned: 2 threads never split the
/// 1.7B shape).
const MIN_PART_KEYS: usize = 2048;

/// Query positions per work item: whole positions (all query heads of a position share its
/// keys), [`BLOCKS_PER_TILE`] blocks of rows.
fn positions_per_item(group: usize) -> usize {
    (BLOCKS_PER_TILE * BLOCK_ROWS / group.max(1)).max(1)
}

/// How many key ranges (split-K) each work item of a chunk of `n` queries over `keys` keys in all
/// is split into: 1 where (KV head, positions) items already give every one of `threads`
/// threads [`ITEMS_PER_THREAD`] of them, else enough parts that they do, none under
/// [`MIN_PART_KEYS`] keys (a short chunk deep in a long context, on a model with few KV heads).
pub(crate) fn key_parts(shape: AttentionShape, n: usize, keys: usize, threads: usize) -> usize {
    let items = shape.num_kv_heads * n.div_ceil(positions_per_item(shape.group_size()));
    let wanted = (ITEMS_PER_THREAD * threads).div_ceil(items.max(1));
    wanted.min(keys / MIN_PART_KEYS).max(1)
}

/// The key ranges of `parts` parts over keys `0 .. keys`: equal, each but the last ending on a
/// key tile (so each tile is in one part).
fn part_ranges(keys: usize, parts: usize) -> impl Iterator<Item = Range<usize>> {
    let span = keys.div_ceil(parts.max(1)).next_multiple_of(KEY_TILE);
    (0..keys)
        .step_by(span)
        .map(move |start| start..(start + span).min(keys))
}

/// [`super::prefill`] on the vector units of `table`'s level, each work item's keys split into
/// `parts` ranges merged before the epilogue (1: no split); the arguments are checked already.
pub(crate) fn prefill(
    table: &KernelTable,
    call: AttentionCall<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
    parts: usize,
) -> Result<(), AttentionError> {
    let AttentionCall {
        shape,
        queries: q,
        q_start,
        n,
        kv,
        gate,
    } = call;
    let positions = positions_per_item(shape.group_size());
    let items: Vec<(usize, usize)> = (0..shape.num_kv_heads)
        .flat_map(|j| (0..n.div_ceil(positions)).map(move |b| (j, b * positions)))
        .collect();
    let want_stats = stats.is_some();
    let (level, dots): (SimdLevel, LaneDots) = (table.level(), table.lane_dots());
    let values_of = ValuesKey::for_call();
    let item_rows = |&(j, t_begin): &(usize, usize)| -> Vec<QueryRow> {
        let (group, t_end) = (shape.group_size(), n.min(t_begin + positions));
        (t_begin..t_end)
            .flat_map(|t| {
                (0..group).map(move |g| QueryRow {
                    q_offset: (t * shape.num_heads + j * group + g) * shape.head_dim,
                    position: q_start + t,
                })
            })
            .collect()
    };
    // An int8 cache's queries, rounded once per item (not per block or key range) on the
    // table's vector kernel.
    let round_rows =
        |rows: &[QueryRow]| prefill_queries(table, q, rows.iter().map(|r| r.q_offset), &kv.head(0));
    let run_item = |&(j, _): &(usize, usize),
                    rows: &[QueryRow],
                    int8_queries: Option<&Int8Queries>,
                    keys: Range<usize>| {
        let block = LaneBlock {
            kv: kv.head(j),
            q,
            rows,
            int8_queries,
            dots,
            values: values_of(j),
            keys,
        };
        run_at(level, block)
    };
    let finish = |&item: &(usize, usize), rows: &[QueryRow], states: &[BlockState]| {
        item_epilogue(shape, gate, q_start, item, rows, states, want_stats)
    };

    let results: Vec<(Vec<f32>, Option<AttentionStats>)> = if parts <= 1 {
        items
            .par_iter()
            .map(|item| {
                let rows = item_rows(item);
                let rounded = round_rows(&rows);
                let states = run_item(item, &rows, rounded.as_ref(), 0..usize::MAX);
                finish(item, &rows, &states)
            })
            .collect()
    } else {
        // Split-K: every (item, key range) is a work item of its own, then each item's parts
        // are merged, in key order, before its epilogue.
        let rows: Vec<Vec<QueryRow>> = items.iter().map(item_rows).collect();
        let rounded: Vec<Option<Int8Queries>> = rows.par_iter().map(|r| round_rows(r)).collect();
        // Item i's parts are `work[first_part[i] .. first_part[i + 1]]`, in key order.
        let mut work: Vec<(usize, Range<usize>)> = Vec::new();
        let mut first_part = vec![0];
        for (i, item_rows) in rows.iter().enumerate() {
            let keys = item_rows.iter().map(|r| r.position).max().expect("rows") + 1;
            work.extend(part_ranges(keys, parts).map(|range| (i, range)));
            first_part.push(work.len());
        }
        let part_states: Vec<Vec<BlockState>> = work
            .par_iter()
            .map(|(i, keys)| run_item(&items[*i], &rows[*i], rounded[*i].as_ref(), keys.clone()))
            .collect();
        items
            .par_iter()
            .enumerate()
            .map(|(i, item)| {
                let mine = &part_states[first_part[i]..first_part[i + 1]];
                let merged: Vec<BlockState> = (0..mine[0].len())
                    .map(|b| {
                        let block_parts: Vec<&BlockState> =
                            mine.iter().map(|states| &states[b]).collect();
                        BlockState::merge(&block_parts)
                    })
                    .collect();
                finish(item, &rows[i], &merged)
            })
            .collect()
    };

    scatter_items(shape, items.iter().copied(), &results, out, stats);
    Ok(())
}

/// The epilogue of one work item: its rows' final softmax states, block by block.
fn item_epilogue(
    shape: AttentionShape,
    gate: GateScores<'_>,
    q_start: usize,
    item: (usize, usize),
    rows: &[QueryRow],
    states: &[BlockState],
    want_stats: bool,
) -> (Vec<f32>, Option<AttentionStats>) {
    prefill::item_epilogue(
        shape,
        gate,
        q_start,
        item,
        rows.len(),
        want_stats,
        |r, acc| {
            let (state, i) = (&states[r / BLOCK_ROWS], r % BLOCK_ROWS);
            state.gather_row(i, acc);
            (state.m[i], state.l[i], state.s0[i])
        },
    )
}
