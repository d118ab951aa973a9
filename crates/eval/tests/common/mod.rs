//! Shared test setup: the builtin corpus plus the tiny hand-made QA fixtures.

#![allow(dead_code)]

use std::path::PathBuf;

use gattn_eval::Corpus;

pub const SEED: u64 = 42;

pub fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests")
}

pub fn corpus_with_qa() -> Corpus {
    let mut corpus = Corpus::builtin();
    corpus
        .load_squad(&tests_dir().join("fixtures/squad_tiny.json"))
        .expect("squad fixture");
    corpus
        .load_hotpotqa(&tests_dir().join("fixtures/hotpotqa_tiny.json"))
        .expect("hotpotqa fixture");
    corpus
}

/// Set GATTN_EVAL_BLESS=1 to rewrite golden files instead of comparing against them.
pub fn blessing() -> bool {
    std::env::var_os("GATTN_EVAL_BLESS").is_some_and(|v| v == "1")
}
