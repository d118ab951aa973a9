//! Portable int8 kernels: the same layout and arithmetic as the SIMD ones, one lane at a time.

use super::layout::{BLOCK, ROWS, TILE_BYTES};
use super::quantize::ActRow;

/// The 16 outputs of one row group for one token: `sum_b (w_q . x_q)_b * w_scale * x_scale`.
pub fn group_dot(packed: &[u8], scales: &[f32], x: ActRow<'_>) -> [f32; ROWS] {
    let nb = scales.len() / ROWS;
    let mut acc = [0.0f32; ROWS];
    for b in 0..nb {
        let tile = &packed[b * TILE_BYTES..(b + 1) * TILE_BYTES];
        let xb = &x.qs[b * BLOCK..(b + 1) * BLOCK];
        let mut dot = [0i32; ROWS];
        for (t, step) in tile.chunks_exact(ROWS * 4).enumerate() {
            for (r, w4) in step.chunks_exact(4).enumerate() {
                for j in 0..4 {
                    dot[r] += (w4[j] as i32 - 128) * xb[4 * t + j] as i32;
                }
            }
        }
        // Fused, as the vector epilogues are (`fma(dot, w_scale * x_scale, acc)`): the same
        // roundings at every level, so int8 results do not depend on the level.
        for r in 0..ROWS {
            acc[r] = (dot[r] as f32).mul_add(scales[b * ROWS + r] * x.scales[b], acc[r]);
        }
    }
    acc
}
