//! The fast RMSNorm equals the reference at every supported SIMD level (up to the order of the
//! sum of squares).

#[path = "checks/mod.rs"]
mod checks;

use checks::levels_under_test;
use gattn_kernels::norm::rms_norm_in_place;
use gattn_kernels::reference;
use proptest::prelude::*;

fn check(x: &[f32], weight: &[f32], eps: f32) -> Result<(), TestCaseError> {
    let mut want = vec![0.0; x.len()];
    reference::rms_norm(x, weight, eps, &mut want);
    for level in levels_under_test() {
        let mut got = x.to_vec();
        rms_norm_in_place(level, &mut got, weight, eps);
        for (i, (&y, &w)) in got.iter().zip(&want).enumerate() {
            // Summation order moves inv_rms by a few ulps (relative ~1e-7 x log n).
            let tolerance = 4e-6 * w.abs() + 1e-30;
            prop_assert!(
                (y - w).abs() <= tolerance,
                "{level}: n={} element {i}: want {w}, got {y}",
                x.len()
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Lengths from 1 (all tail) to past Qwen3-1.7B's hidden size, per-head sizes among them.
    #[test]
    fn rms_norm_equals_reference(
        x in prop::collection::vec(-50.0f32..50.0, 1..2100),
        weight_seed in 0u32..1000,
        eps in prop_oneof![Just(1e-6f32), Just(1e-5f32), 1e-7f32..1e-2],
    ) {
        let weight: Vec<f32> = (0..x.len())
            .map(|i| ((i as u32 * 7 + weight_seed) % 23) as f32 / 11.0 - 1.0)
            .collect();
        check(&x, &weight, eps)?;
    }
}

#[test]
fn zero_vector_is_zero_not_nan() {
    for level in levels_under_test() {
        let mut x = vec![0.0f32; 130];
        rms_norm_in_place(level, &mut x, &vec![1.0; 130], 1e-6);
        assert!(x.iter().all(|&v| v == 0.0), "{level}");
    }
}
