//! [`Q8Matrix`]: int8 weights in the interleaved layout of [`super::layout`], owned or borrowed.

use std::borrow::Cow;

use half::bf16;

use super::layout::{self, BLOCK, ROWS};
use super::quantize::quantize_weight_rows;
use crate::matmul::error::{MatmulError, Q8FormatError};

/// An `n x k` weight matrix (PyTorch Linear layout: `n` outputs, `k` inputs) quantized to int8
/// in blocks of 64 along `k`. Borrowed when built by [`Q8Matrix::from_parts`] over mmapped bytes.
#[derive(Debug, Clone)]
pub struct Q8Matrix<'a> {
    n: usize,
    k: usize,
    packed: Cow<'a, [u8]>,
    scales: Cow<'a, [f32]>,
}

fn check_shape(n: usize, k: usize) -> bool {
    n > 0
        && k > 0
        && layout::groups(n)
            .checked_mul(layout::blocks(k))
            .and_then(|t| t.checked_mul(layout::TILE_BYTES))
            .is_some()
}

impl Q8Matrix<'static> {
    /// Quantizes f32 weights `w` `[n, k]` row-major (symmetric, round to nearest, scale = amax / 127).
    pub fn quantize_f32(w: &[f32], n: usize, k: usize) -> Result<Self, MatmulError> {
        Self::quantize_with(n, k, w.len(), |row, out| {
            out.copy_from_slice(&w[row * k..(row + 1) * k])
        })
    }

    /// Quantizes bf16 weights `w` `[n, k]` row-major (each row widened to f32 first).
    pub fn quantize_bf16(w: &[bf16], n: usize, k: usize) -> Result<Self, MatmulError> {
        Self::quantize_with(n, k, w.len(), |row, out| {
            for (o, v) in out.iter_mut().zip(&w[row * k..(row + 1) * k]) {
                *o = v.to_f32();
            }
        })
    }

    fn quantize_with(
        n: usize,
        k: usize,
        len: usize,
        read_row: impl Fn(usize, &mut [f32]) + Sync,
    ) -> Result<Self, MatmulError> {
        if !check_shape(n, k) {
            return Err(MatmulError::BadShape { n, k });
        }
        if len != n * k {
            return Err(MatmulError::Length {
                what: "weights",
                got: len,
                expected: n * k,
            });
        }
        let (packed, scales) = quantize_weight_rows(n, k, read_row);
        Ok(Q8Matrix {
            n,
            k,
            packed: Cow::Owned(packed),
            scales: Cow::Owned(scales),
        })
    }
}

impl<'a> Q8Matrix<'a> {
    /// Wraps stored parts (as written from [`Q8Matrix::to_parts`]) without re-quantizing.
    ///
    /// `packed` is always borrowed (no copy). `scale_bytes` are little-endian f32; they are
    /// borrowed when 4-byte aligned (safetensors keeps tensor data 8-aligned when tensors are
    /// sized in multiples of 8 bytes, which both parts are), else copied (4 bytes per 64 weights).
    pub fn from_parts(
        packed: &'a [u8],
        scale_bytes: &'a [u8],
        n: usize,
        k: usize,
    ) -> Result<Self, Q8FormatError> {
        if !check_shape(n, k) {
            return Err(Q8FormatError::BadShape { n, k });
        }
        let expected = layout::packed_len(n, k);
        if packed.len() != expected {
            return Err(Q8FormatError::WeightBytes {
                n,
                k,
                expected,
                got: packed.len(),
            });
        }
        let expected = layout::scales_len(n, k) * 4;
        if scale_bytes.len() != expected {
            return Err(Q8FormatError::ScaleBytes {
                n,
                k,
                expected,
                got: scale_bytes.len(),
            });
        }
        let scales = match bytemuck::try_cast_slice::<u8, f32>(scale_bytes) {
            Ok(s) if cfg!(target_endian = "little") => Cow::Borrowed(s),
            _ => Cow::Owned(
                scale_bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
        };
        Ok(Q8Matrix {
            n,
            k,
            packed: Cow::Borrowed(packed),
            scales,
        })
    }

    /// The stored form: packed offset-binary weights and f32 scales, in the layout named by
    /// [`layout::Q8_FORMAT`]. Write both as flat tensors (U8 and F32) and the shape `[n, k]`.
    pub fn to_parts(&self) -> (&[u8], &[f32]) {
        (&self.packed, &self.scales)
    }

    /// The scales as little-endian bytes (what [`Q8Matrix::from_parts`] reads back).
    pub fn scale_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.scales)
    }

    pub fn into_owned(self) -> Q8Matrix<'static> {
        Q8Matrix {
            n: self.n,
            k: self.k,
            packed: Cow::Owned(self.packed.into_owned()),
            scales: Cow::Owned(self.scales.into_owned()),
        }
    }

    /// Output features.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Blocks of 64 along k (the last one zero-padded).
    pub fn blocks(&self) -> usize {
        layout::blocks(self.k)
    }

    /// Bytes a pass over the whole matrix reads (weights + scales).
    pub fn bytes(&self) -> usize {
        self.packed.len() + self.scales.len() * 4
    }

    /// The quantized value and scale of weight (row, col): `w ≈ q * scale`.
    pub fn get(&self, row: usize, col: usize) -> (i8, f32) {
        let nb = self.blocks();
        let q = self.packed[layout::packed_index(nb, row, col)] as i16 - 128;
        (
            q as i8,
            self.scales[layout::scale_index(nb, row, col / BLOCK)],
        )
    }

    /// The f32 matrix these int8 weights stand for, `[n, k]` row-major (tests and debugging).
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.n * self.k];
        for row in 0..self.n {
            for col in 0..self.k {
                let (q, s) = self.get(row, col);
                out[row * self.k + col] = q as f32 * s;
            }
        }
        out
    }

    /// Packed bytes and scales of one group of 16 rows.
    pub(crate) fn group(&self, g: usize) -> (&[u8], &[f32]) {
        let nb = self.blocks();
        let tiles = nb * layout::TILE_BYTES;
        (
            &self.packed[g * tiles..(g + 1) * tiles],
            &self.scales[g * nb * ROWS..(g + 1) * nb * ROWS],
        )
    }
}
