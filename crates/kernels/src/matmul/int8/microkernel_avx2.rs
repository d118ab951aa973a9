//! AVX2 int8 kernel (CPUs without AVX512-VNNI): `vpmaddubsw` with the sign trick. Weights are
//! turned back to signed (xor 0x80), so no offset correction; each 32-byte half holds 8 rows.

use core::arch::x86_64::*;

use super::layout::{BLOCK, ROWS, TILE_BYTES};
use super::quantize::ActRow;

#[target_feature(enable = "avx2,fma")]
pub fn group_dot(packed: &[u8], scales: &[f32], x: ActRow<'_>) -> [f32; ROWS] {
    let nb = scales.len() / ROWS;
    assert!(packed.len() >= nb * TILE_BYTES && x.qs.len() >= nb * BLOCK && x.scales.len() >= nb);
    let flip = _mm256_set1_epi8(-128);
    let ones = _mm256_set1_epi16(1);
    let mut f = [_mm256_setzero_ps(); 2];
    let (wp, sp, xp) = (packed.as_ptr(), scales.as_ptr(), x.qs.as_ptr());
    for b in 0..nb {
        // SAFETY: b < nb and the lengths were checked above.
        unsafe {
            let mut acc = [_mm256_setzero_si256(); 2];
            for t in 0..BLOCK / 4 {
                let xv =
                    _mm256_set1_epi32((xp.add(b * BLOCK + 4 * t) as *const i32).read_unaligned());
                for (h, acc_h) in acc.iter_mut().enumerate() {
                    let w = _mm256_xor_si256(
                        _mm256_loadu_si256(wp.add(b * TILE_BYTES + t * 64 + h * 32).cast()),
                        flip,
                    );
                    let pairs =
                        _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xv, w));
                    *acc_h = _mm256_add_epi32(*acc_h, _mm256_madd_epi16(pairs, ones));
                }
            }
            let sx = _mm256_set1_ps(*x.scales.get_unchecked(b));
            for h in 0..2 {
                let s = _mm256_mul_ps(_mm256_loadu_ps(sp.add(b * ROWS + h * 8)), sx);
                f[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[h]), s, f[h]);
            }
        }
    }
    let mut out = [0.0f32; ROWS];
    // SAFETY: out holds 16 f32.
    unsafe {
        _mm256_storeu_ps(out.as_mut_ptr(), f[0]);
        _mm256_storeu_ps(out.as_mut_ptr().add(8), f[1]);
    }
    out
}
