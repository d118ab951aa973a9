//! The bytes one decode token must read from memory: the roofline's denominator.
//!
//! A decode step multiplies one activation row by every weight matrix, so each linear weight is
//! streamed once per token; at batch 1 nothing stays in cache from one token to the next (the
//! 1.7B shape holds ~3.4 GB of bf16 weights against a 32 MiB L3). What a token reads:
//!
//! - weights: every decoder layer as held (q/k/v/o and gate/up/down projections with their biases
//!   and norm scales, int8 scales included), the final norm, the whole lm_head (it is a full
//!   mat-vec over the vocabulary), and ONE row of the embedding table (the lookup). With tied
//!   embeddings and bf16/f32 weights the lm_head *is* the table, so the table is read in full, but
//!   once, as the lm_head; with int8 weights the tied lm_head is an int8 copy and the bf16 table
//!   contributes only the looked-up row.
//! - KV cache: per layer, the keys and values of every cached position, all KV heads, in the
//!   storage format (int8 rows carry a 4-byte f32 scale each):
//!   `2 * layers * kv_heads * (head_dim * bytes_per_element + scale bytes) * kv_len`.
//!   Decoding the token at position `p` appends its own K/V first and attends over `p + 1` rows.
//!
//! Activations, RoPE tables and logits are small and cache-resident at batch 1; not counted.

use gattn_kernels::attention::{KvDtype, KvLayer};
use serde::Serialize;

use crate::config::Qwen3Config;
use crate::layers::DecoderLayer;
use crate::model::Qwen3Model;

/// Bytes read per decode token, split by source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DecodeTraffic {
    /// Weights streamed per token (see the module comment for what counts).
    pub weight_bytes: u64,
    /// KV cache read per token at the mean KV length of the measured tokens.
    pub kv_bytes: u64,
    /// `weight_bytes + kv_bytes`.
    pub total_bytes: u64,
}

impl DecodeTraffic {
    /// The traffic of `gen_tokens` decode tokens that start with `depth` tokens cached, averaged per
    /// token (KV length `depth + i + 1` for the `i`-th token: mean `depth + (gen_tokens + 1) / 2`).
    pub fn of_decode(model: &Qwen3Model, depth: usize, gen_tokens: usize) -> DecodeTraffic {
        let weight_bytes = streamed_weight_bytes(model);
        let kv_bytes = kv_bytes_read(
            &model.config,
            model.kv_dtype,
            mean_kv_len(depth, gen_tokens),
        )
        .round() as u64;
        DecodeTraffic {
            weight_bytes,
            kv_bytes,
            total_bytes: weight_bytes + kv_bytes,
        }
    }
}

/// Mean number of KV rows the `gen_tokens` tokens after `depth` cached ones attend over.
pub fn mean_kv_len(depth: usize, gen_tokens: usize) -> f64 {
    depth as f64 + (gen_tokens as f64 + 1.0) / 2.0
}

/// Weights one decode token streams: all layers, the final norm, the lm_head, one embedding row.
pub fn streamed_weight_bytes(model: &Qwen3Model) -> u64 {
    let layers: usize = model.layers.iter().map(DecoderLayer::bytes).sum();
    let final_norm = 4 * model.norm.dim();
    let embedding_row = model.embed_tokens.table.bytes() / model.config.vocab_size.max(1);
    (layers + final_norm + model.lm_head.bytes() + embedding_row) as u64
}

/// KV bytes one decode token reads, over all layers, attending over `kv_len` rows.
pub fn kv_bytes_read(config: &Qwen3Config, dtype: KvDtype, kv_len: f64) -> f64 {
    let per_row_all_heads =
        KvLayer::bytes_per_token_for(dtype, config.num_key_value_heads, config.head_dim);
    (per_row_all_heads * config.num_hidden_layers) as f64 * kv_len
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GateMode;
    use crate::init::Preset;

    #[test]
    fn kv_bytes_follow_the_formula_for_each_storage() {
        let config = Preset::Qwen3_1_7b.config(GateMode::None);
        // 2 (K, V) x 28 layers x 8 kv heads x 128 dims x bytes per element.
        let per_row = |bytes_per_element: f64| 2.0 * 28.0 * 8.0 * 128.0 * bytes_per_element;
        assert_eq!(kv_bytes_read(&config, KvDtype::F32, 1.0), per_row(4.0));
        assert_eq!(
            kv_bytes_read(&config, KvDtype::Bf16, 4096.0),
            per_row(2.0) * 4096.0
        );
        // int8: one byte per element plus one f32 scale per head row.
        assert_eq!(
            kv_bytes_read(&config, KvDtype::Int8, 10.0),
            (per_row(1.0) + 2.0 * 28.0 * 8.0 * 4.0) * 10.0
        );
    }

    #[test]
    fn the_mean_kv_length_counts_each_token_itself() {
        assert_eq!(mean_kv_len(0, 1), 1.0);
        assert_eq!(mean_kv_len(4096, 32), 4096.0 + 16.5);
        // Tokens at depth 10 attend over 11, 12, 13 rows.
        assert_eq!(mean_kv_len(10, 3), 12.0);
    }

    #[test]
    fn a_token_streams_the_layers_the_lm_head_and_one_embedding_row() {
        let dir = tempfile::tempdir().unwrap();
        let config = Preset::Tiny.config(GateMode::Elementwise);
        crate::init::write_random_checkpoint(dir.path(), &config, gattn_tensor::DType::BF16, 3)
            .unwrap();
        let row_bf16 = (2 * config.hidden_size) as u64;
        // Tied and bf16: the lm_head is the table itself, read in full once, plus the lookup.
        let bf16 = Qwen3Model::load(dir.path(), crate::WeightFormat::Bf16).unwrap();
        assert_eq!(
            streamed_weight_bytes(&bf16),
            bf16.weight_bytes() as u64 + row_bf16
        );
        // Tied and int8: the int8 lm_head copy is streamed; of the bf16 table only the row.
        let int8 = Qwen3Model::load(dir.path(), crate::WeightFormat::Int8).unwrap();
        let table = (config.vocab_size * config.hidden_size * 2) as u64;
        assert_eq!(
            streamed_weight_bytes(&int8),
            int8.weight_bytes() as u64 - table + row_bf16
        );
        // int8 weights run the fast backend, whose cache is bf16 unless set.
        let traffic = DecodeTraffic::of_decode(&int8, 100, 4);
        assert_eq!(traffic.total_bytes, traffic.weight_bytes + traffic.kv_bytes);
        assert_eq!(
            traffic.kv_bytes as f64,
            kv_bytes_read(&config, KvDtype::Bf16, 102.5)
        );
    }
}
