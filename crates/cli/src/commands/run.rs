//! `gattn-cpu run`: generate, streaming text (or ids) to stdout and statistics to stderr.

use std::io::Write;

use anyhow::{Result, bail};

use gattn_model::{GenerateOptions, Sampler, SamplingParams, StopReason, TextStream, generate};

use crate::args::{OutputArg, RunArgs};
use crate::commands::{load_model, load_tokenizer, prompt_ids};

pub fn run(args: RunArgs) -> Result<()> {
    let tokenizer = load_tokenizer(&args.model)?;
    let prompt = prompt_ids(&args.prompt, tokenizer.as_ref())?;
    if args.output == OutputArg::Text && tokenizer.is_none() {
        bail!("the checkpoint has no tokenizer.json: use --output ids");
    }
    let model = load_model(&args.model)?;
    let ctx = args.ctx.unwrap_or(model.config.max_position_embeddings);
    if ctx == 0 {
        bail!("--ctx must be at least 1");
    }
    let mut cache = model.new_cache(ctx);
    cache.check_room(prompt.len())?;
    let mut sampler = Sampler::new(SamplingParams {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
    });

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut text_stream = tokenizer.as_ref().map(TextStream::new);
    let mut first = true;
    let options = GenerateOptions {
        max_tokens: args.max_tokens,
        eos_token_ids: &model.config.eos_token_ids,
    };
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
    let stats = result?;
    let stop = match stats.stop {
        StopReason::Eos => "end of sequence",
        StopReason::MaxTokens => "--max-tokens reached",
        StopReason::ContextFull => "context full (raise --ctx)",
        StopReason::Interrupted => "interrupted",
    };
    eprintln!(
        "prompt: {} tokens, {:.1} tok/s | generated: {} tokens, {:.2} tok/s | stop: {stop}",
        stats.prompt_tokens,
        stats.prefill_tokens_per_second(),
        stats.generated_tokens,
        stats.decode_tokens_per_second(),
    );
    Ok(())
}
