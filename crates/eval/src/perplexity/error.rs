use std::path::PathBuf;

/// What can go wrong planning windows or reading and writing a saved-logits file.
#[derive(Debug, thiserror::Error)]
pub enum PerplexityError {
    #[error(
        "the text has {tokens} tokens, too few for one window of {ctx} (give a longer text or a smaller -c)"
    )]
    TextTooShort { tokens: usize, ctx: usize },

    #[error("invalid {what}: {reason}")]
    InvalidArgument { what: &'static str, reason: String },

    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{path} exists; pass --force to overwrite it")]
    Exists { path: PathBuf },

    /// The file is not a saved-logits file, or is damaged: names the field that is wrong.
    #[error("{path}: bad saved-logits file: {field}: {reason}")]
    BadLogitsFile {
        path: PathBuf,
        field: String,
        reason: String,
    },

    /// The saved file was made on another model shape, text or window plan than this run.
    #[error("{path} does not match this run: {field}: the file has {saved}, this run has {run}")]
    Mismatch {
        path: PathBuf,
        field: &'static str,
        saved: String,
        run: String,
    },
}
