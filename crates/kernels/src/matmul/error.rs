//! Typed errors of the matmul entry points and of the int8 on-disk format.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MatmulError {
    #[error("{what} has {got} elements, expected {expected}")]
    Length {
        what: &'static str,
        got: usize,
        expected: usize,
    },
    #[error("x has {len} elements, not a multiple of k = {k}")]
    RaggedInput { len: usize, k: usize },
    #[error("fused matmul: {what}")]
    Fusion { what: String },
    #[error("weight shape {n} x {k} is empty or too large")]
    BadShape { n: usize, k: usize },
}

/// Why a stored int8 matrix cannot be used as-is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Q8FormatError {
    #[error("int8 weights of a {n} x {k} matrix need {expected} bytes, got {got}")]
    WeightBytes {
        n: usize,
        k: usize,
        expected: usize,
        got: usize,
    },
    #[error("int8 scales of a {n} x {k} matrix need {expected} bytes, got {got}")]
    ScaleBytes {
        n: usize,
        k: usize,
        expected: usize,
        got: usize,
    },
    #[error("weight shape {n} x {k} is empty or too large")]
    BadShape { n: usize, k: usize },
}
