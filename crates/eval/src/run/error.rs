use std::path::PathBuf;

use gattn_model::ModelError;

use crate::error::EvalError;

/// Everything that can stop a RULER run, merge or comparison. Each message names the file,
/// flag or value concerned.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Eval(#[from] EvalError),

    #[error(transparent)]
    Model(#[from] ModelError),

    #[error(transparent)]
    Output(#[from] gattn_model::OutputError),

    /// A requested length does not fit the model's context.
    #[error(
        "--lengths {length} is longer than the {limit} positions this model holds ({why}); \
         {suggestion}"
    )]
    LengthOverContext {
        length: usize,
        limit: usize,
        why: String,
        suggestion: String,
    },

    #[error("--shard {0}: expected i/n with 0 <= i < n, for example 0/4")]
    BadShard(String),

    #[error("{0}")]
    InvalidArgument(String),

    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{path}: line {line}: {reason}")]
    BadRecord {
        path: PathBuf,
        line: usize,
        reason: String,
    },

    #[error("{path}: {reason}")]
    BadRunDir { path: PathBuf, reason: String },

    /// `ruler merge` without every shard, or with an unfinished one.
    #[error(
        "ruler merge: missing {missing}; give every shard of the sweep (finished), or pass \
         --partial to merge without them"
    )]
    IncompleteMerge { missing: String },

    /// Another `ruler` process holds the run directory's lock.
    #[error(
        "{path} is in use by {holder} (another `gattn-cpu ruler` writing into it); wait for it \
         to finish, or give another --out"
    )]
    Locked { path: PathBuf, holder: String },

    /// `--chat` with a checkpoint whose template is missing or does not render.
    #[error("{path}: chat template: {reason}")]
    ChatTemplate { path: PathBuf, reason: String },

    #[error("writing the chart {path}: {reason}")]
    Chart { path: PathBuf, reason: String },
}

impl RunError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> RunError {
        let path = path.into();
        move |source| RunError::Io { path, source }
    }
}
