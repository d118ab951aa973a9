//! The permuted element order the microkernels work in (see `microkernel`): element
//! `e = E * (b * L + i) + j` of a row sits at slot `(b * E + j) * L + i`, where `L` is the SIMD
//! lane count and `E` the elements per storage word. Slots past the head dim are zero.

/// Slots of one permuted row: whole registers covering `row_words` words.
pub(crate) fn permuted_len(row_words: usize, elems_per_word: usize, lanes: usize) -> usize {
    row_words.div_ceil(lanes) * elems_per_word * lanes
}

/// Slot of element `e` (the definition; the kernels walk it with [`for_each_slot`]).
#[cfg(test)]
fn slot_of(e: usize, elems_per_word: usize, lanes: usize) -> usize {
    let word = e / elems_per_word;
    let j = e % elems_per_word;
    let (b, i) = (word / lanes, word % lanes);
    (b * elems_per_word + j) * lanes + i
}

/// Calls `f(element, slot)` for the elements `0..elems` of a row, slot by slot: the same pairs as
/// [`slot_of`], without its divisions by run-time values (two per element made the epilogue a
/// visible share of a prefill).
#[inline]
pub(crate) fn for_each_slot(
    elems: usize,
    elems_per_word: usize,
    lanes: usize,
    mut f: impl FnMut(usize, usize),
) {
    let blocks = elems.div_ceil(elems_per_word * lanes);
    let mut slot = 0;
    for b in 0..blocks {
        for j in 0..elems_per_word {
            for i in 0..lanes {
                let e = elems_per_word * (b * lanes + i) + j;
                if e < elems {
                    f(e, slot);
                }
                slot += 1;
            }
        }
    }
}

/// Writes `x * factor` into `out` in permuted order (`out` zeroed first, so padding stays 0).
pub(crate) fn permute_scaled(
    x: &[f32],
    factor: f32,
    elems_per_word: usize,
    lanes: usize,
    out: &mut [f32],
) {
    out.iter_mut().for_each(|v| *v = 0.0);
    for_each_slot(x.len(), elems_per_word, lanes, |e, slot| {
        out[slot] = x[e] * factor
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_each_slot_visits_every_element_at_its_slot() {
        for (head_dim, e, lanes) in [
            (80, 4, 16),
            (128, 2, 8),
            (65, 1, 16),
            (66, 4, 1),
            (66, 2, 4),
        ] {
            let mut seen = vec![false; head_dim];
            for_each_slot(head_dim, e, lanes, |d, slot| {
                assert_eq!(slot, slot_of(d, e, lanes), "element {d}");
                assert!(!seen[d], "element {d} visited twice");
                seen[d] = true;
            });
            assert!(seen.iter().all(|&s| s), "every element visited");
        }
    }

    #[test]
    fn slots_are_a_permutation_within_the_padded_row() {
        for (row_words, e, lanes) in [(20, 4, 16), (64, 2, 8), (65, 1, 16), (17, 4, 1), (33, 2, 4)]
        {
            let head_dim = row_words * e;
            let len = permuted_len(row_words, e, lanes);
            let mut seen = vec![false; len];
            for d in 0..head_dim {
                let s = slot_of(d, e, lanes);
                assert!(
                    s < len && !seen[s],
                    "slot {s} of element {d} reused or out of range"
                );
                seen[s] = true;
            }
        }
    }
}
