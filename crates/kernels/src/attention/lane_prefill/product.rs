//! The microkernel of lane prefill: a register tile of `RV` vectors of query rows (the block's
//! rows, one per SIMD lane) by `NC` columns, `c[col] += sum_k a[k] * b(k, col)`, where `b` is read
//! one element at a time and broadcast to every lane.
//!
//! Each lane sums its `k` in order with fused multiply-adds, so a result has the same bits at
//! every SIMD width, scalar included: no horizontal sums anywhere.

#![allow(clippy::needless_range_loop)] // indexing small const-size register arrays reads clearest

use pulp::Simd;

/// The broadcast operand: element `(k, col)` at `values[k * k_stride + col * col_stride]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Broadcast<'a> {
    pub values: &'a [f32],
    pub k_stride: usize,
    pub col_stride: usize,
}

/// `c[col * RV + v] += sum_{k < depth} a[k * RV + v] * b(k, col)` for every `col < cols`, in
/// tiles of `NC` columns (then single columns for the rest). [`product`] picks `RV` and `NC`.
///
/// Panics if `a`, `b` or `c` is too short for `depth` and `cols`.
#[inline(always)]
fn lane_product<S: Simd, const RV: usize, const NC: usize>(
    simd: S,
    a: &[S::f32s],
    b: Broadcast<'_>,
    c: &mut [S::f32s],
    cols: usize,
    depth: usize,
) {
    if cols == 0 || depth == 0 {
        return;
    }
    assert!(a.len() >= depth * RV && c.len() >= cols * RV);
    assert!((depth - 1) * b.k_stride + (cols - 1) * b.col_stride < b.values.len());
    let mut col = 0;
    while col + NC <= cols {
        // SAFETY: the bounds were checked above for every column below `cols`.
        unsafe { tile::<S, RV, NC>(simd, a, b, c, col, depth) };
        col += NC;
    }
    while col < cols {
        // SAFETY: as above.
        unsafe { tile::<S, RV, 1>(simd, a, b, c, col, depth) };
        col += 1;
    }
}

/// [`lane_product`] with the register tile of this width: `BLOCK_ROWS / L` row registers by
/// as many columns as leave registers for the operands (16 on x86-64 AVX2, 32 on AVX-512/NEON).
#[inline(always)]
pub(super) fn product<S: Simd>(
    simd: S,
    a: &[S::f32s],
    b: Broadcast<'_>,
    c: &mut [S::f32s],
    cols: usize,
    depth: usize,
) {
    match S::F32_LANES {
        16 => lane_product::<S, 2, 6>(simd, a, b, c, cols, depth),
        8 => lane_product::<S, 4, 3>(simd, a, b, c, cols, depth),
        4 => lane_product::<S, 8, 3>(simd, a, b, c, cols, depth),
        1 => lane_product::<S, 32, 1>(simd, a, b, c, cols, depth),
        lanes => unreachable!("no register tile for {lanes} lanes"),
    }
}

/// One register tile: columns `col .. col + NC`.
///
/// # Safety
/// `a` holds `depth * RV` vectors, `c` holds `(col + NC) * RV`, and `b`'s element
/// `(depth - 1, col + NC - 1)` is inside `b.values`.
#[inline(always)]
unsafe fn tile<S: Simd, const RV: usize, const NC: usize>(
    simd: S,
    a: &[S::f32s],
    b: Broadcast<'_>,
    c: &mut [S::f32s],
    col: usize,
    depth: usize,
) {
    // Plain loops, no `array::from_fn`: closures do not inherit the target features of the
    // pulp entry point, and came out as out-of-line SSE code.
    let mut acc = [[simd.splat_f32s(0.0); RV]; NC];
    for n in 0..NC {
        for v in 0..RV {
            acc[n][v] = c[(col + n) * RV + v];
        }
    }
    let b_first = b.values.as_ptr().wrapping_add(col * b.col_stride);
    for k in 0..depth {
        let mut broadcast = [simd.splat_f32s(0.0); NC];
        for n in 0..NC {
            // SAFETY: k < depth and n < NC: inside `b.values` (the caller's contract).
            broadcast[n] =
                simd.splat_f32s(unsafe { *b_first.add(k * b.k_stride + n * b.col_stride) });
        }
        // SAFETY: k < depth (the caller's contract on `a`).
        let a_k = unsafe { a.get_unchecked(k * RV..(k + 1) * RV) };
        // One `a` register live at a time: NC * RV accumulators + NC broadcasts + 1 fit the
        // 16 registers of AVX2 at 4 x 3.
        for v in 0..RV {
            let a_kv = a_k[v];
            for n in 0..NC {
                acc[n][v] = simd.mul_add_f32s(a_kv, broadcast[n], acc[n][v]);
            }
        }
    }
    for n in 0..NC {
        for v in 0..RV {
            c[(col + n) * RV + v] = acc[n][v];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimdLevel;
    use crate::dispatch::run_at;
    use pulp::WithSimd;

    struct Product<'a> {
        a: &'a [f32],
        b: Broadcast<'a>,
        cols: usize,
        depth: usize,
    }

    impl WithSimd for Product<'_> {
        type Output = Vec<f32>;
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> Vec<f32> {
            let lanes = S::F32_LANES;
            let a: Vec<S::f32s> = self
                .a
                .chunks_exact(lanes)
                .map(|chunk| S::as_simd_f32s(chunk).0[0])
                .collect();
            let mut c = vec![simd.splat_f32s(1.0); self.cols * 32 / lanes];
            product(simd, &a, self.b, &mut c, self.cols, self.depth);
            bytemuck::cast_slice(&c).to_vec()
        }
    }

    /// The definition: each of the 32 lanes sums its products in `k` order with fused
    /// multiply-adds, starting from the 1.0 already in `c`.
    fn definition(a: &[f32], b: Broadcast<'_>, cols: usize, depth: usize) -> Vec<f32> {
        let mut c = vec![1.0f32; cols * 32];
        for col in 0..cols {
            for lane in 0..32 {
                for k in 0..depth {
                    let value = b.values[k * b.k_stride + col * b.col_stride];
                    c[col * 32 + lane] = a[k * 32 + lane].mul_add(value, c[col * 32 + lane]);
                }
            }
        }
        c
    }

    #[test]
    fn every_level_gives_the_bits_of_the_definition() {
        let (depth, cols) = (37, 11);
        let a: Vec<f32> = (0..depth * 32)
            .map(|i| ((i * 7919) % 1013) as f32 / 97.0 - 5.0)
            .collect();
        let values: Vec<f32> = (0..depth * cols)
            .map(|i| ((i * 104_729) % 2003) as f32 / 311.0 - 3.0)
            .collect();
        for (k_stride, col_stride) in [(1, depth), (cols, 1)] {
            let b = Broadcast {
                values: &values,
                k_stride,
                col_stride,
            };
            let want = definition(&a, b, cols, depth);
            for level in SimdLevel::all_supported() {
                let got = run_at(
                    level,
                    Product {
                        a: &a,
                        b,
                        cols,
                        depth,
                    },
                );
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{level:?}, strides ({k_stride}, {col_stride})");
            }
        }
    }
}
