//! `ruler compare`: several runs (for instance baseline, headwise and elementwise checkpoints)
//! in one table and one chart, as the paper's RULER table sets models against lengths.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::run::chart::{Series, write_line_chart};
use crate::run::error::RunError;
use crate::run::merge::load_run;
use crate::run::report::{length_label, score_table};
use crate::score::ScoreTable;

pub const COMPARE_CSV: &str = "compare.csv";
pub const COMPARE_MD: &str = "compare.md";
pub const COMPARE_CHART: &str = "compare.png";

/// One run to compare and its label in the outputs.
#[derive(Debug, Clone)]
pub struct LabelledRun {
    pub label: String,
    pub dir: PathBuf,
}

/// The default label of a run directory: its last path component.
pub fn default_label(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// Reads every run, writes compare.csv, compare.md and compare.png into `out`, and returns
/// the tables in the order given.
pub fn compare_runs(
    runs: &[LabelledRun],
    out: &Path,
) -> Result<Vec<(String, ScoreTable)>, RunError> {
    if runs.is_empty() {
        return Err(RunError::InvalidArgument(
            "ruler compare needs at least one run directory".into(),
        ));
    }
    let mut tables = Vec::with_capacity(runs.len());
    for run in runs {
        let (_, records) = load_run(&run.dir)?;
        if records.is_empty() {
            return Err(RunError::BadRunDir {
                path: run.dir.clone(),
                reason: "no predictions yet".into(),
            });
        }
        tables.push((run.label.clone(), score_table(&records)));
    }
    std::fs::create_dir_all(out).map_err(RunError::io(out))?;
    let csv = out.join(COMPARE_CSV);
    std::fs::write(&csv, compare_csv(&tables)).map_err(RunError::io(&csv))?;
    let md = out.join(COMPARE_MD);
    std::fs::write(&md, compare_markdown(&tables)).map_err(RunError::io(&md))?;
    let series: Vec<Series> = tables
        .iter()
        .map(|(label, table)| Series {
            label: label.clone(),
            points: table
                .lengths()
                .into_iter()
                .filter_map(|l| table.average(l).map(|a| (l, a)))
                .collect(),
            emphasized: false,
        })
        .collect();
    write_line_chart(
        &out.join(COMPARE_CHART),
        "RULER average score by model",
        &series,
    )?;
    Ok(tables)
}

fn all_lengths(tables: &[(String, ScoreTable)]) -> Vec<usize> {
    let mut lengths: Vec<usize> = tables.iter().flat_map(|(_, t)| t.lengths()).collect();
    lengths.sort_unstable();
    lengths.dedup();
    lengths
}

/// `model,task,length,score,samples`, the average rows with task `average`.
pub fn compare_csv(tables: &[(String, ScoreTable)]) -> String {
    let mut csv = String::from("model,task,length,score,samples\n");
    for (label, table) in tables {
        for row in table.rows() {
            let _ = writeln!(
                csv,
                "{label},{},{},{:.2},{}",
                row.task, row.length, row.score, row.samples
            );
        }
        for length in table.lengths() {
            if let Some(avg) = table.average(length) {
                let samples: usize = table
                    .tasks()
                    .into_iter()
                    .filter_map(|t| table.get(t, length))
                    .map(|c| c.samples)
                    .sum();
                let _ = writeln!(csv, "{label},average,{length},{avg:.2},{samples}");
            }
        }
    }
    csv
}

/// The averages (model x length), then every task with one row per model.
pub fn compare_markdown(tables: &[(String, ScoreTable)]) -> String {
    let lengths = all_lengths(tables);
    let header = |first: &str| {
        let mut h = format!("| {first} |");
        for &l in &lengths {
            let _ = write!(h, " {} |", length_label(l));
        }
        h.push_str("\n| --- |");
        h.push_str(&" ---: |".repeat(lengths.len()));
        h.push('\n');
        h
    };
    let cell = |v: Option<f64>| v.map_or(" - |".to_string(), |v| format!(" {v:.2} |"));
    let mut md = String::from("# RULER comparison\n\n## Average over tasks\n\n");
    md.push_str(&header("model"));
    for (label, table) in tables {
        let _ = write!(md, "| {label} |");
        for &l in &lengths {
            md.push_str(&cell(table.average(l)));
        }
        md.push('\n');
    }
    md.push_str("\n## Per task\n\n");
    md.push_str(&header("task / model"));
    let mut tasks: Vec<_> = tables.iter().flat_map(|(_, t)| t.tasks()).collect();
    tasks.sort_unstable();
    tasks.dedup();
    for task in tasks {
        for (label, table) in tables {
            let _ = write!(md, "| {task} / {label} |");
            for &l in &lengths {
                md.push_str(&cell(table.get(task, l).map(|c| c.score)));
            }
            md.push('\n');
        }
    }
    md
}
