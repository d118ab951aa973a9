//! f32 and bf16 matmuls at every supported SIMD level against the naive references.

#[path = "matmul_common/mod.rs"]
mod common;

use common::{abs_dot, order_tolerance, rng, scalar, shapes, tables_under_test, values};
use gattn_kernels::dispatch::KernelTable;
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
        for table in tables_under_test() {
            let mut y = vec![f32::NAN; m * n];
            matmul_at(table, &weights, &x, bias.as_deref(), &mut y).unwrap();
            for i in 0..m * n {
                let tol = order_tolerance(k, scale[i]);
                prop_assert!((y[i] - expected[i]).abs() <= tol,
                    "{table} m={m} k={k} n={n} at {i}: {} vs {} (tol {tol})", y[i], expected[i]);
            }
        }
    }

    #[test]
    fn bf16_matches_reference_at_every_level(shape in shapes()) {
        let common::Shape { m, k, n, seed } = shape;
        let mut rng = rng(seed);
        let x = values(m * k, 1.0, &mut rng);
        let w: Vec<bf16> = values(n * k, 0.5, &mut rng).into_iter().map(bf16::from_f32).collect();
        for table in tables_under_test() {
            check_bf16(table, &x, &w, m, k, n)?;
        }
    }

    /// The dot-product kernel's tails: token tiles of 6 (m = 2..13), 4-row tiles (odd n) and
    /// k not a multiple of 32, with the table that runs it.
    #[test]
    fn bf16_dot_kernel_tails(m in 2usize..=13, k in 1usize..=200, n in 1usize..=40, seed: u64) {
        let mut rng = rng(seed);
        let x = values(m * k, 1.0, &mut rng);
        let w: Vec<bf16> = values(n * k, 0.5, &mut rng).into_iter().map(bf16::from_f32).collect();
        for table in tables_under_test() {
            check_bf16(table, &x, &w, m, k, n)?;
        }
    }

    /// The AMX tile kernel's shapes (in the AMX table: k a multiple of 32, m > 1): several pairs
    /// of 16-token tiles and a ragged last one, strips of 32 rows with a short last strip.
    #[test]
    fn bf16_amx_tiles(m in 2usize..=80, k32 in 1usize..=24, n in 1usize..=100, seed: u64) {
        let k = 32 * k32;
        let mut rng = rng(seed);
        let x = values(m * k, 1.0, &mut rng);
        let w: Vec<bf16> = values(n * k, 0.5, &mut rng).into_iter().map(bf16::from_f32).collect();
        for table in tables_under_test() {
            check_bf16(table, &x, &w, m, k, n)?;
        }
    }
}

/// bf16 weights with `table`'s kernels against the reference. Where the table rounds the
/// activations to bf16 (AVX512-BF16), against the reference on the rounded x within the
/// accumulation-order tolerance, and against f32 x within what rounding x implies: each
/// |x - round(x)| <= 2^-8 |x|, so the sums differ by at most 2^-8 sum |x w|.
fn check_bf16(
    table: &KernelTable,
    x: &[f32],
    w: &[bf16],
    m: usize,
    k: usize,
    n: usize,
) -> Result<(), TestCaseError> {
    let w_f32: Vec<f32> = w.iter().map(|v| v.to_f32()).collect();
    let scale = abs_dot(x, &w_f32, m, k, n);
    let weights = WeightMatrix::bf16(w, n, k).unwrap();
    let mut y = vec![f32::NAN; m * n];
    matmul_at(table, &weights, x, None, &mut y).unwrap();
    let mut exact_x = vec![0.0; m * n];
    matmul_bf16(x, w, None, m, k, n, &mut exact_x);
    let rounds = table.bf16_rounds_activations();
    let expected = if rounds {
        let x_rounded: Vec<f32> = x.iter().map(|v| bf16::from_f32(*v).to_f32()).collect();
        let mut e = vec![0.0; m * n];
        matmul_bf16(&x_rounded, w, None, m, k, n, &mut e);
        e
    } else {
        exact_x.clone()
    };
    for i in 0..m * n {
        let tol = order_tolerance(k, scale[i]);
        prop_assert!(
            (y[i] - expected[i]).abs() <= tol,
            "{table} m={m} k={k} n={n} at {i}: {} vs {} (tol {tol})",
            y[i],
            expected[i]
        );
        let rounding = scale[i] / 256.0 + tol;
        prop_assert!(
            (y[i] - exact_x[i]).abs() <= rounding,
            "{table} m={m} k={k} n={n} at {i}: {} vs f32-x {} (bound {rounding})",
            y[i],
            exact_x[i]
        );
    }
    Ok(())
}

/// The Qwen3-1.7B prefill shapes once each (the panel and k-block loops at full size).
#[test]
fn bf16_qwen3_shapes() {
    let mut rng = rng(17);
    for (m, k, n) in [(13, 2048, 2064), (7, 6144, 256), (200, 6144, 48)] {
        let x = values(m * k, 1.0, &mut rng);
        let w: Vec<bf16> = values(n * k, 0.5, &mut rng)
            .into_iter()
            .map(bf16::from_f32)
            .collect();
        for table in tables_under_test() {
            check_bf16(table, &x, &w, m, k, n).unwrap();
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
        matmul_at(scalar(), &weights, &[1.0; 3], None, &mut y),
        Err(MatmulError::RaggedInput { .. })
    ));
    let mut y_short = vec![0.0; 2];
    let err = matmul_at(scalar(), &weights, &[1.0; 2], None, &mut y_short).unwrap_err();
    assert!(
        matches!(
            err,
            MatmulError::Length {
                what: "y",
                got: 2,
                expected: 3
            }
        ),
        "{err}"
    );
    assert!(err.to_string().starts_with("y has 2 elements"), "{err}");
    let err = matmul_at(scalar(), &weights, &[1.0; 2], Some(&[0.0; 2]), &mut y).unwrap_err();
    assert!(
        matches!(
            err,
            MatmulError::Length {
                what: "bias",
                got: 2,
                expected: 3
            }
        ),
        "{err}"
    );
    assert!(err.to_string().starts_with("bias has 2 elements"), "{err}");
    assert!(matmul_at(scalar(), &weights, &[1.0; 2], Some(&[0.5; 3]), &mut y).is_ok());
    assert_eq!(y, vec![0.5; 3]);
}
