//! One file per subcommand; what they share lives here.

pub mod attn_map;
pub mod bench;
pub mod info;
pub mod init;
pub mod logits;
pub mod perplexity;
pub mod progress;
pub mod quantize;
pub mod ruler;
pub mod run;
pub mod serve;
pub mod sink;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use gattn_model::{
    Backend, KvDtype, ModelSource, Qwen3Config, Qwen3Model, RopeScaling, Tokenizer, WeightFormat,
};
use gattn_tensor::Checkpoint;
use gattn_tensor::input_file::read_regular_to_string;

use crate::args::{KvArg, LoadArgs, ModelArgs, PromptArgs, WeightsArg};
use crate::failure::{OrUsage, usage};
use crate::limits::{check_threads, prompt_byte_limit};

impl KvArg {
    /// The storage asked for; auto is the backend's own ([`Backend::default_kv_dtype`]: f32 for
    /// the reference kernels, so that the oracle stays exact, bf16 for the SIMD kernels).
    pub fn resolve(self, backend: Backend) -> KvDtype {
        match self {
            KvArg::Auto => backend.default_kv_dtype(),
            KvArg::Bf16 => KvDtype::Bf16,
            KvArg::Int8 => KvDtype::Int8,
            KvArg::F32 => KvDtype::F32,
        }
    }
}

impl WeightsArg {
    /// The format asked for; `None` for auto (the checkpoint's own, see `WeightFormat::native_to`).
    pub fn format(self) -> Option<WeightFormat> {
        match self {
            WeightsArg::Auto => None,
            WeightsArg::F32 => Some(WeightFormat::F32),
            WeightsArg::Bf16 => Some(WeightFormat::Bf16),
            WeightsArg::Int8 => Some(WeightFormat::Int8),
        }
    }

    /// The format the checkpoint in `dir` will load with (auto looks at the checkpoint).
    pub fn resolve(self, dir: &Path) -> Result<WeightFormat> {
        if let Some(format) = self.format() {
            return Ok(format);
        }
        let context = || format!("cannot load the model in {}", dir.display());
        let config = Qwen3Config::from_dir(dir).with_context(context)?;
        let checkpoint = Checkpoint::open_dir(dir).with_context(context)?;
        Ok(WeightFormat::native_to(&config, &checkpoint))
    }
}

/// Builds the global rayon pool once, with `threads` workers (default: all cores).
pub fn init_threads(threads: Option<usize>) -> Result<()> {
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(n) = check_threads(threads)? {
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

/// Loads as `load` says, on the backend of its weight format (`--weights f32`: the reference).
pub fn load_model_as(dir: &Path, load: &LoadArgs) -> Result<Qwen3Model> {
    load_model_on(dir, load, None)
}

/// As [`load_model_as`], on `backend` where a command needs one (attention maps come from the
/// reference kernels only, sink statistics from the fast kernel only).
pub fn load_model_on(dir: &Path, load: &LoadArgs, backend: Option<Backend>) -> Result<Qwen3Model> {
    let mut model = Qwen3Model::load_as(dir, load.weights.format())
        .with_context(|| format!("cannot load the model in {}", dir.display()))?;
    if let Some(backend) = backend {
        model.backend = backend;
    }
    model.kv_dtype = load.kv.resolve(model.backend);
    model.prefill_chunk = load.prefill_chunk;
    if let Some(scaling) = rope_scaling(load.rope_scaling.as_deref(), &model.config)? {
        model.set_rope_scaling(scaling);
    }
    Ok(model)
}

/// The checkpoint's config with `--rope-scaling` applied (YaRN can extend its context, which
/// `--ctx`, `--depth` and prompts are checked against before anything is loaded).
pub fn load_config(dir: &Path, load: &LoadArgs) -> Result<Qwen3Config> {
    let mut config = Qwen3Config::from_dir(dir)
        .with_context(|| format!("cannot load the model in {}", dir.display()))?;
    if let Some(scaling) = rope_scaling(load.rope_scaling.as_deref(), &config)? {
        config.set_rope_scaling(scaling);
    }
    Ok(config)
}

/// `--rope-scaling`, parsed against the checkpoint's config (None: keep the checkpoint's).
pub fn rope_scaling(text: Option<&str>, config: &Qwen3Config) -> Result<Option<RopeScaling>> {
    let Some(text) = text else {
        return Ok(None);
    };
    let scaling = RopeScaling::parse_cli(text, config.max_position_embeddings)
        .map_err(anyhow::Error::msg)
        .or_usage()?;
    Ok(Some(scaling))
}

/// The tokenizer if the checkpoint has one (it is optional with `--prompt-ids`).
pub fn load_tokenizer(dir: &Path) -> Result<Option<Tokenizer>> {
    if dir.join("tokenizer.json").exists() {
        Ok(Some(Tokenizer::from_dir(dir)?))
    } else {
        Ok(None)
    }
}

/// The prompt's token ids. Text longer than [`prompt_byte_limit`] of `ctx` is refused before
/// the tokenizer sees it (it could not fit anyway, and tokenizing it all could take gigabytes).
pub fn prompt_ids(
    prompt: &PromptArgs,
    tokenizer: Option<&Tokenizer>,
    ctx: usize,
) -> Result<Vec<u32>> {
    if let Some(ids) = &prompt.prompt_ids {
        return Ok(ids.clone());
    }
    let limit = prompt_byte_limit(ctx);
    let too_long = |bytes: usize| {
        usage(format!(
            "the prompt is {bytes} bytes, more than the {limit} read for a context of {ctx} tokens"
        ))
    };
    let text = match (&prompt.prompt, &prompt.prompt_file) {
        (Some(text), _) if text.len() as u64 > limit => return Err(too_long(text.len())),
        (Some(text), _) => text.clone(),
        (None, Some(path)) => read_regular_to_string(path, limit)
            .with_context(|| {
                format!(
                    "cannot read the prompt file {} (at most {limit} bytes for a context of {ctx} tokens)",
                    path.display()
                )
            })?,
        (None, None) => bail!("give a prompt: --prompt, --prompt-file or --prompt-ids"),
    };
    let Some(tokenizer) = tokenizer else {
        bail!("the checkpoint has no tokenizer.json: give the prompt as --prompt-ids");
    };
    Ok(tokenizer.encode(&text)?)
}
