//! Writes a safetensors file one tensor at a time, so a multi-GB random checkpoint never has
//! to sit in memory whole. The format: u64 header length, JSON header, then the tensor bytes.

use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value, json};

use gattn_tensor::DType;

use crate::error::{ModelError, Result};
use crate::output::{AtomicFile, Existing};

pub struct TensorSpec {
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
}

impl TensorSpec {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn byte_len(&self) -> usize {
        self.numel() * self.dtype.size_in_bytes()
    }
}

/// Writes `tensors` to `path` in this order; `fill(index, out)` produces tensor `index`'s bytes.
/// Data starts 8-byte aligned; each tensor is aligned to its dtype if the ones before it have
/// lengths that keep it so (order them largest element first, as `quantize` does).
/// The file is written atomically and replaces `path`: callers check the directory first.
pub fn write_safetensors(
    path: &Path,
    tensors: &[TensorSpec],
    metadata: &[(&str, &str)],
    mut fill: impl FnMut(usize, &mut Vec<u8>) -> Result<()>,
) -> Result<()> {
    let io_error = |source| ModelError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut header = Map::new();
    let meta: Map<String, Value> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    header.insert("__metadata__".into(), Value::Object(meta));
    let mut offset = 0usize;
    for t in tensors {
        let len = t.byte_len();
        header.insert(
            t.name.clone(),
            json!({"dtype": t.dtype.to_string(), "shape": t.shape, "data_offsets": [offset, offset + len]}),
        );
        offset += len;
    }
    let mut header_bytes =
        serde_json::to_vec(&Value::Object(header)).expect("JSON of strings and numbers");
    // Pad with spaces so tensor data starts 8-byte aligned (zero-copy bf16/f32 views).
    while !header_bytes.len().is_multiple_of(8) {
        header_bytes.push(b' ');
    }
    let mut out = AtomicFile::create(path, Existing::Replace)?;
    out.write_all(&(header_bytes.len() as u64).to_le_bytes())
        .map_err(io_error)?;
    out.write_all(&header_bytes).map_err(io_error)?;
    let mut bytes = Vec::new();
    for (index, t) in tensors.iter().enumerate() {
        bytes.clear();
        fill(index, &mut bytes)?;
        assert_eq!(bytes.len(), t.byte_len(), "fill of {}", t.name);
        out.write_all(&bytes).map_err(io_error)?;
    }
    Ok(out.commit()?)
}
