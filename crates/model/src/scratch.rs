//! The activation buffers of the forward pass, owned by the sequence's [`KvCache`] and reused by
//! every call on it: after the first decode step, decoding a token allocates nothing (on any
//! thread; checked by `tests/decode_allocations.rs`, which counts every allocation). Run from a
//! thread outside the rayon pool, a step goes through rayon's injector queue, which allocates a
//! block of its own every 63 steps.
//!
//! Buffers grow to the largest chunk seen (at most `--prefill-chunk` tokens) and never shrink.
//!
//! [`KvCache`]: crate::KvCache

use gattn_kernels::attention::DecodeScratch;

use crate::rope::RopeAngles;

/// Everything one forward chunk writes besides the KV cache and the logits.
#[derive(Debug, Clone, Default)]
pub struct ForwardScratch {
    /// The residual stream `[n, hidden]`.
    pub hidden: Vec<f32>,
    /// The final RMSNorm of the rows that need logits `[1 or n, hidden]`.
    pub final_normed: Vec<f32>,
    /// cos/sin of the chunk's positions `[n, head_dim / 2]`.
    pub rope: RopeAngles,
    pub layer: LayerScratch,
}

/// What one decoder layer writes; layers run one after the other, so they share it.
#[derive(Debug, Clone, Default)]
pub struct LayerScratch {
    /// RMSNorm(h) `[n, hidden]`, the input of attention and of the MLP.
    pub normed: Vec<f32>,
    /// Attention(.) or MLP(.) before it is added to the residual `[n, hidden]`.
    pub update: Vec<f32>,
    pub attention: AttentionScratch,
    pub mlp: MlpScratch,
}

#[derive(Debug, Clone, Default)]
pub struct AttentionScratch {
    /// q_proj's output: queries and gate scores interleaved by group `[n, q_proj_rows]`.
    pub q_proj_out: Vec<f32>,
    /// `[n, num_kv_heads * head_dim]` each.
    pub keys: Vec<f32>,
    pub values: Vec<f32>,
    /// `[n, num_heads * head_dim]`.
    pub queries: Vec<f32>,
    /// `[n, num_heads]` (headwise) or `[n, num_heads * head_dim]` (elementwise); empty otherwise.
    pub gate_scores: Vec<f32>,
    /// The gated attention output, o_proj's input `[n, num_heads * head_dim]`.
    pub attn_out: Vec<f32>,
    /// The decode kernel's work items and merged rows.
    pub decode: DecodeScratch,
}

#[derive(Debug, Clone, Default)]
pub struct MlpScratch {
    /// `silu(gate_proj(x)) * up_proj(x)` `[n, intermediate]`.
    pub activation: Vec<f32>,
    /// up_proj(x) on the reference path, which computes the two products apart.
    pub up: Vec<f32>,
}

/// The first `len` elements of `buffer`, grown (never shrunk) if it is shorter.
pub fn sized(buffer: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buffer.len() < len {
        buffer.resize(len, 0.0);
    }
    &mut buffer[..len]
}
