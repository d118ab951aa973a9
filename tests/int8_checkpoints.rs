//! `gattn-cpu quantize` checkpoints: same logits as quantizing at load, loaded in place from
//! the memory map, and every way of lying about the format refused with a message naming
//! file, tensor, expected and found.

use std::path::Path;

use gattn_model::init::safetensors_writer::{TensorSpec, write_safetensors};
use gattn_model::init::{Preset, write_random_checkpoint};
use gattn_model::quantize::quantize_checkpoint;
use gattn_model::weights::WeightData;
use gattn_model::{GateMode, LogitsFor, Qwen3Config, Qwen3Model, WeightFormat};
use gattn_tensor::{DType, SafetensorsFile};

const PROMPT: [u32; 7] = [3, 100, 7, 255, 42, 1, 300];

fn logits(model: &Qwen3Model) -> Vec<f32> {
    let mut cache = model.new_cache(PROMPT.len());
    model.forward(&PROMPT, &mut cache, LogitsFor::All).unwrap()
}

/// A random tiny checkpoint and its int8 copy (`quantize`), in one temp dir.
fn original_and_quantized(config: &Qwen3Config, dtype: DType) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_random_checkpoint(&dir.path().join("orig"), config, dtype, 3).unwrap();
    let summary = quantize_checkpoint(&dir.path().join("orig"), &dir.path().join("int8")).unwrap();
    let linears = 7 * config.num_hidden_layers + 1; // + lm_head, tied or not
    assert_eq!(summary.quantized, linears);
    dir
}

#[test]
fn a_quantized_checkpoint_gives_the_logits_of_quantizing_at_load_and_is_mapped() {
    let cases = [
        (Preset::Tiny.config(GateMode::Elementwise), DType::BF16),
        (
            Qwen3Config {
                tie_word_embeddings: false,
                attention_bias: true,
                ..Preset::Tiny.config(GateMode::Headwise)
            },
            DType::F32,
        ),
        (Preset::Tiny.config(GateMode::None), DType::F16),
    ];
    for (config, dtype) in cases {
        let dir = original_and_quantized(&config, dtype);
        let at_load = Qwen3Model::load(&dir.path().join("orig"), WeightFormat::Int8).unwrap();
        let stored = Qwen3Model::load_as(&dir.path().join("int8"), None).unwrap();
        assert_eq!(stored.format, WeightFormat::Int8, "int8 is the default");
        assert!(stored.config.quantized_int8);
        let (a, b) = (logits(&at_load), logits(&stored));
        assert!(a.iter().all(|v| v.is_finite()));
        assert_eq!(a, b, "{dtype} tied={}", config.tie_word_embeddings);

        // Every linear weight points into the mapped file; nothing was quantized at load.
        let layer = &stored.layers[0];
        for linear in [
            &layer.self_attn.q_proj,
            &layer.mlp.down_proj,
            &stored.lm_head,
        ] {
            assert!(
                matches!(linear.weight, WeightData::Int8Mapped(_)),
                "{:?}",
                std::mem::discriminant(&linear.weight)
            );
        }
        assert!(matches!(at_load.lm_head.weight, WeightData::Int8(_)));
        assert_eq!(stored.weight_bytes(), at_load.weight_bytes());
    }
}

#[test]
fn the_quantized_directory_has_config_tokenizer_and_metadata() {
    let dir = original_and_quantized(&Preset::Tiny.config(GateMode::None), DType::BF16);
    let out = dir.path().join("int8");
    for file in ["config.json", "tokenizer.json", "tokenizer_config.json"] {
        assert!(out.join(file).exists(), "{file}");
    }
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(
        config["gattn_quantization"]["format"],
        gattn_kernels::matmul::Q8_FORMAT
    );
    let file = SafetensorsFile::open(&out.join("model.safetensors")).unwrap();
    assert_eq!(
        file.metadata()["gattn_quantization"],
        gattn_kernels::matmul::Q8_FORMAT
    );
    assert!(
        file.view("model.layers.0.self_attn.q_proj.weight")
            .is_none()
    );
    let packed = file
        .view("model.layers.0.self_attn.q_proj.weight.q8_packed")
        .unwrap();
    assert_eq!(packed.dtype, DType::U8);
    // The copied tensors are the original bytes.
    let orig = SafetensorsFile::open(&dir.path().join("orig/model.safetensors")).unwrap();
    for name in ["model.embed_tokens.weight", "model.norm.weight"] {
        assert_eq!(
            file.view(name).unwrap().bytes,
            orig.view(name).unwrap().bytes
        );
    }
    // Quantizing a quantized checkpoint is refused.
    let e = quantize_checkpoint(&out, &dir.path().join("again")).unwrap_err();
    assert!(e.to_string().contains("already int8"), "{e}");
}

#[test]
fn float_weights_on_an_int8_checkpoint_are_refused_naming_the_file() {
    let dir = original_and_quantized(&Preset::Tiny.config(GateMode::None), DType::BF16);
    for format in [WeightFormat::F32, WeightFormat::Bf16] {
        let e = Qwen3Model::load(&dir.path().join("int8"), format)
            .err()
            .expect("refused");
        let message = e.to_string();
        assert!(
            message.contains("int8/model.safetensors") && message.contains(format.name()),
            "{message}"
        );
    }
}

/// One tensor of a safetensors file, to be edited and written back.
struct Tensor {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

fn read_tensors(path: &Path) -> (Vec<Tensor>, Vec<(String, String)>) {
    let file = SafetensorsFile::open(path).unwrap();
    let mut names: Vec<&str> = file.names().collect();
    names.sort_by_key(|name| file.location(name).unwrap().bytes.start);
    let tensors = names
        .iter()
        .map(|name| {
            let view = file.view(name).unwrap();
            Tensor {
                name: name.to_string(),
                dtype: view.dtype,
                shape: view.shape.to_vec(),
                bytes: view.bytes.to_vec(),
            }
        })
        .collect();
    let metadata = file
        .metadata()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (tensors, metadata)
}

fn write_tensors(path: &Path, tensors: &[Tensor], metadata: &[(String, String)]) {
    let specs: Vec<TensorSpec> = tensors
        .iter()
        .map(|t| TensorSpec {
            name: t.name.clone(),
            shape: t.shape.clone(),
            dtype: t.dtype,
        })
        .collect();
    let metadata: Vec<(&str, &str)> = metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    write_safetensors(path, &specs, &metadata, |i, out| {
        out.extend_from_slice(&tensors[i].bytes);
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_lying_int8_checkpoint_is_refused_naming_file_tensor_expected_and_found() {
    let dir = original_and_quantized(&Preset::Tiny.config(GateMode::None), DType::BF16);
    let good = dir.path().join("int8");
    const Q: &str = "model.layers.1.mlp.up_proj.weight";
    let q = Q;
    fn find(tensors: &mut [Tensor], suffix: &str) -> usize {
        let name = format!("{Q}{suffix}");
        tensors.iter().position(|t| t.name == name).unwrap()
    }
    type Edit = Box<dyn Fn(&mut Vec<Tensor>, &mut Vec<(String, String)>)>;
    // (what, edit, words the error must contain)
    let cases: Vec<(&str, Edit, Vec<String>)> = vec![
        (
            "packed bytes one row group short",
            Box::new(|t, _| {
                let i = find(t, ".q8_packed");
                t[i].shape[0] -= 16;
                let len = t[i].shape.iter().product();
                t[i].bytes.truncate(len);
            }),
            vec![
                format!("{q}.q8_packed"),
                "[192, 64]".into(),
                "[176, 64]".into(),
            ],
        ),
        (
            "packed stored as I8",
            Box::new(|t, _| {
                let i = find(t, ".q8_packed");
                t[i].dtype = DType::I8;
            }),
            vec![format!("{q}.q8_packed"), "U8".into(), "I8".into()],
        ),
        (
            "a NaN scale",
            Box::new(|t, _| {
                let i = find(t, ".q8_scales");
                t[i].bytes[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
            }),
            vec![format!("{q}.q8_scales"), "scale 2 is NaN".into()],
        ),
        (
            "missing scales",
            Box::new(|t, _| {
                let i = find(t, ".q8_scales");
                t.remove(i);
            }),
            vec![format!("{q}.q8_scales"), "is missing".into()],
        ),
        (
            "another format id",
            Box::new(|_, m| {
                m.iter_mut()
                    .find(|(k, _)| k == "gattn_quantization")
                    .unwrap()
                    .1 = "gattn-q8-v0".into();
            }),
            vec![
                "gattn-q8-v0".into(),
                gattn_kernels::matmul::Q8_FORMAT.into(),
            ],
        ),
        (
            "no format in the metadata",
            Box::new(|_, m| m.retain(|(k, _)| k != "gattn_quantization")),
            vec!["config.json says the weights are int8".into()],
        ),
    ];
    for (what, edit, words) in cases {
        let bad = dir.path().join(what.replace(' ', "-"));
        std::fs::create_dir(&bad).unwrap();
        for file in ["config.json", "tokenizer.json"] {
            std::fs::copy(good.join(file), bad.join(file)).unwrap();
        }
        let (mut t, mut m) = read_tensors(&good.join("model.safetensors"));
        edit(&mut t, &mut m);
        write_tensors(&bad.join("model.safetensors"), &t, &m);
        let e = Qwen3Model::load_as(&bad, None).err().expect(what);
        let message = e.to_string();
        assert!(message.contains("model.safetensors"), "{what}: {message}");
        for word in &words {
            assert!(
                message.contains(word.as_str()),
                "{what}: `{word}` not in {message}"
            );
        }
    }

    // config.json without the quantization object, over int8 weights.
    let bad = dir.path().join("config-without-quantization");
    std::fs::create_dir(&bad).unwrap();
    std::fs::copy(
        good.join("model.safetensors"),
        bad.join("model.safetensors"),
    )
    .unwrap();
    std::fs::copy(dir.path().join("orig/config.json"), bad.join("config.json")).unwrap();
    let message = Qwen3Model::load(&bad, WeightFormat::Int8)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        message.contains("model.safetensors") && message.contains("no `gattn_quantization`"),
        "{message}"
    );
    // A config naming an unknown layout is refused at parse time, naming the field.
    let text = std::fs::read_to_string(good.join("config.json"))
        .unwrap()
        .replace(gattn_kernels::matmul::Q8_FORMAT, "gattn-q4");
    std::fs::write(bad.join("config.json"), text).unwrap();
    let message = Qwen3Model::load_as(&bad, None)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        message.contains("config.json") && message.contains("gattn_quantization.format"),
        "{message}"
    );
}
