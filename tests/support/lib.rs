//! Helpers shared by the end-to-end tests: the committed fixtures and comparisons.

use std::path::{Path, PathBuf};

use gattn_tensor::SafetensorsFile;
use serde_json::Value;

/// `tests/fixtures`, written by `tools/fixtures/make_fixtures.py`.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// One fixture: a checkpoint, its prompt and the oracle's logits.
pub struct Fixture {
    pub name: String,
    pub dir: PathBuf,
    pub prompt_ids: Vec<u32>,
    pub tolerance: f32,
    pub oracle: String,
    /// `[prompt_ids.len(), vocab_size]`
    pub expected_logits: Vec<f32>,
}

impl Fixture {
    pub fn load(name: &str) -> Fixture {
        let dir = fixtures_dir().join(name);
        let case: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
        let prompt_ids = case["prompt_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let expected = SafetensorsFile::open(&dir.join("expected.safetensors")).unwrap();
        let logits = expected
            .view("logits")
            .expect("expected.safetensors holds `logits`");
        Fixture {
            name: name.to_string(),
            prompt_ids,
            tolerance: case["tolerance"].as_f64().unwrap() as f32,
            oracle: case["oracle"].as_str().unwrap().to_string(),
            expected_logits: logits.to_f32_vec().unwrap(),
            dir,
        }
    }

    /// Every fixture folder, sorted.
    pub fn all_names() -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
            .expect("tests/fixtures exists")
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("case.json").exists())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

/// The largest `|a - b|`. Panics if any value on either side is not finite: a fold with
/// `f32::max` drops NaN, so a tolerance check would pass on a NaN output.
pub fn max_abs_diff(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len(), "lengths differ");
    let mut max = 0.0f32;
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        assert!(
            a.is_finite() && b.is_finite(),
            "element {i} is not finite: got {a}, want {b}"
        );
        max = max.max((a - b).abs());
    }
    max
}

/// A copy of a fixture checkpoint in a temporary folder, to break on purpose.
pub fn copy_checkpoint(src: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    dir
}
