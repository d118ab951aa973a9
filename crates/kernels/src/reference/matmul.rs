//! `y = x W^T (+ b)`: the linear layer as PyTorch lays it out, W is `[out_features, in_features]`.

use half::bf16;

/// x: `[m, k]`, w: `[n, k]` row-major, bias: `[n]`; y: `[m, n]`. Accumulates in f32 in index
/// order; fast kernels differ from it only by accumulation order.
pub fn matmul_f32(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    m: usize,
    k: usize,
    n: usize,
    y: &mut [f32],
) {
    assert_eq!(x.len(), m * k, "x must be [m, k]");
    assert_eq!(w.len(), n * k, "w must be [n, k]");
    assert_eq!(y.len(), m * n, "y must be [m, n]");
    for row in 0..m {
        let x_row = &x[row * k..(row + 1) * k];
        for col in 0..n {
            let w_row = &w[col * k..(col + 1) * k];
            let mut acc = 0.0f32;
            for i in 0..k {
                acc += x_row[i] * w_row[i];
            }
            y[row * n + col] = acc + bias.map_or(0.0, |b| b[col]);
        }
    }
}

/// As [`matmul_f32`] with bf16 weights widened to f32 on the fly.
pub fn matmul_bf16(
    x: &[f32],
    w: &[bf16],
    bias: Option<&[f32]>,
    m: usize,
    k: usize,
    n: usize,
    y: &mut [f32],
) {
    assert_eq!(x.len(), m * k, "x must be [m, k]");
    assert_eq!(w.len(), n * k, "w must be [n, k]");
    assert_eq!(y.len(), m * n, "y must be [m, n]");
    for row in 0..m {
        let x_row = &x[row * k..(row + 1) * k];
        for col in 0..n {
            let w_row = &w[col * k..(col + 1) * k];
            let mut acc = 0.0f32;
            for i in 0..k {
                acc += x_row[i] * w_row[i].to_f32();
            }
            y[row * n + col] = acc + bias.map_or(0.0, |b| b[col]);
        }
    }
}

/// As [`matmul_f32`] with int8 block weights, each row dequantized (`q * scale`) before its
/// dot products; the activations stay f32 (the int8 kernels round them to int8 too).
pub fn matmul_int8(
    x: &[f32],
    w: &crate::matmul::Q8Matrix<'_>,
    bias: Option<&[f32]>,
    m: usize,
    y: &mut [f32],
) {
    let (n, k) = (w.n(), w.k());
    assert_eq!(x.len(), m * k, "x must be [m, k]");
    assert_eq!(y.len(), m * n, "y must be [m, n]");
    let mut w_row = vec![0.0f32; k];
    for col in 0..n {
        for (i, v) in w_row.iter_mut().enumerate() {
            let (q, scale) = w.get(col, i);
            *v = q as f32 * scale;
        }
        for row in 0..m {
            let x_row = &x[row * k..(row + 1) * k];
            let mut acc = 0.0f32;
            for i in 0..k {
                acc += x_row[i] * w_row[i];
            }
            y[row * n + col] = acc + bias.map_or(0.0, |b| b[col]);
        }
    }
}
