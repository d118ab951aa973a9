//! `ruler compare`: several runs (for instance baseline, headwise and elementwise checkpoints)
//! in one table and one chart, as the paper's RULER table sets models against lengths.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::run::chart::{Series, write_line_chart};
use gattn_model::Existing;
use gattn_model::output::{refuse_existing, write_atomic};

use crate::run::error::RunError;
use crate::run::escape::{csv_text, markdown_text};
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

/// Reads every run, writes compare.csv, compare.md and compare.png into `out` (each
/// atomically; existing ones only replaced with `Existing::Replace`), and returns the tables
/// in the order given.
pub fn compare_runs(
    runs: &[LabelledRun],
    out: &Path,
    existing: Existing,
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
    // Refuse before writing any, so that a refusal changes nothing.
    for name in [COMPARE_CSV, COMPARE_MD, COMPARE_CHART] {
        refuse_existing(&out.join(name), existing)?;
    }
    std::fs::create_dir_all(out).map_err(RunError::io(out))?;
    write_atomic(
        &out.join(COMPARE_CSV),
        compare_csv(&tables).as_bytes(),
        existing,
    )?;
    write_atomic(
        &out.join(COMPARE_MD),
        compare_markdown(&tables).as_bytes(),
        existing,
    )?;
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
        existing,
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
    let mut rows = vec![
        ["model", "task", "length", "score", "samples"]
            .map(String::from)
            .to_vec(),
    ];
    for (label, table) in tables {
        for row in table.rows() {
            rows.push(vec![
                label.clone(),
                row.task.to_string(),
                row.length.to_string(),
                format!("{:.2}", row.score),
                row.samples.to_string(),
            ]);
        }
        for length in table.lengths() {
            if let Some(avg) = table.average(length) {
                let samples: usize = table
                    .tasks()
                    .into_iter()
                    .filter_map(|t| table.get(t, length))
                    .map(|c| c.samples)
                    .sum();
                rows.push(vec![
                    label.clone(),
                    "average".into(),
                    length.to_string(),
                    format!("{avg:.2}"),
                    samples.to_string(),
                ]);
            }
        }
    }
    csv_text(&rows)
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
        let _ = write!(md, "| {} |", markdown_text(label));
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
            let _ = write!(md, "| {task} / {} |", markdown_text(label));
            for &l in &lengths {
                md.push_str(&cell(table.get(task, l).map(|c| c.score)));
            }
            md.push('\n');
        }
    }
    md
}
