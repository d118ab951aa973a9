//! `gattn-cpu quantize`: an int8 copy of a checkpoint (see `gattn_model::quantize`).

use std::time::Instant;

use anyhow::{Context, Result};

use gattn_model::Existing;
use gattn_model::quantize::quantize_checkpoint_with;

use crate::args::QuantizeArgs;

pub fn run(args: QuantizeArgs) -> Result<()> {
    let start = Instant::now();
    let summary =
        quantize_checkpoint_with(&args.model, &args.out, Existing::from_force(args.force))
            .with_context(|| {
                format!(
                    "cannot quantize {} into {}",
                    args.model.display(),
                    args.out.display()
                )
            })?;
    eprintln!(
        "wrote {} ({} int8 matrices, {} tensors copied, {:.2} GB) in {:.1} s",
        args.out.display(),
        summary.quantized,
        summary.copied,
        summary.file_bytes as f64 / 1e9,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
