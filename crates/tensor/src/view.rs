//! A borrowed view of one tensor's bytes, with conversions to f32 for the reference path.

use std::path::Path;

use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::{Result, TensorError};

#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    pub name: &'a str,
    /// The file the bytes live in (for error messages).
    pub path: &'a Path,
    pub dtype: DType,
    pub shape: &'a [usize],
    pub bytes: &'a [u8],
}

impl<'a> TensorView<'a> {
    pub fn new(
        name: &'a str,
        path: &'a Path,
        dtype: DType,
        shape: &'a [usize],
        bytes: &'a [u8],
    ) -> Self {
        TensorView {
            name,
            path,
            dtype,
            shape,
            bytes,
        }
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Fails with a message naming the tensor, the expected and the found shape.
    pub fn expect_shape(&self, expected: &[usize]) -> Result<()> {
        if self.shape != expected {
            return Err(TensorError::ShapeMismatch {
                path: self.path.to_path_buf(),
                name: self.name.to_string(),
                expected: expected.to_vec(),
                found: self.shape.to_vec(),
            });
        }
        Ok(())
    }

    pub fn expect_dtype(&self, expected: DType) -> Result<()> {
        if self.dtype != expected {
            return Err(TensorError::DTypeMismatch {
                path: self.path.to_path_buf(),
                name: self.name.to_string(),
                expected: expected.to_string(),
                found: self.dtype.to_string(),
            });
        }
        Ok(())
    }

    /// The index of the first NaN or infinity, read from the bits (no copy; integer dtypes have
    /// none): a float is non-finite exactly when its exponent bits are all ones.
    pub fn first_non_finite(&self) -> Option<usize> {
        let b = self.bytes;
        match self.dtype {
            DType::F32 => b.chunks_exact(4).position(|c| {
                u32::from_le_bytes([c[0], c[1], c[2], c[3]]) & 0x7F80_0000 == 0x7F80_0000
            }),
            DType::BF16 => b
                .chunks_exact(2)
                .position(|c| u16::from_le_bytes([c[0], c[1]]) & 0x7F80 == 0x7F80),
            DType::F16 => b
                .chunks_exact(2)
                .position(|c| u16::from_le_bytes([c[0], c[1]]) & 0x7C00 == 0x7C00),
            DType::I8 | DType::U8 => None,
        }
    }

    /// Fails, naming the tensor and the element, if any value is NaN or infinite.
    pub fn expect_finite(&self) -> Result<()> {
        let Some(index) = self.first_non_finite() else {
            return Ok(());
        };
        let size = self.dtype.size_in_bytes();
        let value = TensorView {
            shape: &[1],
            bytes: &self.bytes[index * size..][..size],
            ..*self
        }
        .to_f32_vec()?[0];
        Err(TensorError::NonFinite {
            path: self.path.to_path_buf(),
            name: self.name.to_string(),
            index,
            value: value.to_string(),
        })
    }

    /// Converts any float dtype to f32 (a copy; the reference path computes in f32).
    pub fn to_f32_vec(&self) -> Result<Vec<f32>> {
        let b = self.bytes;
        Ok(match self.dtype {
            DType::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            DType::BF16 => b
                .chunks_exact(2)
                .map(|c| bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
            DType::F16 => b
                .chunks_exact(2)
                .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
            DType::I8 | DType::U8 => {
                return Err(TensorError::DTypeMismatch {
                    path: self.path.to_path_buf(),
                    name: self.name.to_string(),
                    expected: "a float dtype".to_string(),
                    found: self.dtype.to_string(),
                });
            }
        })
    }

    /// The bf16 values in place when the bytes are 2-byte aligned (safetensors files written by
    /// HF and by us always are); `None` otherwise, and the caller copies.
    pub fn as_bf16_slice(&self) -> Option<&'a [bf16]> {
        if self.dtype != DType::BF16 {
            return None;
        }
        bytemuck::try_cast_slice(self.bytes).ok()
    }

    pub fn as_f32_slice(&self) -> Option<&'a [f32]> {
        if self.dtype != DType::F32 {
            return None;
        }
        bytemuck::try_cast_slice(self.bytes).ok()
    }

    pub fn as_i8_slice(&self) -> Option<&'a [i8]> {
        if self.dtype != DType::I8 {
            return None;
        }
        bytemuck::try_cast_slice(self.bytes).ok()
    }
}

/// An owned, zero-copy handle on one tensor's bytes inside a memory-mapped file: the mapping stays
/// alive as long as any handle does, so model weights can point into it without a copy.
#[derive(Debug, Clone)]
pub struct MappedTensor {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    file: std::sync::Arc<crate::storage::FileBytes>,
    range: std::ops::Range<usize>,
}

impl MappedTensor {
    pub(crate) fn new(
        name: &str,
        dtype: DType,
        shape: &[usize],
        file: std::sync::Arc<crate::storage::FileBytes>,
        range: std::ops::Range<usize>,
    ) -> Self {
        MappedTensor {
            name: name.to_string(),
            dtype,
            shape: shape.to_vec(),
            file,
            range,
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.file[self.range.clone()]
    }

    pub fn as_bf16_slice(&self) -> Option<&[bf16]> {
        if self.dtype != DType::BF16 {
            return None;
        }
        bytemuck::try_cast_slice(self.bytes()).ok()
    }

    pub fn as_f32_slice(&self) -> Option<&[f32]> {
        if self.dtype != DType::F32 {
            return None;
        }
        bytemuck::try_cast_slice(self.bytes()).ok()
    }

    pub fn as_i8_slice(&self) -> Option<&[i8]> {
        if self.dtype != DType::I8 {
            return None;
        }
        bytemuck::try_cast_slice(self.bytes()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_non_finite_value_is_found_in_every_float_dtype() {
        let path = Path::new("w.safetensors");
        let cases: [(DType, Vec<u8>); 3] = [
            (
                DType::F32,
                [1.0f32, -2.0, f32::NAN, f32::INFINITY]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
            ),
            (
                DType::BF16,
                [1.0f32, -2.0, f32::NAN, f32::INFINITY]
                    .iter()
                    .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
                    .collect(),
            ),
            (
                DType::F16,
                [1.0f32, -2.0, f32::INFINITY, f32::NAN]
                    .iter()
                    .flat_map(|&v| f16::from_f32(v).to_le_bytes())
                    .collect(),
            ),
        ];
        for (dtype, bytes) in &cases {
            let view = TensorView::new("w", path, *dtype, &[4], bytes);
            assert_eq!(view.first_non_finite(), Some(2), "{dtype}");
            let finite =
                TensorView::new("w", path, *dtype, &[2], &bytes[..2 * dtype.size_in_bytes()]);
            assert_eq!(finite.first_non_finite(), None, "{dtype}");
            assert!(finite.expect_finite().is_ok());
            let e = view.expect_finite().unwrap_err().to_string();
            assert!(e.contains("tensor `w`") && e.contains("element 2"), "{e}");
        }
    }
}
