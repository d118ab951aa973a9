//! The fused entry points equal their unfused pieces, at every supported SIMD level (and with
//! the AMX int8 mat-mat on bf16 tiles, `GATTN_AMX_INT8=bf16`, where AMX is present).

#[path = "matmul_common/mod.rs"]
mod common;

use common::{order_tolerance, rng, scalar, shapes, tables_under_test, values};
use gattn_kernels::matmul::{
    KernelTable, MatmulError, Q8Matrix, WeightMatrix, gate_up_silu_at, matmul_at,
    matmul_shared_input_at,
};
use gattn_kernels::reference::activations::silu;
use half::bf16;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn shared_input_equals_separate_matmuls(shape in shapes(), n2 in 1usize..50) {
        let common::Shape { m, k, n, seed } = shape;
        let mut rng = rng(seed);
        let x = values(m * k, 1.0, &mut rng);
        let wq = values(n * k, 0.5, &mut rng);
        let wk = values(n2 * k, 0.5, &mut rng);
        let wv: Vec<bf16> = values(n * k, 0.5, &mut rng).into_iter().map(bf16::from_f32).collect();
        let q8 = Q8Matrix::quantize_f32(&wk, n2, k).unwrap();
        let ws = [
            WeightMatrix::f32(&wq, n, k).unwrap(),
            WeightMatrix::int8(&q8),
            WeightMatrix::bf16(&wv, n, k).unwrap(),
        ];
        // q and v with a bias (qkv_bias checkpoints), k without.
        let biases = [Some(values(n, 1.0, &mut rng)), None, Some(values(n, 1.0, &mut rng))];
        for table in tables_under_test().iter().chain(KernelTable::amx_int8_on_bf16()) {
            let mut fused: Vec<Vec<f32>> = ws.iter().map(|w| vec![f32::NAN; m * w.n()]).collect();
            let mut outs: Vec<&mut [f32]> = fused.iter_mut().map(|v| v.as_mut_slice()).collect();
            let with_bias: Vec<_> = ws.iter().zip(&biases).map(|(w, b)| (*w, b.as_deref())).collect();
            matmul_shared_input_at(table, &with_bias, &x, &mut outs).unwrap();
            for ((w, bias), got) in ws.iter().zip(&biases).zip(&fused) {
                let mut alone = vec![0.0; m * w.n()];
                matmul_at(table, w, &x, bias.as_deref(), &mut alone).unwrap();
                // Same kernels, same blocks: bit-identical.
                prop_assert_eq!(got, &alone, "{} m={} k={} n={}", table, m, k, w.n());
            }
        }
    }

    #[test]
    fn gate_up_silu_equals_silu_gate_times_up(shape in shapes(), format in 0u8..3) {
        let common::Shape { m, k, n, seed } = shape;
        let mut rng = rng(seed);
        let x = values(m * k, 1.0, &mut rng);
        let wg = values(n * k, 0.5, &mut rng);
        let wu = values(n * k, 0.5, &mut rng);
        let (qg, qu) = (Q8Matrix::quantize_f32(&wg, n, k).unwrap(), Q8Matrix::quantize_f32(&wu, n, k).unwrap());
        let to_bf16 = |w: &[f32]| w.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<bf16>>();
        let (bg, bu) = (to_bf16(&wg), to_bf16(&wu));
        // f32, int8 and bf16 weights (the three formats an MLP loads).
        let (gate, up) = match format {
            0 => (WeightMatrix::f32(&wg, n, k).unwrap(), WeightMatrix::f32(&wu, n, k).unwrap()),
            1 => (WeightMatrix::int8(&qg), WeightMatrix::int8(&qu)),
            _ => (WeightMatrix::bf16(&bg, n, k).unwrap(), WeightMatrix::bf16(&bu, n, k).unwrap()),
        };
        for table in tables_under_test().iter().chain(KernelTable::amx_int8_on_bf16()) {
            let (mut g, mut u, mut y) = (vec![0.0; m * n], vec![0.0; m * n], vec![f32::NAN; m * n]);
            matmul_at(table, &gate, &x, None, &mut g).unwrap();
            matmul_at(table, &up, &x, None, &mut u).unwrap();
            gate_up_silu_at(table, &gate, &up, &x, &mut y).unwrap();
            for i in 0..m * n {
                let expected = silu(g[i]) * u[i];
                let tol = order_tolerance(4, expected.abs());
                prop_assert!((y[i] - expected).abs() <= tol,
                    "{table} m={m} k={k} n={n} at {i}: {} vs {expected}", y[i]);
            }
        }
    }
}

#[test]
fn fusion_shape_mismatches_are_errors() {
    let a = vec![0.0f32; 4 * 8];
    let b = vec![0.0f32; 4 * 6];
    let wa = WeightMatrix::f32(&a, 4, 8).unwrap();
    let wb = WeightMatrix::f32(&b, 4, 6).unwrap();
    let mut y = vec![0.0; 4];
    assert!(matches!(
        gate_up_silu_at(scalar(), &wa, &wb, &[0.0; 8], &mut y),
        Err(MatmulError::Fusion { .. })
    ));
    let (mut y1, mut y2) = (vec![0.0; 4], vec![0.0; 4]);
    let fusion_error = |result: Result<(), MatmulError>| match result {
        Err(MatmulError::Fusion { what }) => what,
        other => panic!("expected a fusion error, got {other:?}"),
    };
    let what = fusion_error(matmul_shared_input_at(
        scalar(),
        &[(wa, None), (wb, None)],
        &[0.0; 8],
        &mut [&mut y1, &mut y2],
    ));
    assert!(what.contains("input sizes differ: 8 and 6"), "{what}");
    let what = fusion_error(matmul_shared_input_at(
        scalar(),
        &[(wa, None)],
        &[0.0; 8],
        &mut [&mut y1, &mut y2],
    ));
    assert!(what.contains("1 weight matrices but 2 outputs"), "{what}");
}
