//! aarch64 NEON f32/bf16 matrix-vector rows: 4 accumulators of 4 lanes (16 values per step),
//! `vfmaq_f32`, scalar tail. bf16 is widened by shifting its bits into the top of an f32.
//! NEON is part of every aarch64 target (no runtime check needed).
//!
//! Not compiled on the x86 development machine (no aarch64 target there): keep it simple and
//! parallel to `scalar.rs`, which it must equal up to summation order.

use core::arch::aarch64::*;

use half::bf16;

trait Load4: Copy {
    /// 4 consecutive values from `p` as f32 lanes.
    ///
    /// # Safety
    /// `p` valid for reads of 4 values.
    unsafe fn load4(p: *const Self) -> float32x4_t;
    fn value(self) -> f32;
}

impl Load4 for f32 {
    #[inline(always)]
    unsafe fn load4(p: *const f32) -> float32x4_t {
        // SAFETY: the caller's contract (4 readable values).
        unsafe { vld1q_f32(p) }
    }
    fn value(self) -> f32 {
        self
    }
}

impl Load4 for bf16 {
    #[inline(always)]
    unsafe fn load4(p: *const bf16) -> float32x4_t {
        // bf16 bits are the top half of the f32 bits: widen u16 -> u32 shifted left by 16.
        // SAFETY: the caller's contract (4 readable values).
        unsafe { vreinterpretq_f32_u32(vshll_n_u16::<16>(vld1_u16(p.cast()))) }
    }
    fn value(self) -> f32 {
        self.to_f32()
    }
}

#[target_feature(enable = "neon")]
fn rows<T: Load4>(w: &[T], k: usize, x: &[f32], out: &mut [f32]) {
    assert!(w.len() >= out.len() * k && x.len() >= k);
    let full = k / 16 * 16;
    for (r, o) in out.iter_mut().enumerate() {
        let row = &w[r * k..(r + 1) * k];
        // SAFETY: every load reads 4 values at offset kk + 4j + 3 < full <= k, in bounds of `row`
        // and `x` (asserted above).
        let mut sum = unsafe {
            let (wp, xp) = (row.as_ptr(), x.as_ptr());
            let mut acc = [vdupq_n_f32(0.0); 4];
            let mut kk = 0;
            while kk < full {
                for (j, a) in acc.iter_mut().enumerate() {
                    let off = kk + 4 * j;
                    *a = vfmaq_f32(*a, T::load4(wp.add(off)), vld1q_f32(xp.add(off)));
                }
                kk += 16;
            }
            vaddvq_f32(vaddq_f32(
                vaddq_f32(acc[0], acc[1]),
                vaddq_f32(acc[2], acc[3]),
            ))
        };
        for i in full..k {
            sum += row[i].value() * x[i];
        }
        *o = sum;
    }
}

/// `out[r] = w[r] . x` for the `out.len()` rows of f32 `w` (`[rows, k]`).
#[target_feature(enable = "neon")]
pub fn matvec_rows_f32(w: &[f32], k: usize, x: &[f32], out: &mut [f32]) {
    rows(w, k, x, out)
}

/// As [`matvec_rows_f32`] for bf16 weights.
#[target_feature(enable = "neon")]
pub fn matvec_rows_bf16(w: &[bf16], k: usize, x: &[f32], out: &mut [f32]) {
    rows(w, k, x, out)
}
