//! A run compared with the saved top-k log-probabilities of a base run, position by position:
//! KL divergence, top-1 agreement and the change in the correct token's probability, the
//! statistics llama-perplexity's `--kl-divergence` reports.
//!
//! The base is known only on its top-k tokens. The divergence is computed between the two
//! distributions coarsened to k + 1 outcomes: the base's top-k tokens, each with its own
//! probability, and one "tail" outcome holding all other tokens (base: `1 - sum of the kept
//! probabilities`; run: `1 - sum of its probabilities of the same k tokens`). That is exact when
//! the base's tail is empty and otherwise a lower bound of the full KL divergence (merging
//! outcomes never increases it); with k = 32 the tail of a trained model is usually a few
//! percent at most. llama.cpp stores every token's log-probability (16 bits each) instead, and
//! has no tail. Tails below [`TAIL_EPS`] on the base side (rounding of the f32 log-probabilities
//! when k covers the vocabulary) count as empty.

use serde::Serialize;

use super::logits_file::PositionRecord;

/// Base tail mass treated as zero: the rounding error of `1 - sum` over f32 probabilities.
pub const TAIL_EPS: f64 = 1e-6;

/// One position of a run against the base.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    /// KL(base || run) over the base's top-k tokens and the tail.
    pub kld: f64,
    /// The run's most likely token is the base's.
    pub same_top: bool,
    /// `p_run(correct) - p_base(correct)`.
    pub delta_p: f64,
}

/// Compares the run's `logits` of one position (`[vocab]`, normalised by `logsumexp`, most
/// likely token `argmax`) with the base's record of the same position.
pub fn compare(base: &PositionRecord, logits: &[f32], logsumexp: f64, argmax: u32) -> Comparison {
    let run_logprob = |id: u32| logits[id as usize] as f64 - logsumexp;
    let mut kld = 0.0;
    let (mut base_kept, mut run_kept) = (0.0, 0.0);
    for &(id, base_logprob) in &base.top {
        let (lp, lq) = (base_logprob as f64, run_logprob(id));
        let p = lp.exp();
        if p > 0.0 {
            kld += p * (lp - lq);
        }
        base_kept += p;
        run_kept += lq.exp();
    }
    let base_tail = 1.0 - base_kept;
    if base_tail > TAIL_EPS {
        let run_tail = (1.0 - run_kept).max(f64::MIN_POSITIVE);
        kld += base_tail * (base_tail.ln() - run_tail.ln());
    }
    Comparison {
        kld,
        same_top: base.top.first().map(|t| t.0) == Some(argmax),
        delta_p: run_logprob(base.target).exp() - (base.target_logprob as f64).exp(),
    }
}

/// The comparisons of all positions so far.
#[derive(Debug, Clone, Default)]
pub struct KlStats {
    klds: Vec<f64>,
    same_top: usize,
    delta_p_sum: f64,
    delta_p_sum_sq: f64,
    base_nll_sum: f64,
}

/// What `--kl-divergence` reports (the keys of `--json`'s `kl_divergence` object).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KlSummary {
    pub positions: usize,
    pub mean_kld: f64,
    pub mean_kld_stderr: f64,
    pub max_kld: f64,
    pub median_kld: f64,
    pub p99_kld: f64,
    /// Share of positions whose most likely token is the base's.
    pub same_top: f64,
    pub same_top_stderr: f64,
    /// Mean of `p_run(correct) - p_base(correct)`.
    pub mean_delta_p: f64,
    pub mean_delta_p_stderr: f64,
    pub rms_delta_p: f64,
    /// The base run's perplexity on the same positions (from the saved file).
    pub base_perplexity: f64,
}

impl KlStats {
    pub fn add(&mut self, base: &PositionRecord, comparison: Comparison) {
        self.klds.push(comparison.kld);
        self.same_top += comparison.same_top as usize;
        self.delta_p_sum += comparison.delta_p;
        self.delta_p_sum_sq += comparison.delta_p * comparison.delta_p;
        self.base_nll_sum -= base.target_logprob as f64;
    }

    /// `None` before any position.
    pub fn summary(&self) -> Option<KlSummary> {
        let n = self.klds.len();
        if n == 0 {
            return None;
        }
        let nf = n as f64;
        let stderr = |sum: f64, sum_sq: f64| {
            if n < 2 {
                return 0.0;
            }
            let mean = sum / nf;
            ((sum_sq / nf - mean * mean).max(0.0) / (nf - 1.0)).sqrt()
        };
        let kld_sum: f64 = self.klds.iter().sum();
        let kld_sum_sq: f64 = self.klds.iter().map(|k| k * k).sum();
        let mut sorted = self.klds.clone();
        sorted.sort_by(f64::total_cmp);
        let quantile = |q: f64| sorted[((nf - 1.0) * q).round() as usize];
        let same = self.same_top as f64;
        Some(KlSummary {
            positions: n,
            mean_kld: kld_sum / nf,
            mean_kld_stderr: stderr(kld_sum, kld_sum_sq),
            max_kld: sorted[n - 1],
            median_kld: quantile(0.5),
            p99_kld: quantile(0.99),
            same_top: same / nf,
            same_top_stderr: stderr(same, same),
            mean_delta_p: self.delta_p_sum / nf,
            mean_delta_p_stderr: stderr(self.delta_p_sum, self.delta_p_sum_sq),
            rms_delta_p: (self.delta_p_sum_sq / nf).sqrt(),
            base_perplexity: (self.base_nll_sum / nf).exp(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(target: u32, probs: &[(u32, f64)]) -> PositionRecord {
        PositionRecord {
            target,
            target_logprob: probs.iter().find(|p| p.0 == target).unwrap().1.ln() as f32,
            logsumexp: 0.0,
            top: probs.iter().map(|&(id, p)| (id, p.ln() as f32)).collect(),
        }
    }

    #[test]
    fn known_pair_of_distributions() {
        // Base (0.5, 0.25, 0.25) fully kept; run (0.25, 0.5, 0.25) as logits (lse = 0).
        let base = record(1, &[(0, 0.5), (1, 0.25), (2, 0.25)]);
        let logits = [0.25f32.ln(), 0.5f32.ln(), 0.25f32.ln()];
        let c = compare(&base, &logits, 0.0, 1);
        // 0.5 ln 2 + 0.25 ln 0.5 = 0.25 ln 2
        assert!((c.kld - 0.25 * 2.0f64.ln()).abs() < 1e-6, "{}", c.kld);
        assert!(!c.same_top);
        assert!((c.delta_p - 0.25).abs() < 1e-6);
    }

    #[test]
    fn the_tail_is_one_outcome() {
        // Base keeps token 0 (0.5); tail 0.5. Run: token 0 at 0.25, the rest 0.75.
        let base = record(0, &[(0, 0.5)]);
        let logits = [0.25f32.ln(), 0.375f32.ln(), 0.375f32.ln()];
        let c = compare(&base, &logits, 0.0, 1);
        let expected = 0.5 * (0.5f64 / 0.25).ln() + 0.5 * (0.5f64 / 0.75).ln();
        assert!((c.kld - expected).abs() < 1e-6, "{} vs {expected}", c.kld);
    }

    #[test]
    fn identical_distributions_agree() {
        let base = record(2, &[(1, 0.7), (2, 0.2), (0, 0.1)]);
        let logits = [0.1f32.ln(), 0.7f32.ln(), 0.2f32.ln()];
        let c = compare(&base, &logits, 0.0, 1);
        assert!(c.kld.abs() < 1e-6);
        assert!(c.same_top);
        let mut stats = KlStats::default();
        stats.add(&base, c);
        stats.add(&base, c);
        let s = stats.summary().unwrap();
        assert_eq!(s.same_top, 1.0);
        assert!((s.base_perplexity - 5.0).abs() < 1e-5);
        assert_eq!(KlStats::default().summary(), None);
    }
}
