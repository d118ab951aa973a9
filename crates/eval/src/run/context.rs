//! How many positions the model holds, and the error for a length beyond it.

use gattn_model::{Qwen3Config, RopeScaling};

use crate::run::error::RunError;

/// The positions the model holds with `scaling` applied, as `Qwen3Model::set_rope_scaling`
/// computes them (YaRN extends max_position_embeddings to factor x original; the others keep
/// it). Checked from config.json alone, so a bad length fails before the weights load.
pub fn context_limit(config: &Qwen3Config, scaling: Option<&RopeScaling>) -> usize {
    match scaling {
        Some(RopeScaling::Yarn(y)) => {
            (y.factor * y.original_max_position_embeddings as f64) as usize
        }
        _ => config.max_position_embeddings,
    }
}

/// Fails on the first length over `limit`, saying what the config allows and which
/// `--rope-scaling` would fit it.
pub fn check_lengths(
    lengths: &[usize],
    config: &Qwen3Config,
    scaling: Option<(&str, &RopeScaling)>,
) -> Result<(), RunError> {
    let limit = context_limit(config, scaling.map(|s| s.1));
    let Some(&length) = lengths.iter().filter(|&&l| l > limit).max() else {
        return Ok(());
    };
    let base = config.max_position_embeddings;
    let why = match scaling {
        Some((text, RopeScaling::Yarn(_))) => {
            format!(
                "max_position_embeddings {base} in config.json, {limit} with --rope-scaling {text}"
            )
        }
        Some((text, _)) => format!(
            "max_position_embeddings {base} in config.json; --rope-scaling {text} does not extend it"
        ),
        None => format!("max_position_embeddings {base} in config.json"),
    };
    let factor = length.div_ceil(base.max(1));
    let suggestion = format!(
        "--rope-scaling yarn:{factor} would allow {} (YaRN over the {base} trained positions), \
         or drop the length",
        factor * base
    );
    Err(RunError::LengthOverContext {
        length,
        limit,
        why,
        suggestion,
    })
}
