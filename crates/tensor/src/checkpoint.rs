//! A checkpoint directory's weights: `model.safetensors`, or the shards listed by
//! `model.safetensors.index.json` (`{"weight_map": {"tensor name": "shard file"}}`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use crate::error::{Result, TensorError};
use crate::input_file::read_regular_to_string;
use crate::safetensors_file::SafetensorsFile;
use crate::view::{MappedTensor, TensorView};

pub const SINGLE_FILE: &str = "model.safetensors";
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// A shard index lists tensor names (a few hundred, some 10 KB); more is not an index.
const MAX_INDEX_BYTES: u64 = 64 << 20;

#[derive(Debug)]
pub struct Checkpoint {
    dir: PathBuf,
    files: Vec<SafetensorsFile>,
    /// Tensor name -> index into `files`.
    owner: HashMap<String, usize>,
}

impl Checkpoint {
    /// Opens the weights of a Hugging Face checkpoint directory (sharded or not).
    pub fn open_dir(dir: &Path) -> Result<Self> {
        let index_path = dir.join(INDEX_FILE);
        let single = dir.join(SINGLE_FILE);
        // Both present: which one holds the weights is a guess, so neither is read.
        if index_path.exists() && single.exists() {
            return Err(TensorError::InvalidIndex {
                path: index_path,
                reason: format!(
                    "the directory has both {SINGLE_FILE} and {INDEX_FILE}: remove the one that \
                     is not the checkpoint"
                ),
            });
        }
        if index_path.exists() {
            return Self::open_sharded(dir, &index_path);
        }
        if !single.exists() {
            return Err(TensorError::Io {
                path: single,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("neither {SINGLE_FILE} nor {INDEX_FILE} exists in the directory"),
                ),
            });
        }
        Self::from_files(dir, vec![SafetensorsFile::open(&single)?])
    }

    fn open_sharded(dir: &Path, index_path: &Path) -> Result<Self> {
        let text = read_regular_to_string(index_path, MAX_INDEX_BYTES).map_err(|source| {
            TensorError::Io {
                path: index_path.to_path_buf(),
                source,
            }
        })?;
        let index = parse_shard_index(index_path, &text)?;
        let mut files = Vec::with_capacity(index.shards.len());
        for shard in &index.shards {
            files.push(SafetensorsFile::open(&dir.join(shard))?);
        }
        let checkpoint = Self::from_files(dir, files)?;
        // Every tensor the index promises must be in the shard it names.
        for (name, shard) in &index.weight_map {
            let owner = checkpoint.owner.get(name).map(|&i| &checkpoint.files[i]);
            let found_in_named = owner.is_some_and(|f| f.path() == dir.join(shard));
            if !found_in_named {
                return Err(TensorError::InvalidIndex {
                    path: index_path.to_path_buf(),
                    reason: format!(
                        "tensor `{name}` is listed in shard `{shard}` but that shard does not contain it"
                    ),
                });
            }
        }
        Ok(checkpoint)
    }

    /// A checkpoint of one already opened file (e.g. [`SafetensorsFile::from_bytes`], for fuzzing
    /// the model loader without writing files); `dir` only names it in messages.
    pub fn from_file(dir: &Path, file: SafetensorsFile) -> Result<Self> {
        Self::from_files(dir, vec![file])
    }

    fn from_files(dir: &Path, files: Vec<SafetensorsFile>) -> Result<Self> {
        let mut owner = HashMap::new();
        for (i, file) in files.iter().enumerate() {
            for name in file.names() {
                if let Some(&previous) = owner.get(name) {
                    let previous: &SafetensorsFile = &files[previous];
                    return Err(TensorError::InvalidSafetensors {
                        path: file.path().to_path_buf(),
                        reason: format!(
                            "tensor `{name}` also appears in {}",
                            previous.path().display()
                        ),
                    });
                }
                owner.insert(name.to_string(), i);
            }
        }
        Ok(Checkpoint {
            dir: dir.to_path_buf(),
            files,
            owner,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn files(&self) -> &[SafetensorsFile] {
        &self.files
    }

    pub fn contains(&self, name: &str) -> bool {
        self.owner.contains_key(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.owner.keys().map(String::as_str)
    }

    /// The free-form header metadata of the first file (where `quantize` records its format).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        self.files[0].metadata()
    }

    fn file_of(&self, name: &str) -> Result<&SafetensorsFile> {
        let i = self.owner.get(name).ok_or_else(|| TensorError::Missing {
            name: name.to_string(),
            location: self.dir.display().to_string(),
        })?;
        Ok(&self.files[*i])
    }

    pub fn view(&self, name: &str) -> Result<TensorView<'_>> {
        let file = self.file_of(name)?;
        Ok(file.view(name).expect("owner map and file agree"))
    }

    pub fn mapped(&self, name: &str) -> Result<MappedTensor> {
        let file = self.file_of(name)?;
        Ok(file.mapped(name).expect("owner map and file agree"))
    }
}

fn is_plain_relative(name: &str) -> bool {
    let path = Path::new(name);
    !name.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// The contents of `model.safetensors.index.json`, checked: a non-empty `weight_map` whose shard
/// names are all plain file names (no `..`, no absolute path: the index cannot point outside the
/// checkpoint directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardIndex {
    /// Tensor name -> shard file name.
    pub weight_map: BTreeMap<String, String>,
    /// The distinct shard file names, sorted.
    pub shards: Vec<String>,
}

/// Parses the text of a shard index (`path` names it in errors); touches no file.
pub fn parse_shard_index(path: &Path, text: &str) -> Result<ShardIndex> {
    let invalid = |reason: String| TensorError::InvalidIndex {
        path: path.to_path_buf(),
        reason,
    };
    #[derive(serde::Deserialize)]
    struct RawIndex {
        weight_map: BTreeMap<String, String>,
    }
    let value = crate::strict_json::parse_strict(text).map_err(|e| invalid(e.to_string()))?;
    let raw: RawIndex = serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
    if raw.weight_map.is_empty() {
        return Err(invalid("`weight_map` is empty".to_string()));
    }
    let mut shards: Vec<String> = raw.weight_map.values().cloned().collect();
    shards.sort();
    shards.dedup();
    if let Some(bad) = shards.iter().find(|shard| !is_plain_relative(shard)) {
        return Err(invalid(format!(
            "shard file name `{bad}` must be a plain file name inside the checkpoint directory"
        )));
    }
    Ok(ShardIndex {
        weight_map: raw.weight_map,
        shards,
    })
}
