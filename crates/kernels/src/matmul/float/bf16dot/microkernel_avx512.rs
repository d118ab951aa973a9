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
    // SAFETY: (both loops) offsets stay within the caller's contract.
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

/// How far ahead `row_dot` prefetches (bf16 values: 4 KiB), and how often when it does not ask for
/// every line (512 bytes).
const PREFETCH_AHEAD: usize = 2048;
const PREFETCH_EVERY: usize = 256;

/// One weight row by one token: `sum_i row[i] * x[i]`, in four accumulator chains along k (so
/// the `vdpbf16ps` latency is hidden). The mat-vec calls it row after row, and since rows are
/// contiguous, a panel is one linear stream that the hardware prefetcher follows from start to
/// end (four rows at once made four short streams, which it followed worse). Rows are read from
/// their first cache line on (see the aligned head below): a checkpoint's tensor data may start
/// anywhere, and a load across two lines costs both.
///
/// `EVERY_LINE`: prefetch each line of the row 4 KiB ahead, or one line in 8 (the kernel table
/// picks per vendor).
///
/// # Safety
/// `row` valid for reads of `k` bf16 (bits); `x` valid for `k.next_multiple_of(32)` values, zero
/// past `k`. The weights are read with masks before their first cache line and past their last
/// full step of 32.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(crate) unsafe fn row_dot<const EVERY_LINE: bool>(
    row: *const u16,
    k: usize,
    x: *const u16,
) -> f32 {
    const CHAINS: usize = 4;
    let mut acc = [_mm512_setzero_ps(); CHAINS];
    // A row that does not start on a cache line (a checkpoint's tensor data is only 8-byte
    // aligned) first takes the values up to the next line with a masked load, so that every
    // weight load after it reads one line, not two.
    let head = ((64 - row as usize % 64) % 64 / 2).min(k);
    let mut i = 0;
    // SAFETY: (all loads) offsets stay within the caller's contract; the head and the rest read
    // x and the weights through the same masks.
    unsafe {
        if head > 0 {
            let mask = ((1u64 << head) - 1) as u32;
            let xv = as_bh(_mm512_maskz_loadu_epi16(mask, x.cast()));
            let w = as_bh(_mm512_maskz_loadu_epi16(mask, row.cast()));
            acc[1] = _mm512_dpbf16_ps(acc[1], w, xv);
            i = head;
        }
        let main = i + (k - i) / (CHAINS * STEP) * (CHAINS * STEP);
        while i < main {
            // 4 KiB ahead (into the next rows near the end: the panel is one stream): the
            // hardware prefetcher alone left a thread short of its share of the bandwidth.
            if !EVERY_LINE && i % PREFETCH_EVERY < CHAINS * STEP {
                _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(i + PREFETCH_AHEAD).cast());
            }
            for (c, a) in acc.iter_mut().enumerate() {
                let at = i + c * STEP;
                if EVERY_LINE {
                    _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(at + PREFETCH_AHEAD).cast());
                }
                let xv = as_bh(_mm512_loadu_si512(x.add(at).cast()));
                let w = as_bh(_mm512_loadu_si512(row.add(at).cast()));
                *a = _mm512_dpbf16_ps(*a, w, xv);
            }
            i += CHAINS * STEP;
        }
        // The rest, fewer than 128 values, a step of 32 at a time.
        while i < k {
            let live = (k - i).min(STEP);
            let mask = ((1u64 << live) - 1) as u32;
            let xv = as_bh(_mm512_maskz_loadu_epi16(mask, x.add(i).cast()));
            let w = as_bh(_mm512_maskz_loadu_epi16(mask, row.add(i).cast()));
            acc[0] = _mm512_dpbf16_ps(acc[0], w, xv);
            i += STEP;
        }
    }
    let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    _mm512_reduce_add_ps(sum)
}
