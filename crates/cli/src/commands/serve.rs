//! `gattn-cpu serve`: load a model as `run` does (same checks and messages) and hand it to the
//! HTTP server of `gattn-serve`.

use anyhow::{Context, Result, bail};
use clap::Args;

use gattn_eval::run::ChatTemplate;
use gattn_model::Backend;
use gattn_model::{MemoryPlan, available_memory};
use gattn_serve::{ServeOptions, ServedModel};

use crate::args::ModelArgs;
use crate::commands::{load_config, load_model, load_tokenizer, model_dir};
use crate::limits::{MAX_THREADS, check_count, check_ctx};

/// Request bodies larger than this are refused (413): room for a 128K-token prompt as text or ids.
const MAX_BODY_BYTES: usize = 16 << 20;

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface)
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0: any free port; the address is printed)
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Context length in tokens of each request, prompt included (default: the model's
    /// max_position_embeddings)
    #[arg(short = 'c', long = "ctx")]
    pub ctx: Option<usize>,
    /// Requests generated at once, each with its own KV cache of --ctx tokens; more wait in
    /// arrival order
    #[arg(long, default_value_t = 1,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub parallel: usize,
    /// Require `Authorization: Bearer KEY` on every request but /health
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
}

pub fn run(args: ServeArgs) -> Result<()> {
    let dir = model_dir(&args.model.model)?;
    let config = load_config(&dir, &args.model.load)?;
    let Some(tokenizer) = load_tokenizer(&dir)? else {
        bail!(
            "the checkpoint in {} has no tokenizer.json, which serve needs",
            dir.display()
        );
    };
    let ctx = check_ctx(args.ctx, config.max_position_embeddings)?;
    check_count(
        "--parallel",
        args.parallel,
        1,
        MAX_THREADS,
        "one worker thread each",
    )?;
    // Every worker has its own KV cache and scratch: all of them must fit beside the weights.
    let format = args.model.load.weights.resolve(&dir)?;
    let mut plan = MemoryPlan::new(
        &config,
        format,
        args.model.load.kv.resolve(Backend::for_format(format)),
        ctx,
        args.model.load.prefill_chunk,
    );
    plan.kv_cache_bytes = plan.kv_cache_bytes.saturating_mul(args.parallel as u64);
    plan.scratch_bytes = plan.scratch_bytes.saturating_mul(args.parallel as u64);
    plan.check_fits(available_memory(), ctx)
        .with_context(|| format!("--parallel {} KV caches do not fit", args.parallel))?;

    let chat = chat_template(&dir);
    let model = load_model(&args.model, &dir)?;
    let served = ServedModel {
        model,
        tokenizer,
        chat,
        name: args.model.model.to_string(),
    };
    let options = ServeOptions {
        host: args.host,
        port: args.port,
        ctx,
        parallel: args.parallel,
        api_key: args.api_key,
        max_body_bytes: MAX_BODY_BYTES,
    };
    gattn_serve::serve(served, options)?;
    Ok(())
}

/// The checkpoint's chat template; without one the chat endpoint answers 400 (said at start).
fn chat_template(dir: &std::path::Path) -> Option<ChatTemplate> {
    match ChatTemplate::from_dir(dir) {
        Ok(template) => Some(template),
        Err(error) => {
            eprintln!("note: /v1/chat/completions is off: {error}");
            None
        }
    }
}
