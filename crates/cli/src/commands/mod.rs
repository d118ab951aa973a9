//! One file per subcommand; what they share lives here.

pub mod bench;
pub mod info;
pub mod init;
pub mod logits;
pub mod ruler;
pub mod run;

use anyhow::{Context, Result, bail};

use gattn_model::{KvDtype, Qwen3Model, Tokenizer, WeightFormat};

use crate::args::{KvArg, ModelArgs, PromptArgs, WeightsArg};

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

pub fn load_model(args: &ModelArgs) -> Result<Qwen3Model> {
    init_threads(args.threads)?;
    let mut model = Qwen3Model::load(&args.model, args.weights.format())
        .with_context(|| format!("cannot load the model in {}", args.model.display()))?;
    model.kv_dtype = args.kv.dtype();
    Ok(model)
}

/// The tokenizer if the checkpoint has one (it is optional with `--prompt-ids`).
pub fn load_tokenizer(args: &ModelArgs) -> Result<Option<Tokenizer>> {
    if args.model.join("tokenizer.json").exists() {
        Ok(Some(Tokenizer::from_dir(&args.model)?))
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
