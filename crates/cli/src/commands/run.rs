//! `gattn-cpu run`: generate, streaming text (or ids) to stdout and statistics to stderr.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};

use gattn_model::{
    Backend, GenerateOptions, MemoryPlan, ModelError, Sampler, SamplingParams, StopReason,
    TextStream, available_memory, generate,
};

use crate::args::{OutputArg, RunArgs, TruncateArg};
use crate::commands::progress::PrefillProgress;
use crate::commands::{load_config, load_model, load_tokenizer, model_dir, prompt_ids};
use crate::failure::usage;
use crate::limits::check_ctx;

pub fn run(args: RunArgs) -> Result<()> {
    let dir = model_dir(&args.model.model)?;
    let config = load_config(&dir, &args.model.load)?;
    let ctx = check_ctx(args.ctx, config.max_position_embeddings)?;
    let sampling = SamplingParams {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
    };
    sampling
        .check()
        .map_err(|(name, why)| usage(format!("--{}: {why}", name.replace('_', "-"))))?;
    let tokenizer = load_tokenizer(&dir)?;
    let mut prompt = prompt_ids(&args.prompt, tokenizer.as_ref(), ctx)?;
    if args.output == OutputArg::Text && tokenizer.is_none() {
        bail!("the checkpoint has no tokenizer.json: use --output ids");
    }
    fit_prompt(&mut prompt, ctx, args.truncate)?;
    // Everything the run will need, checked before the weights and the cache are allocated.
    let format = args.model.load.weights.resolve(&dir)?;
    MemoryPlan::new(
        &config,
        format,
        args.model.load.kv.resolve(Backend::for_format(format)),
        ctx,
        prompt.len().min(args.model.load.prefill_chunk),
    )
    .check_fits(available_memory(), ctx)?;

    let model = load_model(&args.model, &dir)?;
    let interrupt = stop_on_ctrl_c()?;
    let mut progress = PrefillProgress::new(prompt.len(), model.prefill_chunk);
    let mut cache = model.new_cache(ctx);
    let mut sampler = Sampler::new(sampling);

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut text_stream = tokenizer.as_ref().map(TextStream::new);
    let mut first = true;
    let mut options = GenerateOptions::new(args.max_tokens, &model.config.eos_token_ids);
    options.interrupt = Some(interrupt);
    let mut on_prefill_chunk = |done: usize, _total: usize| progress.update(done);
    options.on_prefill_chunk = Some(&mut on_prefill_chunk);
    let result = generate(
        &model,
        &mut cache,
        &prompt,
        &mut sampler,
        options,
        |token| {
            match (&args.output, text_stream.as_mut()) {
                (OutputArg::Ids, _) | (_, None) => {
                    write!(out, "{}{token}", if first { "" } else { "," }).ok();
                }
                (OutputArg::Text, Some(stream)) => {
                    write!(out, "{}", stream.push(token)?).ok();
                }
            }
            first = false;
            out.flush().ok();
            Ok(true)
        },
    );
    // Whatever was generated is printed even if the run failed part-way.
    if let (OutputArg::Text, Some(stream)) = (&args.output, text_stream.as_mut()) {
        write!(out, "{}", stream.finish()?)?;
    }
    writeln!(out)?;
    out.flush()?;
    progress.finish();
    let stats = result?;
    let stop = match stats.stop {
        StopReason::Eos => "end of sequence",
        StopReason::MaxTokens => "--max-tokens reached",
        StopReason::ContextFull => "context full (raise --ctx)",
        StopReason::Interrupted => "interrupted (Ctrl-C)",
    };
    eprintln!(
        "prompt: {} tokens, {:.1} tok/s | generated: {} tokens, {:.2} tok/s | stop: {stop}",
        stats.prompt_tokens,
        stats.prefill_tokens_per_second(),
        stats.generated_tokens,
        stats.decode_tokens_per_second(),
    );
    if stats.stop == StopReason::Interrupted {
        // What was generated is printed above; the exit status tells scripts it was cut short.
        std::process::exit(130);
    }
    Ok(())
}

/// The first Ctrl-C sets the returned flag: generation stops after the current prefill chunk or
/// token and what was generated is printed. A second Ctrl-C exits at once.
fn stop_on_ctrl_c() -> Result<&'static AtomicBool> {
    static INTERRUPTED: AtomicBool = AtomicBool::new(false);
    ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::Relaxed) {
            std::process::exit(130);
        }
    })
    .context("cannot install the Ctrl-C handler")?;
    Ok(&INTERRUPTED)
}

/// A prompt longer than the context is an error unless `--truncate` says which end to drop.
fn fit_prompt(prompt: &mut Vec<u32>, ctx: usize, truncate: Option<TruncateArg>) -> Result<()> {
    if prompt.len() <= ctx {
        return Ok(());
    }
    let (before, excess) = (prompt.len(), prompt.len() - ctx);
    match truncate {
        None => {
            return Err(ModelError::PromptTooLong {
                prompt_tokens: before,
                ctx,
            }
            .into());
        }
        Some(TruncateArg::Left) => {
            prompt.drain(..excess);
        }
        Some(TruncateArg::Right) => prompt.truncate(ctx),
    }
    let side = if truncate == Some(TruncateArg::Left) {
        "start"
    } else {
        "end"
    };
    eprintln!(
        "note: the prompt has {before} tokens; dropped {excess} from its {side} to fit --ctx {ctx}"
    );
    Ok(())
}
