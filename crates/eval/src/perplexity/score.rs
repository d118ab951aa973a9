//! One scored position's log-probabilities, and the running negative log-likelihood.

/// What perplexity needs of one position's logits: the target's log-probability, the
/// log-sum-exp of the logits (the normaliser, kept so log-probabilities can be formed for any
/// token) and the argmax.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PositionScore {
    pub target_logprob: f64,
    pub logsumexp: f64,
    pub argmax: u32,
}

/// Scores `logits` (one position, `[vocab]`) against `target`, in f64. A NaN logit makes the
/// result NaN, which the caller reports; `target` must be below `logits.len()`.
pub fn score_position(logits: &[f32], target: u32) -> PositionScore {
    let mut argmax = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[argmax] {
            argmax = i;
        }
    }
    let max = logits[argmax];
    let max = max as f64;
    let sum: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
    let logsumexp = max + sum.ln();
    PositionScore {
        target_logprob: logits[target as usize] as f64 - logsumexp,
        logsumexp,
        argmax: argmax as u32,
    }
}

/// The `k` most likely tokens of `logits` as (id, log-probability), most likely first (ties:
/// lower id first). `ids` is scratch space, reused across calls.
pub fn top_k(logits: &[f32], logsumexp: f64, k: usize, ids: &mut Vec<u32>) -> Vec<(u32, f32)> {
    ids.clear();
    ids.extend(0..logits.len() as u32);
    let k = k.min(ids.len());
    let order = |a: &u32, b: &u32| {
        logits[*b as usize]
            .total_cmp(&logits[*a as usize])
            .then(a.cmp(b))
    };
    if k < ids.len() {
        ids.select_nth_unstable_by(k, order);
    }
    ids[..k].sort_unstable_by(order);
    ids[..k]
        .iter()
        .map(|&id| (id, (logits[id as usize] as f64 - logsumexp) as f32))
        .collect()
}

/// The negative log-likelihood of the scored tokens so far: perplexity and its standard error.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NllAccumulator {
    sum: f64,
    sum_sq: f64,
    count: usize,
}

impl NllAccumulator {
    pub fn add(&mut self, nll: f64) {
        self.sum += nll;
        self.sum_sq += nll * nll;
        self.count += 1;
    }

    pub fn count(&self) -> usize {
        self.count
    }

    pub fn mean_nll(&self) -> f64 {
        self.sum / self.count as f64
    }

    /// `exp(mean NLL)`.
    pub fn perplexity(&self) -> f64 {
        self.mean_nll().exp()
    }

    /// The standard error of the perplexity, as llama-perplexity gives it: the standard error
    /// of the mean NLL carried through `exp` to first order (`ppl * se(mean NLL)`). `None` with
    /// fewer than two tokens.
    pub fn perplexity_stderr(&self) -> Option<f64> {
        if self.count < 2 {
            return None;
        }
        let n = self.count as f64;
        let mean = self.mean_nll();
        let variance = (self.sum_sq / n - mean * mean).max(0.0) * n / (n - 1.0);
        Some(self.perplexity() * (variance / n).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_a_known_distribution() {
        // Probabilities 0.5, 0.25, 0.25.
        let logits = [2.0f32.ln(), 0.0, 0.0];
        let s = score_position(&logits, 1);
        assert!((s.target_logprob - 0.25f64.ln()).abs() < 1e-7);
        assert!((s.logsumexp - 4.0f64.ln()).abs() < 1e-6);
        assert_eq!(s.argmax, 0);
    }

    #[test]
    fn top_k_is_sorted_and_normalised() {
        let logits = [0.0f32, 3.0, 1.0, 3.0, -1.0];
        let lse = score_position(&logits, 0).logsumexp;
        let top = top_k(&logits, lse, 3, &mut Vec::new());
        let ids: Vec<u32> = top.iter().map(|t| t.0).collect();
        assert_eq!(ids, [1, 3, 2]);
        assert!((top[0].1 as f64 - (3.0 - lse)).abs() < 1e-6);
        assert_eq!(top_k(&logits, lse, 99, &mut Vec::new()).len(), 5);
    }

    #[test]
    fn perplexity_and_its_error() {
        let mut acc = NllAccumulator::default();
        for nll in [1.0, 2.0, 3.0] {
            acc.add(nll);
        }
        assert!((acc.perplexity() - 2.0f64.exp()).abs() < 1e-12);
        // sample sd 1, n 3: se of the mean 1/sqrt(3)
        let se = acc.perplexity_stderr().unwrap();
        assert!((se - 2.0f64.exp() / 3.0f64.sqrt()).abs() < 1e-9);
        let mut one = NllAccumulator::default();
        one.add(1.0);
        assert_eq!(one.perplexity_stderr(), None);
    }
}
