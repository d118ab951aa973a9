//! Shared shape strategy and data generation of the matmul proptests (included by `#[path]`).
#![allow(dead_code)]

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[path = "../checks/mod.rs"]
mod checks;
#[allow(unused_imports)] // each test file uses a part
pub use checks::{Feature, current_test, feature_or_skip, max_abs_diff, tables_under_test};

#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub seed: u64,
}

/// m = 1 often (decode); k small, ragged (not a multiple of 32) or Qwen3-1.7B sized (2048);
/// n odd or not, wide enough for several parallel jobs and partial 16-row groups.
pub fn shapes() -> impl Strategy<Value = Shape> {
    let m = prop_oneof![4 => Just(1usize), 4 => 2usize..=14, 1 => Just(31usize)];
    let k = prop_oneof![5 => 1usize..=100, 3 => 100usize..=600, 1 => Just(2048usize), 1 => Just(2048usize + 17)];
    let n = prop_oneof![5 => 1usize..=80, 1 => 150usize..=300];
    (m, k, n, any::<u64>()).prop_map(|(m, k, n, seed)| Shape { m, k, n, seed })
}

/// Values in [-scale, scale), with a few outliers 8x larger (as LLM activations have).
pub fn values(len: usize, scale: f32, rng: &mut StdRng) -> Vec<f32> {
    (0..len)
        .map(|_| {
            let v = rng.random_range(-scale..scale);
            if rng.random_range(0..64) == 0 {
                v * 8.0
            } else {
                v
            }
        })
        .collect()
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// `sum_i |x_i w_i|` per output: the scale of the accumulation-order error.
pub fn abs_dot(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|c| (x[i * k + c] * w[j * k + c]).abs()).sum();
        }
    }
    out
}

/// Bound on the difference of two f32 sums of the same k terms in different orders.
pub fn order_tolerance(k: usize, abs_sum: f32) -> f32 {
    2.0 * k as f32 * f32::EPSILON * abs_sum + 1e-6
}

/// The scalar kernels (every CPU has them).
pub fn scalar() -> &'static gattn_kernels::dispatch::KernelTable {
    gattn_kernels::dispatch::KernelTable::for_level(gattn_kernels::SimdLevel::Scalar)
        .expect("scalar is always supported")
}
