//! Fast matrix-vector and matrix-matrix kernels (f32, bf16, int8). See issue 3.
