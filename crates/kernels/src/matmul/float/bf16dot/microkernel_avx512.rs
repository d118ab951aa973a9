//! AVX512-BF16 microkernel: `vdpbf16ps` of bf16 weight rows by bf16 activation rows, both
//! read along k (the dot-product form, so the weights are used as stored). One f32 accumulator
//! per (row, token) pair holds 16 partial sums; they are reduced once after the whole k block.

use core::arch::x86_64::*;

/// k values per `vdpbf16ps` (32 bf16 = one 512-bit vector).
pub(crate) const STEP: usize = 32;

/// Converts `src` to bf16 bits (round to nearest even, as `vcvtne2ps2bf16`) into `dst`
/// (same length). Like every AVX512-BF16 instruction it treats f32 denormals as zero.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(crate) fn convert_row(src: &[f32], dst: &mut [u16]) {
    assert_eq!(src.len(), dst.len());
    let len = src.len();
    let (sp, dp) = (src.as_ptr(), dst.as_mut_ptr());
    let mut i = 0;
    while i < len {
        let lo_n = (len - i).min(16);
        let hi_n = (len - i).saturating_sub(16).min(16);
        let lo_mask: __mmask16 = ((1u32 << lo_n) - 1) as u16;
        let hi_mask: __mmask16 = ((1u32 << hi_n) - 1) as u16;
        let out_mask: __mmask32 = ((1u64 << (lo_n + hi_n)) - 1) as u32;
        // SAFETY: the masks cover only elements i .. len of both slices.
        unsafe {
            let lo = _mm512_maskz_loadu_ps(lo_mask, sp.add(i));
            let hi = _mm512_maskz_loadu_ps(hi_mask, sp.add(i + 16));
            let packed: __m512i = core::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
            _mm512_mask_storeu_epi16(dp.add(i).cast(), out_mask, packed);
        }
        i += STEP;
    }
}

/// Sums each of 4 accumulators' 16 lanes: lane r of the result is the sum of `a[r]`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
fn reduce4(a: &[__m512; 4]) -> __m128 {
    // In each 128-bit block: [a0 b0 a1 b1] + [a2 b2 a3 b3], then the two 64-bit halves of that
    // and of the same for c, d: [a b c d] per block; then the 4 blocks are summed.
    let ab = _mm512_add_ps(
        _mm512_unpacklo_ps(a[0], a[1]),
        _mm512_unpackhi_ps(a[0], a[1]),
    );
    let cd = _mm512_add_ps(
        _mm512_unpacklo_ps(a[2], a[3]),
        _mm512_unpackhi_ps(a[2], a[3]),
    );
    let (ab, cd) = (_mm512_castps_pd(ab), _mm512_castps_pd(cd));
    let q = _mm512_add_ps(
        _mm512_castpd_ps(_mm512_unpacklo_pd(ab, cd)),
        _mm512_castpd_ps(_mm512_unpackhi_pd(ab, cd)),
    );
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(q)));
    let lo = _mm256_add_ps(_mm512_castps512_ps256(q), hi);
    _mm_add_ps(_mm256_castps256_ps128(lo), _mm256_extractf128_ps::<1>(lo))
}

#[inline(always)]
fn as_bh(v: __m512i) -> __m512bh {
    // SAFETY: both are 512 bits of plain data.
    unsafe { core::mem::transmute::<__m512i, __m512bh>(v) }
}

/// 4 weight rows by `T` tokens over `k` values: `out[t][r] = sum_i rows[r][i] * x[t * ldx + i]`.
///
/// # Safety
/// Each `rows[r]` valid for reads of `k` bf16 (bits); `x` valid for reads of `T` rows of
/// `k.next_multiple_of(32)` values at stride `ldx`, zero past `k` (the activations' padding).
/// The weights are read with a mask past their last full step of 32, so no row needs padding.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(crate) unsafe fn tile<const T: usize>(
    rows: [*const u16; 4],
    k: usize,
    x: *const u16,
    ldx: usize,
    out: &mut [[f32; 4]; T],
) {
    let mut acc = [[_mm512_setzero_ps(); 4]; T];
    let full = k / STEP;
    // SAFETY (both loops): offsets stay within the caller's contract.
    unsafe {
        for s in 0..full {
            let w: [__m512bh; 4] =
                core::array::from_fn(|r| as_bh(_mm512_loadu_si512(rows[r].add(s * STEP).cast())));
            for (t, acc_t) in acc.iter_mut().enumerate() {
                let xv = as_bh(_mm512_loadu_si512(x.add(t * ldx + s * STEP).cast()));
                for r in 0..4 {
                    acc_t[r] = _mm512_dpbf16_ps(acc_t[r], w[r], xv);
                }
            }
        }
        let tail = k % STEP;
        if tail != 0 {
            let mask: __mmask32 = (1u32 << tail) - 1;
            let w: [__m512bh; 4] = core::array::from_fn(|r| {
                as_bh(_mm512_maskz_loadu_epi16(
                    mask,
                    rows[r].add(full * STEP).cast(),
                ))
            });
            for (t, acc_t) in acc.iter_mut().enumerate() {
                let xv = as_bh(_mm512_loadu_si512(x.add(t * ldx + full * STEP).cast()));
                for r in 0..4 {
                    acc_t[r] = _mm512_dpbf16_ps(acc_t[r], w[r], xv);
                }
            }
        }
        for (acc_t, out_t) in acc.iter().zip(out.iter_mut()) {
            _mm_storeu_ps(out_t.as_mut_ptr(), reduce4(acc_t));
        }
    }
}

/// Values (1 KiB) ahead of the loads that each row's software prefetch asks for. The four row
/// streams each run 4 KiB (one row at k = 2048) before the next group of rows, too short for the
/// hardware prefetchers to ramp up: with the prefetch the mat-vec went from 0.80-0.89 to 0.88-1.01
/// of the read bandwidth (matmul bench, all six shapes, three runs each, alternated).
const PREFETCH_AHEAD: usize = 512;

/// `R` weight rows (at `row`, `row + k`, ...) by one token: `out[r] = sum_i rows[r][i] * x[i]`,
/// one accumulator a row. The mat-vec runs `R = 4`: four weight streams in flight, and four
/// independent `vdpbf16ps` chains; `R < 4` only for a panel's last rows. The activations as
/// bf16 are 2 bytes a value, half of f32: even for a long row (k = 6144, `down`) they stay in L1
/// beside the weight streams.
///
/// # Safety
/// Each of the `R` rows valid for reads of `k` bf16 (bits); `x` valid for
/// `k.next_multiple_of(32)` values, zero past `k`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(crate) unsafe fn rows_dot<const R: usize>(
    row: *const u16,
    k: usize,
    x: *const u16,
) -> [f32; R] {
    let mut acc = [_mm512_setzero_ps(); R];
    // SAFETY (all loads): offsets stay within the caller's contract.
    let mut step = |i: usize, mask: __mmask32| unsafe {
        let xv = as_bh(_mm512_loadu_si512(x.add(i).cast()));
        for (r, a) in acc.iter_mut().enumerate() {
            _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(r * k + i + PREFETCH_AHEAD).cast());
            let w = as_bh(_mm512_maskz_loadu_epi16(mask, row.add(r * k + i).cast()));
            *a = _mm512_dpbf16_ps(*a, w, xv);
        }
    };
    // Full steps with a constant mask (a mask computed every step cost 0.1 of the bandwidth),
    // then the live part of the rows' tail (x is zero-padded).
    let main = k / STEP * STEP;
    for i in (0..main).step_by(STEP) {
        step(i, !0);
    }
    if main < k {
        step(main, ((1u64 << (k - main)) - 1) as u32);
    }
    acc.map(|a| _mm512_reduce_add_ps(a))
}
