//! Which kernels a model runs: the naive references (the oracle) or the fast SIMD kernels.

use gattn_kernels::attention::KvDtype;

use crate::weights::WeightFormat;

/// The one switch between the oracle and the fast path, independent of the weight format:
/// f32 weights can run the SIMD kernels, and bf16 or int8 weights the reference loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Plain f32 loops (`gattn_kernels::reference`): matmuls over the weights as stored
    /// (int8 dequantized), materialized softmax over the cache, then the gate.
    Reference,
    /// The SIMD kernels the dispatch chose: fused matmuls, the streaming-softmax attention with
    /// the gate in its epilogue, multi-threaded.
    Fast,
}

impl Backend {
    /// The backend a checkpoint loads with unless told: f32 weights are the oracle (the CLI's
    /// `--weights f32`), every other format runs the kernels it exists for.
    pub fn for_format(format: WeightFormat) -> Backend {
        match format {
            WeightFormat::F32 => Backend::Reference,
            WeightFormat::Bf16 | WeightFormat::Int8 => Backend::Fast,
        }
    }

    /// The KV-cache storage that keeps this backend what it is (`--kv auto`): f32 for the
    /// oracle, whose logits must match Hugging Face's to f32 rounding; bf16 for the fast path.
    pub fn default_kv_dtype(self) -> KvDtype {
        match self {
            Backend::Reference => KvDtype::F32,
            Backend::Fast => KvDtype::Bf16,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Reference => "reference",
            Backend::Fast => "fast",
        }
    }
}
