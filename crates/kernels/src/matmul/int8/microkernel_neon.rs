//! aarch64 NEON int8 kernel: widening multiply (`vmull_s8`) and pairwise accumulate
//! (`vpadalq_s16`), i.e. the sdot arithmetic without the dotprod extension, whose intrinsic
//! (`vdotq_s32`) is not stable Rust yet. Weights are turned back to signed (xor 0x80), so no
//! offset correction. Same layout and result as `scalar.rs` (integer sums are exact).
//!
//! Not compiled on the x86 development machine (no aarch64 target there): keep it simple.

use core::arch::aarch64::*;

use super::layout::{BLOCK, ROWS, TILE_BYTES};
use super::quantize::ActRow;

/// The 16 outputs of one row group for one token.
#[target_feature(enable = "neon")]
pub fn group_dot(packed: &[u8], scales: &[f32], x: ActRow<'_>) -> [f32; ROWS] {
    let nb = scales.len() / ROWS;
    assert!(packed.len() >= nb * TILE_BYTES && x.qs.len() >= nb * BLOCK && x.scales.len() >= nb);
    let mut f = [vdupq_n_f32(0.0); ROWS / 4];
    let (wp, sp, xp) = (packed.as_ptr(), scales.as_ptr(), x.qs.as_ptr());
    for b in 0..nb {
        // SAFETY: b < nb and the lengths were checked above; each step t reads 64 weight bytes
        // at b * TILE_BYTES + t * 64 and 4 activation bytes at b * BLOCK + 4t.
        unsafe {
            // Per 4 rows, two i32x4 of pair sums: lanes (row, half) of the low / high 8 bytes.
            let mut lo = [vdupq_n_s32(0); ROWS / 4];
            let mut hi = [vdupq_n_s32(0); ROWS / 4];
            for t in 0..BLOCK / 4 {
                let x4 = (xp.add(b * BLOCK + 4 * t) as *const i32).read_unaligned();
                let xv = vreinterpretq_s8_s32(vdupq_n_s32(x4));
                for v in 0..ROWS / 4 {
                    // 16 bytes: rows 4v..4v+4, 4 consecutive k values each.
                    let raw = vld1q_u8(wp.add(b * TILE_BYTES + t * 64 + v * 16));
                    let w = vreinterpretq_s8_u8(veorq_u8(raw, vdupq_n_u8(0x80)));
                    let p_lo = vmull_s8(vget_low_s8(w), vget_low_s8(xv));
                    let p_hi = vmull_high_s8(w, xv);
                    lo[v] = vpadalq_s16(lo[v], p_lo);
                    hi[v] = vpadalq_s16(hi[v], p_hi);
                }
            }
            let sx = vdupq_n_f32(*x.scales.get_unchecked(b));
            for v in 0..ROWS / 4 {
                // [r0a+r0b, r1a+r1b, r2a+r2b, r3a+r3b]: one i32 dot product per row.
                let dot = vpaddq_s32(lo[v], hi[v]);
                let s = vmulq_f32(vld1q_f32(sp.add(b * ROWS + 4 * v)), sx);
                f[v] = vfmaq_f32(f[v], vcvtq_f32_s32(dot), s);
            }
        }
    }
    let mut out = [0.0f32; ROWS];
    for (v, chunk) in out.chunks_exact_mut(4).enumerate() {
        // SAFETY: each chunk holds 4 f32.
        unsafe { vst1q_f32(chunk.as_mut_ptr(), f[v]) };
    }
    out
}
