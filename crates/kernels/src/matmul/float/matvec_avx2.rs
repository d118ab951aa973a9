//! AVX2+FMA f32/bf16 matrix-vector rows: as the AVX-512 kernel, 8 lanes, scalar tail.

use core::arch::x86_64::*;

use half::bf16;

trait Load8: Copy {
    /// 8 values from `p` as f32 lanes.
    ///
    /// # Safety
    /// AVX2 present; `p` valid for reads of 8 values.
    unsafe fn load(p: *const Self) -> __m256;
    fn value(self) -> f32;
}

impl Load8 for f32 {
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        // SAFETY: the caller's contract (8 readable values, AVX2).
        unsafe { _mm256_loadu_ps(p) }
    }
    fn value(self) -> f32 {
        self
    }
}

impl Load8 for bf16 {
    #[inline(always)]
    unsafe fn load(p: *const bf16) -> __m256 {
        // SAFETY: the caller's contract (8 readable values, AVX2).
        unsafe {
            let h = _mm_loadu_si128(p.cast());
            _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
        }
    }
    fn value(self) -> f32 {
        self.to_f32()
    }
}

/// # Safety
/// AVX2 present.
#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    // SAFETY: register-only operations; the caller's contract on AVX2.
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)))
    }
}

/// Rows `0..R` of `w` (`k` apart) dotted with `x` into `out[0..R]`.
///
/// # Safety
/// AVX2 and FMA present; `w` valid for `R * k` reads, `x` for `k`, `out` for `R` writes.
#[inline(always)]
unsafe fn rows<T: Load8, const R: usize>(w: *const T, k: usize, x: *const f32, out: *mut f32) {
    // SAFETY: every offset is below R * k (weights), k (x) or R (out): the caller's contract.
    unsafe {
        let mut acc = [_mm256_setzero_ps(); R];
        let full = k / 8 * 8;
        let mut kk = 0;
        while kk < full {
            let xv = _mm256_loadu_ps(x.add(kk));
            for (r, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fmadd_ps(T::load(w.add(r * k + kk)), xv, *a);
            }
            kk += 8;
        }
        for (r, a) in acc.iter().enumerate() {
            let mut s = hsum(*a);
            for i in full..k {
                s += (*w.add(r * k + i)).value() * *x.add(i);
            }
            *out.add(r) = s;
        }
    }
}

#[inline(always)]
fn matvec_rows_generic<T: Load8>(w: &[T], k: usize, x: &[f32], out: &mut [f32]) {
    let n = out.len();
    assert!(w.len() >= n * k && x.len() >= k);
    let (wp, xp, op) = (w.as_ptr(), x.as_ptr(), out.as_mut_ptr());
    let mut r = 0;
    // SAFETY: rows r..r+4 (or r) are < n, so every load is inside w, every store inside out.
    unsafe {
        while r + 4 <= n {
            rows::<T, 4>(wp.add(r * k), k, xp, op.add(r));
            r += 4;
        }
        while r < n {
            rows::<T, 1>(wp.add(r * k), k, xp, op.add(r));
            r += 1;
        }
    }
}

#[target_feature(enable = "avx2,fma")]
pub fn matvec_rows_f32(w: &[f32], k: usize, x: &[f32], out: &mut [f32]) {
    matvec_rows_generic(w, k, x, out)
}

#[target_feature(enable = "avx2,fma")]
pub fn matvec_rows_bf16(w: &[bf16], k: usize, x: &[f32], out: &mut [f32]) {
    matvec_rows_generic(w, k, x, out)
}
