//! The run's tables: `summary.csv` and `results.md` (task x length with RULER's average row),
//! both computed from the predictions alone, so a merge of shards reproduces them exactly.

use std::fmt::Write as _;
use std::path::Path;

use crate::run::chart::{Series, write_line_chart};
use gattn_model::Existing;
use gattn_model::output::write_atomic;

use crate::run::error::RunError;
use crate::run::escape::{csv_text, markdown_text};
use crate::run::record::PredictionRecord;
use crate::run::settings::RunSettings;
use crate::score::{ScoreTable, postprocess_pred};

pub const SUMMARY_FILE: &str = "summary.csv";
pub const RESULTS_FILE: &str = "results.md";
pub const CHART_FILE: &str = "chart.png";

/// RULER's table over the records.
pub fn score_table(records: &[PredictionRecord]) -> ScoreTable {
    let mut table = ScoreTable::new();
    for r in records {
        let empty = postprocess_pred(&r.prediction).is_empty();
        table.add(r.task, r.length, r.score, empty);
    }
    table
}

/// `task,length,score,samples,nulls`, one row per cell, then one `average` row per length.
pub fn summary_csv(table: &ScoreTable) -> String {
    let mut rows = vec![
        ["task", "length", "score", "samples", "nulls"]
            .map(String::from)
            .to_vec(),
    ];
    for row in table.rows() {
        rows.push(vec![
            row.task.to_string(),
            row.length.to_string(),
            format!("{:.2}", row.score),
            row.samples.to_string(),
            row.nulls.to_string(),
        ]);
    }
    for length in table.lengths() {
        let cells: Vec<_> = table
            .tasks()
            .into_iter()
            .filter_map(|t| table.get(t, length))
            .collect();
        if let Some(avg) = table.average(length) {
            let samples: usize = cells.iter().map(|c| c.samples).sum();
            let nulls: usize = cells.iter().map(|c| c.nulls).sum();
            rows.push(vec![
                "average".into(),
                length.to_string(),
                format!("{avg:.2}"),
                samples.to_string(),
                nulls.to_string(),
            ]);
        }
    }
    csv_text(&rows)
}

/// `4096` -> `4K`, `131072` -> `128K`, as RULER's tables label lengths.
pub fn length_label(length: usize) -> String {
    if length >= 1024 && length.is_multiple_of(1024) {
        format!("{}K", length / 1024)
    } else {
        length.to_string()
    }
}

/// The markdown table: one row per task, one column per length, the average row last.
pub fn results_markdown(table: &ScoreTable, settings: &RunSettings) -> String {
    let lengths = table.lengths();
    let mut md = format!(
        "# RULER: {}\n\nweights {}, KV cache {}, rope scaling {}, {} template, seed {}, \
         essays: {}\n\n",
        markdown_text(&settings.model),
        settings.weights,
        settings.kv,
        markdown_text(
            settings
                .rope_scaling
                .as_deref()
                .unwrap_or("as in config.json")
        ),
        if settings.chat { "chat" } else { "raw" },
        settings.seed,
        markdown_text(&settings.essays),
    );
    if !settings.missing.is_empty() {
        let _ = write!(
            md,
            "**Partial merge**: missing {}; those samples are not in this table.\n\n",
            settings.missing.join("; ")
        );
    }
    md.push_str("| task |");
    for &l in &lengths {
        let _ = write!(md, " {} |", length_label(l));
    }
    md.push_str("\n| --- |");
    md.push_str(&" ---: |".repeat(lengths.len()));
    md.push('\n');
    for task in table.tasks() {
        let _ = write!(md, "| {task} |");
        for &l in &lengths {
            match table.get(task, l) {
                Some(c) => {
                    let _ = write!(md, " {:.2} |", c.score);
                }
                None => md.push_str(" - |"),
            }
        }
        md.push('\n');
    }
    md.push_str("| **average** |");
    for &l in &lengths {
        match table.average(l) {
            Some(a) => {
                let _ = write!(md, " **{a:.2}** |");
            }
            None => md.push_str(" - |"),
        }
    }
    md.push('\n');
    let samples: Vec<String> = lengths
        .iter()
        .map(|&l| {
            let n: usize = table
                .tasks()
                .into_iter()
                .filter_map(|t| table.get(t, l))
                .map(|c| c.samples)
                .sum();
            format!("{}: {n}", length_label(l))
        })
        .collect();
    let _ = writeln!(md, "\nSamples per length: {}.", samples.join(", "));
    md
}

/// One line per task plus the average, score against length.
pub fn table_series(table: &ScoreTable) -> Vec<Series> {
    let mut series: Vec<Series> = table
        .tasks()
        .into_iter()
        .map(|task| Series {
            label: task.to_string(),
            points: table
                .lengths()
                .into_iter()
                .filter_map(|l| table.get(task, l).map(|c| (l, c.score)))
                .collect(),
            emphasized: false,
        })
        .collect();
    series.push(Series {
        label: "average".into(),
        points: table
            .lengths()
            .into_iter()
            .filter_map(|l| table.average(l).map(|a| (l, a)))
            .collect(),
        emphasized: true,
    });
    series
}

/// Writes summary.csv, results.md and chart.png into `dir`, each atomically, replacing the
/// directory's earlier reports: the caller owns `dir` (its run, or a merge output it checked).
pub fn write_reports(
    dir: &Path,
    settings: &RunSettings,
    records: &[PredictionRecord],
) -> Result<ScoreTable, RunError> {
    let table = score_table(records);
    let csv_path = dir.join(SUMMARY_FILE);
    write_atomic(&csv_path, summary_csv(&table).as_bytes(), Existing::Replace)?;
    let md_path = dir.join(RESULTS_FILE);
    let md = results_markdown(&table, settings);
    write_atomic(&md_path, md.as_bytes(), Existing::Replace)?;
    if !records.is_empty() {
        let title = format!("RULER: {}", settings.model);
        write_line_chart(
            &dir.join(CHART_FILE),
            &title,
            &table_series(&table),
            Existing::Replace,
        )?;
    }
    Ok(table)
}
