//! The KV cache: per layer, per KV head, the keys (after RoPE) and values of every past position.
//!
//! Reference layout: f32, one contiguous `[len, head_dim]` buffer per KV head so attention streams
//! each head's keys in order. It grows as tokens arrive, never past `ctx`.

use crate::config::Qwen3Config;
use crate::error::{ModelError, Result};

#[derive(Debug, Clone)]
pub struct LayerKvCache {
    num_kv_heads: usize,
    head_dim: usize,
    /// `k_heads[j]`: `[len, head_dim]` keys of KV head `j`.
    k_heads: Vec<Vec<f32>>,
    v_heads: Vec<Vec<f32>>,
    len: usize,
}

impl LayerKvCache {
    fn new(num_kv_heads: usize, head_dim: usize) -> Self {
        LayerKvCache {
            num_kv_heads,
            head_dim,
            k_heads: vec![Vec::new(); num_kv_heads],
            v_heads: vec![Vec::new(); num_kv_heads],
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `n` tokens: `k`, `v` are `[n, num_kv_heads * head_dim]`.
    pub fn append(&mut self, k: &[f32], v: &[f32], n: usize) {
        let d = self.head_dim;
        for t in 0..n {
            for j in 0..self.num_kv_heads {
                let at = (t * self.num_kv_heads + j) * d;
                self.k_heads[j].extend_from_slice(&k[at..at + d]);
                self.v_heads[j].extend_from_slice(&v[at..at + d]);
            }
        }
        self.len += n;
    }

    pub fn k_heads(&self) -> Vec<&[f32]> {
        self.k_heads.iter().map(Vec::as_slice).collect()
    }

    pub fn v_heads(&self) -> Vec<&[f32]> {
        self.v_heads.iter().map(Vec::as_slice).collect()
    }

    fn clear(&mut self) {
        self.k_heads.iter_mut().for_each(Vec::clear);
        self.v_heads.iter_mut().for_each(Vec::clear);
        self.len = 0;
    }
}

#[derive(Debug, Clone)]
pub struct KvCache {
    layers: Vec<LayerKvCache>,
    ctx: usize,
}

impl KvCache {
    /// An empty cache that will hold at most `ctx` tokens.
    pub fn new(config: &Qwen3Config, ctx: usize) -> Self {
        let layer = LayerKvCache::new(config.num_key_value_heads, config.head_dim);
        KvCache {
            layers: vec![layer; config.num_hidden_layers],
            ctx,
        }
    }

    /// Bytes the cache needs when full (f32 K and V).
    pub fn bytes_needed(config: &Qwen3Config, ctx: usize) -> u64 {
        2 * 4 * (config.num_hidden_layers * config.kv_dim()) as u64 * ctx as u64
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

    pub fn clear(&mut self) {
        self.layers.iter_mut().for_each(LayerKvCache::clear);
    }
}
