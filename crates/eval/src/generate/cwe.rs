//! RULER's common words extraction generator
//! (`scripts/data/synthetic/common_words_extraction.py`).

use super::{Built, SampleSpec, fit_sample};
use crate::corpus::Corpus;
use crate::error::EvalError;
use crate::generate::Sample;
use crate::rng::SampleRng;
use crate::task::{TaskConfig, TaskFamily};
use crate::templates::{COMMON_WORDS, fill};
use crate::tokens::TokenCounter;

/// "1. word1 2. word2 ..."
fn numbered(words: &[String]) -> String {
    let mut out = String::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&(i + 1).to_string());
        out.push_str(". ");
        out.push_str(w);
    }
    out
}

/// RULER's `get_example`: `num_words` distinct words, the first `common_nums` repeated
/// `common_repeats` times and the rest `uncommon_repeats` times, in a fixed-seed shuffle.
#[allow(clippy::too_many_arguments)]
fn example(
    spec: &SampleSpec,
    rng: &mut SampleRng,
    words: &[String],
    fallback: &[String],
    num_words: usize,
    common_repeats: usize,
    uncommon_repeats: usize,
    common_nums: usize,
) -> (String, Vec<String>) {
    let full = if num_words <= words.len() {
        rng.sample(words, num_words)
    } else {
        rng.sample(fallback, num_words)
    };
    let (common, uncommon) = full.split_at(common_nums.min(full.len()));
    let mut list: Vec<String> =
        Vec::with_capacity(common.len() * common_repeats + uncommon.len() * uncommon_repeats);
    for _ in 0..common_repeats {
        list.extend_from_slice(common);
    }
    for _ in 0..uncommon_repeats {
        list.extend_from_slice(uncommon);
    }
    spec.seed_only_rng("cwe-list-order").shuffle(&mut list);
    (numbered(&list), common.to_vec())
}

pub(crate) fn generate(
    spec: &SampleSpec,
    config: &TaskConfig,
    counter: &dyn TokenCounter,
    corpus: &Corpus,
) -> Result<Sample, EvalError> {
    let TaskFamily::CommonWords {
        freq_cw,
        freq_ucw,
        num_cw,
    } = config.family
    else {
        unreachable!("cwe::generate called for {:?}", config.family);
    };
    // RULER: sorted(set(nouns + adjs + verbs)), then random.Random(seed).shuffle(words).
    let mut words = corpus.cwe_words.clone();
    spec.seed_only_rng("cwe-words").shuffle(&mut words);
    let fallback = &corpus.english_words;
    // RULER switches to shorter lists below 4096 tokens.
    let short = spec.length < 4096;
    let (shot_words, shot_cr, shot_ucr, main_cr, main_ucr) = if short {
        (20, 3, 1, 6, 1)
    } else {
        (40, 10, 3, freq_cw, freq_ucw)
    };
    let fill_task = |context: &str| {
        let fields = [("context", context), ("query", ""), ("num_cw", "")];
        (
            fill(COMMON_WORDS.template, &fields),
            fill(COMMON_WORDS.answer_prefix, &fields),
        )
    };
    let build = |n: usize| {
        let mut rng = spec.layout_rng();
        let (shot_context, shot_answer) = example(
            spec, &mut rng, &words, fallback, shot_words, shot_cr, shot_ucr, num_cw,
        );
        let (context, answer) = example(
            spec, &mut rng, &words, fallback, n, main_cr, main_ucr, num_cw,
        );
        let (shot_input, shot_prefix) = fill_task(&shot_context);
        let (input, answer_prefix) = fill_task(&context);
        Built {
            input: format!(
                "{shot_input}{shot_prefix} {}\n{input}",
                numbered(&shot_answer)
            ),
            answer_prefix,
            references: answer,
            insertions: Vec::new(),
        }
    };
    let max_words = words.len().max(fallback.len());
    let needed_min = num_cw.max(shot_words);
    if max_words < needed_min {
        return Err(EvalError::NotEnoughWords {
            task: spec.task.as_str(),
            available: max_words,
            needed: needed_min,
            length: spec.length,
        });
    }
    let sample = fit_sample(spec, config, counter, num_cw..=max_words, build)?;
    if sample.haystack_units == max_words {
        // The whole vocabulary fit with room to spare: the sample is shorter than asked.
        return Err(EvalError::NotEnoughWords {
            task: spec.task.as_str(),
            available: max_words,
            needed: max_words + 1,
            length: spec.length,
        });
    }
    Ok(sample)
}
