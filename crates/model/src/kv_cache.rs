//! The KV cache: per layer, per KV head, the keys (after RoPE) and values of every past position,
//! in the storage the fused attention kernel streams (`--kv bf16|int8|f32`, contiguous per KV head).
//!
//! Sized from `--ctx` but grown in chunks of [`GROWTH_CHUNK_TOKENS`], so a short prompt with
//! `--ctx 131072` only touches the memory it uses.

use gattn_kernels::attention::{KvDtype, KvLayer};

use crate::config::Qwen3Config;
use crate::error::{ModelError, Result};
use crate::scratch::ForwardScratch;

/// Tokens added to a layer's capacity at a time.
pub const GROWTH_CHUNK_TOKENS: usize = 4096;

#[derive(Debug, Clone)]
pub struct LayerKvCache {
    pub storage: KvLayer,
    ctx: usize,
}

impl LayerKvCache {
    pub fn len(&self) -> usize {
        self.storage.len()
    }

    pub fn is_empty(&self) -> bool {
        self.storage.is_empty()
    }

    /// Appends `n` tokens: `k`, `v` are `[n, num_kv_heads * head_dim]` (K after RoPE).
    pub fn append(&mut self, k: &[f32], v: &[f32], n: usize) -> Result<()> {
        let needed = self.len() + n;
        if needed > self.storage.capacity() {
            let grown = needed.div_ceil(GROWTH_CHUNK_TOKENS) * GROWTH_CHUNK_TOKENS;
            self.storage.reserve(grown.min(self.ctx).max(needed))?;
        }
        self.storage.append(k, v)?;
        Ok(())
    }

    /// KV head `j`'s keys and values as f32 `[len, head_dim]` (for the reference path).
    pub fn dequantized_head(&self, j: usize) -> (Vec<f32>, Vec<f32>) {
        (self.storage.dequantized_k(j), self.storage.dequantized_v(j))
    }
}

/// The state of one sequence: its keys and values per layer, and the activation buffers its
/// forward passes reuse (so decoding a token allocates nothing: see [`crate::scratch`]).
#[derive(Debug, Clone)]
pub struct KvCache {
    layers: Vec<LayerKvCache>,
    ctx: usize,
    dtype: KvDtype,
    scratch: ForwardScratch,
}

impl KvCache {
    /// An empty cache that will hold at most `ctx` tokens in `dtype`.
    pub fn new(config: &Qwen3Config, ctx: usize, dtype: KvDtype) -> Result<Self> {
        let storage = KvLayer::new(dtype, config.num_key_value_heads, config.head_dim)?;
        let layer = LayerKvCache { storage, ctx };
        Ok(KvCache {
            layers: vec![layer; config.num_hidden_layers],
            ctx,
            dtype,
            scratch: ForwardScratch::default(),
        })
    }

    /// Bytes the cache needs when full.
    pub fn bytes_needed(config: &Qwen3Config, ctx: usize, dtype: KvDtype) -> u64 {
        let per_token =
            KvLayer::bytes_per_token_for(dtype, config.num_key_value_heads, config.head_dim);
        (per_token as u64 * config.num_hidden_layers as u64).saturating_mul(ctx as u64)
    }

    pub fn dtype(&self) -> KvDtype {
        self.dtype
    }

    /// Tokens cached so far (= the position of the next token).
    pub fn len(&self) -> usize {
        self.layers.first().map_or(0, LayerKvCache::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn ctx(&self) -> usize {
        self.ctx
    }

    /// Fails, before anything runs, if `n` more tokens do not fit.
    pub fn check_room(&self, n: usize) -> Result<()> {
        if self.len() + n > self.ctx {
            if self.is_empty() {
                return Err(ModelError::PromptTooLong {
                    prompt_tokens: n,
                    ctx: self.ctx,
                });
            }
            return Err(ModelError::ContextFull { ctx: self.ctx });
        }
        Ok(())
    }

    pub fn layer_mut(&mut self, layer: usize) -> &mut LayerKvCache {
        &mut self.layers[layer]
    }

    /// The per-layer caches and the forward pass's buffers, borrowed together.
    pub fn layers_and_scratch_mut(&mut self) -> (&mut [LayerKvCache], &mut ForwardScratch) {
        (&mut self.layers, &mut self.scratch)
    }

    /// Bytes allocated now (grows in chunks up to [`bytes_needed`](Self::bytes_needed)).
    pub fn bytes_allocated(&self) -> u64 {
        self.layers
            .iter()
            .map(|l| (l.storage.capacity() * l.storage.bytes_per_token()) as u64)
            .sum()
    }

    pub fn clear(&mut self) {
        self.layers.iter_mut().for_each(|l| l.storage.clear());
    }

    /// Drops the tokens from `len` on in every layer (keeps the memory).
    pub fn truncate(&mut self, len: usize) {
        self.layers.iter_mut().for_each(|l| l.storage.truncate(len));
    }
}
