//! Weight matrices as the forward pass uses them, loaded from a checkpoint with every shape checked.

use std::sync::Arc;

use gattn_kernels::matmul::{self, Q8Matrix, WeightMatrix};
use gattn_kernels::reference;
use gattn_tensor::{Checkpoint, DType, MappedTensor, bf16};

use crate::backend::Backend;
use crate::config::Qwen3Config;
use crate::error::{ModelError, Result};
use crate::q8_checkpoint::{self, MappedQ8};

/// How the linear layers hold their weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightFormat {
    /// Everything widened to f32 at load: the reference path.
    F32,
    /// bf16 as stored (memory-mapped, no copy) when the checkpoint is bf16; converted otherwise.
    /// Runs the SIMD matmul kernels.
    Bf16,
    /// Symmetric int8 in blocks of 64 along the input, quantized at load (embeddings stay bf16),
    /// or used in place from an int8 checkpoint (`gattn-cpu quantize`). Runs the SIMD (VNNI) kernels.
    Int8,
}

impl WeightFormat {
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::F32 => "f32",
            WeightFormat::Bf16 => "bf16",
            WeightFormat::Int8 => "int8",
        }
    }

    pub fn parse(s: &str) -> Option<WeightFormat> {
        match s {
            "f32" => Some(WeightFormat::F32),
            "bf16" => Some(WeightFormat::Bf16),
            "int8" => Some(WeightFormat::Int8),
            _ => None,
        }
    }

    /// What a model loads with when no format is asked for (`--weights auto`): the checkpoint's
    /// own precision where a SIMD kernel takes it as stored (int8 of `gattn-cpu quantize`, bf16
    /// used in place), else the f32 reference.
    pub fn native_to(config: &Qwen3Config, checkpoint: &Checkpoint) -> WeightFormat {
        if config.quantized_int8 {
            return WeightFormat::Int8;
        }
        match checkpoint.view("model.layers.0.mlp.down_proj.weight") {
            Ok(view) if view.dtype == DType::BF16 => WeightFormat::Bf16,
            _ => WeightFormat::F32,
        }
    }
}

/// A `[rows, cols]` row-major weight matrix, shared cheaply (a tied lm_head is the embedding).
#[derive(Debug, Clone)]
pub enum WeightData {
    F32(Arc<Vec<f32>>),
    /// Points into the memory-mapped checkpoint.
    Bf16Mapped(MappedTensor),
    Bf16Owned(Arc<Vec<bf16>>),
    /// Quantized at load; row lookups (embeddings) are not supported on it.
    Int8(Arc<Q8Matrix<'static>>),
    /// Stored int8 (an int8 checkpoint), used in place from the memory map.
    Int8Mapped(Arc<MappedQ8>),
}

impl WeightData {
    pub fn bytes(&self) -> usize {
        match self {
            WeightData::F32(w) => w.len() * 4,
            WeightData::Bf16Mapped(m) => m.bytes().len(),
            WeightData::Bf16Owned(w) => w.len() * 2,
            WeightData::Int8(q) => q.bytes(),
            WeightData::Int8Mapped(q) => q.bytes(),
        }
    }

    pub fn is_mapped(&self) -> bool {
        matches!(self, WeightData::Bf16Mapped(_) | WeightData::Int8Mapped(_))
    }

    fn bf16_slice(&self) -> Option<&[bf16]> {
        match self {
            WeightData::Bf16Mapped(m) => m.as_bf16_slice(),
            WeightData::Bf16Owned(w) => Some(w),
            WeightData::F32(_) | WeightData::Int8(_) | WeightData::Int8Mapped(_) => None,
        }
    }

    /// Row `r` (of length `cols`) widened to f32.
    pub fn row_f32(&self, r: usize, cols: usize, out: &mut [f32]) {
        match self {
            WeightData::F32(w) => out.copy_from_slice(&w[r * cols..][..cols]),
            WeightData::Int8(_) | WeightData::Int8Mapped(_) => {
                unreachable!("embeddings are never held as int8")
            }
            _ => {
                let w = self.bf16_slice().expect("bf16 storage");
                for (o, v) in out.iter_mut().zip(&w[r * cols..][..cols]) {
                    *o = v.to_f32();
                }
            }
        }
    }
}

/// Loads tensor `name`, checks it is `[rows, cols]` (or `[rows]` if `cols` is None), in `format`.
/// In an int8 checkpoint, `Int8` reads the stored parts of `name` in place (see `q8_checkpoint`).
pub fn load_matrix(
    checkpoint: &Checkpoint,
    name: &str,
    shape: &[usize],
    format: WeightFormat,
) -> Result<WeightData> {
    if format == WeightFormat::Int8
        && checkpoint
            .metadata()
            .contains_key(q8_checkpoint::FORMAT_KEY)
    {
        let (rows, cols) = (shape[0], shape.get(1).copied().unwrap_or(1));
        let mapped = MappedQ8::load(checkpoint, name, rows, cols)?;
        return Ok(WeightData::Int8Mapped(Arc::new(mapped)));
    }
    let view = checkpoint.view(name)?;
    view.expect_shape(shape)?;
    Ok(match format {
        WeightFormat::F32 => WeightData::F32(Arc::new(view.to_f32_vec()?)),
        WeightFormat::Int8 => {
            let (rows, cols) = (shape[0], shape.get(1).copied().unwrap_or(1));
            let q = match view.as_bf16_slice() {
                Some(w) => Q8Matrix::quantize_bf16(w, rows, cols),
                None => Q8Matrix::quantize_f32(&view.to_f32_vec()?, rows, cols),
            }
            .map_err(|e| ModelError::InvalidArgument(format!("cannot quantize {name}: {e}")))?;
            WeightData::Int8(Arc::new(q))
        }
        WeightFormat::Bf16 => {
            let mapped = checkpoint.mapped(name)?;
            if mapped.dtype == DType::BF16 && mapped.as_bf16_slice().is_some() {
                WeightData::Bf16Mapped(mapped)
            } else {
                let values = view.to_f32_vec()?;
                WeightData::Bf16Owned(Arc::new(values.into_iter().map(bf16::from_f32).collect()))
            }
        }
    })
}

/// A 1-D tensor (norm weights, biases), always in f32.
pub fn load_vector(checkpoint: &Checkpoint, name: &str, len: usize) -> Result<Vec<f32>> {
    let view = checkpoint.view(name)?;
    view.expect_shape(&[len])?;
    Ok(view.to_f32_vec()?)
}

/// A linear layer's weights as the SIMD kernels take them: borrowed in place, or for a stored
/// int8 checkpoint a view over the memory map (cheap: built on each call).
enum SimdWeights<'a> {
    InPlace(WeightMatrix<'a>),
    MappedInt8(Q8Matrix<'a>),
}

impl SimdWeights<'_> {
    fn matrix(&self) -> WeightMatrix<'_> {
        match self {
            SimdWeights::InPlace(w) => *w,
            SimdWeights::MappedInt8(q) => WeightMatrix::int8(q),
        }
    }
}

/// `y = x W^T + b` with W `[out_features, in_features]`, as PyTorch's `nn.Linear`.
#[derive(Debug, Clone)]
pub struct Linear {
    pub weight: WeightData,
    pub bias: Option<Vec<f32>>,
    pub in_features: usize,
    pub out_features: usize,
}

impl Linear {
    /// Loads `{prefix}.weight` `[out, in]` and, if `with_bias`, `{prefix}.bias` `[out]`.
    pub fn load(
        checkpoint: &Checkpoint,
        prefix: &str,
        in_features: usize,
        out_features: usize,
        with_bias: bool,
        format: WeightFormat,
    ) -> Result<Linear> {
        let weight = load_matrix(
            checkpoint,
            &format!("{prefix}.weight"),
            &[out_features, in_features],
            format,
        )?;
        let bias = if with_bias {
            Some(load_vector(
                checkpoint,
                &format!("{prefix}.bias"),
                out_features,
            )?)
        } else {
            None
        };
        Ok(Linear {
            weight,
            bias,
            in_features,
            out_features,
        })
    }

    /// The weights as the SIMD kernels take them.
    fn simd_weights(&self) -> Result<SimdWeights<'_>> {
        let (k, m) = (self.in_features, self.out_features);
        Ok(match &self.weight {
            WeightData::F32(w) => SimdWeights::InPlace(WeightMatrix::f32(w, m, k)?),
            WeightData::Int8(q) => SimdWeights::InPlace(WeightMatrix::int8(q)),
            WeightData::Int8Mapped(q) => SimdWeights::MappedInt8(q.matrix()?),
            other => SimdWeights::InPlace(WeightMatrix::bf16(
                other.bf16_slice().expect("bf16 storage"),
                m,
                k,
            )?),
        })
    }

    /// x: `[n, in_features]` -> y: `[n, out_features]`, by the SIMD kernels or the naive loops.
    pub fn forward(&self, x: &[f32], n: usize, y: &mut [f32], backend: Backend) -> Result<()> {
        let bias = self.bias.as_deref();
        match backend {
            Backend::Fast => matmul::matmul(&self.simd_weights()?.matrix(), x, bias, y)?,
            Backend::Reference => self.forward_reference(x, n, y)?,
        }
        Ok(())
    }

    /// The oracle: `reference::matmul_*` over the weights as stored.
    fn forward_reference(&self, x: &[f32], n: usize, y: &mut [f32]) -> Result<()> {
        let bias = self.bias.as_deref();
        let (k, m) = (self.in_features, self.out_features);
        match &self.weight {
            WeightData::F32(w) => reference::matmul_f32(x, w, bias, n, k, m, y),
            WeightData::Int8(q) => reference::matmul_int8(x, q, bias, n, y),
            WeightData::Int8Mapped(q) => reference::matmul_int8(x, &q.matrix()?, bias, n, y),
            other => {
                let w = other.bf16_slice().expect("bf16 storage");
                reference::matmul_bf16(x, w, bias, n, k, m, y)
            }
        }
        Ok(())
    }

    /// Several linears of the same input (q, k, v): on the fast backend one read of x and one
    /// parallel pass over all their weights. `ys[i]` is `[n, linears[i].out_features]`.
    pub fn forward_shared_input<const N: usize>(
        linears: &[&Linear; N],
        x: &[f32],
        n: usize,
        ys: &mut [&mut [f32]; N],
        backend: Backend,
    ) -> Result<()> {
        if backend == Backend::Reference {
            for (linear, y) in linears.iter().zip(ys.iter_mut()) {
                linear.forward_reference(x, n, y)?;
            }
            return Ok(());
        }
        // Arrays, not Vecs: a decode step allocates nothing.
        let results = linears.map(Linear::simd_weights);
        if results.iter().any(Result::is_err) {
            return Err(results.into_iter().find_map(Result::err).expect("an error"));
        }
        let weights = results.map(|w| w.expect("no error"));
        let matrices: [_; N] =
            std::array::from_fn(|i| (weights[i].matrix(), linears[i].bias.as_deref()));
        matmul::matmul_shared_input(&matrices, x, ys)?;
        Ok(())
    }

    /// The MLP's first half, `y = silu(x gate^T) * (x up^T)` `[n, out_features]`: fused on the
    /// fast backend (both products combined while in cache); the reference computes them apart,
    /// using `up_scratch`.
    pub fn gate_up_silu(
        gate: &Linear,
        up: &Linear,
        x: &[f32],
        n: usize,
        y: &mut [f32],
        backend: Backend,
        up_scratch: &mut Vec<f32>,
    ) -> Result<()> {
        let fused = backend == Backend::Fast && gate.bias.is_none() && up.bias.is_none();
        if fused {
            let (g, u) = (gate.simd_weights()?, up.simd_weights()?);
            matmul::gate_up_silu(&g.matrix(), &u.matrix(), x, y)?;
            return Ok(());
        }
        let up_out = crate::scratch::sized(up_scratch, y.len());
        gate.forward(x, n, y, backend)?;
        up.forward(x, n, up_out, backend)?;
        for (g, u) in y.iter_mut().zip(up_out.iter()) {
            *g = reference::silu(*g) * u;
        }
        Ok(())
    }

    pub fn bytes(&self) -> usize {
        self.weight.bytes() + self.bias.as_ref().map_or(0, |b| b.len() * 4)
    }
}
