//! `gattn-cpu attn-map`: the head-averaged attention maps of chosen layers, per model as a PNG
//! (2 x 2 grid for four layers, token strings on the axes, colour bar) and as .npy, plus one
//! combined figure (model x layer) when several models are given.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};

use gattn_eval::analysis::{
    ColourScale, ModelMaps, head_averaged_maps, parse_layers, token_labels, write_combined_figure,
    write_model_figure,
};
use gattn_model::output::refuse_existing;
use gattn_model::{Backend, Existing, ModelSource};

use crate::args::{ModelsArgs, PromptArgs};
use crate::commands::{init_threads, load_model_on, load_tokenizer, model_dir, prompt_ids};
use crate::failure::OrUsage;
use crate::npy;

#[derive(Args)]
pub struct AttnMapArgs {
    #[command(flatten)]
    pub models: ModelsArgs,
    #[command(flatten)]
    pub prompt: PromptArgs,
    /// Layers to draw, 1-based as in the paper (layer 1 is the first)
    #[arg(long, default_value = "1,7,21,28")]
    pub layers: String,
    /// Colour scale of the heatmaps: sqrt shows small probabilities, linear is proportional
    #[arg(long, value_enum, default_value_t = ScaleArg::Sqrt)]
    pub scale: ScaleArg,
    /// Output directory (created): attn-map-NAME.png, NAME-layerK.npy, attn-map-combined.png
    #[arg(short = 'o', long)]
    pub out: PathBuf,
    /// Replace files of an earlier attn-map in --out (without it, existing files are refused)
    #[arg(long)]
    pub force: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ScaleArg {
    Sqrt,
    Linear,
}

pub fn run(args: AttnMapArgs) -> Result<()> {
    init_threads(args.models.load.threads)?;
    let scale = match args.scale {
        ScaleArg::Sqrt => ColourScale::Sqrt,
        ScaleArg::Linear => ColourScale::Linear,
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let names = file_names(&args.models.models);
    // The figures' names are known now (the .npy names once the layers are): refuse early.
    let existing = Existing::from_force(args.force);
    for name in &names {
        refuse_existing(&args.out.join(format!("attn-map-{name}.png")), existing)?;
    }
    refuse_existing(&args.out.join("attn-map-combined.png"), existing)?;
    let mut all = Vec::new();
    for (source, name) in args.models.models.iter().zip(&names) {
        let dir = model_dir(source)?;
        // Only the reference kernels materialize the probabilities; with --kv auto its cache is
        // f32, so the maps are the model's own, not a bf16 cache's.
        let model = load_model_on(&dir, &args.models.load, Some(Backend::Reference))?;
        let layers = parse_layers(&args.layers, model.layers.len())
            .with_context(|| format!("model {source}"))
            .or_usage()?;
        let tokenizer = load_tokenizer(&dir)?;
        let tokens = prompt_ids(
            &args.prompt,
            tokenizer.as_ref(),
            model.config.max_position_embeddings,
        )?;
        let maps = head_averaged_maps(&model, &tokens, &layers)
            .with_context(|| format!("attention maps of {source}"))?;
        let labels = match &tokenizer {
            Some(t) => token_labels(t, &tokens)?,
            None => tokens.iter().map(u32::to_string).collect(),
        };
        for map in &maps {
            let path = args.out.join(format!("{name}-layer{}.npy", map.layer + 1));
            npy::write_f32(&path, &[map.tokens, map.tokens], &map.probs, existing)?;
        }
        let model_maps = ModelMaps {
            label: source.to_string(),
            tokens: labels,
            maps,
        };
        let figure = args.out.join(format!("attn-map-{name}.png"));
        write_model_figure(&figure, &model_maps, scale, existing)?;
        eprintln!(
            "{source}: {} tokens, wrote {}",
            tokens.len(),
            figure.display()
        );
        all.push(model_maps);
    }
    if all.len() > 1 {
        if all.windows(2).any(|w| w[0].maps.len() != w[1].maps.len()) {
            bail!("the models give different numbers of layers: no combined figure");
        }
        let figure = args.out.join("attn-map-combined.png");
        write_combined_figure(&figure, &all, scale, existing)?;
        eprintln!("wrote {}", figure.display());
    }
    Ok(())
}

/// A file-name stem per model: the builtin name or the directory's name, numbered when two
/// models would share one.
fn file_names(sources: &[ModelSource]) -> Vec<String> {
    let stems: Vec<String> = sources
        .iter()
        .map(|source| match source {
            ModelSource::Builtin(model) => model.name().to_string(),
            ModelSource::Dir(dir) => stem(dir),
        })
        .collect();
    stems
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if stems.iter().filter(|t| *t == s).count() > 1 {
                format!("{s}-{}", i + 1)
            } else {
                s.clone()
            }
        })
        .collect()
}

fn stem(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".to_string())
}
