//! f32 and bf16 matmuls at every supported SIMD level against the naive references.

#[path = "matmul_common/mod.rs"]
mod common;

use common::{abs_dot, order_tolerance, rng, shapes, values};
use gattn_kernels::SimdLevel;
use gattn_kernels::matmul::{MatmulError, WeightMatrix, matmul_at};
use gattn_kernels::reference::matmul::{matmul_bf16, matmul_f32};
use half::bf16;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn f32_matches_reference_at_every_level(shape in shapes(), with_bias: bool) {
        let common::Shape { m, k, n, seed } = shape;
        let mut rng = rng(seed);
        let x = values(m * k, 1.0, &mut rng);
        let w = values(n * k, 0.5, &mut rng);
        let bias = with_bias.then(|| values(n, 1.0, &mut rng));
        let mut expected = vec![0.0; m * n];
        matmul_f32(&x, &w, bias.as_deref(), m, k, n, &mut expected);
        let scale = abs_dot(&x, &w, m, k, n);
        let weights = WeightMatrix::f32(&w, n, k).unwrap();
        for level in SimdLevel::all_supported() {
            let mut y = vec![f32::NAN; m * n];
            matmul_at(level, &weights, &x, bias.as_deref(), &mut y).unwrap();
            for i in 0..m * n {
                let tol = order_tolerance(k, scale[i]);
                prop_assert!((y[i] - expected[i]).abs() <= tol,
                    "{level} m={m} k={k} n={n} at {i}: {} vs {} (tol {tol})", y[i], expected[i]);
            }
        }
    }

    #[test]
    fn bf16_matches_reference_at_every_level(shape in shapes()) {
        let common::Shape { m, k, n, seed } = shape;
        let mut rng = rng(seed);
        let x = values(m * k, 1.0, &mut rng);
        let w: Vec<bf16> = values(n * k, 0.5, &mut rng).into_iter().map(bf16::from_f32).collect();
        let w_f32: Vec<f32> = w.iter().map(|v| v.to_f32()).collect();
        let mut expected = vec![0.0; m * n];
        matmul_bf16(&x, &w, None, m, k, n, &mut expected);
        let scale = abs_dot(&x, &w_f32, m, k, n);
        let weights = WeightMatrix::bf16(&w, n, k).unwrap();
        for level in SimdLevel::all_supported() {
            let mut y = vec![f32::NAN; m * n];
            matmul_at(level, &weights, &x, None, &mut y).unwrap();
            for i in 0..m * n {
                let tol = order_tolerance(k, scale[i]);
                prop_assert!((y[i] - expected[i]).abs() <= tol,
                    "{level} m={m} k={k} n={n} at {i}: {} vs {} (tol {tol})", y[i], expected[i]);
            }
        }
    }
}

#[test]
fn shape_errors_are_reported_not_panicked() {
    let w = vec![0.0f32; 6];
    assert!(matches!(
        WeightMatrix::f32(&w, 4, 2),
        Err(MatmulError::Length { .. })
    ));
    let weights = WeightMatrix::f32(&w, 3, 2).unwrap();
    let mut y = vec![0.0; 3];
    assert!(matches!(
        matmul_at(SimdLevel::Scalar, &weights, &[1.0; 3], None, &mut y),
        Err(MatmulError::RaggedInput { .. })
    ));
    let mut y_short = vec![0.0; 2];
    assert!(matmul_at(SimdLevel::Scalar, &weights, &[1.0; 2], None, &mut y_short).is_err());
    assert!(
        matmul_at(
            SimdLevel::Scalar,
            &weights,
            &[1.0; 2],
            Some(&[0.0; 2]),
            &mut y
        )
        .is_err()
    );
    assert!(
        matmul_at(
            SimdLevel::Scalar,
            &weights,
            &[1.0; 2],
            Some(&[0.5; 3]),
            &mut y
        )
        .is_ok()
    );
    assert_eq!(y, vec![0.5; 3]);
}
