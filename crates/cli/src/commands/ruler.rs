//! `gattn-cpu ruler`: RULER long-context evaluation (run, merge shards, compare models).
//! The work happens in `gattn_eval::run`; this file is the grammar and the messages.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};

use gattn_eval::run::{
    LabelledRun, MergeOptions, RESULTS_FILE, RunOptions, Shard, compare_runs, default_label,
    length_label, merge_runs, run_ruler,
};
use gattn_eval::{QaSource, TaskFamily, TaskName};
use gattn_model::ModelSource;

use crate::args::{KvArg, WeightsArg};
use crate::commands::{init_threads, model_dir};
use crate::failure::{OrUsage, usage};
use crate::limits::check_count;
use gattn_model::{Backend, Existing};

/// `gattn-cpu ruler [OPTIONS] --model DIR --out DIR`, or `gattn-cpu ruler merge|compare ...`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct RulerArgs {
    #[command(subcommand)]
    pub action: Option<RulerAction>,
    #[command(flatten)]
    pub run: RulerRunArgs,
}

#[derive(Subcommand)]
pub enum RulerAction {
    /// Combine the output directories of shards (`--shard i/n`) into one run
    #[command(
        after_help = "Example:\n  gattn-cpu ruler merge out/shard-0 out/shard-1 out/shard-2 --out out/all"
    )]
    Merge(MergeArgs),
    /// Put several runs (e.g. baseline, headwise, elementwise) into one table and chart
    #[command(
        after_help = "Example:\n  gattn-cpu ruler compare out/baseline out/headwise out/elementwise --out out/compare"
    )]
    Compare(CompareArgs),
}

// `model` and `out` are required, but Options: clap leaves them empty under a subcommand.
#[derive(Args)]
pub struct RulerRunArgs {
    /// Checkpoint directory (config.json, model.safetensors or shards, tokenizer.json), or
    /// builtin:baseline|headwise|elementwise
    #[arg(short = 'm', long = "model", default_value = "builtin:elementwise")]
    pub model: Option<ModelSource>,
    /// How the linear layers hold their weights
    #[arg(long, value_enum, default_value_t = WeightsArg::Auto)]
    pub weights: WeightsArg,
    /// Worker threads (default: all cores)
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// `all` or a comma-separated list of RULER tasks (niah_single_1, ..., vt, cwe, fwe, qa_1, qa_2)
    #[arg(long, default_value = "all")]
    pub tasks: String,
    /// Target lengths in tokens, comma-separated; `4K` means 4096
    #[arg(long, value_delimiter = ',', value_parser = parse_length,
          default_value = "4K,8K,16K,32K,64K,128K")]
    pub lengths: Vec<usize>,
    /// Samples per task and length (RULER's num_samples)
    #[arg(short = 'n', long, default_value_t = 20)]
    pub samples: usize,
    /// Seed of the sample generators (RULER's default is 42)
    #[arg(short = 's', long, default_value_t = 42)]
    pub seed: u64,
    /// RoPE scaling for lengths beyond the checkpoint: none, linear:F, yarn:F[:ORIGINAL]
    #[arg(long)]
    pub rope_scaling: Option<String>,
    /// KV-cache storage: auto (f32 with --weights f32, else bf16), bf16, int8 or f32
    #[arg(long, value_enum, default_value_t = KvArg::Auto)]
    pub kv: KvArg,
    /// Wrap each task in the model's chat template (tokenizer_config.json) instead of the raw template
    #[arg(long)]
    pub chat: bool,
    /// Folder of essays (.txt, or RULER's PaulGrahamEssays .json) for the essay haystack
    #[arg(long)]
    pub essays: Option<PathBuf>,
    /// SQuAD v2.0 dev JSON (RULER's squad.json) for qa_1; without it qa_1 is skipped
    #[arg(long)]
    pub squad: Option<PathBuf>,
    /// HotpotQA distractor dev JSON (RULER's hotpotqa.json) for qa_2; without it qa_2 is skipped
    #[arg(long)]
    pub hotpotqa: Option<PathBuf>,
    /// Run only shard i of n (every n-th sample of the plan, from the i-th); merge with `ruler merge`
    #[arg(long, default_value = "0/1")]
    pub shard: String,
    /// No progress bar or progress lines on stderr
    #[arg(long)]
    pub no_progress: bool,
    /// Output directory (created; rerunning into it resumes)
    #[arg(short = 'o', long, required = true)]
    pub out: Option<PathBuf>,
    /// Run into an --out that holds other files (without it, only a new, empty or run directory)
    #[arg(long)]
    pub force: bool,
}

#[derive(Args)]
pub struct MergeArgs {
    /// Output directories of the shards
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Directory for the merged run (new or empty)
    #[arg(short = 'o', long)]
    pub out: PathBuf,
    /// Merge even if shards or samples are missing; the outputs list what is missing
    #[arg(long)]
    pub partial: bool,
    /// Write into an --out that holds files already (e.g. replace an earlier merge)
    #[arg(long)]
    pub force: bool,
}

#[derive(Args)]
pub struct CompareArgs {
    /// Run directories (each a `ruler` or `ruler merge` output)
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Labels of the runs, comma-separated, in order (default: the directory names)
    #[arg(long, value_delimiter = ',')]
    pub labels: Option<Vec<String>>,
    /// Directory for compare.csv, compare.md and compare.png
    #[arg(short = 'o', long)]
    pub out: PathBuf,
    /// Replace an earlier comparison's files in --out
    #[arg(long)]
    pub force: bool,
}

/// `4096`, `4K` / `4k` (x1024).
fn parse_length(text: &str) -> std::result::Result<usize, String> {
    let t = text.trim();
    let (digits, scale) = match t.strip_suffix(['K', 'k']) {
        Some(d) => (d, 1024),
        None => (t, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("`{text}` is not a token count (e.g. 4096 or 4K)"))
}

pub fn run(args: RulerArgs) -> Result<()> {
    match args.action {
        Some(RulerAction::Merge(m)) => merge(m),
        Some(RulerAction::Compare(c)) => compare(c),
        None => evaluate(args.run),
    }
}

fn evaluate(args: RulerRunArgs) -> Result<()> {
    let (Some(model), Some(out)) = (&args.model, args.out.clone()) else {
        bail!("give --out DIR (and --model) to run, or a subcommand (merge, compare)");
    };
    let tasks = TaskName::parse_list(&args.tasks).or_usage()?;
    let shard = args.shard.parse::<Shard>().or_usage()?;
    check_plan_size(&args, tasks.len())?;
    check_qa_datasets(&args, &tasks)?;
    init_threads(args.threads)?;
    let dir = model_dir(model)?;
    let weights = args.weights.resolve(&dir)?;
    let options = RunOptions {
        weights,
        model_dir: dir,
        kv: args.kv.resolve(Backend::for_format(weights)),
        rope_scaling: args.rope_scaling.clone(),
        tasks,
        lengths: args.lengths.clone(),
        samples: args.samples,
        seed: args.seed,
        chat: args.chat,
        shard,
        essays: args.essays.clone(),
        squad: args.squad.clone(),
        hotpotqa: args.hotpotqa.clone(),
        out: out.clone(),
        force: args.force,
        progress: !args.no_progress,
    };
    let outcome = run_ruler(&options)?;
    let averages: Vec<String> = outcome
        .table
        .lengths()
        .into_iter()
        .filter_map(|l| {
            outcome
                .table
                .average(l)
                .map(|a| format!("{} {a:.2}", length_label(l)))
        })
        .collect();
    eprintln!(
        "ruler: {} samples evaluated, {} already done, {:.1} s; average: {}; see {}",
        outcome.evaluated,
        outcome.resumed,
        outcome.wall.as_secs_f64(),
        if averages.is_empty() {
            "-".into()
        } else {
            averages.join(", ")
        },
        out.join(RESULTS_FILE).display()
    );
    Ok(())
}

/// Samples per task and length at most (RULER's own runs use 500): the plan of every sample is
/// built up front, so its size is bounded before anything else.
const MAX_SAMPLES: usize = 100_000;
/// Samples in one plan at most (tasks x lengths x samples), some tens of MB of plan.
const MAX_PLAN: usize = 1 << 20;

fn check_plan_size(args: &RulerRunArgs, tasks: usize) -> Result<()> {
    check_count(
        "--samples",
        args.samples,
        1,
        MAX_SAMPLES,
        "per task and length",
    )?;
    let planned = tasks
        .checked_mul(args.lengths.len())
        .and_then(|n| n.checked_mul(args.samples))
        .filter(|&n| n <= MAX_PLAN);
    if planned.is_none() {
        return Err(usage(format!(
            "{tasks} tasks x {} lengths x --samples {} is more than the {MAX_PLAN} samples one run plans; \
             split it into several runs",
            args.lengths.len(),
            args.samples
        )));
    }
    Ok(())
}

/// A QA task named in --tasks needs its dataset: without it the run would be an empty table.
/// (`--tasks all` skips the QA tasks whose dataset is not given, saying so, as RULER does.)
fn check_qa_datasets(args: &RulerRunArgs, tasks: &[TaskName]) -> Result<()> {
    if args.tasks.trim() == "all" {
        return Ok(());
    }
    for &task in tasks {
        let TaskFamily::Qa { dataset } = task.config().family else {
            continue;
        };
        let (given, flag) = match dataset {
            QaSource::Squad => (args.squad.is_some(), "--squad FILE (SQuAD v2.0 dev JSON)"),
            QaSource::HotpotQa => (
                args.hotpotqa.is_some(),
                "--hotpotqa FILE (HotpotQA distractor dev JSON)",
            ),
        };
        if !given {
            return Err(usage(format!("--tasks names {task}, which needs {flag}")));
        }
    }
    Ok(())
}

fn merge(args: MergeArgs) -> Result<()> {
    let options = MergeOptions {
        partial: args.partial,
        existing: Existing::from_force(args.force),
    };
    let outcome = merge_runs(&args.dirs, &args.out, options)?;
    if !outcome.missing.is_empty() {
        eprintln!(
            "ruler merge: PARTIAL: missing {} (listed in run.json and results.md)",
            outcome.missing.join("; ")
        );
    }
    eprintln!(
        "ruler merge: {} samples from {} directories into {}",
        outcome.samples,
        args.dirs.len(),
        args.out.join(RESULTS_FILE).display()
    );
    Ok(())
}

fn compare(args: CompareArgs) -> Result<()> {
    let labels = match &args.labels {
        Some(l) if l.len() != args.dirs.len() => bail!(
            "--labels has {} names for {} directories",
            l.len(),
            args.dirs.len()
        ),
        Some(l) => l.clone(),
        None => args.dirs.iter().map(|d| default_label(d)).collect(),
    };
    let runs: Vec<LabelledRun> = labels
        .into_iter()
        .zip(&args.dirs)
        .map(|(label, dir)| LabelledRun {
            label,
            dir: dir.clone(),
        })
        .collect();
    compare_runs(&runs, &args.out, Existing::from_force(args.force))?;
    eprintln!(
        "ruler compare: {} runs into {}",
        runs.len(),
        args.out.join("compare.md").display()
    );
    Ok(())
}
