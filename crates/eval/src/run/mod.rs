//! The runner half of RULER: evaluate a checkpoint on the generated samples and write
//! predictions.jsonl, summary.csv, results.md and chart.png; resume, shard, merge, compare.
//!
//! An output directory holds:
//! - `run.json`: the settings the predictions depend on and the plan (a rerun or merge must
//!   match them);
//! - `predictions.jsonl`: one [`PredictionRecord`] per sample, appended as it is scored, each
//!   with a digest and a score that reading checks;
//! - `.lock`: held by the `ruler` process writing into the directory (its pid inside);
//! - `summary.csv`, `results.md`, `chart.png`: RULER's task x length table, from the
//!   predictions alone, so merging shards reproduces an unsharded run's summary exactly.

mod chart;
mod chat;
mod compare;
mod context;
mod counter;
mod error;
mod escape;
mod fingerprint;
mod lock;
mod merge;
mod plan;
mod progress;
mod record;
mod report;
mod runner;
mod settings;

pub use chart::{CHART_SIZE, Series, write_line_chart};
pub use chat::{ChatMessage, ChatTemplate};
pub use compare::{
    COMPARE_CHART, COMPARE_CSV, COMPARE_MD, LabelledRun, compare_csv, compare_markdown,
    compare_runs, default_label,
};
pub use context::{check_lengths, context_limit};
pub use counter::TokenizerCounter;
pub use error::RunError;
pub use escape::{csv_text, markdown_text};
pub use fingerprint::model_fingerprint;
pub use lock::{LOCK_FILE, RunLock};
pub use merge::{MergeOptions, MergeOutcome, load_run, merge_runs};
pub use plan::{Shard, WorkItem, plan};
pub use record::{
    PREDICTIONS_FILE, PredictionRecord, PredictionsFile, PredictionsWriter, Timings,
    read_predictions, write_predictions,
};
pub use report::{
    CHART_FILE, RESULTS_FILE, SUMMARY_FILE, length_label, results_markdown, score_table,
    summary_csv, write_reports,
};
pub use runner::{RunOptions, RunOutcome, run_ruler};
pub use settings::{RunSettings, SETTINGS_FILE};
