//! Choosing the next token from logits: greedy, temperature, top-k, top-p, with a seeded RNG.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    /// 0 = greedy (argmax).
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens (0 = all).
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches `top_p` (1 = all).
    pub top_p: f32,
    pub seed: u64,
}

impl SamplingParams {
    /// The ranges in which sampling means something (a NaN temperature would compare false
    /// everywhere and sample garbage); on failure, the parameter's name and why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err((
                "temperature",
                format!(
                    "is {}, expected a number >= 0 (0 = greedy)",
                    self.temperature
                ),
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err((
                "top_p",
                format!("is {}, expected a number in (0, 1]", self.top_p),
            ));
        }
        Ok(())
    }
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
        }
    }
}

pub struct Sampler {
    params: SamplingParams,
    rng: StdRng,
    /// (token, logit) candidates and their probabilities, reused: sampling allocates nothing
    /// after the first token.
    candidates: Vec<(u32, f32)>,
    probs: Vec<f32>,
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Sampler {
        Sampler {
            params,
            rng: StdRng::seed_from_u64(params.seed),
            candidates: Vec::new(),
            probs: Vec::new(),
        }
    }

    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.params.temperature <= 0.0 {
            return argmax(logits);
        }
        // Candidates sorted by logit, most likely first (ties by id: a total order, so the kept
        // set and its order are deterministic).
        let by_rank = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let (candidates, probs) = (&mut self.candidates, &mut self.probs);
        candidates.clear();
        candidates.extend(logits.iter().enumerate().map(|(i, &l)| (i as u32, l)));
        let top_k = self.params.top_k;
        if top_k > 0 && top_k < candidates.len() {
            // Only the top k are needed: pick them out in linear time before sorting them
            // (sorting all 151936 logits took ~3% of a decode step).
            candidates.select_nth_unstable_by(top_k - 1, by_rank);
            candidates.truncate(top_k);
        }
        // A total order: the unstable sort (which needs no buffer) gives the stable sort's order.
        candidates.sort_unstable_by(by_rank);
        let max = candidates[0].1;
        probs.clear();
        probs.extend(
            candidates
                .iter()
                .map(|&(_, l)| ((l - max) / self.params.temperature).exp()),
        );
        let total: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= total);
        if self.params.top_p < 1.0 {
            let mut cumulative = 0.0;
            let keep = probs
                .iter()
                .position(|&p| {
                    cumulative += p;
                    cumulative >= self.params.top_p
                })
                .map_or(probs.len(), |i| i + 1);
            probs.truncate(keep);
        }
        let total: f32 = probs.iter().sum();
        let mut draw = self.rng.random::<f32>() * total;
        for (i, &p) in probs.iter().enumerate() {
            if draw < p {
                return candidates[i].0;
            }
            draw -= p;
        }
        candidates[probs.len() - 1].0
    }
}

/// The index of the largest logit (the first one on ties); NaN never wins.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] || logits[best].is_nan() {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_argmax() {
        let mut s = Sampler::new(SamplingParams::default());
        assert_eq!(s.sample(&[0.1, 3.0, -1.0, 2.9]), 1);
    }

    #[test]
    fn top_k_one_is_greedy_at_any_temperature() {
        let params = SamplingParams {
            temperature: 5.0,
            top_k: 1,
            top_p: 1.0,
            seed: 7,
        };
        let mut s = Sampler::new(params);
        for _ in 0..20 {
            assert_eq!(s.sample(&[0.1, 3.0, -1.0, 2.9]), 1);
        }
    }

    #[test]
    fn top_k_keeps_the_k_largest_logits_ties_by_lowest_id() {
        // Ranks: id 5 (9.0), then ids 1 and 3 tie (4.0; 1 first), then id 0 (3.0), ...
        let logits = [3.0, 4.0, -1.0, 4.0, 2.0, 9.0, 0.5, 4.0];
        let draws = |top_k| {
            let mut s = Sampler::new(SamplingParams {
                temperature: 100.0,
                top_k,
                top_p: 1.0,
                seed: 3,
            });
            let mut seen: Vec<u32> = (0..2000).map(|_| s.sample(&logits)).collect();
            seen.sort();
            seen.dedup();
            seen
        };
        assert_eq!(draws(2), [1, 5]);
        assert_eq!(draws(4), [1, 3, 5, 7]);
        assert_eq!(draws(5), [0, 1, 3, 5, 7]);
        assert_eq!(draws(8).len(), 8);
    }

    #[test]
    fn same_seed_same_draws_and_top_p_excludes_the_tail() {
        let logits = [2.0, 1.9, 1.8, -10.0];
        let params = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.9,
            seed: 42,
        };
        let draw = |p| {
            let mut s = Sampler::new(p);
            (0..200).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        let a = draw(params);
        assert_eq!(a, draw(params));
        assert!(a.iter().all(|&t| t != 3), "top-p keeps the tail token out");
        assert!(a.iter().any(|&t| t != a[0]), "temperature 1 is not greedy");
    }
}
