//! Broken checkpoints give a clean error that names the file, tensor or field: never a panic,
//! never a silently wrong answer.

use std::path::Path;

use gattn_model::{Qwen3Model, WeightFormat};
use gattn_tests::{copy_checkpoint, fixtures_dir};
use serde_json::Value;

fn load_error(dir: &Path) -> String {
    match Qwen3Model::load(dir, WeightFormat::F32) {
        Ok(_) => panic!("{} loaded, but it is broken", dir.display()),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "error `{message}` does not mention `{part}`"
        );
    }
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut serde_json::Map<String, Value>)) {
    let path = dir.join("config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(config.as_object_mut().unwrap());
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
}

/// Splits a safetensors file into (header JSON, data bytes).
fn read_parts(path: &Path) -> (Value, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    (header, bytes[8 + n..].to_vec())
}

fn write_parts(path: &Path, header: &Value, data: &[u8]) {
    let header = serde_json::to_vec(header).unwrap();
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

fn baseline() -> tempfile::TempDir {
    copy_checkpoint(&fixtures_dir().join("baseline_gqa_tied_f32"))
}

#[test]
fn truncated_weights_file() {
    let dir = baseline();
    let file = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() - 1000]).unwrap();
    assert_mentions(&load_error(dir.path()), &["model.safetensors"]);

    std::fs::write(&file, &bytes[..5]).unwrap(); // not even a header length
    assert_mentions(&load_error(dir.path()), &["model.safetensors"]);
}

#[test]
fn header_that_lies_about_offsets() {
    let dir = baseline();
    let file = dir.path().join("model.safetensors");
    let (mut header, data) = read_parts(&file);
    header["model.norm.weight"]["data_offsets"] = serde_json::json!([0, data.len() * 4]);
    write_parts(&file, &header, &data);
    assert_mentions(&load_error(dir.path()), &["model.safetensors"]);

    let (mut header, data) = read_parts(&file);
    header["model.norm.weight"]["shape"] = serde_json::json!([1u64 << 40]);
    write_parts(&file, &header, &data);
    assert_mentions(&load_error(dir.path()), &["model.safetensors"]);

    // A header length far beyond the file.
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&file, bytes).unwrap();
    assert_mentions(&load_error(dir.path()), &["model.safetensors"]);
}

#[test]
fn tensor_with_the_wrong_shape() {
    let dir = baseline();
    let file = dir.path().join("model.safetensors");
    let (mut header, data) = read_parts(&file);
    let name = "model.layers.1.mlp.down_proj.weight";
    let shape: Vec<u64> = serde_json::from_value(header[name]["shape"].clone()).unwrap();
    header[name]["shape"] = serde_json::json!([shape[1], shape[0]]); // same bytes, transposed
    write_parts(&file, &header, &data);
    assert_mentions(&load_error(dir.path()), &[name, &format!("{shape:?}")]);
}

#[test]
fn missing_tensor() {
    let dir = baseline();
    let file = dir.path().join("model.safetensors");
    let (mut header, data) = read_parts(&file);
    // Renamed, so the data offsets stay valid and only the name is missing.
    let entry = header
        .as_object_mut()
        .unwrap()
        .remove("model.layers.1.self_attn.k_norm.weight")
        .unwrap();
    header["model.layers.1.self_attn.k_norm.scale"] = entry;
    write_parts(&file, &header, &data);
    assert_mentions(
        &load_error(dir.path()),
        &["model.layers.1.self_attn.k_norm.weight", "not found"],
    );

    // Untied embeddings but no lm_head.
    let dir = baseline();
    edit_config(dir.path(), |c| {
        c.insert("tie_word_embeddings".into(), false.into());
    });
    assert_mentions(&load_error(dir.path()), &["lm_head.weight"]);
}

#[test]
fn bad_config_values_name_the_field_and_value() {
    let cases: Vec<(&str, Value, &[&str])> = vec![
        (
            "num_key_value_heads",
            3.into(),
            &["num_key_value_heads", "3"],
        ),
        ("hidden_size", (-64).into(), &["hidden_size", "-64"]),
        ("vocab_size", "many".into(), &["vocab_size", "many"]),
        ("model_type", "llama".into(), &["model_type", "llama"]),
        ("rms_norm_eps", 0.into(), &["rms_norm_eps"]),
        (
            "rope_scaling",
            serde_json::json!({"rope_type": "dynamic", "factor": 2.0}),
            &["rope_type", "dynamic"],
        ),
        (
            "rope_scaling",
            serde_json::json!({"rope_type": "yarn", "factor": 0.5}),
            &["factor", "0.5"],
        ),
        (
            "use_sliding_window",
            true.into(),
            &["sliding-window", "unsupported"],
        ),
        ("head_dim", 7.into(), &["head_dim", "7"]),
    ];
    for (field, value, expected) in cases {
        let dir = baseline();
        edit_config(dir.path(), |c| {
            c.insert(field.into(), value.clone());
        });
        let message = load_error(dir.path());
        assert_mentions(&message, expected);
        assert_mentions(&message, &["config.json"]);
    }
    let dir = baseline();
    std::fs::write(
        dir.path().join("config.json"),
        "{ \"model_type\": \"qwen3\", ",
    )
    .unwrap();
    assert_mentions(&load_error(dir.path()), &["config.json", "JSON"]);
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    assert_mentions(&load_error(dir.path()), &["config.json"]);
}

#[test]
fn both_gates_at_once_is_an_error() {
    let dir = copy_checkpoint(&fixtures_dir().join("headwise_gqa"));
    edit_config(dir.path(), |c| {
        c.insert("elementwise_attn_output_gate".into(), true.into());
    });
    assert_mentions(&load_error(dir.path()), &["both true"]);
}

#[test]
fn gate_flag_that_does_not_match_q_proj() {
    // A headwise checkpoint whose config forgot the flag: q_proj has the headwise row count.
    let dir = copy_checkpoint(&fixtures_dir().join("headwise_gqa"));
    edit_config(dir.path(), |c| {
        c.insert("headwise_attn_output_gate".into(), false.into());
    });
    assert_mentions(&load_error(dir.path()), &["q_proj", "headwise", "none"]);

    // A baseline checkpoint claiming an elementwise gate.
    let dir = baseline();
    edit_config(dir.path(), |c| {
        c.insert("elementwise_attn_output_gate".into(), true.into());
    });
    assert_mentions(&load_error(dir.path()), &["q_proj", "elementwise", "none"]);
}

#[test]
fn shard_index_naming_a_missing_or_escaping_file() {
    let dir = copy_checkpoint(&fixtures_dir().join("baseline_sharded_f16"));
    let index_path = dir.path().join("model.safetensors.index.json");
    let mut index: Value =
        serde_json::from_str(&std::fs::read_to_string(&index_path).unwrap()).unwrap();
    index["weight_map"]["model.norm.weight"] = "../../etc/passwd".into();
    std::fs::write(&index_path, index.to_string()).unwrap();
    assert_mentions(&load_error(dir.path()), &["model.safetensors.index.json"]);

    index["weight_map"]["model.norm.weight"] = "model-00009-of-00009.safetensors".into();
    std::fs::write(&index_path, index.to_string()).unwrap();
    assert_mentions(
        &load_error(dir.path()),
        &["model-00009-of-00009.safetensors"],
    );
}

#[test]
fn token_ids_past_the_vocabulary_are_refused() {
    let dir = fixtures_dir().join("baseline_gqa_tied_f32");
    let model = Qwen3Model::load(&dir, WeightFormat::F32).unwrap();
    let vocab = model.config.vocab_size as u32;
    let err = model
        .forward(
            &[1, vocab],
            &mut model.new_cache(8),
            gattn_model::LogitsFor::Last,
        )
        .unwrap_err();
    assert_mentions(&err.to_string(), &[&vocab.to_string(), "out of range"]);
}

#[test]
fn prompt_longer_than_the_context() {
    let dir = fixtures_dir().join("baseline_gqa_tied_f32");
    let model = Qwen3Model::load(&dir, WeightFormat::F32).unwrap();
    let err = model
        .forward(
            &[1, 2, 3, 4, 5],
            &mut model.new_cache(4),
            gattn_model::LogitsFor::Last,
        )
        .unwrap_err();
    assert_mentions(&err.to_string(), &["5 tokens", "4"]);
}

#[test]
fn non_finite_hidden_state_names_the_layer() {
    // An inf weight in layer 1's MLP: the logits would be garbage; the engine names the layer.
    let dir = baseline();
    let file = dir.path().join("model.safetensors");
    let (header, mut data) = read_parts(&file);
    let name = "model.layers.1.mlp.down_proj.weight";
    let begin = header[name]["data_offsets"][0].as_u64().unwrap() as usize;
    for at in (begin..begin + 64).step_by(4) {
        data[at..at + 4].copy_from_slice(&f32::INFINITY.to_le_bytes());
    }
    write_parts(&file, &header, &data);
    let model = Qwen3Model::load(dir.path(), WeightFormat::F32).unwrap();
    let err = model
        .forward(
            &[1, 2, 3],
            &mut model.new_cache(8),
            gattn_model::LogitsFor::Last,
        )
        .unwrap_err()
        .to_string();
    assert_mentions(&err, &["non-finite", "layer 1"]);
}
