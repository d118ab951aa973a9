//! `gattn-cpu perplexity`: perplexity over windows of a text (the second half of each window
//! scored, as llama-perplexity), optionally saving the top-k log-probabilities of a base run or
//! comparing with them (KL divergence). The work happens in `gattn_eval::perplexity`.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use gattn_tensor::input_file::read_regular_to_string;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use gattn_eval::perplexity::{
    BUILTIN_TEXT, KlSummary, LogitsFiles, PerplexityReport, PerplexityRun, plan_windows,
    scored_logits,
};
use gattn_model::Backend;
use gattn_model::{MemoryPlan, available_memory};

use crate::args::ModelArgs;
use crate::commands::{load_config, load_model, load_tokenizer, model_dir};
use crate::limits::{check_at_least, check_count, check_tokens};

/// Window length unless `-c` says otherwise (llama-perplexity's default), capped at the model's
/// context.
const DEFAULT_CTX: usize = 512;
/// A text to score is read whole and tokenized: 64 MiB is 50 times wikitext-2's test set.
const MAX_TEXT_BYTES: u64 = 64 << 20;
/// A window scores its second half: 4 tokens is the least that leaves two scored.
const MIN_WINDOW: usize = 4;
/// More saved log-probabilities per position than any KL estimate needs.
const MAX_SAVED_TOP_K: usize = 1 << 16;

#[derive(Args)]
pub struct PerplexityArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Text file to score (default: the builtin held-out text, --builtin-text)
    #[arg(short = 'f', long = "file", conflicts_with = "builtin_text")]
    pub file: Option<PathBuf>,
    /// Score the held-out text inside the binary: chapters 1-5 of Austen's Northanger Abbey
    /// (45 KB; not in the tiny models' training data)
    #[arg(long)]
    pub builtin_text: bool,
    /// Window length in tokens; the second half of each window is scored (default: 512, or the
    /// model's context if smaller)
    #[arg(short = 'c', long = "ctx")]
    pub ctx: Option<usize>,
    /// Score at most N windows (default: all that fit in the text)
    #[arg(long, value_name = "N")]
    pub chunks: Option<usize>,
    /// Tokens between window starts (default: -c, i.e. non-overlapping windows)
    #[arg(long, value_name = "S")]
    pub stride: Option<usize>,
    /// Write the top-k log-probabilities of every scored position to FILE (a base run for
    /// --kl-divergence; format in docs/results.md, "Quantization quality")
    #[arg(long, value_name = "FILE")]
    pub save_logits: Option<PathBuf>,
    /// Log-probabilities kept per position by --save-logits
    #[arg(long, value_name = "K", default_value_t = 32)]
    pub top_k: usize,
    /// Compare with a base run's --save-logits FILE: KL divergence, top-1 agreement, delta p
    #[arg(long, value_name = "FILE")]
    pub kl_divergence: Option<PathBuf>,
    /// Let --save-logits replace an existing file
    #[arg(long)]
    pub force: bool,
    /// Print one JSON document (keys include perplexity and, with --kl-divergence, mean_kld)
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: PerplexityArgs) -> Result<()> {
    check_count(
        "--top-k",
        args.top_k,
        1,
        MAX_SAVED_TOP_K,
        "log-probabilities saved per position",
    )?;
    // Counts are checked before the text is read; --chunks beyond the text's windows means all.
    if let Some(stride) = args.stride {
        check_tokens("--stride", stride, 1)?;
    }
    if let Some(chunks) = args.chunks {
        check_at_least("--chunks", chunks, 1)?;
    }
    let dir = model_dir(&args.model.model)?;
    let config = load_config(&dir, &args.model.load)?;
    let Some(tokenizer) = load_tokenizer(&dir)? else {
        bail!(
            "{} has no tokenizer.json: perplexity needs one to tokenize the text",
            dir.display()
        );
    };
    let ctx = args
        .ctx
        .unwrap_or(DEFAULT_CTX.min(config.max_position_embeddings));
    check_tokens("--ctx", ctx, MIN_WINDOW)?;
    let (text, text_name) = match &args.file {
        Some(path) => (
            read_regular_to_string(path, MAX_TEXT_BYTES)
                .with_context(|| format!("cannot read the text file {}", path.display()))?,
            path.display().to_string(),
        ),
        None => (
            BUILTIN_TEXT.to_string(),
            "the builtin text (Northanger Abbey, ch. 1-5)".into(),
        ),
    };
    let tokens = tokenizer.encode(&text)?;
    if ctx > config.max_position_embeddings {
        eprintln!(
            "warning: -c {ctx} is beyond the model's context of {} tokens (see --rope-scaling)",
            config.max_position_embeddings
        );
    }
    let windows = plan_windows(tokens.len(), ctx, args.stride, args.chunks)
        .with_context(|| format!("cannot cut {text_name} into windows"))?;
    let format = args.model.load.weights.resolve(&dir)?;
    MemoryPlan::new(
        &config,
        format,
        args.model.load.kv.resolve(Backend::for_format(format)),
        ctx,
        ctx.min(args.model.load.prefill_chunk),
    )
    .check_fits(available_memory(), ctx)?;

    let mut run = PerplexityRun::new(
        &config,
        &windows,
        &tokens,
        LogitsFiles {
            save: args.save_logits.as_deref().map(|p| (p, args.force)),
            compare: args.kl_divergence.as_deref(),
            top_k: args.top_k,
        },
    )?;
    let model = load_model(&args.model, &dir)?;
    if !args.json {
        println!(
            "{}: weights {}, KV {}; {text_name}: {} tokens, {} windows of {ctx}, {} scored each",
            args.model.model,
            model.format.name(),
            model.kv_dtype.name(),
            tokens.len(),
            windows.len(),
            windows[0].scored(),
        );
    }
    let bar = progress_bar(windows.len());
    let mut cache = model.new_cache(ctx);
    for (i, window) in windows.iter().enumerate() {
        let logits = scored_logits(&model, window, &tokens, &mut cache)
            .with_context(|| format!("window {} (tokens {}..)", i + 1, window.start))?;
        let result = run.add_window(window, &tokens, &logits)?;
        if !args.json {
            bar.suspend(|| {
                println!(
                    "[{}] {:.4} (running {:.4})",
                    i + 1,
                    result.perplexity,
                    result.running_perplexity
                )
            });
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let report = run.finish()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(
            &report,
            args.kl_divergence.as_ref(),
            args.save_logits.as_ref(),
        );
    }
    Ok(())
}

/// Windows done, on stderr, only when stderr is a terminal (indicatif hides it otherwise).
fn progress_bar(windows: usize) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(windows as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("perplexity {bar:40} {pos}/{len} windows, {eta} left")
            .expect("a valid template"),
    );
    bar
}

fn print_report(report: &PerplexityReport, base: Option<&PathBuf>, saved: Option<&PathBuf>) {
    let stderr = report
        .perplexity_stderr
        .map_or(String::new(), |se| format!(" +/- {se:.4}"));
    println!(
        "Final estimate: PPL = {:.4}{stderr} over {} tokens (mean NLL {:.5})",
        report.perplexity, report.tokens_scored, report.mean_nll
    );
    if let Some(path) = saved {
        println!("saved the top-k log-probabilities to {}", path.display());
    }
    if let (Some(k), Some(path)) = (&report.kl_divergence, base) {
        print_kl(k, &path.display().to_string(), report.perplexity);
    }
}

fn print_kl(k: &KlSummary, base: &str, perplexity: f64) {
    println!("Compared with {base} ({} positions):", k.positions);
    println!(
        "  PPL(base)      {:.4}   PPL ratio {:.5}",
        k.base_perplexity,
        perplexity / k.base_perplexity
    );
    println!(
        "  Mean KLD       {:.6} +/- {:.6}",
        k.mean_kld, k.mean_kld_stderr
    );
    println!("  Max KLD        {:.6}", k.max_kld);
    println!(
        "  Median KLD     {:.6}   99.0% KLD {:.6}",
        k.median_kld, k.p99_kld
    );
    println!(
        "  Same top p     {:.3} +/- {:.3} %",
        100.0 * k.same_top,
        100.0 * k.same_top_stderr
    );
    println!(
        "  Mean delta p   {:.3} +/- {:.3} %   RMS delta p {:.3} %",
        100.0 * k.mean_delta_p,
        100.0 * k.mean_delta_p_stderr,
        100.0 * k.rms_delta_p
    );
}
