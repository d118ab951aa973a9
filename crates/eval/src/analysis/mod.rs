//! Attention-sink and gate analysis of a checkpoint, the numbers and pictures behind the paper's
//! comparison of baseline and gated models (`gattn-cpu sink`, `gattn-cpu attn-map`):
//! - [`sink_report`]: per layer, the mean attention share on the first token, the gate statistics
//!   and the largest hidden-state activation, streamed by the fused kernel in chunks (any length);
//! - [`head_averaged_maps`]: the head-averaged attention probabilities of chosen layers (reference
//!   path, materialized, short prompts), drawn by [`write_model_figure`] and
//!   [`write_combined_figure`] as heatmaps with token labels and a colour bar.

mod colour;
mod error;
mod heatmap;
mod labels;
mod layers;
mod maps;
mod sink;

pub use colour::ColourScale;
pub use error::AnalysisError;
pub use heatmap::{
    ModelMaps, combined_figure_size, model_figure_size, write_combined_figure, write_model_figure,
};
pub use labels::token_labels;
pub use layers::parse_layers;
pub use maps::{LayerMap, MAX_MAP_TOKENS, head_averaged_maps};
pub use sink::{LayerSink, SinkReport, sink_report, sink_statistics, sink_table};
