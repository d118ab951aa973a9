//! The three tiny trained checkpoints of `models/` (baseline, headwise, elementwise), embedded in
//! the binary so `gattn-cpu run -p ...` works without a download. On first use a model is written
//! to the cache directory (`$GATTN_CACHE_DIR`, else `$XDG_CACHE_HOME/gattn-cpu`, else
//! `~/.cache/gattn-cpu`) and then loaded like any checkpoint directory (memory-mapped).
//!
//! Files are written under a temporary name and renamed, and every use checks the size and
//! SHA-256 of each file against the embedded bytes, so an interrupted or altered cache is redone.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use sha2::{Digest, Sha256};

use crate::error::{ModelError, Result};
use crate::output::{Existing, write_atomic};

/// A checkpoint shipped inside the binary, named `builtin:NAME` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinModel {
    Baseline,
    Headwise,
    Elementwise,
}

/// A `-m/--model` value: a checkpoint directory, or `builtin:NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    Dir(PathBuf),
    Builtin(BuiltinModel),
}

const PREFIX: &str = "builtin:";

macro_rules! checkpoint_files {
    ($dir:literal) => {
        &[
            (
                "config.json",
                include_bytes!(concat!("../../../models/", $dir, "/config.json")),
            ),
            (
                "model.safetensors",
                include_bytes!(concat!("../../../models/", $dir, "/model.safetensors")),
            ),
            (
                "tokenizer.json",
                include_bytes!(concat!("../../../models/", $dir, "/tokenizer.json")),
            ),
            (
                "tokenizer_config.json",
                include_bytes!(concat!("../../../models/", $dir, "/tokenizer_config.json")),
            ),
        ]
    };
}

type EmbeddedFiles = &'static [(&'static str, &'static [u8])];

impl BuiltinModel {
    pub const ALL: [BuiltinModel; 3] = [
        BuiltinModel::Baseline,
        BuiltinModel::Headwise,
        BuiltinModel::Elementwise,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BuiltinModel::Baseline => "baseline",
            BuiltinModel::Headwise => "headwise",
            BuiltinModel::Elementwise => "elementwise",
        }
    }

    /// The embedded files: (file name, bytes).
    pub fn files(self) -> EmbeddedFiles {
        match self {
            BuiltinModel::Baseline => checkpoint_files!("baseline"),
            BuiltinModel::Headwise => checkpoint_files!("headwise"),
            BuiltinModel::Elementwise => checkpoint_files!("elementwise"),
        }
    }

    /// Writes the checkpoint under `cache_root` unless an intact copy is there; returns its
    /// directory. The directory name carries a hash of the contents, so a binary with other
    /// weights never reads this one's files.
    pub fn materialize_in(self, cache_root: &Path) -> Result<PathBuf> {
        let files = self.files();
        let mut all = Sha256::new();
        let digests: Vec<[u8; 32]> = files
            .iter()
            .map(|(_, bytes)| {
                let digest: [u8; 32] = Sha256::digest(bytes).into();
                all.update(digest);
                digest
            })
            .collect();
        let tag = hex(&all.finalize()[..6]);
        let dir = cache_root
            .join("builtin")
            .join(format!("{}-{tag}", self.name()));
        std::fs::create_dir_all(&dir).map_err(|source| ModelError::Write {
            path: dir.clone(),
            source,
        })?;
        for ((name, bytes), digest) in files.iter().zip(&digests) {
            let path = dir.join(name);
            if !is_intact(&path, bytes.len(), digest) {
                write_atomically(&path, bytes)?;
            }
        }
        Ok(dir)
    }

    /// [`materialize_in`](Self::materialize_in) the default cache directory.
    pub fn materialize(self) -> Result<PathBuf> {
        self.materialize_in(&cache_root()?)
    }
}

impl fmt::Display for BuiltinModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BuiltinModel {
    type Err = ModelError;

    fn from_str(name: &str) -> Result<Self> {
        BuiltinModel::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| ModelError::UnknownBuiltin {
                name: name.to_string(),
                valid: BuiltinModel::ALL
                    .iter()
                    .map(|m| format!("{PREFIX}{m}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

impl ModelSource {
    /// The checkpoint directory, writing a builtin model to the cache first if needed.
    pub fn dir(&self) -> Result<PathBuf> {
        match self {
            ModelSource::Dir(dir) => Ok(dir.clone()),
            ModelSource::Builtin(model) => model.materialize(),
        }
    }
}

impl fmt::Display for ModelSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSource::Dir(dir) => write!(f, "{}", dir.display()),
            ModelSource::Builtin(model) => write!(f, "{PREFIX}{model}"),
        }
    }
}

impl FromStr for ModelSource {
    type Err = ModelError;

    /// `builtin:NAME` names an embedded model (an unknown name is an error listing the valid
    /// ones); anything else is a directory.
    fn from_str(text: &str) -> Result<Self> {
        match text.strip_prefix(PREFIX) {
            Some(name) => Ok(ModelSource::Builtin(name.parse()?)),
            None => Ok(ModelSource::Dir(PathBuf::from(text))),
        }
    }
}

/// `$GATTN_CACHE_DIR`, else `$XDG_CACHE_HOME/gattn-cpu`, else `$HOME/.cache/gattn-cpu`.
pub fn cache_root() -> Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("GATTN_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("gattn-cpu"));
    }
    var("HOME")
        .map(|home| PathBuf::from(home).join(".cache").join("gattn-cpu"))
        .ok_or(ModelError::NoCacheDir)
}

fn is_intact(path: &Path, len: usize, digest: &[u8; 32]) -> bool {
    match std::fs::metadata(path) {
        Ok(meta) if meta.len() == len as u64 => std::fs::read(path)
            .map(|bytes| Sha256::digest(&bytes).as_slice() == digest)
            .unwrap_or(false),
        _ => false,
    }
}

/// Readers (and other processes materializing the same model) never see a partial file; the
/// cache's own files are replaced (a damaged one is rewritten).
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    Ok(write_atomic(path, bytes, Existing::Replace)?)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_names_list_the_valid_ones() {
        for model in BuiltinModel::ALL {
            let source: ModelSource = format!("builtin:{model}").parse().unwrap();
            assert_eq!(source, ModelSource::Builtin(model));
        }
        assert_eq!(
            "some/dir".parse::<ModelSource>().unwrap(),
            ModelSource::Dir(PathBuf::from("some/dir"))
        );
        let error = "builtin:gated"
            .parse::<ModelSource>()
            .unwrap_err()
            .to_string();
        assert!(error.contains("builtin:gated"), "{error}");
        assert!(
            error.contains("builtin:baseline, builtin:headwise, builtin:elementwise"),
            "{error}"
        );
    }

    #[test]
    fn materializes_once_and_repairs_a_damaged_cache() {
        let root = tempfile::tempdir().unwrap();
        let model = BuiltinModel::Headwise;
        let dir = model.materialize_in(root.path()).unwrap();
        for (name, bytes) in model.files() {
            assert_eq!(std::fs::read(dir.join(name)).unwrap(), *bytes, "{name}");
        }
        let weights = dir.join("model.safetensors");
        // A half-written file (right name, wrong size) and a same-size corruption are redone.
        std::fs::write(&weights, b"truncated").unwrap();
        assert_eq!(model.materialize_in(root.path()).unwrap(), dir);
        let mut corrupted = std::fs::read(&weights).unwrap();
        corrupted[1000] ^= 0xff;
        std::fs::write(&weights, &corrupted).unwrap();
        model.materialize_in(root.path()).unwrap();
        assert_eq!(
            std::fs::read(&weights).unwrap(),
            model.files()[1].1,
            "the weights are rewritten"
        );
        // No temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), model.files().len(), "{names:?}");
        // And the result loads as a checkpoint.
        let loaded = crate::Qwen3Model::load(&dir, crate::WeightFormat::F32).unwrap();
        assert_eq!(loaded.config.gate, crate::GateMode::Headwise);
    }
}
