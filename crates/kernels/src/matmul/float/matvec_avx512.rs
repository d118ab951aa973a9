//! AVX-512 f32/bf16 matrix-vector rows, one row at a time with 4 accumulators; bf16 is
//! widened to f32 by a zero-extend and a 16-bit shift (exact), then FMA. Tails use masked loads.

use core::arch::x86_64::*;

use half::bf16;

/// Loads 16 weights as f32 (the element types the float kernels accept).
trait Load16: Copy {
    /// # Safety
    /// AVX-512 present; `p` valid for reads of 16 values.
    unsafe fn load(p: *const Self) -> __m512;
    /// # Safety
    /// AVX-512 present; `p` valid for reads of the values whose `mask` bits are set.
    unsafe fn load_masked(p: *const Self, mask: __mmask16) -> __m512;
}

impl Load16 for f32 {
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_masked(p: *const f32, mask: __mmask16) -> __m512 {
        // SAFETY: the caller's contract (masked-off lanes are not read).
        unsafe { _mm512_maskz_loadu_ps(mask, p) }
    }
}

impl Load16 for bf16 {
    #[inline(always)]
    unsafe fn load(p: *const bf16) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe {
            let h = _mm256_loadu_si256(p.cast());
            _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
        }
    }
    #[inline(always)]
    unsafe fn load_masked(p: *const bf16, mask: __mmask16) -> __m512 {
        // SAFETY: the caller's contract (masked-off lanes are not read).
        unsafe {
            let h = _mm256_maskz_loadu_epi16(mask, p.cast());
            _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
        }
    }
}

/// One row at a time keeps the weights a single sequential stream, which the hardware
/// prefetcher follows best (4 rows at once, sharing x loads, streamed much slower);
/// 4 accumulators hide the FMA latency.
///
/// # Safety
/// AVX-512 present; `w` and `x` valid for `k` reads, `out` for one write.
#[inline(always)]
unsafe fn row_unrolled<T: Load16>(w: *const T, k: usize, x: *const f32, out: *mut f32) {
    // SAFETY: full loads end at or before k, the tail's mask covers only the values left.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); 4];
        let main = k / 64 * 64;
        let mut kk = 0;
        while kk < main {
            for (u, a) in acc.iter_mut().enumerate() {
                let o = kk + 16 * u;
                *a = _mm512_fmadd_ps(T::load(w.add(o)), _mm512_loadu_ps(x.add(o)), *a);
            }
            kk += 64;
        }
        let mut total = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
        while kk + 16 <= k {
            total = _mm512_fmadd_ps(T::load(w.add(kk)), _mm512_loadu_ps(x.add(kk)), total);
            kk += 16;
        }
        if kk < k {
            // 1..=15 lanes left.
            let mask: __mmask16 = ((1u32 << (k - kk)) - 1) as u16;
            let xv = _mm512_maskz_loadu_ps(mask, x.add(kk));
            total = _mm512_fmadd_ps(T::load_masked(w.add(kk), mask), xv, total);
        }
        *out = _mm512_reduce_add_ps(total);
    }
}

#[inline(always)]
fn matvec_rows_generic<T: Load16>(w: &[T], k: usize, x: &[f32], out: &mut [f32]) {
    let n = out.len();
    assert!(w.len() >= n * k && x.len() >= k);
    let (wp, xp, op) = (w.as_ptr(), x.as_ptr(), out.as_mut_ptr());
    // SAFETY: r < n, so every load is inside w (row r) and x, every store inside out.
    unsafe {
        for r in 0..n {
            row_unrolled::<T>(wp.add(r * k), k, xp, op.add(r));
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub fn matvec_rows_f32(w: &[f32], k: usize, x: &[f32], out: &mut [f32]) {
    matvec_rows_generic(w, k, x, out)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub fn matvec_rows_bf16(w: &[bf16], k: usize, x: &[f32], out: &mut [f32]) {
    matvec_rows_generic(w, k, x, out)
}
