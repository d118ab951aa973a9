//! A small byte-level BPE `tokenizer.json` for random checkpoints: one token per byte, Qwen's
//! pre-tokenizer regex and NFC normalizer, and the three ChatML special tokens.

use serde_json::{Value, json};

/// `<|endoftext|>`, `<|im_start|>`, `<|im_end|>` follow the 256 byte tokens.
pub const SPECIAL_TOKENS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
pub const EOS_IDS: [u32; 2] = [256, 258];
pub const VOCAB_SIZE: usize = 256 + SPECIAL_TOKENS.len();

/// Qwen2/Qwen3's pre-tokenizer split (as in their tokenizer.json).
pub const QWEN_PRETOKENIZER_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// GPT-2's reversible byte -> printable character map that byte-level BPE vocabularies use.
fn byte_to_char() -> Vec<char> {
    let printable =
        |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut next_unprintable = 256;
    (0u32..256)
        .map(|b| {
            if printable(b) {
                char::from_u32(b).unwrap()
            } else {
                let c = char::from_u32(next_unprintable).unwrap();
                next_unprintable += 1;
                c
            }
        })
        .collect()
}

pub fn tokenizer_json() -> Value {
    let vocab: serde_json::Map<String, Value> = byte_to_char()
        .into_iter()
        .enumerate()
        .map(|(id, c)| (c.to_string(), json!(id)))
        .collect();
    let added_tokens: Vec<Value> = SPECIAL_TOKENS
        .iter()
        .enumerate()
        .map(|(i, content)| {
            json!({"id": 256 + i, "content": content, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added_tokens,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_PRETOKENIZER_REGEX}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}
        ]},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": false, "vocab": vocab, "merges": []}
    })
}

/// tokenizer_config.json with a minimal ChatML chat template (as Qwen's, without tools/thinking).
pub fn tokenizer_config_json() -> Value {
    json!({
        "tokenizer_class": "Qwen2Tokenizer",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "chat_template": "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    })
}
