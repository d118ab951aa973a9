//! Prefill: a chunk of `n` queries at positions `q_start..q_start + n` against keys
//! `0..q_start + n`, parallel (rayon, current pool) over (KV head, query tile) work items.

use super::checks::check_call;
use super::dispatch::{AttendRange, run_at};
use super::epilogue::{FinalRow, RowGate, write_row};
use super::stats::AttentionStats;
use super::tile::{PartialRows, QueryRow, TileScratch};
use super::{AttentionCall, AttentionError};
use crate::reference::{AttentionShape, GateScores};
use crate::{KernelTable, SimdLevel};
use rayon::prelude::*;

/// Query rows (positions x query heads of one KV head) per work item: enough to amortize each
/// K/V tile over many rows, few enough that the accumulators stay in L1/L2.
const ROWS_PER_ITEM: usize = 32;

/// Causal attention of a chunk of queries, gate fused in the epilogue; equals
/// `reference::causal_attention` followed by `reference::apply_output_gate` on the stored K/V.
///
/// `out`: `[n, num_heads * head_dim]`; `stats`: if given, this call's sink mass and gate values
/// are added to it.
pub fn prefill(
    level: SimdLevel,
    call: AttentionCall<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
) -> Result<(), AttentionError> {
    let table = KernelTable::of_level(level).ok_or(AttentionError::UnsupportedLevel(level))?;
    prefill_on(table, call, out, stats)
}

/// [`prefill`] with the kernels of `table` (on AMX tiles where it has them and the cache allows:
/// see [`super::prefill_uses_amx_tiles`]); the proptests run every table.
pub fn prefill_on(
    table: &KernelTable,
    call: AttentionCall<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
) -> Result<(), AttentionError> {
    let level = table.level();
    check_call(level, &call, out)?;
    #[cfg(target_arch = "x86_64")]
    if super::amx_prefill::prefill_uses_amx_tiles(table, call.kv.dtype(), call.shape.head_dim) {
        return super::amx_prefill::prefill(call, out, stats);
    }
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
    let positions_per_item = (ROWS_PER_ITEM / group).max(1);
    let tiles = n.div_ceil(positions_per_item);
    let items: Vec<(usize, usize)> = (0..num_kv_heads)
        .flat_map(|j| (0..tiles).map(move |tile| (j, tile)))
        .collect();
    let want_stats = stats.is_some();

    let results: Vec<(Vec<f32>, Option<AttentionStats>)> = items
        .par_iter()
        .map(|&(j, tile)| {
            let t_begin = tile * positions_per_item;
            let t_end = n.min(t_begin + positions_per_item);
            let rows: Vec<QueryRow> = (t_begin..t_end)
                .flat_map(|t| {
                    (0..group).map(move |g| QueryRow {
                        q_offset: (t * num_heads + j * group + g) * head_dim,
                        position: q_start + t,
                    })
                })
                .collect();
            let mut scratch = TileScratch::default();
            run_at(
                level,
                AttendRange {
                    level,
                    kv: kv.head(j),
                    q,
                    rows: &rows,
                    keys: 0..q_start + t_end,
                    scratch: &mut scratch,
                },
            );
            let partial = &scratch.partial;
            let mut local = want_stats.then(AttentionStats::default);
            let mut item_out = vec![0.0f32; rows.len() * head_dim];
            for (r, out_row) in item_out.chunks_exact_mut(head_dim).enumerate() {
                let t = t_begin + r / group;
                let h = j * group + r % group;
                write_row(
                    final_row(partial, r),
                    row_gate(gate, t, h, num_heads, head_dim),
                    out_row,
                    local.as_mut(),
                    q_start + t == 0,
                );
            }
            (item_out, local)
        })
        .collect();

    let firsts = items
        .iter()
        .map(|&(j, tile)| (j, tile * positions_per_item));
    scatter_items(shape, firsts, &results, out, stats);
    Ok(())
}

/// Writes each work item's rows (KV head `j`, query positions from `first` on, `group` heads a
/// position: `[positions * group, head_dim]`) to their places in `out` `[n, num_heads *
/// head_dim]`, and merges the items' statistics into `stats`.
pub(crate) fn scatter_items(
    shape: AttentionShape,
    firsts: impl Iterator<Item = (usize, usize)>,
    results: &[(Vec<f32>, Option<AttentionStats>)],
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
) {
    let (num_heads, head_dim, group) = (shape.num_heads, shape.head_dim, shape.group_size());
    let mut total = AttentionStats::default();
    for ((j, first), (item_out, local)) in firsts.zip(results) {
        for (r, row) in item_out.chunks_exact(head_dim).enumerate() {
            let (t, h) = (first + r / group, j * group + r % group);
            out[(t * num_heads + h) * head_dim..][..head_dim].copy_from_slice(row);
        }
        if let Some(local) = local {
            total.merge(local);
        }
    }
    if let Some(stats) = stats {
        stats.merge(&total);
    }
}

pub(crate) fn final_row(partial: &PartialRows, r: usize) -> FinalRow<'_> {
    FinalRow {
        acc: &partial.acc[r * partial.row_len..][..partial.row_len],
        m: partial.m[r],
        l: partial.l[r],
        s0: partial.s0[r],
        lanes: partial.lanes,
        elems_per_word: partial.elems_per_word,
    }
}

/// The gate of query `t` (index within the call), head `h`.
pub(crate) fn row_gate<'a>(
    gate: GateScores<'a>,
    t: usize,
    h: usize,
    num_heads: usize,
    head_dim: usize,
) -> RowGate<'a> {
    match gate {
        GateScores::None => RowGate::None,
        GateScores::Headwise(g) => RowGate::Headwise(g[t * num_heads + h]),
        GateScores::Elementwise(g) => {
            RowGate::Elementwise(&g[(t * num_heads + h) * head_dim..][..head_dim])
        }
    }
}
