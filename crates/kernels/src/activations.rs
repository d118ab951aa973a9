//! Fast elementwise activations (pulp, every SIMD level), checked against `reference::activations`.

use pulp::{Simd, WithSimd};

use crate::SimdLevel;
use crate::dispatch::run_at;
use crate::simd_math::exp_nonpositive;

/// `up[i] = silu(gate[i]) * up[i]`: the SwiGLU combine of the MLP, in place on `up`.
///
/// `silu(g) = g * sigmoid(g)` with `sigmoid` from `e = exp(-|g|)` (never overflows):
/// `1 / (1 + e)` for `g >= 0`, `e / (1 + e)` below.
pub fn silu_mul_in_place(level: SimdLevel, gate: &[f32], up: &mut [f32]) {
    assert_eq!(
        gate.len(),
        up.len(),
        "silu_mul_in_place: gate and up lengths differ"
    );
    run_at(level, SiluMul { gate, up });
}

struct SiluMul<'a> {
    gate: &'a [f32],
    up: &'a mut [f32],
}

impl WithSimd for SiluMul<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let (gate_body, gate_tail) = S::as_simd_f32s(self.gate);
        let (up_body, up_tail) = S::as_mut_simd_f32s(self.up);
        for (u, &g) in up_body.iter_mut().zip(gate_body) {
            *u = simd.mul_f32s(*u, silu(simd, g));
        }
        for (u, &g) in up_tail.iter_mut().zip(gate_tail) {
            *u *= simd.reduce_max_f32s(silu(simd, simd.splat_f32s(g)));
        }
    }
}

#[inline(always)]
fn silu<S: Simd>(simd: S, g: S::f32s) -> S::f32s {
    let e = exp_nonpositive(simd, simd.neg_f32s(simd.abs_f32s(g)));
    let one = simd.splat_f32s(1.0);
    let denominator = simd.add_f32s(one, e);
    let numerator = simd.select_f32s(simd.less_than_f32s(g, simd.splat_f32s(0.0)), e, one);
    simd.mul_f32s(g, simd.div_f32s(numerator, denominator))
}
