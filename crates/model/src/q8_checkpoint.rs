//! Reading int8 checkpoints (written by `gattn-cpu quantize`, see `quantize.rs`): each quantized
//! linear weight `X.weight` `[n, k]` is stored as two tensors in the layout
//! [`Q8_FORMAT`] names, used in place from the memory map (no copy, no re-quantizing):
//!
//! - `X.weight.q8_packed`: U8 `[n rounded up to 16, k rounded up to 64]`, the interleaved
//!   offset-binary bytes of `gattn_kernels::matmul::int8::layout`;
//! - `X.weight.q8_scales`: F32 `[n rounded up to 16, k / 64 rounded up]`, one scale per
//!   (row, block of 64), in the layout's order.
//!
//! The file's `__metadata__` says `gattn_quantization = Q8_FORMAT` and `gattn_q8_block = 64`;
//! config.json says the same in its `gattn_quantization` object. Both must agree.

use std::path::PathBuf;

use gattn_kernels::matmul::int8::layout::{self, BLOCK, ROWS};
use gattn_kernels::matmul::{Q8_FORMAT, Q8Matrix};
use gattn_tensor::{Checkpoint, DType, MappedTensor};

use crate::config::Qwen3Config;
use crate::error::{ModelError, Result};

/// Suffix of the packed-bytes tensor of a quantized `X.weight`.
pub const PACKED_SUFFIX: &str = ".q8_packed";
/// Suffix of the scales tensor of a quantized `X.weight`.
pub const SCALES_SUFFIX: &str = ".q8_scales";
/// `__metadata__` key holding the layout id ([`Q8_FORMAT`]).
pub const FORMAT_KEY: &str = "gattn_quantization";
/// `__metadata__` key holding the block size along k.
pub const BLOCK_KEY: &str = "gattn_q8_block";

/// The shape `X.weight.q8_packed` is stored with (its byte length is the layout's).
pub fn packed_shape(n: usize, k: usize) -> [usize; 2] {
    [layout::groups(n) * ROWS, layout::blocks(k) * BLOCK]
}

/// The shape `X.weight.q8_scales` is stored with.
pub fn scales_shape(n: usize, k: usize) -> [usize; 2] {
    [layout::groups(n) * ROWS, layout::blocks(k)]
}

/// Whether the checkpoint's weights are stored int8, checking that config.json and the
/// safetensors metadata agree with each other and name the layout this build reads.
pub fn is_stored_int8(config: &Qwen3Config, checkpoint: &Checkpoint) -> Result<bool> {
    let file = checkpoint.files()[0].path().to_path_buf();
    let error = |reason: String| ModelError::Int8Checkpoint {
        path: file.clone(),
        reason,
    };
    let metadata = checkpoint.metadata();
    let stored = match metadata.get(FORMAT_KEY) {
        None => false,
        Some(format) if format == Q8_FORMAT => true,
        Some(other) => {
            return Err(error(format!(
                "__metadata__ `{FORMAT_KEY}` is \"{other}\"; this build reads only \"{Q8_FORMAT}\""
            )));
        }
    };
    if stored {
        let block = metadata.get(BLOCK_KEY);
        if block.and_then(|b| b.parse::<usize>().ok()) != Some(BLOCK) {
            return Err(error(format!(
                "__metadata__ `{BLOCK_KEY}` is {block:?}, expected \"{BLOCK}\""
            )));
        }
    }
    match (stored, config.quantized_int8) {
        (true, false) => Err(error(format!(
            "the weights are int8 ({Q8_FORMAT}) but config.json has no `{FORMAT_KEY}`"
        ))),
        (false, true) => Err(error(format!(
            "config.json says the weights are int8 (`{FORMAT_KEY}`) but this file's __metadata__ \
             does not"
        ))),
        _ => Ok(stored),
    }
}

/// An `n x k` int8 matrix whose packed bytes and scales stay in the memory-mapped file.
#[derive(Debug)]
pub struct MappedQ8 {
    /// The file holding the parts (for messages).
    path: PathBuf,
    packed: MappedTensor,
    scales: MappedTensor,
    n: usize,
    k: usize,
}

impl MappedQ8 {
    /// Finds `{name}.q8_packed` and `{name}.q8_scales` and checks dtypes, shapes against
    /// `[n, k]`, alignment and that every scale is finite and non-negative; after this,
    /// [`MappedQ8::matrix`] cannot fail.
    pub fn load(checkpoint: &Checkpoint, name: &str, n: usize, k: usize) -> Result<MappedQ8> {
        let part = |suffix: &str, dtype: DType, shape: [usize; 2]| -> Result<MappedTensor> {
            let part_name = format!("{name}{suffix}");
            if !checkpoint.contains(&part_name) {
                return Err(ModelError::Int8Checkpoint {
                    path: checkpoint.files()[0].path().to_path_buf(),
                    reason: format!(
                        "tensor `{part_name}` is missing (int8 weight `{name}` is stored as \
                         `{name}{PACKED_SUFFIX}` and `{name}{SCALES_SUFFIX}`)"
                    ),
                });
            }
            let view = checkpoint.view(&part_name)?;
            view.expect_dtype(dtype)?;
            view.expect_shape(&shape)?;
            Ok(checkpoint.mapped(&part_name)?)
        };
        let packed = part(PACKED_SUFFIX, DType::U8, packed_shape(n, k))?;
        let scales = part(SCALES_SUFFIX, DType::F32, scales_shape(n, k))?;
        let path = checkpoint.view(&scales.name)?.path.to_path_buf();
        let error = |reason: String| ModelError::Int8Checkpoint {
            path: path.clone(),
            reason: format!("tensor `{}`: {reason}", scales.name),
        };
        let Some(values) = scales.as_f32_slice() else {
            return Err(error(
                "the scales are not 4-byte aligned in the file (they cannot be used in place)"
                    .into(),
            ));
        };
        if let Some((i, s)) = values
            .iter()
            .enumerate()
            .find(|(_, s)| !(s.is_finite() && **s >= 0.0))
        {
            return Err(error(format!(
                "scale {i} is {s}, expected a finite value >= 0"
            )));
        }
        let matrix = MappedQ8 {
            path,
            packed,
            scales,
            n,
            k,
        };
        matrix.matrix()?;
        Ok(matrix)
    }

    /// The borrowed matrix the kernels run on: a few length checks, no copy.
    pub fn matrix(&self) -> Result<Q8Matrix<'_>> {
        Q8Matrix::from_parts(self.packed.bytes(), self.scales.bytes(), self.n, self.k).map_err(
            |e| ModelError::Int8Checkpoint {
                path: self.path.clone(),
                reason: format!("tensor `{}`: {e}", self.packed.name),
            },
        )
    }

    pub fn bytes(&self) -> usize {
        self.packed.bytes().len() + self.scales.bytes().len()
    }
}
