//! Checks shared by the fuzz targets. Each one panics only when the library under test broke a
//! promise (a panic inside the library, an error that does not name the file, a view whose size
//! disagrees with its dtype and shape); a clean error is the expected outcome for bad input.

use std::path::Path;

use gattn_tensor::{DType, SafetensorsFile};

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
    view.expect_dtype(view.dtype).expect("a view has its own dtype");

    match view.to_f32_vec() {
        Ok(values) => assert_eq!(values.len(), numel),
        Err(e) => {
            assert_eq!(view.dtype, DType::I8, "only I8 refuses to_f32_vec");
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

    let mapped = file.mapped(name).expect("a listed name has a mapped handle");
    assert_eq!(mapped.bytes(), view.bytes);
    assert_eq!(mapped.as_bf16_slice().is_some(), view.as_bf16_slice().is_some());
    assert_eq!(mapped.as_f32_slice().is_some(), view.as_f32_slice().is_some());
    assert_eq!(mapped.as_i8_slice().is_some(), view.as_i8_slice().is_some());
}

/// Every error must say which file (or tensor) it is about.
pub fn assert_names(error: &dyn std::fmt::Display, what: &str) {
    let message = error.to_string();
    assert!(message.contains(what), "error `{message}` does not name `{what}`");
}


/// The path config errors must name.
pub const CONFIG_PATH: &str = "fuzz/config.json";

/// Parses `text` as config.json; an accepted config must support everything the loader derives
/// from it (sizes, parameter count, RoPE frequencies) without a panic.
pub fn check_config(text: &str) {
    let config = match gattn_model::Qwen3Config::from_json_str(Path::new(CONFIG_PATH), text) {
        Ok(config) => config,
        Err(e) => {
            assert_names(&e, "config.json");
            return;
        }
    };
    assert!(config.num_attention_heads % config.num_key_value_heads == 0);
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
