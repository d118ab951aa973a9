//! The microkernel of lane prefill: a register tile of `RV` vectors of query rows (the block's
//! rows, one per SIMD lane) by `NC` columns, `c[col] += sum_k a[k] * b(k, col)`, where `b` is read
//! one element at a time and broadcast to every lane.
//!
//! Each lane sums its `k` in one [`Order`] with fused multiply-adds, so a result has the same
//! bits at every SIMD width, scalar included: no horizontal sums anywhere. The paired orders are
//! those of `vdpbf16ps` (a pair's odd product first, then its even one, each rounded), so that
//! the AVX512-BF16 kernels beside this one (`dots_avx512`) give these bits too.

#![allow(clippy::needless_range_loop)] // indexing small const-size register arrays reads clearest

use pulp::Simd;

/// The broadcast operand: element `(k, col)` at `values[k * k_stride + col * col_stride]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Broadcast<'a> {
    pub values: &'a [f32],
    pub k_stride: usize,
    pub col_stride: usize,
}

impl<'a> Broadcast<'a> {
    /// `values` as `[k][col]` rows of `cols` elements.
    pub fn rows(values: &'a [f32], cols: usize) -> Self {
        Broadcast {
            values,
            k_stride: cols,
            col_stride: 1,
        }
    }
}

/// The order each lane sums its `depth` products in (a `u8` for a const parameter).
pub(super) struct Order;

impl Order {
    /// `k = 0, 1, 2, ...`
    pub const SEQUENTIAL: u8 = 0;
    /// `k = h, 0, h + 1, 1, ...` with `h = depth / 2`: bf16 pairs whose even elements are at
    /// `0..h` and odd ones at `h..depth` (a stored row in lane prefill's slot order).
    pub const SPLIT_PAIRS: u8 = 1;
    /// `k = 1, 0, 3, 2, ...`: bf16 pairs of adjacent `k` (two keys of a tile).
    pub const ADJACENT_PAIRS: u8 = 2;
}

/// The `step`-th `k` of `ORDER` (`half` = depth / 2).
#[inline(always)]
fn order_index<const ORDER: u8>(step: usize, half: usize) -> usize {
    match ORDER {
        Order::SPLIT_PAIRS if step.is_multiple_of(2) => half + step / 2,
        Order::SPLIT_PAIRS => step / 2,
        Order::ADJACENT_PAIRS => step ^ 1,
        _ => step,
    }
}

/// `c[col * RV + v] += sum_{k < depth} a[k * RV + v] * b(k, col)` for every `col < cols`, the
/// `k` in `ORDER`, in tiles of `NC` columns (then single columns for the rest). [`product`] picks
/// `RV` and `NC`.
///
/// Panics if `a`, `b` or `c` is too short for `depth` and `cols`, or if a paired order has an
/// odd depth.
#[inline(always)]
fn lane_product<S: Simd, const RV: usize, const NC: usize, const ORDER: u8>(
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
    assert!(
        ORDER == Order::SEQUENTIAL || depth.is_multiple_of(2),
        "pairs need an even depth"
    );
    let mut col = 0;
    while col + NC <= cols {
        // SAFETY: the bounds were checked above for every column below `cols`.
        unsafe { tile::<S, RV, NC, ORDER>(simd, a, b, c, col, depth) };
        col += NC;
    }
    while col < cols {
        // SAFETY: as above.
        unsafe { tile::<S, RV, 1, ORDER>(simd, a, b, c, col, depth) };
        col += 1;
    }
}

/// [`lane_product`] with the register tile of this width: `BLOCK_ROWS / L` row registers by
/// as many columns as leave registers for the operands (16 on x86-64 AVX2, 32 on AVX-512/NEON).
#[inline(always)]
pub(super) fn product<S: Simd, const ORDER: u8>(
    simd: S,
    a: &[S::f32s],
    b: Broadcast<'_>,
    c: &mut [S::f32s],
    cols: usize,
    depth: usize,
) {
    match S::F32_LANES {
        16 => lane_product::<S, 2, 8, ORDER>(simd, a, b, c, cols, depth),
        8 => lane_product::<S, 4, 3, ORDER>(simd, a, b, c, cols, depth),
        4 => lane_product::<S, 8, 3, ORDER>(simd, a, b, c, cols, depth),
        1 => lane_product::<S, 32, 1, ORDER>(simd, a, b, c, cols, depth),
        lanes => unreachable!("no register tile for {lanes} lanes"),
    }
}

/// One register tile: columns `col .. col + NC`.
///
/// # Safety
/// `a` holds `depth * RV` vectors, `c` holds `(col + NC) * RV`, `b`'s element
/// `(depth - 1, col + NC - 1)` is inside `b.values`, and a paired `ORDER` has an even depth.
#[inline(always)]
unsafe fn tile<S: Simd, const RV: usize, const NC: usize, const ORDER: u8>(
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
    let half = depth / 2;
    for step in 0..depth {
        let k = order_index::<ORDER>(step, half);
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
        order: u8,
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
            let (b, cols, depth) = (self.b, self.cols, self.depth);
            match self.order {
                Order::SPLIT_PAIRS => {
                    product::<S, { Order::SPLIT_PAIRS }>(simd, &a, b, &mut c, cols, depth)
                }
                Order::ADJACENT_PAIRS => {
                    product::<S, { Order::ADJACENT_PAIRS }>(simd, &a, b, &mut c, cols, depth)
                }
                _ => product::<S, { Order::SEQUENTIAL }>(simd, &a, b, &mut c, cols, depth),
            }
            bytemuck::cast_slice(&c).to_vec()
        }
    }

    /// The definition: each of the 32 lanes sums its products in the order's `k` sequence with
    /// fused multiply-adds, starting from the 1.0 already in `c`.
    fn definition(a: &[f32], b: Broadcast<'_>, cols: usize, ks: &[usize]) -> Vec<f32> {
        let mut c = vec![1.0f32; cols * 32];
        for col in 0..cols {
            for lane in 0..32 {
                for &k in ks {
                    let value = b.values[k * b.k_stride + col * b.col_stride];
                    c[col * 32 + lane] = a[k * 32 + lane].mul_add(value, c[col * 32 + lane]);
                }
            }
        }
        c
    }

    #[test]
    fn every_level_gives_the_bits_of_the_definition() {
        let (depth, cols) = (38, 11);
        let a: Vec<f32> = (0..depth * 32)
            .map(|i| ((i * 7919) % 1013) as f32 / 97.0 - 5.0)
            .collect();
        let values: Vec<f32> = (0..depth * cols)
            .map(|i| ((i * 104_729) % 2003) as f32 / 311.0 - 3.0)
            .collect();
        let half = depth / 2;
        let orders = [
            (Order::SEQUENTIAL, (0..depth).collect::<Vec<_>>()),
            (
                Order::SPLIT_PAIRS,
                (0..half).flat_map(|i| [half + i, i]).collect(),
            ),
            (
                Order::ADJACENT_PAIRS,
                (0..half).flat_map(|i| [2 * i + 1, 2 * i]).collect(),
            ),
        ];
        for (order, ks) in &orders {
            for (k_stride, col_stride) in [(1, depth), (cols, 1)] {
                let b = Broadcast {
                    values: &values,
                    k_stride,
                    col_stride,
                };
                let want = definition(&a, b, cols, ks);
                for level in SimdLevel::all_supported() {
                    let got = run_at(
                        level,
                        Product {
                            a: &a,
                            b,
                            cols,
                            depth,
                            order: *order,
                        },
                    );
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(
                        same,
                        "{level:?}, order {order}, strides ({k_stride}, {col_stride})"
                    );
                }
            }
        }
    }
}
