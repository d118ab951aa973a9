//! Qwen3 with the optional output gate of "Gated Attention for Large Language Models":
//! config, weights, KV cache, the forward pass, sampling, tokenizer and random checkpoints.

pub mod backend;
pub mod bench;
pub mod builtin;
pub mod config;
pub mod error;
pub mod generate;
pub mod init;
pub mod kv_cache;
pub mod layer_stats;
pub mod layers;
pub mod memory;
pub mod model;
pub mod output;
mod panic_guard;
pub mod q8_checkpoint;
pub mod quantize;
pub mod rope;
mod rows;
pub mod sampling;
pub mod scratch;
pub mod tokenizer;
pub mod weights;

pub use backend::Backend;
pub use bench::{BenchReport, BenchSettings, ChunkProgress, run_bench};
pub use builtin::{BuiltinModel, ModelSource};
pub use config::{GateMode, Qwen3Config, RopeScaling};
pub use error::{ModelError, Result};
pub use gattn_kernels::attention::KvDtype;
pub use generate::{GenerateOptions, GenerationStats, StopReason, generate};
pub use kv_cache::KvCache;
pub use layer_stats::LayerStats;
pub use memory::{MemoryPlan, available_memory};
pub use model::{DEFAULT_PREFILL_CHUNK, LogitsFor, PrefillEnd, Qwen3Model};
pub use output::{Existing, OutputError};
pub use sampling::{Sampler, SamplingParams};
pub use tokenizer::{TextStream, Tokenizer};
pub use weights::WeightFormat;
