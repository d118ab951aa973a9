//! RULER's scoring (`scripts/eval/evaluate.py`, `scripts/eval/synthetic/constants.py`).

use std::collections::{BTreeMap, BTreeSet};

use crate::task::{Metric, TaskName};

/// RULER's `postprocess_pred`: strip, turn every control character (U+0000..U+001F) into a
/// newline, strip again.
pub fn postprocess_pred(prediction: &str) -> String {
    let replaced: String = prediction
        .trim()
        .chars()
        .map(|c| if (c as u32) < 0x20 { '\n' } else { c })
        .collect();
    replaced.trim().to_string()
}

fn contains_ci(haystack_lower: &str, needle: &str) -> bool {
    haystack_lower.contains(&needle.to_lowercase())
}

/// Per-sample `string_match_all`, in percent: the share of references that occur in the
/// prediction, case-insensitively. No references scores 0 (RULER would divide by zero).
pub fn string_match_all(prediction: &str, references: &[String]) -> f64 {
    if references.is_empty() {
        return 0.0;
    }
    let pred = prediction.to_lowercase();
    let hits = references.iter().filter(|r| contains_ci(&pred, r)).count();
    100.0 * hits as f64 / references.len() as f64
}

/// Per-sample `string_match_part`, in percent: 100 if any reference occurs in the prediction.
pub fn string_match_part(prediction: &str, references: &[String]) -> f64 {
    let pred = prediction.to_lowercase();
    if references.iter().any(|r| contains_ci(&pred, r)) {
        100.0
    } else {
        0.0
    }
}

/// Scores one raw prediction of `task` as RULER does: post-process, then the task's metric.
/// The mean of these over a task's samples, rounded to 2 decimals, is RULER's task score.
pub fn score(task: TaskName, prediction: &str, references: &[String]) -> f64 {
    let pred = postprocess_pred(prediction);
    match task.config().metric {
        Metric::StringMatchAll => string_match_all(&pred, references),
        Metric::StringMatchPart => string_match_part(&pred, references),
    }
}

/// RULER's `round(score, 2)`. Python rounds the exact binary value (ties to even); Rust's
/// fixed-precision formatting does the same, where `(x * 100.0).round()` would not
/// (Python's `round(2.675, 2)` is 2.67).
fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap_or(x)
}

/// The score of one task at one length.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TaskLengthScore {
    pub task: TaskName,
    pub length: usize,
    /// Mean per-sample score in percent, rounded to 2 decimals.
    pub score: f64,
    pub samples: usize,
    /// Samples whose post-processed prediction was empty (RULER's "nulls").
    pub nulls: usize,
}

#[derive(Debug, Clone, Copy, Default)]
struct Cell {
    sum: f64,
    samples: usize,
    nulls: usize,
}

/// Accumulates per-sample scores into RULER's table: one score per task and length, and an
/// average row (the mean of the task scores at that length).
#[derive(Debug, Clone, Default)]
pub struct ScoreTable {
    cells: BTreeMap<(TaskName, usize), Cell>,
}

impl ScoreTable {
    pub fn new() -> ScoreTable {
        ScoreTable::default()
    }

    /// Adds one sample's score (from [`score`]); `empty_prediction` counts it as a null.
    pub fn add(&mut self, task: TaskName, length: usize, score: f64, empty_prediction: bool) {
        let cell = self.cells.entry((task, length)).or_default();
        cell.sum += score;
        cell.samples += 1;
        cell.nulls += usize::from(empty_prediction);
    }

    /// Scores and adds one raw prediction.
    pub fn add_prediction(
        &mut self,
        task: TaskName,
        length: usize,
        prediction: &str,
        references: &[String],
    ) {
        let s = score(task, prediction, references);
        self.add(task, length, s, postprocess_pred(prediction).is_empty());
    }

    /// Combines another table (for example a shard's) into this one.
    pub fn merge(&mut self, other: &ScoreTable) {
        for (key, c) in &other.cells {
            let cell = self.cells.entry(*key).or_default();
            cell.sum += c.sum;
            cell.samples += c.samples;
            cell.nulls += c.nulls;
        }
    }

    pub fn tasks(&self) -> Vec<TaskName> {
        self.cells
            .keys()
            .map(|(t, _)| *t)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    pub fn lengths(&self) -> Vec<usize> {
        self.cells
            .keys()
            .map(|(_, l)| *l)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    pub fn get(&self, task: TaskName, length: usize) -> Option<TaskLengthScore> {
        self.cells.get(&(task, length)).map(|c| TaskLengthScore {
            task,
            length,
            score: round2(c.sum / c.samples as f64),
            samples: c.samples,
            nulls: c.nulls,
        })
    }

    /// All cells, ordered by task then length.
    pub fn rows(&self) -> Vec<TaskLengthScore> {
        self.cells
            .keys()
            .filter_map(|&(t, l)| self.get(t, l))
            .collect()
    }

    /// The average row at `length`: mean of the (rounded) task scores present, rounded.
    pub fn average(&self, length: usize) -> Option<f64> {
        let scores: Vec<f64> = self
            .tasks()
            .into_iter()
            .filter_map(|t| self.get(t, length))
            .map(|s| s.score)
            .collect();
        (!scores.is_empty()).then(|| round2(scores.iter().sum::<f64>() / scores.len() as f64))
    }
}
