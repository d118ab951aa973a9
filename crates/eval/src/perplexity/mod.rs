//! Perplexity and KL divergence of a model on a text, as llama.cpp's `llama-perplexity` measures
//! them: the text is cut into windows of `ctx` tokens, each run from an empty cache, and only
//! the second half of each window is scored (every scored token then sees at least `ctx / 2`
//! tokens of context).
//!
//! - [`windows`]: where the windows lie and which of their positions are scored;
//! - [`score`]: one position's log-probabilities and the running negative log-likelihood;
//! - [`logits_file`]: the saved top-k log-probabilities of a base run (`--save-logits`);
//! - [`kld`]: a run compared with such a file (`--kl-divergence`);
//! - [`PerplexityRun`]: the windows' scored logits in, the report out.
//!
//! [`scored_logits`] runs one window through the model; the caller hands them to a
//! [`PerplexityRun`].

mod error;
pub mod kld;
pub mod logits_file;
mod run;
pub mod score;
pub mod windows;

pub use error::PerplexityError;
pub use kld::{KlStats, KlSummary};
pub use logits_file::{LogitsFileHeader, LogitsFileReader, LogitsFileWriter, PositionRecord};
pub use run::{LogitsFiles, PerplexityReport, PerplexityRun, WindowResult, scored_logits};
pub use score::{NllAccumulator, PositionScore, score_position};
pub use windows::{Window, plan_windows};

/// The held-out text that ships with the engine: chapters 1-5 of Jane Austen's *Northanger
/// Abbey* (public domain; see `data/README.md`). The builtin tiny models were trained only on
/// *Pride and Prejudice* and *Persuasion*, so none of it was seen in training.
pub const BUILTIN_TEXT: &str = include_str!("../../data/northanger_abbey_ch1-5.txt");
