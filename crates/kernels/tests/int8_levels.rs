//! int8 weights give the same bits with every kernel table (every SIMD level, AMX or not): every level rounds the activations with
//! one rule, sums each block of 64 in integers (exact) and folds the blocks in with the same
//! fused multiply-add, in the same order.

#[path = "matmul_common/mod.rs"]
mod common;

use common::{rng, tables_under_test, values};
use gattn_kernels::matmul::{Q8Matrix, WeightMatrix, matmul_at};
use gattn_kernels::{KernelTable, SimdLevel};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// One token (the mat-vec) and chunks of tokens (the mat-mat, AMX tiles where present).
    #[test]
    fn int8_matmul_is_bit_identical_at_every_level(
        m in prop_oneof![Just(1usize), 2usize..=40],
        k in 1usize..=300,
        n in 1usize..=70,
        seed: u64,
    ) {
        let mut rng = rng(seed);
        let w = values(n * k, 1.0, &mut rng);
        let x = values(m * k, 3.0, &mut rng);
        let bias = values(n, 0.5, &mut rng);
        let q = Q8Matrix::quantize_f32(&w, n, k).unwrap();
        let weights = WeightMatrix::int8(&q);
        let run = |table: &KernelTable| {
            let mut y = vec![f32::NAN; m * n];
            matmul_at(table, &weights, &x, Some(&bias), &mut y).unwrap();
            y.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
        };
        let scalar = run(KernelTable::for_level(SimdLevel::Scalar).unwrap());
        for table in tables_under_test() {
            prop_assert_eq!(&run(table), &scalar, "{} differs from scalar", table);
        }
    }
}
