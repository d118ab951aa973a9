//! `predictions.jsonl`: one line per evaluated sample, appended as soon as it is scored, so
//! a run killed at any point resumes where it stopped.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use gattn_model::Existing;
use gattn_model::output::write_atomic;
use sha2::{Digest, Sha256};

use crate::run::error::RunError;
use crate::run::plan::WorkItem;
use crate::run::settings::RunSettings;
use crate::score::score;
use crate::task::TaskName;

pub const PREDICTIONS_FILE: &str = "predictions.jsonl";

/// Wall-clock milliseconds spent on one sample.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Timings {
    /// Building the sample (haystack fit, in the model's tokens).
    pub build_ms: f64,
    /// Feeding the prompt.
    pub prefill_ms: f64,
    /// Greedy decoding after the prompt.
    pub decode_ms: f64,
}

/// One predictions line.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PredictionRecord {
    pub task: TaskName,
    pub length: usize,
    pub index: usize,
    pub seed: u64,
    /// SHA-256 (hex) of the exact prompt text fed to the model, template included.
    pub prompt_hash: String,
    pub prompt_tokens: usize,
    /// The first and last characters of the prompt, to see the template without the haystack.
    pub prompt_head: String,
    pub prompt_tail: String,
    /// The decoded generation, before RULER's post-processing.
    pub prediction: String,
    pub references: Vec<String>,
    /// RULER's per-sample score in percent.
    pub score: f64,
    pub generated_tokens: usize,
    /// Why decoding stopped: `eos`, `max_tokens` or `context_full`.
    pub stop: String,
    pub timings: Timings,
    /// SHA-256 (hex) over the fields that say which sample this is and what was predicted
    /// ([`PredictionRecord::expected_digest`]): a record edited by hand no longer matches it.
    pub digest: String,
}

impl PredictionRecord {
    pub fn item(&self) -> WorkItem {
        WorkItem {
            length: self.length,
            task: self.task,
            index: self.index,
        }
    }

    /// The digest of the record's identity and content. Floats are left out (a JSON round
    /// trip may move them by an ulp): the score is checked by recomputing it instead.
    pub fn expected_digest(&self) -> String {
        let mut hash = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        };
        field(self.task.to_string().as_bytes());
        field(&(self.length as u64).to_le_bytes());
        field(&(self.index as u64).to_le_bytes());
        field(&self.seed.to_le_bytes());
        field(self.prompt_hash.as_bytes());
        field(&(self.prompt_tokens as u64).to_le_bytes());
        field(self.prediction.as_bytes());
        field(&(self.references.len() as u64).to_le_bytes());
        for reference in &self.references {
            field(reference.as_bytes());
        }
        field(&(self.generated_tokens as u64).to_le_bytes());
        field(self.stop.as_bytes());
        hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The record with its digest filled in.
    pub fn sealed(mut self) -> PredictionRecord {
        self.digest = self.expected_digest();
        self
    }

    /// Checks the record against itself: the digest, and the score recomputed from the
    /// prediction and references with RULER's metric.
    pub fn verify(&self) -> Result<(), String> {
        if self.digest != self.expected_digest() {
            return Err(format!(
                "{} length {} sample {}: the record does not match its digest (edited by hand?)",
                self.task, self.length, self.index
            ));
        }
        let rescored = score(self.task, &self.prediction, &self.references);
        // Written so that a NaN score fails too.
        let same_score = (self.score - rescored).abs() <= 1e-9;
        if !same_score {
            return Err(format!(
                "{} length {} sample {}: score {} but the prediction scores {rescored}",
                self.task, self.length, self.index, self.score
            ));
        }
        Ok(())
    }
}

/// The records of a predictions file, and where its last complete line ends.
#[derive(Debug, Clone, Default)]
pub struct PredictionsFile {
    pub records: Vec<PredictionRecord>,
    /// The line number of each record, for errors.
    lines: Vec<usize>,
    /// Byte length of the complete lines; a truncated tail (a run killed mid-write) lies past it.
    valid_bytes: u64,
    ends_with_newline: bool,
    pub truncated_tail: bool,
}

/// The largest predictions file read (a million samples of a few hundred bytes each).
const PREDICTIONS_LIMIT: u64 = 1 << 30;

/// Reads `path` (missing = empty). A last line cut short by a killed run is ignored; a bad
/// line anywhere else is an error, since it means the file is not what this tool wrote.
pub fn read_predictions(path: &Path) -> Result<PredictionsFile, RunError> {
    let bytes = match gattn_tensor::input_file::read_regular(path, PREDICTIONS_LIMIT) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(PredictionsFile {
                ends_with_newline: true,
                ..PredictionsFile::default()
            });
        }
        Err(e) => return Err(RunError::io(path)(e)),
    };
    let mut file = PredictionsFile {
        ends_with_newline: true,
        ..PredictionsFile::default()
    };
    let mut start = 0usize;
    let mut line_no = 0usize;
    while start < bytes.len() {
        line_no += 1;
        let (end, complete) = match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(p) => (start + p, true),
            None => (bytes.len(), false),
        };
        let line = &bytes[start..end];
        let next = if complete { end + 1 } else { end };
        if line.iter().all(u8::is_ascii_whitespace) {
            start = next;
            file.valid_bytes = next as u64;
            continue;
        }
        match serde_json::from_slice::<PredictionRecord>(line) {
            Ok(record) => {
                record.verify().map_err(|reason| RunError::BadRecord {
                    path: path.to_path_buf(),
                    line: line_no,
                    reason,
                })?;
                file.records.push(record);
                file.lines.push(line_no);
                file.valid_bytes = next as u64;
                file.ends_with_newline = complete;
            }
            Err(_) if !complete => {
                file.truncated_tail = true;
                break;
            }
            Err(e) => {
                return Err(RunError::BadRecord {
                    path: path.to_path_buf(),
                    line: line_no,
                    reason: e.to_string(),
                });
            }
        }
        start = next;
    }
    Ok(file)
}

impl PredictionsFile {
    /// Checks that every record belongs to the run of `settings` (its seed, a sample of its
    /// plan) and that no sample appears twice; an error names `path` and the line.
    pub fn check_against(&self, path: &Path, settings: &RunSettings) -> Result<(), RunError> {
        let planned: HashSet<WorkItem> = settings.planned()?.into_iter().collect();
        let mut seen: HashMap<WorkItem, usize> = HashMap::new();
        for (record, &line) in self.records.iter().zip(&self.lines) {
            let bad = |reason: String| RunError::BadRecord {
                path: path.to_path_buf(),
                line,
                reason,
            };
            let item = record.item();
            let name = format!("{} length {} sample {}", item.task, item.length, item.index);
            if record.seed != settings.seed {
                return Err(bad(format!(
                    "{name} has seed {} but run.json has seed {}",
                    record.seed, settings.seed
                )));
            }
            if !planned.contains(&item) {
                return Err(bad(format!(
                    "{name} is not in this run's plan (run.json: {})",
                    settings.plan_flags()
                )));
            }
            if let Some(first) = seen.insert(item, line) {
                return Err(bad(format!(
                    "{name} is already on line {first} (two runs wrote into one directory?)"
                )));
            }
        }
        Ok(())
    }
}

/// Appends records to a predictions file, one complete line per write.
pub struct PredictionsWriter {
    file: File,
    path: PathBuf,
}

impl PredictionsWriter {
    /// Opens `path` for appending after cutting off a truncated tail found by
    /// [`read_predictions`] (and ending the last line if it lacks its newline).
    pub fn open(path: &Path, existing: &PredictionsFile) -> Result<PredictionsWriter, RunError> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(RunError::io(path))?;
        if existing.truncated_tail {
            file.set_len(existing.valid_bytes)
                .map_err(RunError::io(path))?;
        }
        if !existing.ends_with_newline {
            file.write_all(b"\n").map_err(RunError::io(path))?;
        }
        Ok(PredictionsWriter {
            file,
            path: path.to_path_buf(),
        })
    }

    pub fn append(&mut self, record: &PredictionRecord) -> Result<(), RunError> {
        let mut line = serde_json::to_string(record).map_err(|e| RunError::BadRecord {
            path: self.path.clone(),
            line: 0,
            reason: e.to_string(),
        })?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(RunError::io(&self.path))
    }
}

/// Writes `records` as a fresh predictions file (merge output), sorted by sample key,
/// atomically; an existing file is replaced only with `Existing::Replace`.
pub fn write_predictions(
    path: &Path,
    records: &[PredictionRecord],
    existing: Existing,
) -> Result<(), RunError> {
    let mut sorted: Vec<&PredictionRecord> = records.iter().collect();
    sorted.sort_by_key(|r| r.item());
    let mut text = String::new();
    for r in sorted {
        text.push_str(&serde_json::to_string(r).map_err(|e| RunError::BadRecord {
            path: path.to_path_buf(),
            line: 0,
            reason: e.to_string(),
        })?);
        text.push('\n');
    }
    Ok(write_atomic(path, text.as_bytes(), existing)?)
}
