//! The fast SwiGLU combine equals the reference `silu(gate) * up` at every supported SIMD level.

#[path = "checks/mod.rs"]
mod checks;

use checks::levels_under_test;
use gattn_kernels::activations::silu_mul_in_place;
use gattn_kernels::reference::activations::silu;
use proptest::prelude::*;

fn check(gate: &[f32], up: &[f32]) -> Result<(), TestCaseError> {
    for level in levels_under_test() {
        let mut got = up.to_vec();
        silu_mul_in_place(level, gate, &mut got);
        for (i, ((&g, &u), &y)) in gate.iter().zip(up).zip(&got).enumerate() {
            let want = silu(g) * u;
            // The polynomial exp is good to ~1e-7 relative; the division adds an ulp or two.
            let tolerance = 1e-6 * want.abs() + 1e-30;
            prop_assert!(
                (y - want).abs() <= tolerance,
                "{level}: element {i}: silu({g}) * {u} = {want}, got {y}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Odd lengths leave a tail after the full vectors; values span where silu saturates.
    #[test]
    fn silu_mul_equals_reference(
        pairs in prop::collection::vec((-100.0f32..100.0, -10.0f32..10.0), 0..83)
    ) {
        let (gate, up): (Vec<f32>, Vec<f32>) = pairs.into_iter().unzip();
        check(&gate, &up)?;
    }
}

#[test]
fn silu_mul_handles_extremes() {
    let gate = [
        0.0,
        -0.0,
        1e-30,
        -1e-30,
        88.0,
        -88.0,
        1e4,
        -1e4,
        f32::MAX,
        f32::MIN,
    ];
    let up = [1.0; 10];
    check(&gate, &up).unwrap();
}
