use std::path::PathBuf;

/// Everything that can be wrong with a checkpoint file or a tensor in it.
/// Each variant names the file (and tensor) so the user knows what to fix.
#[derive(Debug, thiserror::Error)]
pub enum TensorError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a valid safetensors file: {reason}")]
    InvalidSafetensors { path: PathBuf, reason: String },
    #[error("{path}: tensor `{name}` has unsupported dtype {dtype}")]
    UnsupportedDType {
        path: PathBuf,
        name: String,
        dtype: String,
    },
    #[error("tensor `{name}` not found in the checkpoint ({location})")]
    Missing { name: String, location: String },
    #[error("{path}: tensor `{name}` has shape {found:?}, expected {expected:?}")]
    ShapeMismatch {
        path: PathBuf,
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    #[error("{path}: tensor `{name}` has dtype {found}, expected {expected}")]
    DTypeMismatch {
        path: PathBuf,
        name: String,
        expected: String,
        found: String,
    },
    #[error("{path}: tensor `{name}` holds {value} at element {index}: the weights must be finite")]
    NonFinite {
        path: PathBuf,
        name: String,
        index: usize,
        value: String,
    },
    #[error("{path}: invalid shard index: {reason}")]
    InvalidIndex { path: PathBuf, reason: String },
}

pub type Result<T> = std::result::Result<T, TensorError>;
