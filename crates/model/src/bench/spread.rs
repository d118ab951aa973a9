//! Summaries of repeated timings: medians and percentiles of rates.

use serde::Serialize;

/// Median, extremes and the 10th/90th percentiles of a set of rates (e.g. tokens per second).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub p10: f64,
    pub p90: f64,
}

impl Spread {
    /// The spread of `values` (at least one; NaNs sort last). Percentiles by nearest rank.
    pub fn of(values: &[f64]) -> Spread {
        assert!(!values.is_empty(), "a spread of no values");
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |p: f64| sorted[(p * (sorted.len() - 1) as f64).round() as usize];
        Spread {
            median: median_of_sorted(&sorted),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            p10: at(0.1),
            p90: at(0.9),
        }
    }
}

/// The middle value, or the mean of the two middle values of an even count.
fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_percentiles_and_extremes_of_unsorted_rates() {
        let values: Vec<f64> = (1..=11).rev().map(f64::from).collect();
        let s = Spread::of(&values);
        assert_eq!((s.median, s.min, s.max), (6.0, 1.0, 11.0));
        assert_eq!((s.p10, s.p90), (2.0, 10.0));
        assert_eq!(Spread::of(&[4.0, 1.0, 3.0, 2.0]).median, 2.5);
        let one = Spread::of(&[7.0]);
        assert_eq!((one.median, one.p10, one.p90), (7.0, 7.0, 7.0));
    }
}
