//! The generated haystacks hold exactly what RULER's would: every needle once, the right
//! number of needle lines, at the planned depth, and the answers where they belong.

mod common;

use gattn_eval::{
    Corpus, HaystackKind, Sample, TaskConfig, TaskFamily, TaskName, WhitespaceCounter,
    generate_sample,
};

fn sample(task: TaskName, length: usize, index: usize, corpus: &Corpus) -> Sample {
    generate_sample(
        task,
        length,
        index,
        common::SEED,
        &WhitespaceCounter,
        corpus,
    )
    .unwrap_or_else(|e| panic!("{task}: {e}"))
}

/// The haystack between the task header and the question.
fn context_of(s: &Sample) -> &str {
    let start = s.input.find('\n').expect("header line") + 1;
    let end = s.input.rfind('\n').expect("question line");
    &s.input[start..end]
}

#[test]
fn niah_needles_are_present_once_with_their_answers() {
    let corpus = common::corpus_with_qa();
    for &task in TaskName::all() {
        let TaskFamily::Niah {
            haystack,
            num_needle_k,
            num_needle_v,
            num_needle_q,
            ..
        } = TaskConfig::of(task).family
        else {
            continue;
        };
        for index in 0..3 {
            let s = sample(task, 8192, index, &corpus);
            let k = num_needle_k.max(num_needle_q);
            assert_eq!(s.insertions.len(), k * num_needle_v, "{task}");
            assert_eq!(s.references.len(), num_needle_q * num_needle_v, "{task}");
            let context = context_of(&s);
            for ins in &s.insertions {
                assert_eq!(
                    context.matches(ins.text.as_str()).count(),
                    1,
                    "{task}: {}",
                    ins.text
                );
            }
            // Each answer is the value of exactly one inserted needle, for a queried key
            // that the question names.
            for r in &s.references {
                let needle = s
                    .insertions
                    .iter()
                    .find(|i| i.text.ends_with(&format!(" is: {r}.")))
                    .unwrap_or_else(|| panic!("{task}: no needle holds answer {r}"));
                let key = needle
                    .text
                    .split(" for ")
                    .nth(1)
                    .unwrap()
                    .split(" is: ")
                    .next()
                    .unwrap();
                assert!(
                    s.input.rsplit('\n').next().unwrap().contains(key),
                    "{task}: key {key} not asked"
                );
                assert!(
                    s.answer_prefix.contains(key),
                    "{task}: key {key} not in answer prefix"
                );
            }
            let needle_lines = context.matches("One of the special magic").count();
            let expected = match haystack {
                HaystackKind::Needle => s.haystack_units + s.insertions.len(),
                _ => s.insertions.len(),
            };
            assert_eq!(needle_lines, expected, "{task}");
        }
    }
}

/// Exact check against RULER's rule: needle i goes after `int(S * depth)` of the S
/// sentences of the first `haystack_units` essay words.
#[test]
fn essay_needles_sit_after_the_planned_sentence() {
    let corpus = common::corpus_with_qa();
    let essay: Vec<&str> = include_str!("../data/austen_essays.txt")
        .split_whitespace()
        .collect();
    for task in [
        TaskName::NiahSingle2,
        TaskName::NiahMultikey1,
        TaskName::NiahMultivalue,
    ] {
        for index in 0..4 {
            let s = sample(task, 16384, index, &corpus);
            let n = s.haystack_units;
            let ends = gattn_eval::sentence_ends(&essay[..n]);
            let num_sentences = ends.len();
            let context = context_of(&s);
            let mut needle_words_before = 0;
            for ins in &s.insertions {
                let at = context.find(ins.text.as_str()).unwrap();
                let words_before = context[..at].split_whitespace().count() - needle_words_before;
                let p = (num_sentences as f64 * ins.depth) as usize;
                let expected = if p == 0 { 0 } else { ends[p - 1] };
                assert_eq!(
                    words_before, expected,
                    "{task} #{index} depth {}",
                    ins.depth
                );
                needle_words_before += ins.text.split_whitespace().count();
            }
            // The haystack around the needles is the corpus prefix, word for word.
            let mut rest = context.to_string();
            for ins in &s.insertions {
                rest = rest.replacen(ins.text.as_str(), "", 1);
            }
            assert!(
                rest.split_whitespace().eq(essay[..n].iter().copied()),
                "{task} #{index}"
            );
        }
    }
}

#[test]
fn niah_needles_sit_at_their_planned_depth() {
    let corpus = common::corpus_with_qa();
    for task in [
        TaskName::NiahSingle1,
        TaskName::NiahSingle2,
        TaskName::NiahMultikey1,
        TaskName::NiahMultikey2,
        TaskName::NiahMultivalue,
    ] {
        for index in 0..4 {
            let s = sample(task, 16384, index, &corpus);
            let context = context_of(&s);
            for ins in &s.insertions {
                let at = context.find(ins.text.as_str()).unwrap();
                let actual = at as f64 / context.len() as f64;
                // Sentence lengths vary, so character depth tracks sentence depth loosely.
                assert!(
                    (actual - ins.depth).abs() < 0.06,
                    "{task} #{index}: planned {:.3}, found at {actual:.3}",
                    ins.depth
                );
            }
        }
    }
}

#[test]
fn line_haystack_needles_are_before_the_planned_line() {
    let corpus = common::corpus_with_qa();
    let s = sample(TaskName::NiahSingle1, 4096, 5, &corpus);
    let lines: Vec<&str> = context_of(&s).split('\n').collect();
    assert_eq!(lines.len(), s.haystack_units + 1);
    let ins = &s.insertions[0];
    let at = lines.iter().position(|l| *l == ins.text).unwrap();
    assert_eq!(at, (ins.depth * s.haystack_units as f64).round() as usize);
}

#[test]
fn essay_depths_come_from_ruler_depth_grid() {
    let corpus = common::corpus_with_qa();
    let grid: Vec<f64> = (0..40)
        .map(|i| (i as f64 * 100.0 / 39.0).round() / 100.0)
        .collect();
    for index in 0..10 {
        let s = sample(TaskName::NiahMultikey1, 2048, index, &corpus);
        let depths: Vec<f64> = s.insertions.iter().map(|i| i.depth).collect();
        assert!(depths.iter().all(|d| grid.contains(d)), "{depths:?}");
        assert!(
            depths.windows(2).all(|w| w[0] < w[1]),
            "distinct, sorted: {depths:?}"
        );
    }
}

#[test]
fn vt_chain_is_complete_in_order_and_answers_are_its_variables() {
    let corpus = common::corpus_with_qa();
    for index in 0..3 {
        let s = sample(TaskName::Vt, 8192, index, &corpus);
        assert_eq!(s.references.len(), 5);
        assert_eq!(s.insertions.len(), 5);
        // The task part follows the one-shot example; its chain is the sample's own.
        let task_start = s.input.rfind("Memorize and track").unwrap();
        assert!(task_start > 0, "the one-shot example comes first");
        let task_part = &s.input[task_start..];
        let mut last = 0;
        for (j, ins) in s.insertions.iter().enumerate() {
            let at = task_part.find(ins.text.as_str()).expect("link present");
            assert!(at > last, "links in chain order");
            last = at;
            assert!(ins.text.starts_with(&format!("VAR {} = ", s.references[j])));
        }
        let value = s.insertions[0].text.rsplit(' ').next().unwrap();
        assert_eq!(value.len(), 5);
        assert!(
            s.answer_prefix
                .contains(&format!("value {value}, they are: "))
        );
        assert!(s.answer_prefix.contains(" 5 variables are assgined"));
        // The example's own answer is in the example, after its answer prefix.
        let example = &s.input[..task_start];
        assert!(
            example.contains("they are:  "),
            "example answer follows its prefix"
        );
        assert!(!example.contains("12345"), "example value was randomised");
    }
}

#[test]
fn cwe_common_words_repeat_as_configured() {
    let corpus = common::corpus_with_qa();
    for (length, common_repeats, uncommon_repeats) in [(4096, 30, 3), (2048, 6, 1)] {
        let s = sample(TaskName::Cwe, length, 0, &corpus);
        assert_eq!(s.references.len(), 10);
        let task_start = s.input.rfind("Below is a numbered list").unwrap();
        let list = &s.input[task_start..];
        let words: Vec<&str> = list
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .filter(|w| w[0].ends_with('.') && w[0][..w[0].len() - 1].parse::<usize>().is_ok())
            .map(|w| w[1])
            .collect();
        assert_eq!(
            words.len(),
            10 * common_repeats + (s.haystack_units - 10) * uncommon_repeats
        );
        for r in &s.references {
            assert_eq!(
                words.iter().filter(|w| **w == r).count(),
                common_repeats,
                "{r}"
            );
        }
        let other = words
            .iter()
            .find(|w| !s.references.iter().any(|r| r == *w))
            .unwrap();
        assert_eq!(
            words.iter().filter(|w| *w == other).count(),
            uncommon_repeats
        );
    }
}

#[test]
fn fwe_answers_are_the_most_frequent_coded_words() {
    let corpus = common::corpus_with_qa();
    let s = sample(TaskName::Fwe, 8192, 2, &corpus);
    let start = s.input.find("coded words. ").unwrap() + "coded words. ".len();
    let end = s.input.rfind("\nQuestion:").unwrap();
    let mut counts = std::collections::HashMap::<&str, usize>::new();
    for w in s.input[start..end].split(' ') {
        *counts.entry(w).or_default() += 1;
    }
    let mut ranked: Vec<(&str, usize)> = counts.into_iter().collect();
    ranked.sort_by_key(|r| std::cmp::Reverse(r.1));
    assert_eq!(ranked[0].0, "...");
    let top: Vec<&str> = ranked[1..4].iter().map(|r| r.0).collect();
    assert_eq!(top, s.references);
    assert!(ranked[1].1 > ranked[2].1 && ranked[2].1 > ranked[3].1 && ranked[3].1 > ranked[4].1);
}

#[test]
fn qa_holds_the_gold_document_and_the_question() {
    let corpus = common::corpus_with_qa();
    let squad = corpus.squad.as_ref().unwrap();
    assert_eq!(squad.items.len(), 5, "the unanswerable question is dropped");
    for index in 0..squad.items.len() {
        let s = sample(TaskName::Qa1, 180, index, &corpus);
        let item = &squad.items[index];
        assert!(s.input.contains(&squad.docs[item.context[0]]));
        assert!(s.input.ends_with(&format!("Question: {}", item.query)));
        assert_eq!(s.references, item.outputs);
        assert_eq!(s.answer_prefix, " Answer:");
        assert_eq!(s.input.matches("Document ").count(), s.haystack_units);
    }
    let hotpot = corpus.hotpotqa.as_ref().unwrap();
    let s = sample(TaskName::Qa2, 4096, 1, &corpus);
    for &d in &hotpot.items[1].context {
        assert!(s.input.contains(&hotpot.docs[d]));
    }
    assert_eq!(
        s.haystack_units,
        hotpot.docs.len(),
        "a long target takes every document"
    );
    let err = generate_sample(TaskName::Qa2, 4096, 3, 1, &WhitespaceCounter, &corpus).unwrap_err();
    assert!(matches!(
        err,
        gattn_eval::EvalError::QaIndexOutOfRange { .. }
    ));
}
