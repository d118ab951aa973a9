//! Prefill: a chunk of `n` queries at positions `q_start..q_start + n` against keys
//! `0..q_start + n`, on AMX tiles (`amx_prefill`) or the vector units (`lane_prefill`), and the
//! parts both share: the gate of a row, the scatter of work items' rows into the output.

use super::checks::check_call;
use super::epilogue::{FinalRow, RowGate, write_row};
use super::stats::AttentionStats;
use super::{AttentionCall, AttentionError};
use crate::reference::{AttentionShape, GateScores};
use crate::{KernelTable, SimdLevel};

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
/// see [`super::prefill_uses_amx_tiles`]); the proptests run every table. On the vector units,
/// each work item's keys are split into [`prefill_key_parts`] ranges for the current rayon
/// pool, so the sums' order (not the bound they keep) depends on the threads where it splits.
pub fn prefill_on(
    table: &KernelTable,
    call: AttentionCall<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
) -> Result<(), AttentionError> {
    let keys = call.q_start.saturating_add(call.n);
    let parts = prefill_key_parts(call.shape, call.n, keys, rayon::current_num_threads());
    prefill_with_key_parts(table, call, out, stats, parts)
}

/// How many key ranges the vector prefill splits each work item of a chunk of `n` queries over
/// `keys` keys into on `threads` threads (split-K): 1 where its (KV head, query block) items
/// already give each thread two, more for a short chunk deep in a long context on a model with
/// few KV heads, no part under 2048 keys.
pub fn prefill_key_parts(shape: AttentionShape, n: usize, keys: usize, threads: usize) -> usize {
    super::lane_prefill::key_parts(shape, n, keys, threads)
}

/// [`prefill_on`] with an explicit number of key ranges per work item on the vector units (0 and
/// 1: the keys whole; the AMX tiles do not split).
pub fn prefill_with_key_parts(
    table: &KernelTable,
    call: AttentionCall<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
    parts: usize,
) -> Result<(), AttentionError> {
    let level = table.level();
    check_call(level, &call, out)?;
    #[cfg(target_arch = "x86_64")]
    if super::amx_prefill::prefill_uses_amx_tiles(table, call.kv.dtype(), call.shape.head_dim) {
        return super::amx_prefill::prefill(table, call, out, stats);
    }
    super::lane_prefill::prefill(table, call, out, stats, parts)
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

/// The epilogue of one work item (KV head `j`, query positions from `first` on, `group` heads a
/// position, `rows` rows in that order) of a call whose queries start at `q_start`: row `r`'s
/// `final_state(r, acc)` gathers its accumulator into `acc` (`head_dim`) and returns its `(m,
/// l, s0)`; the rows are written through the gate to `[rows, head_dim]`, with the item's
/// statistics where wanted.
#[allow(
    clippy::too_many_arguments,
    reason = "the item, the call's shape, gate and start, and the kernel's own state"
)]
pub(crate) fn item_epilogue(
    shape: AttentionShape,
    gate: GateScores<'_>,
    q_start: usize,
    (j, first): (usize, usize),
    rows: usize,
    want_stats: bool,
    mut final_state: impl FnMut(usize, &mut [f32]) -> (f32, f32, f32),
) -> (Vec<f32>, Option<AttentionStats>) {
    let (head_dim, group) = (shape.head_dim, shape.group_size());
    let mut local = want_stats.then(AttentionStats::default);
    let mut item_out = vec![0.0f32; rows * head_dim];
    let mut acc = vec![0.0f32; head_dim];
    for (r, out_row) in item_out.chunks_exact_mut(head_dim).enumerate() {
        let (t, h) = (first + r / group, j * group + r % group);
        let (m, l, s0) = final_state(r, &mut acc);
        let final_row = FinalRow {
            acc: &acc,
            m,
            l,
            s0,
            lanes: 1,
            elems_per_word: 1,
        };
        let gate = row_gate(gate, t, h, shape.num_heads, head_dim);
        write_row(final_row, gate, out_row, local.as_mut(), q_start + t == 0);
    }
    (item_out, local)
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
