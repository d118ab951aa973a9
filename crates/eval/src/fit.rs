//! Finding the largest haystack that fits the token budget.
//!
//! RULER binary-searches the haystack size with a full tokenization per step. The token
//! count of a prompt is close to linear in the haystack size, so a secant (interpolation)
//! search needs only a handful of full tokenizations instead of ~17, and it falls back to
//! bisection whenever the count misbehaves. Each probe costs one build plus one count, O(n),
//! so a fit costs O(n) times a small constant.

/// The largest `n` in `min..=max` with `cost(n) <= budget`, assuming `cost` grows with `n`
/// (roughly linearly). Returns `Err(cost(min))` when even `min` does not fit.
pub(crate) fn largest_fitting(
    min: usize,
    max: usize,
    budget: usize,
    mut cost: impl FnMut(usize) -> usize,
) -> Result<usize, usize> {
    let min_cost = cost(min);
    if min_cost > budget {
        return Err(min_cost);
    }
    if min == max {
        return Ok(min);
    }
    // Invariant: `lo` fits; `hi` (when known) does not.
    let (mut lo, mut lo_cost) = (min, min_cost);
    let mut hi: Option<(usize, usize)> = None;
    // The previous probe, for the secant slope before `hi` is known.
    let mut prev = (min, min_cost);
    let mut first = true;
    for step in 0.. {
        if let Some((h, _)) = hi
            && h == lo + 1
        {
            return Ok(lo);
        }
        if hi.is_none() && lo == max {
            return Ok(max);
        }
        let upper_exclusive = hi.map_or(max + 1, |(h, _)| h);
        let guess = if step >= 24 {
            // Pathological counter: plain bisection always terminates.
            lo + (upper_exclusive - lo) / 2
        } else if first {
            // No slope yet: assume the cost per unit seen at `min` (it over-counts the
            // fixed template, so the guess undershoots and the secant takes over).
            let per_unit = (lo_cost as f64 / lo.max(1) as f64).max(1e-9);
            lo + ((budget - lo_cost) as f64 / per_unit) as usize
        } else {
            let (x1, y1, x2, y2) = match hi {
                Some((h, hc)) => (lo, lo_cost, h, hc),
                None => (prev.0, prev.1, lo, lo_cost),
            };
            let slope = if x2 != x1 && y2 > y1 {
                (y2 - y1) as f64 / (x2 - x1) as f64
            } else {
                0.0
            };
            if slope > 0.0 {
                let target = lo as f64 + (budget as f64 - lo_cost as f64) / slope;
                target.floor().max(0.0) as usize
            } else {
                // Flat or non-monotone segment: double the step, or bisect inside the bracket.
                match hi {
                    Some(_) => lo + (upper_exclusive - lo) / 2,
                    None => lo.saturating_mul(2).max(lo + 1),
                }
            }
        };
        first = false;
        // Stay strictly inside the bracket so every probe shrinks it.
        let guess = guess.clamp(lo + 1, upper_exclusive - 1);
        let c = cost(guess);
        if c <= budget {
            prev = (lo, lo_cost);
            lo = guess;
            lo_cost = c;
        } else {
            hi = Some((guess, c));
            // A secant guess that overshoots is usually off by a unit or two: probe just
            // below it next rather than interpolating from far away.
            if guess > lo + 1 {
                let below = guess - 1;
                let cb = cost(below);
                if cb <= budget {
                    return Ok(below);
                }
                hi = Some((below, cb));
            }
        }
    }
    unreachable!("the loop returns once the bracket closes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_exact_maximum_of_a_linear_cost() {
        for budget in [100usize, 1000, 4096, 131_072] {
            let mut probes = 0;
            let n = largest_fitting(1, 10_000_000, budget, |n| {
                probes += 1;
                37 + n * 13 / 10
            })
            .unwrap();
            assert!(37 + n * 13 / 10 <= budget);
            assert!(37 + (n + 1) * 13 / 10 > budget);
            assert!(probes <= 12, "{probes} probes for budget {budget}");
        }
    }

    #[test]
    fn handles_step_costs_and_the_max_bound() {
        let n = largest_fitting(1, 50, 10_000, |n| n * 7).unwrap();
        assert_eq!(n, 50);
        let n = largest_fitting(5, 1000, 700, |n| 20 * n.div_ceil(3)).unwrap();
        assert!(20 * n.div_ceil(3) <= 700);
        assert!(20 * (n + 1).div_ceil(3) > 700);
        assert_eq!(largest_fitting(5, 10, 3, |n| n), Err(5));
    }
}
