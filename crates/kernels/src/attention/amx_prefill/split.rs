//! The work split of AMX prefill: items of (KV head, block of query positions) over rayon, and
//! the epilogue of each row.

use rayon::prelude::*;

use super::block::{Block, BlockQueries};
use super::tiles::TILE;
use crate::KernelTable;
use crate::attention::int8_queries::prefill_queries;
use crate::attention::prefill::{item_epilogue, scatter_items};
use crate::attention::stats::AttentionStats;
use crate::attention::{AttentionCall, AttentionError};
use crate::reference::AttentionShape;

/// Largest block of query rows per item: a block's accumulators and packed queries (384 KiB at
/// head_dim 128) stay in L2, and each K/V step read from memory serves 512 rows.
const MAX_BLOCK_TILES: usize = 32;
/// Items per thread at least (the causal blocks differ in length, rayon balances them).
const ITEMS_PER_THREAD: usize = 4;

/// [`super::prefill`] on AMX tiles; the arguments are checked already and
/// [`super::prefill_uses_amx_tiles`] holds for `table`.
pub(crate) fn prefill(
    table: &KernelTable,
    call: AttentionCall<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
) -> Result<(), AttentionError> {
    let AttentionCall {
        shape,
        queries: q,
        q_start,
        n,
        kv,
        gate,
    } = call;
    let AttentionShape {
        num_heads,
        num_kv_heads,
        head_dim,
    } = shape;
    let group = shape.group_size();
    let positions = positions_per_block(n, group, num_kv_heads);
    let blocks = n.div_ceil(positions);
    let items: Vec<(usize, usize)> = (0..num_kv_heads)
        .flat_map(|j| (0..blocks).map(move |b| (j, b)))
        .collect();
    let want_stats = stats.is_some();

    let results: Vec<(Vec<f32>, Option<AttentionStats>)> = items
        .par_iter()
        .map(|&(j, b)| {
            let (t_begin, t_end) = (b * positions, n.min((b + 1) * positions));
            let rows: Vec<(usize, usize)> = (t_begin..t_end)
                .flat_map(|t| (0..group).map(move |g| (t, j * group + g)))
                .collect();
            let offset = |&(t, h): &(usize, usize)| (t * num_heads + h) * head_dim;
            let head = kv.head(j);
            // An int8 cache's queries: the bytes the vector kernels use.
            let rounded = prefill_queries(table, q, rows.iter().map(offset), &head);
            let queries = match &rounded {
                Some(rounded) => BlockQueries::Int8(rounded),
                None => {
                    BlockQueries::Bf16(rows.iter().map(|r| &q[offset(r)..][..head_dim]).collect())
                }
            };
            let block = Block::new(head, queries, rows.iter().map(|&(t, _)| q_start + t));
            let state = block.run();
            item_epilogue(
                shape,
                gate,
                q_start,
                (j, t_begin),
                rows.len(),
                want_stats,
                |r, acc| {
                    state.gather_row(r, acc);
                    (state.m[r], state.l[r], state.s0[r])
                },
            )
        })
        .collect();

    let firsts = items.iter().map(|&(j, b)| (j, b * positions));
    scatter_items(shape, firsts, &results, out, stats);
    Ok(())
}

/// Query positions per block: blocks as large as `MAX_BLOCK_TILES` allows, but enough of them
/// for every thread, and whole pairs of tiles where the group size divides 32.
fn positions_per_block(n: usize, group: usize, num_kv_heads: usize) -> usize {
    let tiles_per_head = (n * group).div_ceil(TILE);
    let wanted_items = ITEMS_PER_THREAD * rayon::current_num_threads();
    let blocks = tiles_per_head
        .div_ceil(MAX_BLOCK_TILES)
        .max(wanted_items.div_ceil(num_kv_heads))
        .min(tiles_per_head.div_ceil(2))
        .max(1);
    let positions = n.div_ceil(blocks);
    let unit = if (2 * TILE).is_multiple_of(group) {
        2 * TILE / group
    } else {
        1
    };
    positions.next_multiple_of(unit).min(n).max(1)
}
