//! Epilogue: one output row from the final softmax state, `out = acc / l * sigmoid(gate)` in a
//! single pass (undoing the lane permutation on the way), plus the optional statistics.

use super::layout::for_each_slot;
use super::stats::AttentionStats;
use crate::reference::sigmoid;

/// The gate of one (query, head) row.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RowGate<'a> {
    None,
    /// Pre-sigmoid score of the head.
    Headwise(f32),
    /// Pre-sigmoid scores, one per head dimension.
    Elementwise(&'a [f32]),
}

/// The final state of one row (`acc` in permuted slot order).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FinalRow<'a> {
    pub acc: &'a [f32],
    pub m: f32,
    pub l: f32,
    pub s0: f32,
    pub lanes: usize,
    pub elems_per_word: usize,
}

pub(crate) fn write_row(
    row: FinalRow<'_>,
    gate: RowGate<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
    first_token: bool,
) {
    // l == 0 only if every score was -inf: output zeros rather than NaN.
    let inv_l = if row.l > 0.0 { 1.0 / row.l } else { 0.0 };
    let (len, epw, lanes, acc) = (out.len(), row.elems_per_word, row.lanes, row.acc);
    // In element order already (lane prefill gathers its rows): plain loops, vectorized.
    let in_order = (lanes, epw) == (1, 1);
    match gate {
        RowGate::Elementwise(scores) if in_order => {
            for ((y, &a), &s) in out.iter_mut().zip(&acc[..len]).zip(&scores[..len]) {
                *y = a * inv_l * sigmoid(s);
            }
        }
        RowGate::Elementwise(scores) => for_each_slot(len, epw, lanes, |e, slot| {
            out[e] = acc[slot] * inv_l * sigmoid(scores[e])
        }),
        // One factor for the whole row (times 1 exactly without a gate).
        RowGate::None | RowGate::Headwise(_) => {
            let g = match gate {
                RowGate::Headwise(score) => inv_l * sigmoid(score),
                _ => inv_l,
            };
            if in_order {
                out.iter_mut()
                    .zip(&acc[..len])
                    .for_each(|(y, &a)| *y = a * g);
            } else {
                for_each_slot(len, epw, lanes, |e, slot| out[e] = acc[slot] * g);
            }
        }
    }
    if let Some(stats) = stats {
        let sink = if row.s0 == f32::NEG_INFINITY {
            0.0
        } else {
            (row.s0 - row.m).exp() * inv_l
        };
        stats.add_sink(sink);
        match gate {
            RowGate::None => {}
            RowGate::Headwise(score) => {
                stats.add_gates(std::iter::once(sigmoid(score)), first_token)
            }
            RowGate::Elementwise(scores) => {
                stats.add_gates(scores.iter().map(|&s| sigmoid(s)), first_token)
            }
        }
    }
}
