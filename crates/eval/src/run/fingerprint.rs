//! The fingerprints in `run.json`: two runs whose checkpoints or data files differ must not be
//! resumed into one directory or merged, even when the paths are the same.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use gattn_tensor::input_file::{open_regular, read_regular};
use sha2::{Digest, Sha256};

use crate::run::error::RunError;

/// Hashing every byte of a multi-GB checkpoint would take seconds to minutes per run, so each
/// weight file contributes its name, its size and its first and last MiB: the safetensors
/// header (names, shapes, dtypes, offsets) and real weights at both ends.
const SAMPLED_BYTES: u64 = 1 << 20;

/// The small files that decide outputs are hashed whole (at most this many bytes each, as the
/// loader reads them).
const WHOLE_FILE_LIMIT: u64 = 256 << 20;

/// The small files that decide outputs are hashed whole.
const WHOLE_FILES: [&str; 4] = [
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "generation_config.json",
];

/// SHA-256 (hex, first 16 bytes) of `dir`'s config, tokenizer and sampled weight files.
pub fn model_fingerprint(dir: &Path) -> Result<String, RunError> {
    let mut hash = Sha256::new();
    for name in WHOLE_FILES {
        let path = dir.join(name);
        match read_regular(&path, WHOLE_FILE_LIMIT) {
            Ok(bytes) => {
                hash.update(name.as_bytes());
                hash.update((bytes.len() as u64).to_le_bytes());
                hash.update(&bytes);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(RunError::io(path)(e)),
        }
    }
    let mut weights: Vec<_> = std::fs::read_dir(dir)
        .map_err(RunError::io(dir))?
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .filter(|n| n.to_string_lossy().ends_with(".safetensors"))
        .collect();
    weights.sort();
    for name in weights {
        let path = dir.join(&name);
        hash.update(name.to_string_lossy().as_bytes());
        sample_file(&path, &mut hash).map_err(RunError::io(path))?;
    }
    Ok(hex16(&hash.finalize()))
}

/// SHA-256 (hex, first 16 bytes) of the data files given (`--essays DIR`, `--squad FILE`,
/// `--hotpotqa FILE`), whole: their text is what the samples are made of. `builtin` if none.
pub fn data_fingerprint(paths: &[(&str, Option<&Path>)]) -> Result<String, RunError> {
    if paths.iter().all(|(_, p)| p.is_none()) {
        return Ok("builtin".into());
    }
    let mut hash = Sha256::new();
    for (flag, path) in paths {
        let Some(path) = path else { continue };
        hash.update(flag.as_bytes());
        let mut files = vec![path.to_path_buf()];
        if path.is_dir() {
            files = std::fs::read_dir(path)
                .map_err(RunError::io(*path))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            files.sort();
        }
        for file in files {
            let bytes = read_regular(&file, WHOLE_FILE_LIMIT).map_err(RunError::io(&file))?;
            hash.update(file.file_name().unwrap_or_default().as_encoded_bytes());
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(&bytes);
        }
    }
    Ok(hex16(&hash.finalize()))
}

fn hex16(digest: &[u8]) -> String {
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

fn sample_file(path: &Path, hash: &mut Sha256) -> std::io::Result<()> {
    let (mut file, len) = open_regular(path, u64::MAX)?;
    hash.update(len.to_le_bytes());
    let mut chunk = Vec::new();
    (&mut file).take(SAMPLED_BYTES).read_to_end(&mut chunk)?;
    hash.update(&chunk);
    if len > SAMPLED_BYTES {
        file.seek(SeekFrom::Start(
            len.saturating_sub(SAMPLED_BYTES).max(SAMPLED_BYTES),
        ))?;
        chunk.clear();
        file.take(SAMPLED_BYTES).read_to_end(&mut chunk)?;
        hash.update(&chunk);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_weight_or_config_changes_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), b"{}").unwrap();
        std::fs::write(dir.path().join("model.safetensors"), vec![1u8; 3 << 20]).unwrap();
        let first = model_fingerprint(dir.path()).unwrap();
        assert_eq!(first.len(), 32);
        assert_eq!(model_fingerprint(dir.path()).unwrap(), first);
        let mut weights = vec![1u8; 3 << 20];
        *weights.last_mut().unwrap() = 2; // in the last MiB
        std::fs::write(dir.path().join("model.safetensors"), &weights).unwrap();
        let second = model_fingerprint(dir.path()).unwrap();
        assert_ne!(second, first);
        std::fs::write(dir.path().join("config.json"), b"{ }").unwrap();
        assert_ne!(model_fingerprint(dir.path()).unwrap(), second);
    }

    #[test]
    fn a_changed_data_file_changes_the_data_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let squad = dir.path().join("squad.json");
        std::fs::write(&squad, b"[1]").unwrap();
        let of = |p: Option<&Path>| data_fingerprint(&[("--essays", None), ("--squad", p)]);
        assert_eq!(of(None).unwrap(), "builtin");
        let first = of(Some(&squad)).unwrap();
        std::fs::write(&squad, b"[2]").unwrap();
        assert_ne!(of(Some(&squad)).unwrap(), first);
    }
}
