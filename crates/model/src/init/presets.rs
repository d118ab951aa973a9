//! Model shapes for `gattn-cpu init`: two small ones for tests and the real Qwen3 shapes.

use crate::config::{GateMode, Qwen3Config, RopeScaling};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Tiny,
    Small,
    Qwen3_0_6b,
    Qwen3_1_7b,
}

impl Preset {
    pub const ALL: [Preset; 4] = [
        Preset::Tiny,
        Preset::Small,
        Preset::Qwen3_0_6b,
        Preset::Qwen3_1_7b,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Tiny => "tiny",
            Preset::Small => "small",
            Preset::Qwen3_0_6b => "qwen3-0.6b",
            Preset::Qwen3_1_7b => "qwen3-1.7b",
        }
    }

    pub fn parse(s: &str) -> Option<Preset> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The config of this preset with the given gate.
    pub fn config(self, gate: GateMode) -> Qwen3Config {
        // (vocab, hidden, intermediate, layers, heads, kv heads, head_dim, max positions)
        let (
            vocab_size,
            hidden_size,
            intermediate_size,
            layers,
            heads,
            kv_heads,
            head_dim,
            max_pos,
        ) = match self {
            Preset::Tiny => (512, 64, 192, 2, 4, 2, 16, 4096),
            Preset::Small => (4096, 256, 768, 4, 8, 4, 32, 32768),
            Preset::Qwen3_0_6b => (151936, 1024, 3072, 28, 16, 8, 128, 40960),
            Preset::Qwen3_1_7b => (151936, 2048, 6144, 28, 16, 8, 128, 40960),
        };
        Qwen3Config {
            vocab_size,
            hidden_size,
            intermediate_size,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            num_key_value_heads: kv_heads,
            head_dim,
            rms_norm_eps: 1e-6,
            rope_theta: 1_000_000.0,
            rope_scaling: RopeScaling::None,
            max_position_embeddings: max_pos,
            tie_word_embeddings: true,
            attention_bias: false,
            use_qk_norm: true,
            gate,
            bos_token_id: None,
            eos_token_ids: super::byte_tokenizer::EOS_IDS.to_vec(),
            quantized_int8: false,
        }
    }
}
