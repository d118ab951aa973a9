//! Decode (one query per head) with the sequence split into parts (flash-decoding): each
//! (KV head, part) work item streams its keys once and returns its partial (max, sum, acc)
//! triples, which are merged with log-sum-exp weights before the epilogue.

use super::checks::check_call;
use super::dispatch::{AttendRange, run_at};
use super::epilogue::{FinalRow, write_row};
use super::merge::merge_row;
use super::prefill::row_gate;
use super::stats::AttentionStats;
use super::tile::{KEY_TILE, PartialRows, QueryRow, TileScratch};
use super::{AttentionCall, AttentionError};
use crate::SimdLevel;
use crate::parallel;
use crate::reference::AttentionShape;
use std::ops::Range;

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

/// What [`decode`] keeps between calls, so that a decode step allocates nothing once it has
/// grown (on the first call, for as many parts as the longest context will use): one slot per
/// (KV head, part) work item, and the merged rows of one KV head.
#[derive(Debug, Clone, Default)]
pub struct DecodeScratch {
    items: Vec<DecodeItem>,
    merged: PartialRows,
}

/// One work item's rows and the buffers of its key range.
#[derive(Debug, Clone, Default)]
struct DecodeItem {
    rows: Vec<QueryRow>,
    tile: TileScratch,
}

/// Attention of the single query at `call.q_start` (usually `kv.len() - 1`, with `call.n == 1`)
/// against keys `0..=q_start`; `out`: `[num_heads * head_dim]`; buffers reused from `scratch`.
pub fn decode(
    level: SimdLevel,
    call: AttentionCall<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
    scratch: &mut DecodeScratch,
) -> Result<(), AttentionError> {
    let (kv_heads, threads) = (call.shape.num_kv_heads, rayon::current_num_threads());
    let parts = decode_parts(kv_heads, call.q_start + 1, threads);
    let most_parts = decode_parts(kv_heads, usize::MAX, threads);
    decode_in(
        level,
        call,
        out,
        stats,
        scratch,
        parts,
        kv_heads * most_parts,
    )
}

/// [`decode`] with an explicit number of sequence parts (>= 1; more parts than key tiles leaves
/// some empty, which is allowed).
pub fn decode_with_parts(
    level: SimdLevel,
    call: AttentionCall<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
    scratch: &mut DecodeScratch,
    parts: usize,
) -> Result<(), AttentionError> {
    decode_in(level, call, out, stats, scratch, parts, 0)
}

/// [`decode_with_parts`], the scratch first grown to at least `reserve_items` work items.
fn decode_in(
    level: SimdLevel,
    call: AttentionCall<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
    scratch: &mut DecodeScratch,
    parts: usize,
    reserve_items: usize,
) -> Result<(), AttentionError> {
    check_call(level, &call, out)?;
    if call.n != 1 {
        return Err(AttentionError::BadLength {
            what: "decode queries",
            got: call.n,
            expected: 1,
        });
    }
    let AttentionCall {
        shape,
        queries: q,
        q_start: position,
        kv,
        gate,
        ..
    } = call;
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
    let items = num_kv_heads * parts;
    let run_item = |item: usize, slot: &mut DecodeItem, keys: Range<usize>| {
        let j = item / parts;
        slot.rows.clear();
        slot.rows.extend((0..group).map(|g| QueryRow {
            q_offset: (j * group + g) * head_dim,
            position,
        }));
        run_at(
            level,
            AttendRange {
                level,
                kv: kv.head(j),
                q,
                rows: &slot.rows,
                keys,
                scratch: &mut slot.tile,
            },
        );
    };
    let grown = scratch.items.len().max(items).max(reserve_items);
    if scratch.items.len() < grown {
        // Every slot sized now (an empty key range), so that a later step with more parts
        // allocates nothing.
        scratch.items.resize_with(grown, DecodeItem::default);
        for slot in &mut scratch.items {
            run_item(0, slot, 0..0);
        }
    }

    parallel::for_each_mut(&mut scratch.items[..items], |item, slot| {
        let p = item % parts;
        let begin = (p * part_len).min(keys);
        let end = ((p + 1) * part_len).min(keys);
        run_item(item, slot, begin..end);
    });

    let mut local = stats.is_some().then(AttentionStats::default);
    for (j, head_parts) in scratch.items[..items].chunks_exact(parts).enumerate() {
        let merged = &mut scratch.merged;
        merge_parts(head_parts, merged);
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

/// Log-sum-exp merge into `merged`: with `m = max m_p`, `l = sum l_p e^(m_p - m)` and
/// `acc = sum acc_p e^(m_p - m)`. Empty parts (`m_p = -inf`) get weight 0.
fn merge_parts(items: &[DecodeItem], merged: &mut PartialRows) {
    let parts = || items.iter().map(|item| &item.tile.partial);
    let first = &items[0].tile.partial;
    merged.row_len = first.row_len;
    merged.lanes = first.lanes;
    merged.elems_per_word = first.elems_per_word;
    for (to, from) in [
        (&mut merged.m, &first.m),
        (&mut merged.l, &first.l),
        (&mut merged.s0, &first.s0),
        (&mut merged.acc, &first.acc),
    ] {
        to.clone_from(from);
    }
    let rows = merged.m.len();
    let row_len = merged.row_len;
    for r in 0..rows {
        let states = parts().map(|p| (p.m[r], p.l[r], p.s0[r]));
        let acc = &mut merged.acc[r * row_len..][..row_len];
        acc.iter_mut().for_each(|a| *a = 0.0);
        (merged.m[r], merged.l[r], merged.s0[r]) = merge_row(states, |p, w| {
            let part = &items[p].tile.partial.acc[r * row_len..][..row_len];
            for (a, &x) in acc.iter_mut().zip(part) {
                *a += w * x;
            }
        });
    }
}
