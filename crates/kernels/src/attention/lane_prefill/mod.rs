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
//! Work split (this file): items of (KV head, `BLOCKS_PER_TILE` blocks of positions) over rayon.

mod block;
#[cfg(target_arch = "x86_64")]
mod dots_avx2;
#[cfg(target_arch = "x86_64")]
mod dots_avx512;
mod product;
mod value_pairs;

use rayon::prelude::*;

use super::epilogue::{FinalRow, write_row};
use super::prefill::{row_gate, scatter_items};
use super::stats::AttentionStats;
use super::tile::QueryRow;
use super::{AttentionCall, AttentionError};
use crate::dispatch::run_at;
use crate::reference::AttentionShape;
use crate::{KernelTable, SimdLevel};
use block::{BLOCK_ROWS, BLOCKS_PER_TILE, LaneBlock};
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

/// [`super::prefill`] on the vector units of `table`'s level; the arguments are checked already.
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
    // Whole positions per item: all query heads of a position share its keys.
    let positions = (BLOCKS_PER_TILE * BLOCK_ROWS / group).max(1);
    let items: Vec<(usize, usize)> = (0..num_kv_heads)
        .flat_map(|j| (0..n.div_ceil(positions)).map(move |b| (j, b * positions)))
        .collect();
    let want_stats = stats.is_some();
    let (level, dots): (SimdLevel, LaneDots) = (table.level(), table.lane_dots());
    let values_of = ValuesKey::for_call();

    let results: Vec<(Vec<f32>, Option<AttentionStats>)> = items
        .par_iter()
        .map(|&(j, t_begin)| {
            let t_end = n.min(t_begin + positions);
            let rows: Vec<QueryRow> = (t_begin..t_end)
                .flat_map(|t| {
                    (0..group).map(move |g| QueryRow {
                        q_offset: (t * num_heads + j * group + g) * head_dim,
                        position: q_start + t,
                    })
                })
                .collect();
            let mut local = want_stats.then(AttentionStats::default);
            let mut item_out = vec![0.0f32; rows.len() * head_dim];
            let mut acc = vec![0.0f32; head_dim];
            let block = LaneBlock {
                kv: kv.head(j),
                q,
                rows: &rows,
                dots,
                values: values_of(j),
            };
            let states = run_at(level, block);
            for (c, (chunk, state)) in rows.chunks(BLOCK_ROWS).zip(&states).enumerate() {
                for (i, row) in chunk.iter().enumerate() {
                    let r = c * BLOCK_ROWS + i;
                    let (t, h) = (t_begin + r / group, j * group + r % group);
                    state.gather_row(i, &mut acc);
                    let final_row = FinalRow {
                        acc: &acc,
                        m: state.m[i],
                        l: state.l[i],
                        s0: state.s0[i],
                        lanes: 1,
                        elems_per_word: 1,
                    };
                    let out_row = &mut item_out[r * head_dim..][..head_dim];
                    let row_gate = row_gate(gate, t, h, num_heads, head_dim);
                    write_row(
                        final_row,
                        row_gate,
                        out_row,
                        local.as_mut(),
                        row.position == 0,
                    );
                }
            }
            (item_out, local)
        })
        .collect();

    scatter_items(shape, items.iter().copied(), &results, out, stats);
    Ok(())
}
