//! RULER's frequent words extraction generator
//! (`scripts/data/synthetic/freq_words_extraction.py`).

use std::collections::BTreeSet;

use super::{Built, SampleSpec, fit_sample, unit_cap};
use crate::error::EvalError;
use crate::generate::Sample;
use crate::rng::LOWERCASE;
use crate::task::{TaskConfig, TaskFamily};
use crate::templates::{FREQ_WORDS, fill};
use crate::tokens::TokenCounter;

/// The Riemann zeta function for `s > 1` (scipy.special.zeta with one argument):
/// a direct sum plus the Euler-Maclaurin tail, accurate to ~1e-12 for s >= 1.1.
fn zeta(s: f64) -> f64 {
    const N: usize = 1000;
    let n = N as f64;
    let head: f64 = (1..N).map(|k| (k as f64).powf(-s)).sum();
    head + n.powf(1.0 - s) / (s - 1.0) + 0.5 * n.powf(-s) + s * n.powf(-s - 1.0) / 12.0
}

/// k^-alpha; exact multiplication for the integer alphas RULER uses, so counts do not
/// depend on the platform's `pow`.
fn inverse_power(k: usize, alpha: f64) -> f64 {
    if alpha.fract() == 0.0 && (1.0..=8.0).contains(&alpha) {
        let k = k as f64;
        let mut p = 1.0;
        for _ in 0..alpha as u32 {
            p *= k;
        }
        1.0 / p
    } else {
        (k as f64).powf(-alpha)
    }
}

pub(crate) fn generate(
    spec: &SampleSpec,
    config: &TaskConfig,
    counter: &dyn TokenCounter,
) -> Result<Sample, EvalError> {
    let TaskFamily::FreqWords {
        alpha,
        coded_wordlen,
    } = config.family
    else {
        unreachable!("fwe::generate called for {:?}", config.family);
    };
    // RULER: vocab_size = max_seq_length // 50 (after removing the model template tokens).
    let vocab_size = spec.length.saturating_sub(spec.reserved_tokens) / 50;
    if vocab_size < 4 {
        return Err(EvalError::LengthTooShort {
            task: spec.task.as_str(),
            length: spec.length,
            needed: 200 + spec.reserved_tokens,
            tokens_to_generate: config.tokens_to_generate,
        });
    }
    // Random distinct coded words, sorted, shuffled with the run seed; rank 1 is noise.
    let mut rng = spec.fixed_rng();
    let mut vocab = BTreeSet::new();
    while vocab.len() < vocab_size {
        vocab.insert(rng.string_from(LOWERCASE, coded_wordlen));
    }
    let mut vocab: Vec<String> = vocab.into_iter().collect();
    spec.seed_only_rng("fwe-vocab-order").shuffle(&mut vocab);
    vocab[0] = "...".to_string();
    let references: Vec<String> = vocab[1..4].to_vec();
    let zeta_alpha = zeta(alpha);

    let build = |num_words: usize| {
        // Rank k appears int(num_words * k^-alpha / zeta(alpha)) times.
        let mut words: Vec<&str> = Vec::new();
        for (k, w) in vocab.iter().enumerate() {
            let count = (num_words as f64 * inverse_power(k + 1, alpha) / zeta_alpha) as usize;
            words.extend(std::iter::repeat_n(w.as_str(), count));
        }
        spec.seed_only_rng("fwe-text-order").shuffle(&mut words);
        let context = words.join(" ");
        let fields = [("context", context.as_str()), ("query", "")];
        Built {
            input: fill(FREQ_WORDS.template, &fields),
            answer_prefix: fill(FREQ_WORDS.answer_prefix, &fields),
            references: references.clone(),
            insertions: Vec::new(),
        }
    };
    fit_sample(spec, config, counter, 1..=unit_cap(spec.length), build)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeta_matches_known_values() {
        assert!((zeta(2.0) - std::f64::consts::PI.powi(2) / 6.0).abs() < 1e-10);
        assert!((zeta(4.0) - std::f64::consts::PI.powi(4) / 90.0).abs() < 1e-10);
        assert!((zeta(1.5) - 2.612_375_348_685_488).abs() < 1e-9);
    }
}
