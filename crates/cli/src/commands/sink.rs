//! `gattn-cpu sink`: per layer, the attention share on the first token, the gate statistics and
//! the largest hidden-state activation, as a table (or JSON) per model. The statistics stream
//! from the fused kernel in chunks (`gattn_eval::analysis`), so the prompt may be of any length.

use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;

use gattn_eval::analysis::{SinkReport, sink_report, sink_table};
use gattn_model::{Backend, MemoryPlan, available_memory};

use crate::args::{ModelsArgs, PromptArgs};
use crate::commands::{init_threads, load_model_on, load_tokenizer, model_dir, prompt_ids};

#[derive(Args)]
pub struct SinkArgs {
    #[command(flatten)]
    pub models: ModelsArgs,
    #[command(flatten)]
    pub prompt: PromptArgs,
    /// Print one JSON document (a list with one report per model) instead of the tables
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: SinkArgs) -> Result<()> {
    init_threads(args.models.load.threads)?;
    let mut reports: Vec<SinkReport> = Vec::new();
    for source in &args.models.models {
        let dir = model_dir(source)?;
        let config = gattn_model::Qwen3Config::from_dir(&dir)?;
        let tokenizer = load_tokenizer(&dir)?;
        let tokens = prompt_ids(
            &args.prompt,
            tokenizer.as_ref(),
            config.max_position_embeddings,
        )?;
        MemoryPlan::new(
            &config,
            args.models.load.weights.resolve(&dir)?,
            args.models.load.kv.resolve(Backend::Fast),
            tokens.len(),
            tokens.len().min(args.models.load.prefill_chunk),
        )
        .check_fits(available_memory(), tokens.len())?;
        // The statistics stream out of the fused kernel: the fast backend, whatever the weights.
        let model = load_model_on(&dir, &args.models.load, Some(Backend::Fast))?;
        let start = Instant::now();
        let report = sink_report(&source.to_string(), &model, &tokens)
            .with_context(|| format!("sink statistics of {source}"))?;
        eprintln!(
            "{source}: {} tokens in {:.2} s",
            tokens.len(),
            start.elapsed().as_secs_f64()
        );
        reports.push(report);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        print!("{}", sink_table(&reports));
    }
    Ok(())
}
