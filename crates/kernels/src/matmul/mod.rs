//! Fast matrix-vector and matrix-matrix kernels (f32, bf16, int8). See issue 3.
//! `y = x W^T (+ b)`: the linear layer as PyTorch lays it out, W is `[out_features, in_features]`.
//!
//! - [`WeightMatrix`]: what a linear layer holds (f32 or bf16 slices used in place, or a
//!   [`Q8Matrix`]). [`matmul`] is the one entry point: matrix-vector for one token, matrix-matrix
//!   for a chunk, parallel over output columns in the caller's current rayon pool
//!   (through [`crate::parallel::for_each`]).
//! - Fusions: [`matmul_shared_input`] (q/k/v/gate projections: activations quantized once, one
//!   parallel pass over all matrices) and [`gate_up_silu`] (`silu(x Wg^T) * (x Wu^T)`).
//! - `*_at` variants take an explicit [`SimdLevel`] (proptests run every supported level).
//!
//! Files: `driver` splits the work and runs it in parallel, `int8/` (layout, quantization,
//! matrix type, microkernels per ISA) and `float/` (f32/bf16 mat-vec kernels per ISA, the
//! AVX512-BF16 dot-product mat-vec and mat-mat in `float/bf16dot`, gemm panels for the other
//! mat-mats)
//! compute.

#[cfg(target_arch = "x86_64")]
pub(crate) mod amx;
mod driver;
pub mod error;
mod float;
pub mod int8;

use half::bf16;

pub use crate::dispatch::SimdLevel;
pub use error::{MatmulError, Q8FormatError};
pub use float::FloatWeight;
pub use int8::layout::Q8_FORMAT;
pub use int8::matrix::Q8Matrix;
pub use int8::quantize::{Q8Activations, quantize_activations};

/// The weights of one linear layer, `[n, k]` (n outputs, k inputs).
#[derive(Debug, Clone, Copy)]
pub enum WeightMatrix<'a> {
    F32 {
        data: &'a [f32],
        n: usize,
        k: usize,
    },
    /// Used in place (no converted copy), e.g. a view into an mmapped checkpoint.
    Bf16 {
        data: &'a [bf16],
        n: usize,
        k: usize,
    },
    Int8(&'a Q8Matrix<'a>),
}

impl<'a> WeightMatrix<'a> {
    pub fn f32(data: &'a [f32], n: usize, k: usize) -> Result<Self, MatmulError> {
        check_len("f32 weights", data.len(), n, k)?;
        Ok(WeightMatrix::F32 { data, n, k })
    }

    pub fn bf16(data: &'a [bf16], n: usize, k: usize) -> Result<Self, MatmulError> {
        check_len("bf16 weights", data.len(), n, k)?;
        Ok(WeightMatrix::Bf16 { data, n, k })
    }

    pub fn int8(q: &'a Q8Matrix<'a>) -> Self {
        WeightMatrix::Int8(q)
    }

    /// Output features.
    pub fn n(&self) -> usize {
        match self {
            WeightMatrix::F32 { n, .. } | WeightMatrix::Bf16 { n, .. } => *n,
            WeightMatrix::Int8(q) => q.n(),
        }
    }

    /// Input features.
    pub fn k(&self) -> usize {
        match self {
            WeightMatrix::F32 { k, .. } | WeightMatrix::Bf16 { k, .. } => *k,
            WeightMatrix::Int8(q) => q.k(),
        }
    }

    /// Bytes one pass over the weights reads (what a mat-vec streams).
    pub fn bytes(&self) -> usize {
        match self {
            WeightMatrix::F32 { data, .. } => data.len() * 4,
            WeightMatrix::Bf16 { data, .. } => data.len() * 2,
            WeightMatrix::Int8(q) => q.bytes(),
        }
    }
}

fn check_len(what: &'static str, got: usize, n: usize, k: usize) -> Result<(), MatmulError> {
    let expected = n
        .checked_mul(k)
        .filter(|_| n > 0 && k > 0)
        .ok_or(MatmulError::BadShape { n, k })?;
    if got != expected {
        return Err(MatmulError::Length {
            what,
            got,
            expected,
        });
    }
    Ok(())
}

/// Do bf16 products at `level` run the AVX512-BF16 dot-product kernels (mat-vec and mat-mat),
/// which round the activations to bf16 (to nearest even, as llama.cpp's BF16 does)? Otherwise the
/// bf16 weights are widened to f32 and the activations stay f32.
pub fn bf16_rounds_activations(level: SimdLevel) -> bool {
    float::bf16dot::available(level)
}

/// Does the bf16 dot-product mat-vec prefetch every line of its weight rows (else one in 8)?
pub fn bf16_matvec_prefetches_every_line() -> bool {
    float::bf16dot::prefetch_every_line()
}

/// `y = x W^T + bias` at the process-wide SIMD level. x `[m, k]`, y `[m, n]`, bias `[n]`;
/// `m = x.len() / k` (m == 1 takes the matrix-vector path).
pub fn matmul(
    w: &WeightMatrix<'_>,
    x: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
) -> Result<(), MatmulError> {
    matmul_at(crate::dispatch::simd_level(), w, x, bias, y)
}

/// [`matmul`] at an explicit level (must be supported by this CPU: see [`SimdLevel::all_supported`]).
pub fn matmul_at(
    level: SimdLevel,
    w: &WeightMatrix<'_>,
    x: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
) -> Result<(), MatmulError> {
    driver::run(level, &[(*w, bias)], x, &mut [y], driver::Epilogue::None)
}

/// Several projections of the same activations (q, k, v and the attention gate), each with its
/// optional bias: x is read and (for int8) quantized once, and all matrices share one parallel
/// pass. `ys[i]` is `[m, ws[i].0.n()]`.
pub fn matmul_shared_input(
    ws: &[(WeightMatrix<'_>, Option<&[f32]>)],
    x: &[f32],
    ys: &mut [&mut [f32]],
) -> Result<(), MatmulError> {
    matmul_shared_input_at(crate::dispatch::simd_level(), ws, x, ys)
}

pub fn matmul_shared_input_at(
    level: SimdLevel,
    ws: &[(WeightMatrix<'_>, Option<&[f32]>)],
    x: &[f32],
    ys: &mut [&mut [f32]],
) -> Result<(), MatmulError> {
    driver::run(level, ws, x, ys, driver::Epilogue::None)
}

/// The MLP's first half: `y = silu(x Wg^T) * (x Wu^T)`, both products computed column block by
/// column block and combined while in cache. `gate` and `up` are both `[n, k]`; y is `[m, n]`.
pub fn gate_up_silu(
    gate: &WeightMatrix<'_>,
    up: &WeightMatrix<'_>,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    gate_up_silu_at(crate::dispatch::simd_level(), gate, up, x, y)
}

pub fn gate_up_silu_at(
    level: SimdLevel,
    gate: &WeightMatrix<'_>,
    up: &WeightMatrix<'_>,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    if gate.n() != up.n() || gate.k() != up.k() {
        return Err(MatmulError::Fusion {
            what: format!(
                "gate is {} x {} but up is {} x {}",
                gate.n(),
                gate.k(),
                up.n(),
                up.k()
            ),
        });
    }
    driver::run(
        level,
        &[(*up, None)],
        x,
        &mut [y],
        driver::Epilogue::SiluGate(gate),
    )
}
