//! Golden samples: the same seed must give the same text, byte for byte, forever.
//! Regenerate (after an intended change only) with `GATTN_EVAL_BLESS=1 cargo test -p gattn-eval --test golden`.
//!
//! The golden files only pin what the generator once wrote; whether those answers are right is
//! checked by `every_answer_follows_from_its_own_text`, which re-derives each sample's references
//! from its input by RULER's definition of the task (needles named by the question, the variable
//! chain, word counts), with none of the generator's code.

mod common;

use std::collections::HashMap;

use gattn_eval::{Sample, TaskName, WhitespaceCounter, generate_sample};

/// Length per task for the golden files: short enough to review, long enough to hold a
/// real haystack. cwe and vt at 4096 take RULER's long-context branch (cwe switches its
/// list sizes below 4096).
fn golden_length(task: TaskName) -> usize {
    match task {
        TaskName::Cwe => 4096,
        TaskName::Qa1 | TaskName::Qa2 => 300,
        _ => 1024,
    }
}

fn render(samples: &[Sample]) -> String {
    let mut out = serde_json::to_string_pretty(samples).expect("samples serialize");
    out.push('\n');
    out
}

#[test]
fn every_generator_matches_its_golden_file() {
    let corpus = common::corpus_with_qa();
    let mut mismatches = Vec::new();
    for &task in TaskName::all() {
        let length = golden_length(task);
        let samples: Vec<Sample> = [0usize, 1]
            .iter()
            .map(|&index| {
                generate_sample(
                    task,
                    length,
                    index,
                    common::SEED,
                    &WhitespaceCounter,
                    &corpus,
                )
                .unwrap_or_else(|e| panic!("{task}: {e}"))
            })
            .collect();
        let text = render(&samples);
        let path = common::tests_dir()
            .join("golden")
            .join(format!("{task}.json"));
        if common::blessing() {
            std::fs::write(&path, &text).expect("write golden file");
            continue;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!("{}: {e} (run with GATTN_EVAL_BLESS=1 once)", path.display())
        });
        if expected != text {
            mismatches.push(task.as_str());
        }
    }
    assert!(mismatches.is_empty(), "golden mismatch for {mismatches:?}");
}

#[test]
fn generation_is_deterministic_and_depends_on_every_coordinate() {
    let corpus = common::corpus_with_qa();
    let counter = WhitespaceCounter;
    let base = generate_sample(TaskName::NiahMultikey1, 2048, 3, 7, &counter, &corpus).unwrap();
    let again = generate_sample(TaskName::NiahMultikey1, 2048, 3, 7, &counter, &corpus).unwrap();
    assert_eq!(base, again);
    let other_index =
        generate_sample(TaskName::NiahMultikey1, 2048, 4, 7, &counter, &corpus).unwrap();
    let other_seed =
        generate_sample(TaskName::NiahMultikey1, 2048, 3, 8, &counter, &corpus).unwrap();
    let other_length =
        generate_sample(TaskName::NiahMultikey1, 2049, 3, 7, &counter, &corpus).unwrap();
    assert_ne!(base.references, other_index.references);
    assert_ne!(base.references, other_seed.references);
    assert_ne!(base.references, other_length.references);
}

/// Every task's references, re-derived from the text of freshly generated samples (and the
/// golden files hold such samples, as `every_generator_matches_its_golden_file` shows).
#[test]
fn every_answer_follows_from_its_own_text() {
    let corpus = common::corpus_with_qa();
    for &task in TaskName::all() {
        for index in 0..3 {
            let length = golden_length(task);
            let sample = generate_sample(
                task,
                length,
                index,
                common::SEED,
                &WhitespaceCounter,
                &corpus,
            )
            .unwrap_or_else(|e| panic!("{task}: {e}"));
            assert!(sample.length_tokens <= length, "{task} {index}: too long");
            assert!(!sample.references.is_empty(), "{task} {index}: no answer");
            let mut got = sample.references.clone();
            got.sort();
            if let Some(want) = derive_references(task, &sample.input) {
                assert_eq!(
                    got, want,
                    "{task} {index}: references differ from the text's answer"
                );
            } else {
                // QA needs reading comprehension: the answer must at least be in a document.
                let documents = sample.input.split("\nQuestion:").next().unwrap();
                assert!(
                    got.iter().any(|r| documents.contains(r.as_str())),
                    "{task} {index}: no reference appears in the documents"
                );
            }
        }
    }
}

/// The sorted answer of `input` by the task's definition (`None` for QA).
fn derive_references(task: TaskName, input: &str) -> Option<Vec<String>> {
    let question = input.lines().last().expect("a question line");
    let mut answer = match task {
        TaskName::Vt => variables_with_value(input, question),
        TaskName::Cwe => most_frequent_words(numbered_list(input), 10),
        TaskName::Fwe => {
            let coded = input.rsplit("coded words.").next().unwrap();
            let coded = coded.split("\nQuestion").next().unwrap();
            most_frequent_words(coded.split_whitespace().filter(|w| *w != "..."), 3)
        }
        TaskName::Qa1 | TaskName::Qa2 => return None,
        _ => needle_values_for(input, &question_keys(question)),
    };
    answer.sort();
    Some(answer)
}

/// The keys the question asks about: "... for KEY mentioned in" or "... for K1, K2, and K3
/// mentioned in".
fn question_keys(question: &str) -> Vec<String> {
    let start = question.find(" for ").expect("keys in the question") + " for ".len();
    let end = question
        .find(" mentioned in")
        .expect("keys in the question");
    question[start..end]
        .replace(", and ", ", ")
        .split(", ")
        .map(str::to_string)
        .collect()
}

/// The values of every needle "One of the special magic ... for KEY is: VALUE." whose key is one
/// of `keys` (distractor needles name other keys).
fn needle_values_for(input: &str, keys: &[String]) -> Vec<String> {
    const NEEDLE: &str = "One of the special magic ";
    let mut values = Vec::new();
    for (at, _) in input.match_indices(NEEDLE) {
        let rest = &input[at + NEEDLE.len()..];
        let key_start = rest.find(" for ").unwrap() + " for ".len();
        let key_end = rest.find(" is: ").unwrap();
        let value = &rest[key_end + " is: ".len()..];
        // Numbers and UUIDs: letters, digits and dashes, up to the sentence's full stop.
        let end = value
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(value.len());
        let value = &value[..end];
        if keys.iter().any(|k| k == &rest[key_start..key_end]) {
            values.push(value.to_string());
        }
    }
    values
}

/// Follows every chain of "VAR A = 12345" / "VAR B = VAR A" to the value the question names.
fn variables_with_value(input: &str, question: &str) -> Vec<String> {
    let wanted = question.split("the value ").nth(1).unwrap();
    let wanted = wanted.split_whitespace().next().unwrap();
    let mut assigned = HashMap::new();
    for line in input.lines() {
        if let Some(rest) = line.strip_prefix("VAR ") {
            let (name, value) = rest.split_once(" = ").expect("VAR NAME = VALUE");
            assigned.insert(name.trim(), value.trim().trim_start_matches("VAR ").trim());
        }
    }
    fn resolve<'a>(assigned: &HashMap<&'a str, &'a str>, mut name: &'a str) -> &'a str {
        for _ in 0..=assigned.len() {
            match assigned.get(name) {
                Some(next) => name = next,
                None => return name,
            }
        }
        panic!("a cycle of variables through {name}")
    }
    assigned
        .keys()
        .filter(|name| resolve(&assigned, name) == wanted)
        .map(|name| name.to_string())
        .collect()
}

/// The words of the last "1. word 2. word ..." list (an earlier one is the worked example).
fn numbered_list(input: &str) -> impl Iterator<Item = &str> {
    let list = input
        .lines()
        .rfind(|l| l.starts_with("1. "))
        .expect("a numbered list");
    list.split_whitespace()
        .filter(|w| !w.ends_with('.') || w.trim_end_matches('.').parse::<usize>().is_err())
}

/// The `count` most frequent words, which must be strictly more frequent than every other word
/// (else the question has no single answer).
fn most_frequent_words<'a>(words: impl Iterator<Item = &'a str>, count: usize) -> Vec<String> {
    let mut counts = HashMap::<&str, usize>::new();
    for word in words {
        *counts.entry(word).or_default() += 1;
    }
    let mut ranked: Vec<(&str, usize)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    assert!(ranked.len() > count, "fewer than {count} distinct words");
    assert!(
        ranked[count - 1].1 > ranked[count].1,
        "no clear top {count}: {:?}",
        &ranked[..=count]
    );
    ranked[..count].iter().map(|(w, _)| w.to_string()).collect()
}
