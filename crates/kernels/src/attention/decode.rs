//! Decode (one query per head) with the sequence split into parts (flash-decoding): each
//! (KV head, part) work item streams its keys once and returns its partial (max, sum, acc)
//! triples, which are merged with log-sum-exp weights before the epilogue.

use super::AttentionError;
use super::checks::check_call;
use super::dispatch::{AttendRange, run_at};
use super::epilogue::{FinalRow, write_row};
use super::kv::KvLayer;
use super::prefill::row_gate;
use super::stats::AttentionStats;
use super::tile::{KEY_TILE, PartialRows, QueryRow};
use crate::SimdLevel;
use crate::parallel;
use crate::reference::{AttentionShape, GateScores};

/// Parts shorter than this are not worth a work item of their own.
const MIN_PART_KEYS: usize = 1024;
/// Work items wanted per thread, so stealing evens out uneven threads.
const ITEMS_PER_THREAD: usize = 2;

/// How many parts `decode` splits `keys` keys into: enough that (KV heads x parts) gives every
/// thread of the current rayon pool `ITEMS_PER_THREAD` items, but no part under `MIN_PART_KEYS`.
pub fn decode_parts(num_kv_heads: usize, keys: usize, threads: usize) -> usize {
    let wanted = (ITEMS_PER_THREAD * threads).div_ceil(num_kv_heads.max(1));
    wanted.min(keys / MIN_PART_KEYS).max(1)
}

/// Attention of the single query at `position` (usually `kv.len() - 1`) against keys
/// `0..=position`; `q`, `out`: `[num_heads * head_dim]`; `gate` as in [`super::prefill`] with n = 1.
#[allow(clippy::too_many_arguments)]
pub fn decode(
    level: SimdLevel,
    shape: AttentionShape,
    q: &[f32],
    position: usize,
    kv: &KvLayer,
    gate: GateScores<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
) -> Result<(), AttentionError> {
    let parts = decode_parts(
        shape.num_kv_heads,
        position + 1,
        rayon::current_num_threads(),
    );
    decode_with_parts(level, shape, q, position, kv, gate, out, stats, parts)
}

/// [`decode`] with an explicit number of sequence parts (>= 1; more parts than key tiles leaves
/// some empty, which is allowed).
#[allow(clippy::too_many_arguments)]
pub fn decode_with_parts(
    level: SimdLevel,
    shape: AttentionShape,
    q: &[f32],
    position: usize,
    kv: &KvLayer,
    gate: GateScores<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
    parts: usize,
) -> Result<(), AttentionError> {
    check_call(level, shape, q, position, 1, kv, gate, out)?;
    let AttentionShape {
        num_heads,
        num_kv_heads,
        head_dim,
    } = shape;
    let group = shape.group_size();
    let keys = position + 1;
    let parts = parts.max(1);
    // Part boundaries on tile multiples, so no part ends in a partial tile but the last.
    let part_len = keys.div_ceil(parts).div_ceil(KEY_TILE) * KEY_TILE;
    let items: Vec<(usize, usize)> = (0..num_kv_heads)
        .flat_map(|j| (0..parts).map(move |p| (j, p)))
        .collect();

    let partials: Vec<PartialRows> = parallel::map(items.len(), |item| {
        let (j, p) = items[item];
        let rows: Vec<QueryRow> = (0..group)
            .map(|g| QueryRow {
                q_offset: (j * group + g) * head_dim,
                position,
            })
            .collect();
        let begin = (p * part_len).min(keys);
        let end = ((p + 1) * part_len).min(keys);
        run_at(
            level,
            AttendRange {
                level,
                kv: kv.head(j),
                q,
                rows: &rows,
                keys: begin..end,
            },
        )
    });

    let mut local = stats.is_some().then(AttentionStats::default);
    for (j, head_parts) in partials.chunks_exact(parts).enumerate() {
        let merged = merge_parts(head_parts);
        for g in 0..group {
            let h = j * group + g;
            let row = FinalRow {
                acc: &merged.acc[g * merged.row_len..][..merged.row_len],
                m: merged.m[g],
                l: merged.l[g],
                s0: merged.s0[g],
                lanes: merged.lanes,
                elems_per_word: merged.elems_per_word,
            };
            write_row(
                row,
                row_gate(gate, 0, h, num_heads, head_dim),
                &mut out[h * head_dim..][..head_dim],
                local.as_mut(),
                position == 0,
            );
        }
    }
    if let (Some(stats), Some(local)) = (stats, local) {
        stats.merge(&local);
    }
    Ok(())
}

/// Log-sum-exp merge: with `m = max m_p`, `l = sum l_p e^(m_p - m)` and
/// `acc = sum acc_p e^(m_p - m)`. Empty parts (`m_p = -inf`) get weight 0.
fn merge_parts(parts: &[PartialRows]) -> PartialRows {
    let mut merged = parts[0].clone();
    let rows = merged.m.len();
    let row_len = merged.row_len;
    for r in 0..rows {
        let m = parts
            .iter()
            .map(|p| p.m[r])
            .fold(f32::NEG_INFINITY, f32::max);
        merged.m[r] = m;
        merged.s0[r] = parts
            .iter()
            .map(|p| p.s0[r])
            .fold(f32::NEG_INFINITY, f32::max);
        let acc = &mut merged.acc[r * row_len..][..row_len];
        acc.iter_mut().for_each(|a| *a = 0.0);
        let mut l = 0.0;
        if m != f32::NEG_INFINITY {
            for part in parts.iter().filter(|p| p.m[r] != f32::NEG_INFINITY) {
                let w = (part.m[r] - m).exp();
                l += part.l[r] * w;
                for (a, &x) in acc.iter_mut().zip(&part.acc[r * row_len..][..row_len]) {
                    *a += w * x;
                }
            }
        }
        merged.l[r] = l;
    }
    merged
}
