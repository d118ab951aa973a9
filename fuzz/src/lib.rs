//! Checks shared by the fuzz targets. Each one panics only when the library under test broke a
//! promise (a panic inside the library, an error that does not name the file, a view whose size
//! disagrees with its dtype and shape); a clean error is the expected outcome for bad input.
//!
//! The workspace test `tests/fuzz_corpus.rs` includes this file and replays every committed seed
//! through these functions, so `cargo test --workspace` runs them without libFuzzer.

use std::path::{Component, Path};
use std::sync::OnceLock;

use gattn_model::init::Preset;
use gattn_model::init::byte_tokenizer::{VOCAB_SIZE, tokenizer_json};
use gattn_model::{
    GateMode, LogitsFor, Qwen3Config, Qwen3Model, TextStream, Tokenizer, WeightFormat,
};
use gattn_tensor::{Checkpoint, DType, SafetensorsFile};
use unicode_normalization::UnicodeNormalization;

/// The name error messages must carry.
pub const SAFETENSORS_NAME: &str = "fuzz-input.safetensors";

/// Loads `bytes` as a safetensors file and exercises every tensor in it.
pub fn check_safetensors(bytes: Vec<u8>) {
    let path = Path::new(SAFETENSORS_NAME);
    let file = match SafetensorsFile::from_bytes(path, bytes) {
        Ok(file) => file,
        Err(e) => {
            assert_names(&e, SAFETENSORS_NAME);
            return;
        }
    };
    let names: Vec<String> = file.names().map(str::to_string).collect();
    for name in &names {
        check_tensor(&file, name);
    }
    let absent = "no such tensor \u{0}";
    if !names.iter().any(|n| n == absent) {
        assert!(file.view(absent).is_none() && file.mapped(absent).is_none());
    }
}

fn check_tensor(file: &SafetensorsFile, name: &str) {
    let view = file.view(name).expect("a listed name has a view");
    let numel = view
        .shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .expect("an accepted shape does not overflow");
    assert_eq!(view.bytes.len(), numel * view.dtype.size_in_bytes());
    assert_eq!(view.numel(), numel);

    let shape = view.shape.to_vec();
    view.expect_shape(&shape).expect("a view has its own shape");
    let mut other = shape.clone();
    other.push(1);
    let e = view.expect_shape(&other).unwrap_err();
    assert_names(&e, name);
    view.expect_dtype(view.dtype)
        .expect("a view has its own dtype");

    match view.to_f32_vec() {
        Ok(values) => assert_eq!(values.len(), numel),
        Err(e) => {
            assert!(
                matches!(view.dtype, DType::I8 | DType::U8),
                "only I8 and U8 refuse to_f32_vec"
            );
            assert_names(&e, name);
        }
    }
    if let Some(s) = view.as_bf16_slice() {
        assert_eq!(s.len(), numel);
    }
    if let Some(s) = view.as_f32_slice() {
        assert_eq!(s.len(), numel);
    }
    if let Some(s) = view.as_i8_slice() {
        assert_eq!(s.len(), numel);
    }

    let mapped = file
        .mapped(name)
        .expect("a listed name has a mapped handle");
    assert_eq!(mapped.bytes(), view.bytes);
    assert_eq!(
        mapped.as_bf16_slice().is_some(),
        view.as_bf16_slice().is_some()
    );
    assert_eq!(
        mapped.as_f32_slice().is_some(),
        view.as_f32_slice().is_some()
    );
    assert_eq!(mapped.as_i8_slice().is_some(), view.as_i8_slice().is_some());
}

/// Every error must say which file (or tensor) it is about.
pub fn assert_names(error: &dyn std::fmt::Display, what: &str) {
    let message = error.to_string();
    assert!(
        message.contains(what),
        "error `{message}` does not name `{what}`"
    );
}

/// The path config errors must name.
pub const CONFIG_PATH: &str = "fuzz/config.json";

/// Every top-level key `Qwen3Config::from_json_str` reads: what an error may name (besides
/// `rope_scaling.KEY` and `rope_parameters.KEY`), and what `config_structured` edits.
pub const CONFIG_FIELDS: [&str; 26] = [
    "model_type",
    "hidden_act",
    "use_sliding_window",
    "layer_types",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "rms_norm_eps",
    "rope_parameters",
    "rope_theta",
    "max_position_embeddings",
    "rope_scaling",
    "headwise_attn_output_gate",
    "elementwise_attn_output_gate",
    "attention_bias",
    "qkv_bias",
    "tie_word_embeddings",
    "use_qk_norm",
    "bos_token_id",
    "eos_token_id",
    "original_max_position_embeddings",
    "gattn_quantization",
];

/// Parses `text` as config.json. An accepted config must satisfy the documented constraints
/// (checked here against the JSON as serde_json reads it, not through the parser's own code) and
/// support everything the loader derives from it; a refused one must name config.json and the
/// field at fault (or, for text that is not a JSON object, say so).
pub fn check_config(text: &str) {
    let config = match gattn_model::Qwen3Config::from_json_str(Path::new(CONFIG_PATH), text) {
        Ok(config) => config,
        Err(e) => {
            assert_names(&e, "config.json");
            assert_config_error_names_a_field(&e);
            return;
        }
    };
    let json: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text).expect("an accepted config.json is a JSON object");
    assert_config_matches_json(&config, &json);
    assert!(config.group_size() >= 1);
    let _ = (config.q_proj_rows(), config.kv_dim(), config.q_dim());
    let _ = config.parameter_count();
    // RoPE tables are head_dim / 2 long: only build small ones.
    if config.head_dim <= 1024 {
        let rope = gattn_model::rope::RotaryEmbedding::new(&config);
        let _ = rope.attention_factor();
        let angles = rope.angles(0, 2);
        assert_eq!(angles.cos.len(), config.head_dim);
    }
}

/// A refusal names the field at fault: `field `NAME`` for a bad value, the key itself for an
/// unsupported feature, or says that the text is not valid JSON.
fn assert_config_error_names_a_field(error: &gattn_model::ModelError) {
    use gattn_model::ModelError;
    let message = error.to_string();
    let names_a_key = |text: &str| CONFIG_FIELDS.iter().any(|key| text.contains(key));
    match error {
        ModelError::Config { field, reason, .. } => {
            let top = field.split('.').next().unwrap_or_default();
            assert!(
                CONFIG_FIELDS.contains(&top) && message.contains(&format!("`{field}`")),
                "error `{message}` names no config field"
            );
            assert!(!reason.is_empty(), "error `{message}` gives no reason");
        }
        ModelError::Unsupported { reason, .. } => assert!(
            names_a_key(reason) || reason.contains("sizes"),
            "error `{message}` names no config field"
        ),
        ModelError::InvalidJson { .. } => assert!(
            message.contains("not valid JSON"),
            "error `{message}` is not about the JSON"
        ),
        other => panic!("config.json refused with an unexpected error kind: {other}"),
    }
}

/// The documented constraints of an accepted config, and that it holds the file's values.
fn assert_config_matches_json(
    config: &gattn_model::Qwen3Config,
    json: &serde_json::Map<String, serde_json::Value>,
) {
    assert_eq!(
        json.get("model_type").and_then(|v| v.as_str()),
        Some("qwen3")
    );
    let sizes = [
        ("vocab_size", config.vocab_size),
        ("hidden_size", config.hidden_size),
        ("intermediate_size", config.intermediate_size),
        ("num_hidden_layers", config.num_hidden_layers),
        ("num_attention_heads", config.num_attention_heads),
        ("num_key_value_heads", config.num_key_value_heads),
        ("head_dim", config.head_dim),
        ("max_position_embeddings", config.max_position_embeddings),
    ];
    for (key, value) in sizes {
        assert!((1..=1usize << 31).contains(&value), "{key} = {value}");
        if let Some(given) = json.get(key).and_then(|v| v.as_u64()) {
            assert_eq!(given, value as u64, "{key} differs from the file");
        }
    }
    assert_eq!(config.num_attention_heads % config.num_key_value_heads, 0);
    assert_eq!(config.head_dim % 2, 0, "RoPE needs an even head_dim");
    let eps = config.rms_norm_eps;
    assert!(eps > 0.0 && eps < 1.0, "rms_norm_eps = {eps}");
    let theta = config.rope_theta;
    assert!(theta.is_finite() && theta > 1.0, "rope_theta = {theta}");
    match &config.rope_scaling {
        gattn_model::RopeScaling::None => {}
        gattn_model::RopeScaling::Linear { factor } => {
            assert!(
                factor.is_finite() && *factor >= 1.0,
                "linear factor {factor}"
            )
        }
        gattn_model::RopeScaling::Yarn(yarn) => {
            assert!(
                yarn.factor.is_finite() && yarn.factor >= 1.0,
                "yarn factor {}",
                yarn.factor
            );
            assert!(yarn.original_max_position_embeddings >= 1);
        }
    }
    let flag = |key: &str| json.get(key).and_then(|v| v.as_bool()).unwrap_or(false);
    let gates = (
        flag("headwise_attn_output_gate"),
        flag("elementwise_attn_output_gate"),
    );
    let want_gate = match gates {
        (false, false) => GateMode::None,
        (true, false) => GateMode::Headwise,
        (false, true) => GateMode::Elementwise,
        (true, true) => panic!("both gates accepted"),
    };
    assert_eq!(config.gate, want_gate);
}

/// The path shard index errors must name.
pub const INDEX_PATH: &str = "fuzz/model.safetensors.index.json";

/// Arbitrary text as model.safetensors.index.json: an accepted index must only name plain files
/// inside the checkpoint directory.
pub fn check_shard_index(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let index = match gattn_tensor::parse_shard_index(Path::new(INDEX_PATH), text) {
        Ok(index) => index,
        Err(e) => {
            assert_names(&e, "model.safetensors.index.json");
            return;
        }
    };
    assert!(!index.shards.is_empty());
    assert!(
        index.shards.windows(2).all(|w| w[0] < w[1]),
        "sorted and distinct"
    );
    for shard in &index.shards {
        let inside = Path::new(shard)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
        assert!(
            inside && !shard.is_empty(),
            "shard `{shard}` escapes the directory"
        );
        let joined = Path::new("/checkpoint").join(shard);
        assert!(joined.starts_with("/checkpoint"));
    }
    for shard in index.weight_map.values() {
        assert!(index.shards.binary_search(shard).is_ok());
    }
}

fn byte_tokenizer() -> &'static Tokenizer {
    static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| {
        // Tokenizer reads only files: write the JSON once per process.
        let path =
            std::env::temp_dir().join(format!("gattn-fuzz-tokenizer-{}.json", std::process::id()));
        std::fs::write(&path, tokenizer_json().to_string()).expect("temp dir is writable");
        let tokenizer = Tokenizer::from_file(&path).expect("the byte tokenizer loads");
        let _ = std::fs::remove_file(&path);
        tokenizer
    })
}

/// Arbitrary bytes as a prompt (lossy UTF-8) through the byte-level tokenizer: ids in range,
/// `decode(encode(s)) == NFC(s)`, streaming decode equals full decode, decoding arbitrary
/// in-range ids does not panic.
pub fn check_tokenizer_prompt(data: &[u8]) {
    let tokenizer = byte_tokenizer();
    let text = String::from_utf8_lossy(data);
    let ids = match tokenizer.encode(&text) {
        Ok(ids) => ids,
        Err(e) => panic!("encoding a string failed: {e}"),
    };
    assert!(ids.iter().all(|&id| (id as usize) < VOCAB_SIZE));
    let decoded = tokenizer.decode(&ids).expect("ids from encode decode");
    let normalized: String = text.nfc().collect();
    assert_eq!(decoded, normalized, "decode(encode(text)) is not NFC(text)");

    let mut stream = TextStream::new(tokenizer);
    let mut streamed = String::new();
    for &id in &ids {
        streamed.push_str(&stream.push(id).expect("a valid id streams"));
    }
    streamed.push_str(&stream.finish().expect("finish"));
    assert_eq!(
        streamed, decoded,
        "streamed text differs from the full decode"
    );

    // Ids straight from the fuzzer (in range): decode must not panic.
    let raw_ids: Vec<u32> = data
        .iter()
        .map(|&b| u32::from(b) % VOCAB_SIZE as u32)
        .collect();
    let _ = tokenizer.decode(&raw_ids);
}

/// The directory int8 checkpoint errors must name.
pub const INT8_DIR: &str = "fuzz-int8";

/// The config the int8 seed was quantized from (`gattn-cpu init --preset tiny`, no gate) with
/// `gattn_quantization` set, as `gattn-cpu quantize` writes it.
pub fn int8_config() -> Qwen3Config {
    Qwen3Config {
        quantized_int8: true,
        ..Preset::Tiny.config(GateMode::None)
    }
}

/// Arbitrary bytes as the model.safetensors of an int8 checkpoint (`gattn-cpu quantize`),
/// loaded as the model does (`--weights int8`): a refusal must name the checkpoint; an accepted
/// file must run a forward pass without a panic (its result may still be a clean error).
pub fn check_int8_checkpoint(bytes: Vec<u8>) {
    let dir = Path::new(INT8_DIR);
    let file = match SafetensorsFile::from_bytes(&dir.join("model.safetensors"), bytes) {
        Ok(file) => file,
        Err(e) => {
            assert_names(&e, INT8_DIR);
            return;
        }
    };
    let checkpoint = Checkpoint::from_file(dir, file).expect("one file has no duplicate names");
    let model = match Qwen3Model::from_checkpoint(int8_config(), &checkpoint, WeightFormat::Int8) {
        Ok(model) => model,
        Err(e) => {
            assert_names(&e, INT8_DIR);
            return;
        }
    };
    let prompt = [1, 300, 7];
    let mut cache = model.new_cache(prompt.len());
    if let Ok(logits) = model.forward(&prompt, &mut cache, LogitsFor::All) {
        assert_eq!(logits.len(), prompt.len() * model.config.vocab_size);
    }
}

/// A per-process scratch file named `name` (the readers below take paths, as the CLI gives them).
fn scratch_file(name: &str, data: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gattn-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir is writable");
    let path = dir.join(name);
    std::fs::write(&path, data).expect("temp dir is writable");
    path
}

/// Arbitrary bytes as `tokenizer.json`: a refusal names the file; an accepted tokenizer encodes
/// text to ids that decode again, and decoding ids it may not know is a clean error at worst.
pub fn check_tokenizer_json(data: &[u8]) {
    let path = scratch_file("tokenizer.json", data);
    let tokenizer = match Tokenizer::from_file(&path) {
        Ok(tokenizer) => tokenizer,
        Err(e) => {
            assert_names(&e, "tokenizer.json");
            return;
        }
    };
    for text in ["Hello, world!", "<|im_start|>user\n日本語 🙂<|im_end|>", ""] {
        match tokenizer.encode(text) {
            Ok(ids) => {
                if let Err(e) = tokenizer.decode(&ids) {
                    assert_names(&e, "tokenizer.json");
                }
            }
            Err(e) => assert_names(&e, "tokenizer.json"),
        }
    }
    let raw_ids: Vec<u32> = data.iter().take(64).map(|&b| u32::from(b)).collect();
    if let Err(e) = tokenizer.decode(&raw_ids) {
        assert_names(&e, "tokenizer.json");
    }
}

/// Arbitrary bytes as a ruler run's `predictions.jsonl` (read on resume, merge and compare): a
/// refusal names the file and a line that exists; accepted records are one per complete line
/// (a cut last line is dropped, never misread) and survive a write and read back unchanged.
pub fn check_predictions(data: &[u8]) {
    use gattn_eval::run::{PredictionRecord, RunError, read_predictions};
    let path = scratch_file("predictions.jsonl", data);
    let lines = data.split(|&b| b == b'\n').count();
    let file = match read_predictions(&path) {
        Ok(file) => file,
        Err(e) => {
            assert_names(&e, "predictions.jsonl");
            if let RunError::BadRecord { line, .. } = &e {
                assert!((1..=lines).contains(line), "line {line} of {lines}: {e}");
                assert_names(&e, &format!("line {line}"));
            }
            return;
        }
    };
    let non_blank = data
        .split(|&b| b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .count();
    assert!(file.records.len() <= non_blank);
    if file.truncated_tail {
        assert!(
            !data.ends_with(b"\n"),
            "a complete last line is not a cut tail"
        );
    } else {
        assert_eq!(file.records.len(), non_blank, "a line was skipped");
    }
    let mut text = String::new();
    for record in &file.records {
        text.push_str(&serde_json::to_string(record).expect("a record serializes"));
        text.push('\n');
    }
    let again = read_predictions(&scratch_file("predictions.jsonl", text.as_bytes()))
        .expect("records written back read again");
    let same: Vec<&PredictionRecord> = again.records.iter().collect();
    assert_eq!(same, file.records.iter().collect::<Vec<_>>(), "round trip");
}
