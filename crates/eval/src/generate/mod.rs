//! Sample generation: one module per RULER generator, sharing the length fit here.

mod cwe;
mod fwe;
mod niah;
mod qa;
mod vt;

use crate::corpus::Corpus;
use crate::error::EvalError;
use crate::fit::largest_fitting;
use crate::rng::SampleRng;
use crate::task::{TaskConfig, TaskFamily, TaskName};
use crate::tokens::TokenCounter;

/// Where one needle (or chain link) was put into the haystack.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Insertion {
    /// The exact inserted text.
    pub text: String,
    /// Planned depth as a fraction of the haystack in front of it: RULER's depth percent / 100
    /// for essay haystacks, insertion index / haystack lines for line haystacks.
    pub depth: f64,
}

/// One generated RULER sample. The prompt the model sees (without a chat template) is
/// `input + answer_prefix`; with a chat template RULER puts `input` in the user turn and
/// appends `answer_prefix` after the assistant header.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    pub task: TaskName,
    /// Target length in tokens (RULER's `max_seq_length`).
    pub length: usize,
    pub index: usize,
    pub seed: u64,
    pub input: String,
    pub answer_prefix: String,
    /// RULER's `outputs`: the strings the prediction is matched against.
    pub references: Vec<String>,
    pub tokens_to_generate: usize,
    /// count(input + answer_prefix) + reserved tokens + tokens_to_generate, always <= length.
    pub length_tokens: usize,
    /// Size of the haystack the fit settled on, in the generator's unit (essay words, noise
    /// blocks, distractor lines, list words, coded words, documents).
    pub haystack_units: usize,
    pub insertions: Vec<Insertion>,
}

impl Sample {
    /// The raw-template prompt: `input + answer_prefix`, what RULER sends to a base model.
    pub fn prompt(&self) -> String {
        format!("{}{}", self.input, self.answer_prefix)
    }
}

/// What to generate. `reserved_tokens` is room kept for a chat template around the prompt
/// (RULER's `model_template_token`); 0 for the raw template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleSpec {
    pub task: TaskName,
    pub length: usize,
    pub index: usize,
    pub seed: u64,
    pub reserved_tokens: usize,
}

/// A prompt built for one haystack size.
pub(crate) struct Built {
    pub(crate) input: String,
    pub(crate) answer_prefix: String,
    pub(crate) references: Vec<String>,
    pub(crate) insertions: Vec<Insertion>,
}

impl SampleSpec {
    /// Randomness that must not change with the haystack size (keys, values, chains).
    pub(crate) fn fixed_rng(&self) -> SampleRng {
        SampleRng::derive(
            self.seed,
            self.task.as_str(),
            &[self.length as u64, self.index as u64, 0],
        )
    }

    /// Randomness drawn afresh for every haystack size tried (depths, distractors).
    pub(crate) fn layout_rng(&self) -> SampleRng {
        SampleRng::derive(
            self.seed,
            self.task.as_str(),
            &[self.length as u64, self.index as u64, 1],
        )
    }

    /// RULER's `random.Random(args.random_seed)` shuffles: seeded by the run seed alone.
    pub(crate) fn seed_only_rng(&self, label: &str) -> SampleRng {
        SampleRng::derive(self.seed, label, &[])
    }
}

/// Generates sample `index` of `task` at `length` tokens, with no tokens reserved.
pub fn generate_sample(
    task: TaskName,
    length: usize,
    index: usize,
    seed: u64,
    counter: &dyn TokenCounter,
    corpus: &Corpus,
) -> Result<Sample, EvalError> {
    generate_sample_with(
        &SampleSpec {
            task,
            length,
            index,
            seed,
            reserved_tokens: 0,
        },
        counter,
        corpus,
    )
}

pub fn generate_sample_with(
    spec: &SampleSpec,
    counter: &dyn TokenCounter,
    corpus: &Corpus,
) -> Result<Sample, EvalError> {
    let config = TaskConfig::of(spec.task);
    match config.family {
        TaskFamily::Niah { .. } => niah::generate(spec, &config, counter, corpus),
        TaskFamily::VariableTracking { .. } => vt::generate(spec, &config, counter, corpus),
        TaskFamily::CommonWords { .. } => cwe::generate(spec, &config, counter, corpus),
        TaskFamily::FreqWords { .. } => fwe::generate(spec, &config, counter),
        TaskFamily::Qa { .. } => qa::generate(spec, &config, counter, corpus),
    }
}

/// Fits the haystack to the budget and builds the final sample.
pub(crate) fn fit_sample(
    spec: &SampleSpec,
    config: &TaskConfig,
    counter: &dyn TokenCounter,
    units: std::ops::RangeInclusive<usize>,
    mut build: impl FnMut(usize) -> Built,
) -> Result<Sample, EvalError> {
    let overhead = spec.reserved_tokens + config.tokens_to_generate;
    let too_short = |needed: usize| EvalError::LengthTooShort {
        task: spec.task.as_str(),
        length: spec.length,
        needed,
        tokens_to_generate: config.tokens_to_generate,
    };
    let prompt_tokens = |b: &Built| {
        let mut prompt = String::with_capacity(b.input.len() + b.answer_prefix.len());
        prompt.push_str(&b.input);
        prompt.push_str(&b.answer_prefix);
        counter.count_tokens(&prompt)
    };
    let (min, max) = (*units.start(), *units.end());
    if spec.length < overhead {
        return Err(too_short(overhead + prompt_tokens(&build(min))));
    }
    let budget = spec.length - overhead;
    let units = largest_fitting(min, max, budget, |n| prompt_tokens(&build(n)))
        .map_err(|cost| too_short(cost + overhead))?;
    let built = build(units);
    let length_tokens = prompt_tokens(&built) + overhead;
    debug_assert!(length_tokens <= spec.length);
    Ok(Sample {
        task: spec.task,
        length: spec.length,
        index: spec.index,
        seed: spec.seed,
        input: built.input,
        answer_prefix: built.answer_prefix,
        references: built.references,
        tokens_to_generate: config.tokens_to_generate,
        length_tokens,
        haystack_units: units,
        insertions: built.insertions,
    })
}

/// A generous cap on haystack units: every unit costs at least a token with any real
/// tokenizer, so no fit needs more units than the target length (plus slack for counters
/// that merge text).
pub(crate) fn unit_cap(length: usize) -> usize {
    length.saturating_mul(4).max(64)
}

/// Appends `words[from..to]` (cyclic over the corpus) joined by single spaces.
pub(crate) fn push_words(out: &mut String, words: &[Box<str>], from: usize, to: usize) {
    for i in from..to {
        if i > from {
            out.push(' ');
        }
        out.push_str(&words[i % words.len()]);
    }
}
