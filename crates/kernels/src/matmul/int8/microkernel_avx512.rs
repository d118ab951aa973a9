//! AVX512-VNNI int8 microkernels: `vpdpbusd` of offset-binary weights (u8) by activation bytes
//! (i8, broadcast 4 at a time), one i32 lane per output row, f32 epilogue once per block of 64.

use core::arch::x86_64::*;

use super::layout::{BLOCK, ROWS, TILE_BYTES};
use super::quantize::ActRow;

/// Loads 4 activation bytes as one i32 and broadcasts it (folds into `vpdpbusd`'s `{1to16}`).
///
/// # Safety
/// AVX-512 present; `p` valid for reads of 4 bytes.
#[inline(always)]
unsafe fn broadcast4(p: *const i8) -> __m512i {
    // SAFETY: the caller's contract.
    unsafe { _mm512_set1_epi32((p as *const i32).read_unaligned()) }
}

/// Bytes (four blocks of a row group) ahead of the loads that the mat-vec's software prefetch
/// asks for, one line every 512 bytes: the hint keeps the weight stream running ahead across job
/// starts. Not every line: the hardware prefetcher already fetches the lines in between, and a
/// prefetch per line costs stream bandwidth.
const PREFETCH_AHEAD: usize = 4096;

/// One token against one row group (matrix-vector). Two accumulator chains hide VNNI latency.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
pub fn group_dot(packed: &[u8], scales: &[f32], x: ActRow<'_>) -> [f32; ROWS] {
    let nb = scales.len() / ROWS;
    assert!(packed.len() >= nb * TILE_BYTES && x.qs.len() >= nb * BLOCK);
    assert!(x.scales.len() >= nb && x.offset_fix.len() >= nb);
    let mut f = _mm512_setzero_ps();
    let (wp, sp, xp) = (packed.as_ptr(), scales.as_ptr(), x.qs.as_ptr());
    for b in 0..nb {
        // SAFETY: b < nb and the lengths were checked above.
        unsafe {
            let w = wp.add(b * TILE_BYTES);
            let xb = xp.add(b * BLOCK);
            let mut a0 = _mm512_set1_epi32(*x.offset_fix.get_unchecked(b));
            let mut a1 = _mm512_setzero_si512();
            _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add(PREFETCH_AHEAD).cast());
            _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add(512 + PREFETCH_AHEAD).cast());
            for t in (0..BLOCK / 4).step_by(2) {
                a0 = _mm512_dpbusd_epi32(
                    a0,
                    _mm512_loadu_si512(w.add(t * 64).cast()),
                    broadcast4(xb.add(4 * t)),
                );
                a1 = _mm512_dpbusd_epi32(
                    a1,
                    _mm512_loadu_si512(w.add(t * 64 + 64).cast()),
                    broadcast4(xb.add(4 * t + 4)),
                );
            }
            let s = _mm512_mul_ps(
                _mm512_loadu_ps(sp.add(b * ROWS)),
                _mm512_set1_ps(*x.scales.get_unchecked(b)),
            );
            f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)), s, f);
        }
    }
    let mut out = [0.0f32; ROWS];
    // SAFETY: out holds 16 f32.
    unsafe { _mm512_storeu_ps(out.as_mut_ptr(), f) };
    out
}

/// `MR` tokens (rows `tok0..tok0+MR` of `xq`, all present: activations are padded) against `G`
/// row groups: `MR * G` i32 and `MR * G` f32 accumulators stay in registers for the whole k;
/// each weight vector is loaded once per `MR` tokens, each activation broadcast once per `G`.
/// Token `i`'s 16 values of group `g` go to `out + i * ld + g * 16`.
///
/// # Safety
/// AVX-512 and VNNI present; `out` valid for writes of `out[i * ld + j]`, `i < MR`,
/// `j < G * 16`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[allow(clippy::too_many_arguments)] // the operands, then where the tile goes
pub unsafe fn tile<const MR: usize, const G: usize>(
    groups: [(&[u8], &[f32]); G],
    xq: &[i8],
    xs: &[f32],
    xfix: &[i32],
    nb: usize,
    tok0: usize,
    out: *mut f32,
    ld: usize,
) {
    let kp = nb * BLOCK;
    assert!(
        xq.len() >= (tok0 + MR) * kp
            && xs.len() >= (tok0 + MR) * nb
            && xfix.len() >= (tok0 + MR) * nb
    );
    for (packed, scales) in &groups {
        assert!(packed.len() >= nb * TILE_BYTES && scales.len() >= nb * ROWS);
    }
    let wps: [*const u8; G] = core::array::from_fn(|g| groups[g].0.as_ptr());
    let sps: [*const f32; G] = core::array::from_fn(|g| groups[g].1.as_ptr());
    let xp = xq.as_ptr();
    let mut f = [[_mm512_setzero_ps(); G]; MR];
    for b in 0..nb {
        // SAFETY: every offset below is < the lengths asserted above.
        unsafe {
            let mut acc = [[_mm512_setzero_si512(); G]; MR];
            for (i, acc_i) in acc.iter_mut().enumerate() {
                let fix = _mm512_set1_epi32(*xfix.get_unchecked((tok0 + i) * nb + b));
                *acc_i = [fix; G];
            }
            for t in 0..BLOCK / 4 {
                let w: [__m512i; G] = core::array::from_fn(|g| {
                    _mm512_loadu_si512(wps[g].add(b * TILE_BYTES + t * 64).cast())
                });
                for (i, acc_i) in acc.iter_mut().enumerate() {
                    let x = broadcast4(xp.add((tok0 + i) * kp + b * BLOCK + 4 * t));
                    for g in 0..G {
                        acc_i[g] = _mm512_dpbusd_epi32(acc_i[g], w[g], x);
                    }
                }
            }
            let ws: [__m512; G] = core::array::from_fn(|g| _mm512_loadu_ps(sps[g].add(b * ROWS)));
            for i in 0..MR {
                let sx = _mm512_set1_ps(*xs.get_unchecked((tok0 + i) * nb + b));
                for g in 0..G {
                    f[i][g] = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(acc[i][g]),
                        _mm512_mul_ps(ws[g], sx),
                        f[i][g],
                    );
                }
            }
        }
    }
    for (i, f_i) in f.iter().enumerate() {
        for (g, &values) in f_i.iter().enumerate() {
            // SAFETY: inside the tile by the caller's contract.
            unsafe { _mm512_storeu_ps(out.add(i * ld + g * ROWS), values) };
        }
    }
}
