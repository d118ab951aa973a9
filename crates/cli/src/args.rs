//! The command-line grammar. Short flags follow llama.cpp (`-m`, `-c`, `-t`, `-n`, `-p`, `-f`, `-s`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use gattn_model::ModelSource;

#[derive(Parser)]
#[command(
    name = "gattn-cpu",
    version,
    about = "CPU inference for Qwen3 with gated attention (arXiv 2505.06708)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Generate text from a prompt
    #[command(
        after_help = "Examples:\n  gattn-cpu run -p \"It is a truth universally acknowledged\" -n 80 --temperature 0\n  \
        gattn-cpu run -m builtin:baseline -p \"It is a truth\" -n 80\n  \
        gattn-cpu init --preset tiny --gate elementwise --out /tmp/tiny\n  \
        gattn-cpu run -m /tmp/tiny -p \"The gate\" -n 32 --temperature 0.7 --seed 1"
    )]
    Run(RunArgs),
    /// Write the logits of every prompt position to a .npy file
    #[command(
        after_help = "Examples:\n  gattn-cpu logits -m /tmp/tiny --prompt-ids 1,2,3 --out logits.npy\n  \
        gattn-cpu logits -m builtin:headwise --prompt-ids 73,116,32 --out logits.npy"
    )]
    Logits(LogitsArgs),
    /// Write a random-weight checkpoint in Hugging Face layout
    #[command(
        after_help = "Example:\n  gattn-cpu init --preset qwen3-1.7b --gate headwise --dtype bf16 --out models/rand-1.7b"
    )]
    Init(InitArgs),
    /// Show the SIMD level, threads and (with --model) the model's shapes and sizes
    #[command(
        after_help = "Examples:\n  gattn-cpu info\n  gattn-cpu info -m /tmp/tiny\n  gattn-cpu info -m builtin:baseline"
    )]
    Info(InfoArgs),
    /// RULER long-context evaluation: run, resume, shard (`merge`) and compare checkpoints
    #[command(
        after_help = "Examples:\n  gattn-cpu ruler -m models/qwen3-1.7b --tasks niah_single_1,vt --lengths 4K,8K -n 20 --out out/base\n  \
        gattn-cpu ruler -m models/qwen3-1.7b --lengths 128K --rope-scaling yarn:4 --shard 0/4 --out out/s0\n  \
        gattn-cpu ruler merge out/s0 out/s1 out/s2 out/s3 --out out/all\n  \
        gattn-cpu ruler compare out/base out/headwise out/elementwise --out out/compare"
    )]
    Ruler(crate::commands::ruler::RulerArgs),
    /// Per layer: attention share on the first token, gate statistics, largest activation
    #[command(
        after_help = "Examples:\n  gattn-cpu sink -m builtin:baseline -m builtin:headwise -m builtin:elementwise -p \"It is a truth universally acknowledged\"\n  \
        gattn-cpu sink -m models/qwen3-1.7b --weights bf16 -f long_prompt.txt --json > sink.json"
    )]
    Sink(crate::commands::sink::SinkArgs),
    /// Head-averaged attention maps of chosen layers as PNG heatmaps and .npy
    #[command(
        after_help = "Examples:\n  gattn-cpu attn-map -m builtin:baseline -m builtin:elementwise -p \"It is a truth universally acknowledged\" --layers 1,2,3,4 --out maps\n  \
        gattn-cpu attn-map -m models/qwen3-1.7b --weights bf16 -p \"The gate\" --layers 1,7,21,28 --out maps"
    )]
    AttnMap(crate::commands::attn_map::AttnMapArgs),
    /// Write an int8 copy of a checkpoint that loads by mmap with no re-quantizing
    #[command(
        after_help = "Example:\n  gattn-cpu quantize -m models/qwen3-1.7b -o models/qwen3-1.7b-int8\n  \
        gattn-cpu run -m models/qwen3-1.7b-int8 -p \"The gate\" -n 32"
    )]
    Quantize(QuantizeArgs),
    /// Measure prefill and decode speed against the read-bandwidth roofline
    #[command(
        after_help = "Example:\n  gattn-cpu bench -m models/rand-1.7b --weights bf16 --prompt 512 --gen 32 --depth 4096 -t 2\n  \
        gattn-cpu bench -m /tmp/tiny --weights int8 --kv int8 -p 64 -n 16 -d 128 --json\n  \
        gattn-cpu bench -m models/rand-1.7b-int8 --kv int8 -p 16 -n 16 -d 131072 --depth-fill synthetic --rope-scaling yarn:4\n  \
        gattn-cpu bench -m models/rand-1.7b-int8 --kv bf16 -p 512 -d 32768 --depth-fill synthetic -n 1\n  \
        gattn-cpu bench -m models/rand-1.7b-int8 --kv bf16 -p 131072 -n 1 -r 1 --prefill-only --rope-scaling yarn:4"
    )]
    Bench(BenchArgs),
    /// Perplexity of a text (second half of each window scored) and KL divergence against a
    /// base run's saved log-probabilities, as llama-perplexity
    #[command(
        after_help = "Examples:\n  gattn-cpu perplexity -m builtin:elementwise\n  \
        gattn-cpu perplexity -m models/qwen3-1.7b -f wiki.test.raw -c 512 --chunks 20 --weights f32 --kv f32 --save-logits base.lp\n  \
        gattn-cpu perplexity -m models/qwen3-1.7b -f wiki.test.raw -c 512 --chunks 20 --weights int8 --kv int8 --kl-divergence base.lp"
    )]
    Perplexity(crate::commands::perplexity::PerplexityArgs),
    /// Serve the model over HTTP: OpenAI-compatible completions and chat, RULER's /generate
    #[command(
        after_help = "Examples:\n  gattn-cpu serve -m builtin:elementwise --port 8080\n  \
        curl -s http://127.0.0.1:8080/v1/completions -d '{\"prompt\": \"It is a truth\", \"max_tokens\": 16, \"temperature\": 0}'\n  \
        gattn-cpu serve -m models/qwen3-1.7b -c 32768 --parallel 2 --api-key secret --host 0.0.0.0\n\
        See docs/serve.md for lm-evaluation-harness and NVIDIA RULER against it."
    )]
    Serve(crate::commands::serve::ServeArgs),
}

#[derive(Args)]
pub struct QuantizeArgs {
    /// Checkpoint directory to quantize (bf16, f16 or f32; single file or shards)
    #[arg(short = 'm', long = "model")]
    pub model: PathBuf,
    /// Output directory (created; must not exist or be empty)
    #[arg(short = 'o', long)]
    pub out: PathBuf,
    /// Replace existing output files (without it, a command never overwrites a file)
    #[arg(long)]
    pub force: bool,
}

/// `-m/--model`: a checkpoint directory or `builtin:baseline|headwise|elementwise`.
const MODEL_HELP: &str = "Checkpoint directory (config.json, model.safetensors or shards, \
    tokenizer.json), or builtin:baseline|headwise|elementwise (tiny models inside the binary)";

#[derive(Args)]
pub struct ModelArgs {
    #[arg(short = 'm', long = "model", default_value = "builtin:elementwise", help = MODEL_HELP)]
    pub model: ModelSource,
    #[command(flatten)]
    pub load: LoadArgs,
}

/// How a model is loaded and run: weight format, threads, KV-cache storage.
#[derive(Args)]
pub struct LoadArgs {
    /// How the linear layers hold their weights: auto (the checkpoint's own: int8 for a quantized
    /// checkpoint, bf16 for bf16, else f32), f32 (the naive reference kernels: the oracle), bf16
    /// or int8 (SIMD kernels)
    #[arg(long, value_enum, default_value_t = WeightsArg::Auto)]
    pub weights: WeightsArg,
    /// Most prompt tokens one forward pass runs (longer prompts are split into chunks)
    #[arg(long, default_value_t = gattn_model::DEFAULT_PREFILL_CHUNK,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub prefill_chunk: usize,
    /// Override the checkpoint's RoPE scaling: none, linear:FACTOR or yarn:FACTOR[:ORIGINAL]
    /// (e.g. yarn:4 over 32768 positions for 131072 tokens, as Qwen3's documentation does)
    #[arg(long, value_name = "SCALING")]
    pub rope_scaling: Option<String>,
    /// Worker threads (default: all cores)
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// KV-cache storage: auto (f32 with --weights f32, the oracle; bf16 otherwise), bf16, int8
    /// (per-token, per-head scale) or f32
    #[arg(long, value_enum, default_value_t = KvArg::Auto)]
    pub kv: KvArg,
}

/// Several models to compare (`sink`, `attn-map`), loaded the same way.
#[derive(Args)]
pub struct ModelsArgs {
    /// Checkpoint directory or builtin:NAME; repeat to compare models
    #[arg(short = 'm', long = "model", required = true, long_help = MODEL_HELP)]
    pub models: Vec<ModelSource>,
    #[command(flatten)]
    pub load: LoadArgs,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum KvArg {
    /// f32 for the reference kernels (`--weights f32`), bf16 for the SIMD kernels
    Auto,
    Bf16,
    Int8,
    F32,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
pub struct PromptArgs {
    /// Prompt text
    #[arg(short = 'p', long)]
    pub prompt: Option<String>,
    /// Read the prompt text from a file
    #[arg(short = 'f', long)]
    pub prompt_file: Option<PathBuf>,
    /// Prompt as comma-separated token ids (works without tokenizer.json)
    #[arg(long, value_delimiter = ',')]
    pub prompt_ids: Option<Vec<u32>>,
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompt: PromptArgs,
    /// Context length in tokens, prompt included (default: the model's max_position_embeddings)
    #[arg(short = 'c', long = "ctx")]
    pub ctx: Option<usize>,
    /// Tokens to generate at most
    #[arg(short = 'n', long, default_value_t = 256)]
    pub max_tokens: usize,
    /// Sampling temperature; 0 = greedy
    #[arg(long, visible_alias = "temp", default_value_t = 0.8)]
    pub temperature: f32,
    /// Sample from the K most likely tokens only (0 = all)
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Sample from the smallest set of tokens whose probability reaches P
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// Random seed (same seed, same output)
    #[arg(short = 's', long, default_value_t = 0)]
    pub seed: u64,
    /// Print the generated text, or the generated token ids comma-separated
    #[arg(long, value_enum, default_value_t = OutputArg::Text)]
    pub output: OutputArg,
    /// A prompt longer than --ctx is refused, unless truncated: keep its end (left) or start (right)
    #[arg(long, value_enum)]
    pub truncate: Option<TruncateArg>,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum TruncateArg {
    /// Drop tokens from the start of the prompt
    Left,
    /// Drop tokens from the end of the prompt
    Right,
}

#[derive(Args)]
pub struct LogitsArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt as comma-separated token ids
    #[arg(long, value_delimiter = ',', required = true)]
    pub prompt_ids: Vec<u32>,
    /// Output .npy file: little-endian f32, shape [tokens, vocab_size]
    #[arg(short = 'o', long)]
    pub out: PathBuf,
    /// Replace existing output files (without it, a command never overwrites a file)
    #[arg(long)]
    pub force: bool,
}

#[derive(Args)]
pub struct InitArgs {
    /// Model shape
    #[arg(long, value_enum)]
    pub preset: PresetArg,
    /// The paper's output gate
    #[arg(long, value_enum, default_value_t = GateArg::None)]
    pub gate: GateArg,
    #[arg(short = 's', long, default_value_t = 0)]
    pub seed: u64,
    /// Weight dtype in the safetensors file
    #[arg(long, value_enum, default_value_t = DtypeArg::Bf16)]
    pub dtype: DtypeArg,
    /// Output directory (created; must not exist or be empty)
    #[arg(short = 'o', long)]
    pub out: PathBuf,
    /// Replace existing output files (without it, a command never overwrites a file)
    #[arg(long)]
    pub force: bool,
}

#[derive(Args)]
pub struct InfoArgs {
    #[arg(short = 'm', long = "model", help = MODEL_HELP)]
    pub model: Option<ModelSource>,
    #[arg(long, value_enum, default_value_t = WeightsArg::Auto)]
    pub weights: WeightsArg,
    /// Context length to size the KV cache for (default: max_position_embeddings)
    #[arg(short = 'c', long = "ctx")]
    pub ctx: Option<usize>,
    /// KV-cache storage (auto: f32 with --weights f32, else bf16)
    #[arg(long, value_enum, default_value_t = KvArg::Auto)]
    pub kv: KvArg,
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Override the checkpoint's RoPE scaling (see `run --help`)
    #[arg(long, value_name = "SCALING")]
    pub rope_scaling: Option<String>,
}

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt tokens of the timed prefill (random ids), on top of the --depth cached tokens
    #[arg(short = 'p', long = "prompt", value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub prompt_tokens: u64,
    /// Tokens decoded (greedy), each timed
    #[arg(short = 'n', long = "gen", value_name = "N", default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..))]
    pub gen_tokens: u64,
    /// Tokens cached (by an untimed prefill) before the timed prefill and the timed decode
    #[arg(short = 'd', long, value_name = "N", default_value_t = 0)]
    pub depth: usize,
    /// How the --depth tokens are cached: prefill (real, slow for 32K+) or synthetic (random
    /// keys/values written into the cache; same decode cost and memory, seconds to set up)
    #[arg(long, value_enum, default_value_t = DepthFillArg::Prefill)]
    pub depth_fill: DepthFillArg,
    /// Timed prefills, each on the --depth cached tokens; the median is reported
    #[arg(short = 'r', long, value_name = "R", default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    pub repetitions: u64,
    /// Skip the untimed warm-up prefill that runs first (as llama-bench's --no-warmup)
    #[arg(long)]
    pub no_warmup: bool,
    /// Time the prefill only, printing each chunk's rate on stderr: no warm-up, decode, probes
    #[arg(long)]
    pub prefill_only: bool,
    /// Seed of the random token ids
    #[arg(short = 's', long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON document instead of the text summary
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum DepthFillArg {
    Prefill,
    Synthetic,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum WeightsArg {
    /// The checkpoint's own: int8 for a quantized checkpoint, bf16 (in place) for bf16, else f32
    Auto,
    /// f32 weights on the naive reference kernels (the oracle; with --kv auto an f32 KV cache)
    F32,
    /// bf16 weights (used in place when the checkpoint is bf16), SIMD kernels
    Bf16,
    /// int8 blocks of 64 (quantized at load, or as stored by `quantize`), SIMD (VNNI) kernels
    Int8,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum OutputArg {
    Text,
    Ids,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum PresetArg {
    Tiny,
    Small,
    #[value(name = "qwen3-0.6b")]
    Qwen3_0_6b,
    #[value(name = "qwen3-1.7b")]
    Qwen3_1_7b,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum GateArg {
    None,
    Headwise,
    Elementwise,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum DtypeArg {
    Bf16,
    F16,
    F32,
}
