use std::path::PathBuf;

use gattn_model::ModelError;

/// Everything that can stop `sink` or `attn-map`; each message names the flag, file or value.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    #[error(transparent)]
    Model(#[from] ModelError),

    #[error("--layers: {0}")]
    BadLayers(String),

    #[error("--layers {layer}: the model has {layers} layers (layers are numbered 1 to {layers})")]
    LayerOutOfRange { layer: usize, layers: usize },

    #[error(
        "the prompt has {tokens} tokens; attention maps materialize tokens x tokens \
         probabilities and are limited to {max} (use `gattn-cpu sink` for long prompts)"
    )]
    TooLongForMaps { tokens: usize, max: usize },

    #[error(
        "the prompt has {tokens} tokens but the model holds {max_positions} positions \
         (max_position_embeddings)"
    )]
    TooLongForModel { tokens: usize, max_positions: usize },

    #[error("{path}: cannot draw the figure: {reason}")]
    Figure { path: PathBuf, reason: String },
}
