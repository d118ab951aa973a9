//! One file per subcommand; what they share lives here.

pub mod attn_map;
pub mod info;
pub mod init;
pub mod logits;
pub mod ruler;
pub mod run;
pub mod sink;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use gattn_model::{KvDtype, ModelSource, Qwen3Model, Tokenizer, WeightFormat};

use crate::args::{KvArg, LoadArgs, ModelArgs, PromptArgs, WeightsArg};

impl KvArg {
    pub fn dtype(self) -> KvDtype {
        match self {
            KvArg::Bf16 => KvDtype::Bf16,
            KvArg::Int8 => KvDtype::Int8,
            KvArg::F32 => KvDtype::F32,
        }
    }
}

impl WeightsArg {
    pub fn format(self) -> WeightFormat {
        match self {
            WeightsArg::F32 => WeightFormat::F32,
            WeightsArg::Bf16 => WeightFormat::Bf16,
            WeightsArg::Int8 => WeightFormat::Int8,
        }
    }
}

/// Builds the global rayon pool once, with `threads` workers (default: all cores).
pub fn init_threads(threads: Option<usize>) -> Result<()> {
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(n) = threads {
        if n == 0 {
            bail!("--threads must be at least 1");
        }
        builder = builder.num_threads(n);
    }
    builder
        .build_global()
        .context("cannot start the thread pool")
}

/// The checkpoint directory of a `-m` value; a builtin model is written to the cache first.
pub fn model_dir(source: &ModelSource) -> Result<PathBuf> {
    source
        .dir()
        .with_context(|| format!("cannot prepare the model {source}"))
}

/// Loads the checkpoint in `dir` (from [`model_dir`]) as `args` say, after starting the threads.
pub fn load_model(args: &ModelArgs, dir: &Path) -> Result<Qwen3Model> {
    init_threads(args.load.threads)?;
    load_model_as(dir, &args.load)
}

pub fn load_model_as(dir: &Path, load: &LoadArgs) -> Result<Qwen3Model> {
    let mut model = Qwen3Model::load(dir, load.weights.format())
        .with_context(|| format!("cannot load the model in {}", dir.display()))?;
    model.kv_dtype = load.kv.dtype();
    Ok(model)
}

/// The tokenizer if the checkpoint has one (it is optional with `--prompt-ids`).
pub fn load_tokenizer(dir: &Path) -> Result<Option<Tokenizer>> {
    if dir.join("tokenizer.json").exists() {
        Ok(Some(Tokenizer::from_dir(dir)?))
    } else {
        Ok(None)
    }
}

pub fn prompt_ids(prompt: &PromptArgs, tokenizer: Option<&Tokenizer>) -> Result<Vec<u32>> {
    if let Some(ids) = &prompt.prompt_ids {
        return Ok(ids.clone());
    }
    let text = match (&prompt.prompt, &prompt.prompt_file) {
        (Some(text), _) => text.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the prompt file {}", path.display()))?,
        (None, None) => bail!("give a prompt: --prompt, --prompt-file or --prompt-ids"),
    };
    let Some(tokenizer) = tokenizer else {
        bail!("the checkpoint has no tokenizer.json: give the prompt as --prompt-ids");
    };
    Ok(tokenizer.encode(&text)?)
}
