//! `ruler merge`: shard outputs into one run directory with one summary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::run::error::RunError;
use crate::run::plan::WorkItem;
use crate::run::record::{PREDICTIONS_FILE, PredictionRecord, read_predictions, write_predictions};
use crate::run::report::write_reports;
use crate::run::settings::RunSettings;
use crate::score::ScoreTable;

/// A run directory's settings and predictions (a truncated last line is ignored).
pub fn load_run(dir: &Path) -> Result<(RunSettings, Vec<PredictionRecord>), RunError> {
    let settings = RunSettings::read(dir)?.ok_or_else(|| RunError::BadRunDir {
        path: dir.to_path_buf(),
        reason: "no run.json: not an output directory of `gattn-cpu ruler`".into(),
    })?;
    let file = read_predictions(&dir.join(PREDICTIONS_FILE))?;
    Ok((settings, file.records))
}

/// What a merge produced.
#[derive(Debug, Clone)]
pub struct MergeOutcome {
    pub table: ScoreTable,
    pub samples: usize,
    /// Samples found in more than one input (identical prompts; kept once).
    pub duplicates: usize,
}

/// Combines the predictions of `inputs` (shards of one sweep) into `out`: predictions.jsonl
/// sorted by sample, run.json, summary.csv, results.md and chart.png. The inputs must share
/// their settings, and a sample present twice must have had the same prompt.
pub fn merge_runs(inputs: &[PathBuf], out: &Path) -> Result<MergeOutcome, RunError> {
    let Some(first) = inputs.first() else {
        return Err(RunError::InvalidArgument(
            "ruler merge needs at least one run directory".into(),
        ));
    };
    let (settings, _) = load_run(first)?;
    let mut merged: BTreeMap<WorkItem, (PredictionRecord, PathBuf)> = BTreeMap::new();
    let mut duplicates = 0;
    for dir in inputs {
        let (other, records) = load_run(dir)?;
        if let Some(diff) = settings.difference(&other) {
            return Err(RunError::BadRunDir {
                path: dir.clone(),
                reason: format!("cannot merge with {}: {diff}", first.display()),
            });
        }
        for record in records {
            match merged.get(&record.item()) {
                Some((kept, from)) if kept.prompt_hash != record.prompt_hash => {
                    return Err(RunError::BadRunDir {
                        path: dir.clone(),
                        reason: format!(
                            "{} length {} sample {} has a different prompt in {}",
                            record.task,
                            record.length,
                            record.index,
                            from.display()
                        ),
                    });
                }
                Some(_) => duplicates += 1,
                None => {
                    merged.insert(record.item(), (record, dir.clone()));
                }
            }
        }
    }
    std::fs::create_dir_all(out).map_err(RunError::io(out))?;
    let records: Vec<PredictionRecord> = merged.into_values().map(|(r, _)| r).collect();
    write_predictions(&out.join(PREDICTIONS_FILE), &records)?;
    settings.write(out)?;
    let table = write_reports(out, &settings, &records)?;
    Ok(MergeOutcome {
        table,
        samples: records.len(),
        duplicates,
    })
}
