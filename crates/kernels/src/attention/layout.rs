//! The permuted element order the microkernels work in (see `microkernel`): element
//! `e = E * (b * L + i) + j` of a row sits at slot `(b * E + j) * L + i`, where `L` is the SIMD
//! lane count and `E` the elements per storage word. Slots past the head dim are zero.

/// Slots of one permuted row: whole registers covering `row_words` words.
pub(crate) fn permuted_len(row_words: usize, elems_per_word: usize, lanes: usize) -> usize {
    row_words.div_ceil(lanes) * elems_per_word * lanes
}

/// Slot of element `e`.
#[inline]
pub(crate) fn slot_of(e: usize, elems_per_word: usize, lanes: usize) -> usize {
    let word = e / elems_per_word;
    let j = e % elems_per_word;
    let (b, i) = (word / lanes, word % lanes);
    (b * elems_per_word + j) * lanes + i
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
    for (e, &v) in x.iter().enumerate() {
        out[slot_of(e, elems_per_word, lanes)] = v * factor;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
