//! Samples fill the target length: never over it, and within 1% under it.

mod common;

use gattn_eval::{
    CharCounter, EvalError, SampleSpec, TaskName, TokenCounter, WhitespaceCounter, generate_sample,
    generate_sample_with,
};

const LENGTHS: [usize; 6] = [1024, 2048, 4096, 8192, 16384, 32768];

/// The synthetic tasks; the QA fixtures are far too small to fill these lengths.
fn synthetic_tasks() -> impl Iterator<Item = TaskName> {
    TaskName::all()
        .iter()
        .copied()
        .filter(|t| !matches!(t, TaskName::Qa1 | TaskName::Qa2))
}

fn check(task: TaskName, length: usize, counter: &dyn TokenCounter, corpus: &gattn_eval::Corpus) {
    // Long lengths cost more build time: sample a single index there.
    let sample = generate_sample(task, length, 0, common::SEED, counter, corpus)
        .unwrap_or_else(|e| panic!("{task} @ {length}: {e}"));
    let prompt = format!("{}{}", sample.input, sample.answer_prefix);
    let measured = counter.count_tokens(&prompt) + sample.tokens_to_generate;
    assert_eq!(
        measured, sample.length_tokens,
        "{task} @ {length}: length_tokens is stale"
    );
    assert!(
        measured <= length,
        "{task} @ {length}: {measured} tokens exceed the target"
    );
    let gap = length - measured;
    assert!(
        gap * 100 <= length,
        "{task} @ {length}: {measured} tokens is more than 1% under the target ({gap} short)"
    );
}

#[test]
fn whitespace_counter_lengths_within_one_percent_under_target() {
    let corpus = common::corpus_with_qa();
    for task in synthetic_tasks() {
        for length in LENGTHS {
            check(task, length, &WhitespaceCounter, &corpus);
        }
    }
}

#[test]
fn char_counter_lengths_within_one_percent_under_target() {
    let corpus = common::corpus_with_qa();
    let counter = CharCounter { chars_per_token: 4 };
    for task in synthetic_tasks() {
        for length in [4096, 16384] {
            check(task, length, &counter, &corpus);
        }
    }
}

#[test]
fn reserved_tokens_are_kept_free() {
    let corpus = common::corpus_with_qa();
    let spec = SampleSpec {
        task: TaskName::NiahSingle2,
        length: 4096,
        index: 0,
        seed: common::SEED,
        reserved_tokens: 300,
    };
    let s = generate_sample_with(&spec, &WhitespaceCounter, &corpus).unwrap();
    assert!(s.length_tokens <= 4096);
    assert!(s.length_tokens >= 4096 - 41, "{}", s.length_tokens);
    let plain = generate_sample(
        TaskName::NiahSingle2,
        4096,
        0,
        common::SEED,
        &WhitespaceCounter,
        &corpus,
    )
    .unwrap();
    let plain_prompt =
        WhitespaceCounter.count_tokens(&format!("{}{}", plain.input, plain.answer_prefix));
    let reserved_prompt =
        WhitespaceCounter.count_tokens(&format!("{}{}", s.input, s.answer_prefix));
    assert!(
        plain_prompt >= reserved_prompt + 290,
        "{plain_prompt} vs {reserved_prompt}"
    );
}

#[test]
fn too_short_targets_and_missing_qa_files_are_typed_errors() {
    let corpus = gattn_eval::Corpus::builtin();
    let err = generate_sample(
        TaskName::NiahSingle1,
        100,
        0,
        1,
        &WhitespaceCounter,
        &corpus,
    )
    .unwrap_err();
    assert!(matches!(err, EvalError::LengthTooShort { .. }), "{err}");
    for task in [TaskName::Qa1, TaskName::Qa2] {
        let err = generate_sample(task, 4096, 0, 1, &WhitespaceCounter, &corpus).unwrap_err();
        assert!(matches!(err, EvalError::MissingQaDataset { .. }), "{err}");
        assert!(err.to_string().starts_with("skipped: "), "{err}");
    }
}

/// One long sample per generator family at 131072 tokens, to keep the fit honest where
/// the haystack repeats the corpus (essay) and where cwe runs past the wonderwords list.
#[test]
fn longest_ruler_length_fits() {
    let corpus = common::corpus_with_qa();
    for task in [TaskName::NiahSingle2, TaskName::Cwe, TaskName::Vt] {
        check(task, 131_072, &WhitespaceCounter, &corpus);
    }
}
