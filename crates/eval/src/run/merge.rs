//! `ruler merge`: the shards of one sweep into one run directory with one summary. The shards
//! must be exactly `0/n .. n-1/n` of one plan with the same settings, each complete, unless
//! `--partial` says to merge what there is (and the outputs say what is missing).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gattn_model::Existing;
use gattn_model::output::prepare_dir;

use crate::run::error::RunError;
use crate::run::lock::RunLock;
use crate::run::plan::{Shard, WorkItem};
use crate::run::record::{PREDICTIONS_FILE, PredictionRecord, read_predictions, write_predictions};
use crate::run::report::write_reports;
use crate::run::settings::RunSettings;
use crate::score::ScoreTable;

/// A run directory's settings and predictions (a truncated last line is ignored), every record
/// checked against itself and against the run's plan.
pub fn load_run(dir: &Path) -> Result<(RunSettings, Vec<PredictionRecord>), RunError> {
    let settings = RunSettings::read(dir)?.ok_or_else(|| RunError::BadRunDir {
        path: dir.to_path_buf(),
        reason: "no run.json: not an output directory of `gattn-cpu ruler`".into(),
    })?;
    let path = dir.join(PREDICTIONS_FILE);
    let file = read_predictions(&path)?;
    file.check_against(&path, &settings)?;
    Ok((settings, file.records))
}

/// What a merge produced.
#[derive(Debug, Clone)]
pub struct MergeOutcome {
    pub table: ScoreTable,
    pub samples: usize,
    /// What a `--partial` merge went without (empty when complete), as written to run.json.
    pub missing: Vec<String>,
}

/// How to merge.
#[derive(Debug, Clone, Copy)]
pub struct MergeOptions {
    /// Merge even if shards or samples are missing (listed in the outputs).
    pub partial: bool,
    /// Whether a non-empty `out` may be written into (`--force`).
    pub existing: Existing,
}

/// One input directory, checked.
struct ShardRun {
    dir: PathBuf,
    shard: Shard,
    records: Vec<PredictionRecord>,
    planned: Vec<WorkItem>,
}

/// Combines the predictions of `inputs` (the shards of one sweep) into `out`: predictions.jsonl
/// sorted by sample, run.json, summary.csv, results.md and chart.png.
pub fn merge_runs(
    inputs: &[PathBuf],
    out: &Path,
    options: MergeOptions,
) -> Result<MergeOutcome, RunError> {
    let Some(first_dir) = inputs.first() else {
        return Err(RunError::InvalidArgument(
            "ruler merge needs at least one run directory".into(),
        ));
    };
    let (settings, _) = load_run(first_dir)?;
    let count = settings.shard()?.count;
    let mut by_index: BTreeMap<usize, ShardRun> = BTreeMap::new();
    for dir in inputs {
        let (other, records) = load_run(dir)?;
        let bad = |reason: String| RunError::BadRunDir {
            path: dir.clone(),
            reason,
        };
        if let Some(diff) = settings.difference(&other, false) {
            return Err(bad(format!(
                "cannot merge with {}: {diff}",
                first_dir.display()
            )));
        }
        if !other.missing.is_empty() {
            return Err(bad(format!(
                "is itself a partial merge (missing {}): merge the shards it came from",
                other.missing.join("; ")
            )));
        }
        let shard = other.shard()?;
        if shard.count != count {
            return Err(bad(format!(
                "is shard {shard} but {} is shard {}: not one split of the sweep",
                first_dir.display(),
                settings.shard
            )));
        }
        if let Some(twin) = by_index.get(&shard.index) {
            return Err(bad(format!(
                "shard {shard} is given twice: {} and {}",
                twin.dir.display(),
                dir.display()
            )));
        }
        let planned = other.planned()?;
        by_index.insert(
            shard.index,
            ShardRun {
                dir: dir.clone(),
                shard,
                records,
                planned,
            },
        );
    }

    let mut missing: Vec<String> = (0..count)
        .filter(|i| !by_index.contains_key(i))
        .map(|index| format!("shard {}", Shard { index, count }))
        .collect();
    for run in by_index.values() {
        let lacking = run.planned.len() - run.records.len();
        if lacking > 0 {
            missing.push(format!(
                "shard {} ({}): {lacking} of its {} samples",
                run.shard,
                run.dir.display(),
                run.planned.len()
            ));
        }
    }
    if !missing.is_empty() && !options.partial {
        return Err(RunError::IncompleteMerge {
            missing: missing.join("; "),
        });
    }

    let mut merged: BTreeMap<WorkItem, PredictionRecord> = BTreeMap::new();
    for run in by_index.into_values() {
        for record in run.records {
            // Shards of one plan are disjoint and each was checked against its plan.
            merged.insert(record.item(), record);
        }
    }
    let records: Vec<PredictionRecord> = merged.into_values().collect();
    let merged_settings = RunSettings {
        shard: Shard::ALL.to_string(),
        missing: missing.clone(),
        ..settings
    };

    prepare_dir(out, options.existing)?;
    let _lock = RunLock::acquire(out)?;
    write_predictions(&out.join(PREDICTIONS_FILE), &records, Existing::Replace)?;
    merged_settings.write(out)?;
    let table = write_reports(out, &merged_settings, &records)?;
    Ok(MergeOutcome {
        table,
        samples: records.len(),
        missing,
    })
}
