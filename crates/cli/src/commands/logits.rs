//! `gattn-cpu logits`: every prompt position's logits as a `[tokens, vocab_size]` f32 .npy.

use anyhow::Result;

use gattn_model::output::refuse_existing;
use gattn_model::{Existing, LogitsFor};

use crate::args::LogitsArgs;
use crate::commands::{load_model, model_dir};
use crate::npy;

pub fn run(args: LogitsArgs) -> Result<()> {
    // Usage errors (exit 2) first; then an existing output is refused before the forward pass,
    // and again (atomically) when the file is written.
    crate::limits::check_threads(args.model.load.threads)?;
    let existing = Existing::from_force(args.force);
    refuse_existing(&args.out, existing)?;
    let model = load_model(&args.model, &model_dir(&args.model.model)?)?;
    let mut cache = model.new_cache(args.prompt_ids.len());
    let logits = model.forward(&args.prompt_ids, &mut cache, LogitsFor::All)?;
    let shape = [args.prompt_ids.len(), model.config.vocab_size];
    npy::write_f32(&args.out, &shape, &logits, existing)?;
    eprintln!(
        "wrote {} ({} x {} f32)",
        args.out.display(),
        shape[0],
        shape[1]
    );
    Ok(())
}
