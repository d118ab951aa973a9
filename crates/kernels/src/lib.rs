//! The hot kernels of gattn-cpu, and the naive references they are checked against.
//!
//! - `reference`: plain, obviously-correct f32 loops. The reference forward pass uses only these,
//!   and every fast kernel has a proptest comparing it with its reference.
//! - `dispatch`: the one place that decides, once at start-up, which SIMD level runs, and the
//!   kernel table resolved for it (which kernel runs each operation).
//! - `matmul`, `attention`, `activations`, `norm`: the fast kernels (microkernels, packing/blocking
//!   and dispatch kept apart).
//! - `parallel`: the kernels' parallel loops, and the spinning team a decode step runs them on.
//! - `bandwidth`: the read-bandwidth probe that speeds are reported against (the roofline);
//!   `matrix_peak`: the peak of the instruction attention multiplies with (AMX tiles or the
//!   level's f32 FMA) that its FLOP rate is reported against.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod activations;
mod aligned;
pub mod attention;
pub mod bandwidth;
pub mod dispatch;
mod fixed_sum;
pub mod matmul;
pub mod matrix_peak;
pub mod norm;
pub mod parallel;
pub mod reference;
mod simd_math;
mod word_dots;

pub use dispatch::{KernelTable, SimdLevel};
