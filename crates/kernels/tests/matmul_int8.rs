//! int8 weights x int8 activations at every supported SIMD level: exact against the integer
//! reference of the same quantized values, and within the bound the block scales imply against
//! the f32 reference of the original values. Plus the stored form round trip, and the AMX int8
//! mat-mat that widens the weights to bf16 (`GATTN_AMX_INT8=bf16`) against its own reference.

#[path = "matmul_common/mod.rs"]
mod common;

use common::{
    Feature, current_test, feature_or_skip, order_tolerance, rng, shapes, tables_under_test, values,
};
use gattn_kernels::matmul::{
    KernelTable, MatmulError, Q8FormatError, Q8Matrix, WeightMatrix, matmul_at,
    quantize_activations,
};
use gattn_kernels::reference::matmul::matmul_f32;
use half::bf16;
use proptest::prelude::*;

/// The int8 format's block (`layout::BLOCK`), restated: a change of the format shows here.
const BLOCK: usize = 64;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn int8_matches_quantized_reference_and_f32_bound(shape in shapes()) {
        let common::Shape { m, k, n, seed } = shape;
        check_int8(m, k, n, seed)?;
    }

    /// The AMX tile kernel's shapes (m > 1): several pairs of 16-token tiles and a ragged
    /// last one, pairs of 16-row groups and a single last group.
    #[test]
    fn int8_amx_tiles(m in 2usize..=80, k in 1usize..=400, n in 1usize..=100, seed: u64) {
        check_int8(m, k, n, seed)?;
    }

    /// The AVX2 tile kernel's tails: tokens not a multiple of its 4-token tile (the last tile
    /// runs a narrower kernel), n not a multiple of the 16-row group (zero rows past n), k not a
    /// multiple of the 64-value block (zero-padded last block); several column jobs (n > 32).
    #[test]
    fn int8_avx2_tiles_with_tails(
        tiles in 0usize..=7,
        extra_tokens in 1usize..=3,
        groups in 0usize..=6,
        extra_rows in 1usize..=15,
        blocks in 0usize..=4,
        extra_k in 1usize..=63,
        seed: u64,
    ) {
        let m = (4 * tiles + extra_tokens).max(2);
        let (n, k) = (16 * groups + extra_rows, 64 * blocks + extra_k);
        check_int8(m, k, n, seed)?;
    }

    /// The int8 mat-mat on bf16 tiles: pairs of 16-token tiles and a ragged last one, pairs of
    /// 16-row groups and an odd last one, k past the last 32- and 64-value step.
    #[test]
    fn int8_on_bf16_tiles(m in 2usize..=80, k in 1usize..=400, n in 1usize..=100, seed: u64) {
        check_int8_on_bf16(m, k, n, seed)?;
    }

    #[test]
    fn weight_quantization_error_is_within_half_a_scale(n in 1usize..40, k in 1usize..200, seed: u64) {
        let w = values(n * k, 2.0, &mut rng(seed));
        let q = Q8Matrix::quantize_f32(&w, n, k).unwrap();
        let back = q.dequantize();
        for row in 0..n {
            for col in 0..k {
                // The scale the format defines, computed here, not read back from `q`.
                let want_scale = block_scale(&w[row * k..(row + 1) * k], col);
                let (_, s) = q.get(row, col);
                prop_assert!((s - want_scale).abs() <= 1e-6 * want_scale, "({row}, {col}): scale {s}, want {want_scale}");
                let err = (w[row * k + col] - back[row * k + col]).abs();
                prop_assert!(err <= want_scale / 2.0 * 1.0001, "({row}, {col}): error {err} scale {want_scale}");
            }
        }
    }

    #[test]
    fn stored_parts_round_trip(n in 1usize..40, k in 1usize..100, seed: u64) {
        let w = values(n * k, 1.0, &mut rng(seed));
        let q = Q8Matrix::quantize_f32(&w, n, k).unwrap();
        let (packed, _) = q.to_parts();
        let scale_bytes = q.scale_bytes().to_vec();
        let back = Q8Matrix::from_parts(packed, &scale_bytes, n, k).unwrap();
        prop_assert_eq!(back.dequantize(), q.dequantize());
        // Misaligned scale bytes still load (copied).
        let mut shifted = vec![0u8; scale_bytes.len() + 1];
        shifted[1..].copy_from_slice(&scale_bytes);
        let back = Q8Matrix::from_parts(packed, &shifted[1..], n, k).unwrap();
        prop_assert_eq!(back.dequantize(), q.dequantize());
    }
}

/// `amax / 127` of the 64-value block of `row` that holds `col` (the inputs are finite and not
/// all zero here).
fn block_scale(row: &[f32], col: usize) -> f32 {
    let block = &row[col / BLOCK * BLOCK..((col / BLOCK + 1) * BLOCK).min(row.len())];
    block.iter().fold(0.0f32, |m, v| {
        assert!(v.is_finite());
        m.max(v.abs())
    }) / 127.0
}

/// int8 weights and activations at every supported level: exact against the integer reference
/// of the same quantized values (up to f32 rounding of the per-block terms), and within the
/// bound the block scales imply against the f32 reference of the original values.
fn check_int8(m: usize, k: usize, n: usize, seed: u64) -> Result<(), TestCaseError> {
    let mut rng = rng(seed);
    let x = values(m * k, 1.0, &mut rng);
    let w = values(n * k, 0.5, &mut rng);
    let q = Q8Matrix::quantize_f32(&w, n, k).unwrap();
    let qx = quantize_activations(&x, m, k);

    // The same quantized numbers, summed exactly per block (i32), then in f64.
    let mut exact = vec![0.0f64; m * n];
    let mut term_scale = vec![0.0f64; m * n];
    // sum |x| * w_scale / 2 + |w| * x_scale / 2 (+ their product): the quantization error
    // bound, with the scales the format defines (amax / 127), computed here from x and w.
    let mut quant_bound = vec![0.0f64; m * n];
    let block_scales = |v: &[f32], rows: usize| -> Vec<f64> {
        (0..rows)
            .flat_map(|r| (0..k.div_ceil(BLOCK)).map(move |b| (r, b)))
            .map(|(r, b)| block_scale(&v[r * k..(r + 1) * k], b * BLOCK) as f64)
            .collect()
    };
    let (want_sw, want_sx) = (block_scales(&w, n), block_scales(&x, m));
    for i in 0..m {
        for j in 0..n {
            for b in 0..k.div_ceil(BLOCK) {
                let (mut dot, mut abs) = (0i64, 0i64);
                let (_, sw) = q.get(j, b * BLOCK);
                let (_, sx) = qx.get(i, b * BLOCK);
                let nb = k.div_ceil(BLOCK);
                for (got, want) in [(sw, want_sw[j * nb + b]), (sx, want_sx[i * nb + b])] {
                    prop_assert!(
                        (got as f64 - want).abs() <= 1e-6 * want,
                        "block {b}: scale {got}, the format's amax / 127 is {want}"
                    );
                }
                for c in b * BLOCK..((b + 1) * BLOCK).min(k) {
                    let (wq, _) = q.get(j, c);
                    let (xq, _) = qx.get(i, c);
                    dot += wq as i64 * xq as i64;
                    abs += (wq as i64 * xq as i64).abs();
                    let want_sw = want_sw[j * k.div_ceil(BLOCK) + b];
                    let want_sx = want_sx[i * k.div_ceil(BLOCK) + b];
                    quant_bound[i * n + j] += x[i * k + c].abs() as f64 * want_sw / 2.0
                        + w[j * k + c].abs() as f64 * want_sx / 2.0
                        + want_sw * want_sx / 4.0;
                }
                exact[i * n + j] += dot as f64 * (sw as f64 * sx as f64);
                term_scale[i * n + j] += abs as f64 * (sw as f64 * sx as f64);
            }
        }
    }
    let mut reference = vec![0.0; m * n];
    matmul_f32(&x, &w, None, m, k, n, &mut reference);

    let weights = WeightMatrix::int8(&q);
    for table in tables_under_test() {
        let mut y = vec![f32::NAN; m * n];
        matmul_at(table, &weights, &x, None, &mut y).unwrap();
        for idx in 0..m * n {
            // f32 rounding of the per-block terms and their sum (one per block).
            let tol = order_tolerance(k.div_ceil(BLOCK) + 2, term_scale[idx] as f32);
            prop_assert!(
                (y[idx] as f64 - exact[idx]).abs() <= tol as f64,
                "{table} m={m} k={k} n={n} at {idx}: {} vs exact {} (tol {tol})",
                y[idx],
                exact[idx]
            );
            let bound = quant_bound[idx] as f32 * 1.001 + tol + 1e-5;
            prop_assert!(
                (y[idx] - reference[idx]).abs() <= bound,
                "{table} m={m} k={k} n={n} at {idx}: {} vs f32 {} (bound {bound})",
                y[idx],
                reference[idx]
            );
        }
    }
    Ok(())
}

/// The AMX table whose int8 mat-mat widens the weights to bf16 tiles, or `None` after
/// reporting the skip (a failure where `GATTN_REQUIRE_SIMD` lists `amx`).
fn int8_on_bf16_table() -> Option<&'static KernelTable> {
    let table = KernelTable::amx_int8_on_bf16();
    if table.is_none() {
        feature_or_skip(&current_test(), Feature::Amx);
    }
    table
}

/// The int8 mat-mat on bf16 tiles computes `sum x' w'` with `x' = bf16(x)` and
/// `w' = bf16(q * scale)` (the f32 product, then rounded to nearest even), in f32 sums: against
/// that reference within the accumulation-order tolerance, and against the f32 reference of the
/// original values within what the roundings imply: `|w - w'| <= scale / 2 + 2^-8 |q scale|`,
/// `|x - x'| <= 2^-8 |x|`.
fn check_int8_on_bf16(m: usize, k: usize, n: usize, seed: u64) -> Result<(), TestCaseError> {
    let Some(table) = int8_on_bf16_table() else {
        return Ok(());
    };
    let mut rng = rng(seed);
    let x = values(m * k, 1.0, &mut rng);
    let w = values(n * k, 0.5, &mut rng);
    let q = Q8Matrix::quantize_f32(&w, n, k).unwrap();
    let round = |v: f32| bf16::from_f32(v).to_f32() as f64;
    let mut y = vec![f32::NAN; m * n];
    matmul_at(table, &WeightMatrix::int8(&q), &x, None, &mut y).unwrap();
    let mut reference = vec![0.0; m * n];
    matmul_f32(&x, &w, None, m, k, n, &mut reference);
    for i in 0..m {
        for j in 0..n {
            let (mut want, mut abs, mut bound) = (0.0f64, 0.0f64, 0.0f64);
            for c in 0..k {
                let (wq, s) = q.get(j, c);
                let w_deq = wq as f32 * s;
                let (xr, wr) = (round(x[i * k + c]), round(w_deq));
                want += xr * wr;
                abs += (xr * wr).abs();
                let err_w = block_scale(&w[j * k..(j + 1) * k], c) as f64 / 2.0 * 1.0001
                    + (w_deq.abs() as f64) / 256.0;
                let err_x = (x[i * k + c].abs() as f64) / 256.0;
                bound += x[i * k + c].abs() as f64 * err_w + wr.abs() * err_x + err_w * err_x;
            }
            let idx = i * n + j;
            let tol = order_tolerance(k, abs as f32) as f64;
            prop_assert!(
                (y[idx] as f64 - want).abs() <= tol,
                "{table} m={m} k={k} n={n} at ({i}, {j}): {} vs bf16 reference {want} (tol {tol})",
                y[idx]
            );
            let bound = bound * 1.001 + tol + 1e-5;
            prop_assert!(
                (y[idx] as f64 - reference[idx] as f64).abs() <= bound,
                "{table} m={m} k={k} n={n} at ({i}, {j}): {} vs f32 {} (bound {bound})",
                y[idx],
                reference[idx]
            );
        }
    }
    Ok(())
}

/// The token blocks of the AMX kernels (256 tokens at k = 2048) and Qwen3's widest k.
#[test]
fn int8_long_prefill_shapes() {
    for (m, k, n, seed) in [(300, 2048, 40, 1), (40, 6144, 33, 2)] {
        check_int8(m, k, n, seed).unwrap();
        check_int8_on_bf16(m, k, n, seed).unwrap();
    }
}

#[test]
fn bf16_quantization_matches_f32_quantization_of_the_same_values() {
    let (n, k) = (19, 75);
    let w: Vec<bf16> = values(n * k, 1.0, &mut rng(7))
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let w32: Vec<f32> = w.iter().map(|v| v.to_f32()).collect();
    let a = Q8Matrix::quantize_bf16(&w, n, k).unwrap();
    let b = Q8Matrix::quantize_f32(&w32, n, k).unwrap();
    assert_eq!(a.to_parts(), b.to_parts());
}

#[test]
fn from_parts_rejects_wrong_lengths() {
    let q = Q8Matrix::quantize_f32(&[0.5; 3 * 40], 3, 40).unwrap();
    let (packed, _) = q.to_parts();
    let scales = q.scale_bytes();
    assert!(matches!(
        Q8Matrix::from_parts(&packed[1..], scales, 3, 40),
        Err(Q8FormatError::WeightBytes { .. })
    ));
    assert!(matches!(
        Q8Matrix::from_parts(packed, &scales[4..], 3, 40),
        Err(Q8FormatError::ScaleBytes { .. })
    ));
    assert!(matches!(
        Q8Matrix::from_parts(packed, scales, 0, 40),
        Err(Q8FormatError::BadShape { .. })
    ));
    assert!(Q8Matrix::from_parts(packed, scales, 3, 40).is_ok());
    assert!(matches!(
        Q8Matrix::quantize_f32(&[0.0; 5], 2, 3),
        Err(MatmulError::Length { .. })
    ));
}

#[test]
fn all_zero_and_huge_blocks_stay_finite() {
    let (n, k) = (17, 64);
    let mut w = vec![0.0f32; n * k];
    w[k + 3] = 3.0e30;
    let q = Q8Matrix::quantize_f32(&w, n, k).unwrap();
    let x = vec![1.0f32; 2 * k];
    for table in tables_under_test().iter().chain(int8_on_bf16_table()) {
        let mut y = vec![f32::NAN; 2 * n];
        matmul_at(table, &WeightMatrix::int8(&q), &x, None, &mut y).unwrap();
        assert!(y.iter().all(|v| v.is_finite()), "{table}: {y:?}");
        assert_eq!(y[0], 0.0);
        assert!((y[1] - 3.0e30).abs() <= 3.0e30 * 0.01, "{table}: {}", y[1]);
    }
}
