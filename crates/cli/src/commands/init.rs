//! `gattn-cpu init`: a random-weight checkpoint in Hugging Face layout.

use anyhow::{Context, Result};

use gattn_model::init::{Preset, write_random_checkpoint_with};
use gattn_model::{Existing, GateMode};
use gattn_tensor::DType;

use crate::args::{DtypeArg, GateArg, InitArgs, PresetArg};

pub fn run(args: InitArgs) -> Result<()> {
    let preset = match args.preset {
        PresetArg::Tiny => Preset::Tiny,
        PresetArg::Small => Preset::Small,
        PresetArg::Qwen3_0_6b => Preset::Qwen3_0_6b,
        PresetArg::Qwen3_1_7b => Preset::Qwen3_1_7b,
    };
    let gate = match args.gate {
        GateArg::None => GateMode::None,
        GateArg::Headwise => GateMode::Headwise,
        GateArg::Elementwise => GateMode::Elementwise,
    };
    let dtype = match args.dtype {
        DtypeArg::Bf16 => DType::BF16,
        DtypeArg::F16 => DType::F16,
        DtypeArg::F32 => DType::F32,
    };
    let config = preset.config(gate);
    write_random_checkpoint_with(
        &args.out,
        &config,
        dtype,
        args.seed,
        Existing::from_force(args.force),
    )
    .with_context(|| format!("cannot write the checkpoint to {}", args.out.display()))?;
    eprintln!(
        "wrote a random {} checkpoint ({} gate, {dtype}, {:.1} M parameters) to {}",
        preset.name(),
        gate.name(),
        config.parameter_count() as f64 / 1e6,
        args.out.display()
    );
    Ok(())
}
