use std::path::PathBuf;

use gattn_tensor::TensorError;

/// Everything that can go wrong while loading or running a model. Each variant names the file,
/// field or tensor concerned, and the value found, so the user knows what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: cannot write: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Output(#[from] crate::output::OutputError),
    #[error("`builtin:{name}` is not a builtin model: the builtin models are {valid}")]
    UnknownBuiltin { name: String, valid: String },
    #[error(
        "no cache directory for the builtin models: set GATTN_CACHE_DIR (or XDG_CACHE_HOME or HOME)"
    )]
    NoCacheDir,
    #[error("{path}: not valid JSON: {reason}")]
    InvalidJson { path: PathBuf, reason: String },
    #[error("{path}: field `{field}`: {reason}")]
    Config {
        path: PathBuf,
        field: String,
        reason: String,
    },
    #[error("{path}: int8 checkpoint: {reason}")]
    Int8Checkpoint { path: PathBuf, reason: String },
    #[error(
        "{probe} come from the {} backend only: set the model's backend to it (the CLI does for \
         each command)", backend.name()
    )]
    ProbeNeedsBackend {
        probe: &'static str,
        backend: crate::backend::Backend,
    },
    #[error("{path}: unsupported: {reason}")]
    Unsupported { path: PathBuf, reason: String },
    #[error(transparent)]
    Tensor(#[from] TensorError),
    #[error("{path}: tokenizer: {reason}")]
    Tokenizer { path: PathBuf, reason: String },
    #[error("token id {id} is out of range: the vocabulary has {vocab_size} tokens")]
    TokenOutOfRange { id: u32, vocab_size: usize },
    #[error("the prompt has {prompt_tokens} tokens but the context holds only {ctx} (raise --ctx)")]
    PromptTooLong { prompt_tokens: usize, ctx: usize },
    #[error("the context is full: {ctx} tokens (raise --ctx)")]
    ContextFull { ctx: usize },
    #[error("the prompt is empty: give at least one token")]
    EmptyPrompt,
    #[error("non-finite values (NaN or inf) in layer {layer}: {stage} at position {position}")]
    NonFinite {
        layer: usize,
        stage: &'static str,
        position: usize,
    },
    #[error("KV cache: {0}")]
    KvCache(#[from] gattn_kernels::attention::KvError),
    #[error("attention kernel: {0}")]
    Attention(#[from] gattn_kernels::attention::AttentionError),
    #[error("matmul kernel: {0}")]
    Matmul(#[from] gattn_kernels::matmul::MatmulError),
    #[error("not enough memory: {0}")]
    OutOfMemory(String),
    #[error("{0}")]
    InvalidArgument(String),
}

pub type Result<T> = std::result::Result<T, ModelError>;
