//! Replays every committed fuzz seed (`fuzz/corpus/TARGET/*`) through the same checks the
//! cargo-fuzz targets call (`fuzz/src/lib.rs`, included here), so `cargo test --workspace`
//! catches a regression on a seed without building libFuzzer. Seeds only: the fuzzing itself
//! is `fuzz/smoke.sh`.

#[path = "../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod fuzz_checks;

use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

/// The seed files of `target`, sorted; at least one must exist.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir().join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} has no seeds", dir.display());
    files
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect()
}

#[test]
fn every_corpus_directory_is_replayed_here() {
    let mut targets: Vec<String> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    targets.sort();
    assert_eq!(
        targets,
        [
            "config_json",
            "int8_checkpoint",
            "predictions_jsonl",
            "safetensors_bytes",
            "shard_index",
            "tokenizer_json",
            "tokenizer_prompt"
        ],
        "a new corpus needs a replay test below"
    );
}

#[test]
fn safetensors_seeds() {
    for (_, bytes) in seeds("safetensors_bytes") {
        fuzz_checks::check_safetensors(bytes);
    }
}

#[test]
fn config_seeds() {
    for (name, bytes) in seeds("config_json") {
        let text = String::from_utf8(bytes).unwrap_or_else(|_| panic!("{name} is UTF-8"));
        fuzz_checks::check_config(&text);
    }
}

#[test]
fn shard_index_seeds() {
    for (_, bytes) in seeds("shard_index") {
        fuzz_checks::check_shard_index(&bytes);
    }
}

#[test]
fn tokenizer_prompt_seeds() {
    for (_, bytes) in seeds("tokenizer_prompt") {
        fuzz_checks::check_tokenizer_prompt(&bytes);
    }
}

#[test]
fn tokenizer_json_seeds() {
    for (_, bytes) in seeds("tokenizer_json") {
        fuzz_checks::check_tokenizer_json(&bytes);
    }
}

/// The seeds are read as written (two records; one, then a cut tail), and a few mutations of
/// them are refused naming the line or read consistently.
#[test]
fn predictions_seeds_and_their_mutations() {
    for (name, bytes) in seeds("predictions_jsonl") {
        fuzz_checks::check_predictions(&bytes);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("predictions.jsonl");
        std::fs::write(&path, &bytes).unwrap();
        let file = gattn_eval::run::read_predictions(&path).unwrap();
        let want = if name == "cut-tail" {
            (1, true)
        } else {
            (2, false)
        };
        assert_eq!((file.records.len(), file.truncated_tail), want, "{name}");
        for cut in [1, bytes.len() / 3, bytes.len() - 1] {
            fuzz_checks::check_predictions(&bytes[..cut]);
        }
        let mut broken = bytes.clone();
        broken.splice(0..0, b"{\"task\": 7}\n".iter().copied());
        fuzz_checks::check_predictions(&broken);
    }
}

#[test]
fn int8_checkpoint_seeds_load_and_their_mutations_are_refused_cleanly() {
    let seeds = seeds("int8_checkpoint");
    let (_, real) = seeds
        .iter()
        .find(|(name, _)| name == "tiny-none")
        .expect("the quantized tiny checkpoint seed");
    // The real seed is a valid checkpoint, so fuzzing starts from what the loader accepts.
    let file = gattn_tensor::SafetensorsFile::from_bytes(Path::new("seed"), real.clone()).unwrap();
    let checkpoint = gattn_tensor::Checkpoint::from_file(Path::new("seed"), file).unwrap();
    gattn_model::Qwen3Model::from_checkpoint(
        fuzz_checks::int8_config(),
        &checkpoint,
        gattn_model::WeightFormat::Int8,
    )
    .expect("the tiny-none seed loads");
    for (_, bytes) in &seeds {
        fuzz_checks::check_int8_checkpoint(bytes.clone());
    }
    // A few cheap deterministic mutations of the real seed: truncations and byte flips.
    for cut in [0, 7, 8, 100, real.len() / 2, real.len() - 1] {
        fuzz_checks::check_int8_checkpoint(real[..cut].to_vec());
    }
    for at in (0..real.len()).step_by(real.len() / 64 + 1) {
        let mut bytes = real.clone();
        bytes[at] ^= 0x5a;
        fuzz_checks::check_int8_checkpoint(bytes);
    }
}

/// Writes `fuzz/corpus/int8_checkpoint/tiny-none` (a quantized `init --preset tiny` checkpoint's
/// model.safetensors). Run after changing the int8 format:
/// `cargo test -p gattn-tests --test fuzz_corpus -- --ignored`.
#[test]
#[ignore]
fn regenerate_int8_seed() {
    use gattn_model::init::{Preset, write_random_checkpoint};
    let dir = tempfile::tempdir().unwrap();
    let config = Preset::Tiny.config(gattn_model::GateMode::None);
    write_random_checkpoint(
        &dir.path().join("orig"),
        &config,
        gattn_tensor::DType::BF16,
        1,
    )
    .unwrap();
    gattn_model::quantize::quantize_checkpoint(&dir.path().join("orig"), &dir.path().join("q"))
        .unwrap();
    let out = corpus_dir().join("int8_checkpoint");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::copy(
        dir.path().join("q/model.safetensors"),
        out.join("tiny-none"),
    )
    .unwrap();
}
