//! Loading the originals: an essays folder in RULER's JSON or as text, QA files, and
//! typed errors for bad input.

use gattn_eval::{Corpus, EvalError, TaskName, WhitespaceCounter, generate_sample};

#[test]
fn essays_dir_replaces_the_haystack_and_repeats_when_short() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.json"),
        r#"{"text": "Alpha essay one.  It has\n two sentences."}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.txt"),
        "Beta essay text. Short and plain.\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("ignored.md"), "Not an essay.").unwrap();
    let mut corpus = Corpus::builtin();
    corpus.load_essays_dir(dir.path()).unwrap();
    assert_eq!(corpus.essay_words(), 13);
    let s = generate_sample(
        TaskName::NiahSingle2,
        1024,
        0,
        1,
        &WhitespaceCounter,
        &corpus,
    )
    .unwrap();
    assert!(
        s.input
            .contains("Alpha essay one. It has two sentences. Beta essay text.")
    );
    assert!(!s.input.contains("Not an essay"));
    assert!(!s.input.contains("Bennet"), "the builtin essays are gone");
    // Far more words than the folder holds: the corpus repeats, as RULER's newer niah.py does.
    assert!(s.haystack_units > 13 * 20);
    assert!(s.length_tokens <= 1024 && s.length_tokens >= 1014);
}

#[test]
fn bad_inputs_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut corpus = Corpus::builtin();
    assert!(matches!(
        corpus.load_essays_dir(dir.path()),
        Err(EvalError::BadCorpus { .. })
    ));
    let broken = dir.path().join("squad.json");
    std::fs::write(&broken, "{ not json").unwrap();
    assert!(matches!(
        corpus.load_squad(&broken),
        Err(EvalError::Json { .. })
    ));
    std::fs::write(&broken, r#"{"version": "x"}"#).unwrap();
    assert!(matches!(
        corpus.load_squad(&broken),
        Err(EvalError::BadCorpus { .. })
    ));
    assert!(matches!(
        corpus.load_hotpotqa(&dir.path().join("missing.json")),
        Err(EvalError::Io { .. })
    ));
}
