//! Golden samples: the same seed must give the same text, byte for byte, forever.
//! Regenerate (after an intended change only) with `GATTN_EVAL_BLESS=1 cargo test -p gattn-eval --test golden`.

mod common;

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
