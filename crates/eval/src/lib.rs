//! RULER (NVIDIA, arXiv 2404.06654) long-context tasks, model-independent half:
//! deterministic sample generators for the 13 standard tasks and RULER's scoring.
//!
//! The runner (model inference, output files, sharding) sits on top of this crate and
//! supplies a [`TokenCounter`] backed by the model's own tokenizer, so that samples are
//! filled to the target length in that model's tokens, as RULER does.
//!
//! ```
//! use gattn_eval::{Corpus, ScoreTable, TaskName, WhitespaceCounter, generate_sample, score};
//!
//! let corpus = Corpus::builtin(); // add corpus.load_squad(..) / load_hotpotqa(..) for qa_1/qa_2
//! let sample = generate_sample(TaskName::NiahSingle2, 4096, 0, 42, &WhitespaceCounter, &corpus)?;
//! assert!(sample.length_tokens <= 4096);
//! // Greedy-decode at most `sample.tokens_to_generate` tokens after `sample.prompt()`, then:
//! let prediction = format!(" {}.", sample.references[0]);
//! let mut table = ScoreTable::new();
//! table.add(sample.task, sample.length, score(sample.task, &prediction, &sample.references), false);
//! assert_eq!(table.average(4096), Some(100.0));
//! # Ok::<(), gattn_eval::EvalError>(())
//! ```

pub mod analysis;
mod corpus;
mod error;
mod fit;
mod font;
mod generate;
pub mod perplexity;
mod rng;
pub mod run;
mod score;
mod sentences;
mod task;
mod templates;
mod tokens;

pub use corpus::{Corpus, QaDataset, QaItem};
pub use error::EvalError;
pub use generate::{Insertion, Sample, SampleSpec, generate_sample, generate_sample_with};
pub use score::{
    ScoreTable, TaskLengthScore, postprocess_pred, score, string_match_all, string_match_part,
};
pub use sentences::sentence_ends;
pub use task::{HaystackKind, Metric, NeedleKind, QaSource, TaskConfig, TaskFamily, TaskName};
pub use templates::{TaskTemplate, template_for};
pub use tokens::{CharCounter, TokenCounter, WhitespaceCounter};
