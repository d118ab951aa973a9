use std::path::PathBuf;

/// Everything that can go wrong while loading corpora or generating samples.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("unknown RULER task `{0}` (expected one of: {1})")]
    UnknownTask(String, String),

    /// A QA task was requested without its dataset: the runner reports it and skips the task.
    #[error(
        "skipped: {task} needs --{flag} FILE (RULER's {dataset} file cannot be downloaded here)"
    )]
    MissingQaDataset {
        task: &'static str,
        flag: &'static str,
        dataset: &'static str,
    },

    #[error(
        "target length {length} is too short for {task}: even the smallest haystack needs \
         {needed} tokens (including {tokens_to_generate} tokens to generate)"
    )]
    LengthTooShort {
        task: &'static str,
        length: usize,
        needed: usize,
        tokens_to_generate: usize,
    },

    #[error(
        "{task}: the word lists hold {available} words but {needed} are needed at length {length}"
    )]
    NotEnoughWords {
        task: &'static str,
        available: usize,
        needed: usize,
        length: usize,
    },

    #[error(
        "{task}: sample index {index} is out of range, the QA dataset has {available} questions"
    )]
    QaIndexOutOfRange {
        task: &'static str,
        index: usize,
        available: usize,
    },

    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("parsing {path}: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    #[error("{path}: {reason}")]
    BadCorpus { path: PathBuf, reason: String },
}
