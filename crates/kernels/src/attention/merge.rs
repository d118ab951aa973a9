//! The merge of split-K: one row's softmax states over disjoint key ranges combined into the
//! state over their union, for decode's key parts and the vector prefill's key ranges alike.

/// The log-sum-exp merge of one row: with `m = max m_p`, `l = sum l_p e^(m_p - m)`, and the
/// accumulators `acc = sum acc_p e^(m_p - m)`, which `add_acc(p, weight)` adds for every part
/// `p` that saw keys (in part order; a part with `m_p = -inf` weighs 0). `parts` yields each
/// part's `(m, l, s0)`; returns the merged `(m, l, s0)` (`s0`, the score of key 0: the largest).
pub(crate) fn merge_row<I>(parts: I, mut add_acc: impl FnMut(usize, f32)) -> (f32, f32, f32)
where
    I: Iterator<Item = (f32, f32, f32)> + Clone,
{
    let m = parts.clone().map(|p| p.0).fold(f32::NEG_INFINITY, f32::max);
    let s0 = parts.clone().map(|p| p.2).fold(f32::NEG_INFINITY, f32::max);
    let mut l = 0.0;
    if m != f32::NEG_INFINITY {
        for (p, (m_p, l_p, _)) in parts.enumerate() {
            if m_p == f32::NEG_INFINITY {
                continue;
            }
            let weight = (m_p - m).exp();
            l += l_p * weight;
            add_acc(p, weight);
        }
    }
    (m, l, s0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_weighed_against_the_largest_shift_and_empty_parts_skipped() {
        let parts = [
            (1.0, 2.0, 0.5),
            (f32::NEG_INFINITY, 0.0, -3.0),
            (3.0, 1.0, 0.25),
        ];
        let mut added = Vec::new();
        let (m, l, s0) = merge_row(parts.iter().copied(), |p, w| added.push((p, w)));
        assert_eq!((m, s0), (3.0, 0.5));
        assert_eq!(l, 2.0 * (-2.0f32).exp() + 1.0);
        assert_eq!(added, vec![(0, (-2.0f32).exp()), (2, 1.0)]);
        let none = [(f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY); 2];
        let (m, l, _) = merge_row(none.iter().copied(), |_, _| panic!("no part saw keys"));
        assert_eq!((m, l), (f32::NEG_INFINITY, 0.0));
    }
}
