//! One memory-mapped `.safetensors` file. The header is validated by the `safetensors` crate
//! (offsets contiguous, byte lengths equal dtype x shape, file exactly as long as the header says),
//! so every view handed out afterwards is in bounds.

use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::view::{MappedTensor, TensorView};

/// Where one tensor's bytes are inside the mapped file.
#[derive(Debug, Clone)]
pub struct TensorLocation {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Absolute byte range within the file.
    pub bytes: Range<usize>,
}

#[derive(Debug)]
pub struct SafetensorsFile {
    path: PathBuf,
    mmap: Arc<Mmap>,
    tensors: BTreeMap<String, TensorLocation>,
    metadata: BTreeMap<String, String>,
}

impl SafetensorsFile {
    pub fn open(path: &Path) -> Result<Self> {
        let io_err = |source| TensorError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io_err)?;
        // SAFETY: the file is mapped read-only; like every mmap-based loader (llama.cpp, candle) we
        // assume the checkpoint is not truncated by another process while it is in use.
        let mmap = unsafe { Mmap::map(&file) }.map_err(io_err)?;
        Self::from_mmap(path, mmap)
    }

    fn from_mmap(path: &Path, mmap: Mmap) -> Result<Self> {
        let invalid = |reason: String| TensorError::InvalidSafetensors {
            path: path.to_path_buf(),
            reason,
        };
        let (header_len, metadata) = safetensors::SafeTensors::read_metadata(&mmap[..])
            .map_err(|e| invalid(describe_safetensors_error(&e, mmap.len())))?;
        let data_start = 8 + header_len;
        let mut tensors = BTreeMap::new();
        for (name, info) in metadata.tensors() {
            let dtype = DType::from_safetensors(info.dtype).ok_or_else(|| {
                TensorError::UnsupportedDType {
                    path: path.to_path_buf(),
                    name: name.clone(),
                    dtype: format!("{:?}", info.dtype),
                }
            })?;
            let (begin, end) = info.data_offsets;
            tensors.insert(
                name,
                TensorLocation {
                    dtype,
                    shape: info.shape.clone(),
                    bytes: data_start + begin..data_start + end,
                },
            );
        }
        let metadata = metadata
            .metadata()
            .clone()
            .map(|m| m.into_iter().collect())
            .unwrap_or_default();
        Ok(SafetensorsFile {
            path: path.to_path_buf(),
            mmap: Arc::new(mmap),
            tensors,
            metadata,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The free-form `__metadata__` map of the header.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    pub fn location(&self, name: &str) -> Option<&TensorLocation> {
        self.tensors.get(name)
    }

    pub fn view(&self, name: &str) -> Option<TensorView<'_>> {
        let (name, loc) = self.tensors.get_key_value(name)?;
        Some(TensorView::new(
            name,
            &self.path,
            loc.dtype,
            &loc.shape,
            &self.mmap[loc.bytes.clone()],
        ))
    }

    /// A zero-copy handle that keeps the mapping alive on its own.
    pub fn mapped(&self, name: &str) -> Option<MappedTensor> {
        let loc = self.tensors.get(name)?;
        Some(MappedTensor::new(
            name,
            loc.dtype,
            &loc.shape,
            Arc::clone(&self.mmap),
            loc.bytes.clone(),
        ))
    }
}

fn describe_safetensors_error(e: &safetensors::SafeTensorError, file_len: usize) -> String {
    use safetensors::SafeTensorError as E;
    match e {
        E::HeaderTooSmall => format!("file is {file_len} bytes, too short for a header"),
        E::HeaderTooLarge => "header length field is absurdly large".to_string(),
        E::InvalidHeaderLength => format!(
            "header length field points past the end of the file ({file_len} bytes): truncated?"
        ),
        E::MetadataIncompleteBuffer => format!(
            "tensor data does not match the file length ({file_len} bytes): truncated or padded?"
        ),
        other => other.to_string(),
    }
}
