//! AVX2 int8 mat-mat microkernel: `MR` tokens against one row group, the sums in registers.
//!
//! The row-group kernel (`microkernel_avx2::group_dot`) loads and prepares (xor 0x80, absolute
//! value) every weight vector once per token; here each is loaded and prepared once per `MR`
//! tokens, and every token only pays its own `vpsignb`, `vpmaddubsw`, `vpmaddwd`, `vpaddd`.
//!
//! Exact: `vpmaddubsw` multiplies `|w|` (unsigned, at most 128: a stored byte 0 is q = -128,
//! which `vpsignb` leaves as 0x80, read unsigned as 128) by `x` with `w`'s sign (`vpsignb`; the
//! activations are quantized to [-127, 127], so negating one never wraps). A pair sum is then at
//! most 2 * 128 * 127 = 32512 < 32767: the i16 saturation never happens, and the i32 block sums
//! (64 terms, below 2^21) equal the scalar kernel's. The f32 epilogue is the other levels' one,
//! in the same order: per block, `fma(dot as f32, w_scale * x_scale, acc)`.

use core::arch::x86_64::*;

use super::layout::{BLOCK, ROWS, TILE_BYTES};

/// Rows `tok0 .. tok0 + MR` of the quantized activations (`xq`: `[rows][nb * 64]`, `xs`:
/// `[rows][nb]`) against one row group (`packed` bytes and `scales`), into `out[token]`. A
/// block's i32 sums stay in registers (`2 * MR` vectors, one per 8-row half and token); the f32
/// sums are updated once per block. Token `i`'s 16 values go to `out + i * ld`.
///
/// # Safety
/// AVX2 and FMA present; `out` valid for writes of `out[i * ld + j]`, `i < MR`, `j < 16`.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)] // the operands, then where the tile goes
pub unsafe fn tile<const MR: usize>(
    packed: &[u8],
    scales: &[f32],
    xq: &[i8],
    xs: &[f32],
    nb: usize,
    tok0: usize,
    out: *mut f32,
    ld: usize,
) {
    let kp = nb * BLOCK;
    assert!(xq.len() >= (tok0 + MR) * kp && xs.len() >= (tok0 + MR) * nb);
    assert!(packed.len() >= nb * TILE_BYTES && scales.len() >= nb * ROWS);
    let (wp, sp, xp) = (packed.as_ptr(), scales.as_ptr(), xq.as_ptr());
    let flip = _mm256_set1_epi8(-128);
    let ones = _mm256_set1_epi16(1);
    let mut f = [[_mm256_setzero_ps(); 2]; MR];
    for b in 0..nb {
        // SAFETY: every offset below is < the lengths asserted above (b < nb, t < 16, i < MR).
        unsafe {
            let mut acc = [[_mm256_setzero_si256(); MR]; 2];
            for t in 0..BLOCK / 4 {
                let x: [__m256i; MR] = core::array::from_fn(|i| {
                    let p = xp.add((tok0 + i) * kp + b * BLOCK + 4 * t);
                    _mm256_set1_epi32((p as *const i32).read_unaligned())
                });
                for (h, acc_h) in acc.iter_mut().enumerate() {
                    let w = _mm256_xor_si256(
                        _mm256_loadu_si256(wp.add(b * TILE_BYTES + t * 64 + h * 32).cast()),
                        flip,
                    );
                    let abs_w = _mm256_sign_epi8(w, w);
                    for (a, &xi) in acc_h.iter_mut().zip(&x) {
                        let pairs = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(xi, w));
                        *a = _mm256_add_epi32(*a, _mm256_madd_epi16(pairs, ones));
                    }
                }
            }
            let ws: [__m256; 2] =
                core::array::from_fn(|h| _mm256_loadu_ps(sp.add(b * ROWS + h * 8)));
            for i in 0..MR {
                let sx = _mm256_set1_ps(*xs.get_unchecked((tok0 + i) * nb + b));
                for h in 0..2 {
                    f[i][h] = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(acc[h][i]),
                        _mm256_mul_ps(ws[h], sx),
                        f[i][h],
                    );
                }
            }
        }
    }
    for (i, [lo, hi]) in f.into_iter().enumerate() {
        // SAFETY: inside the tile by the caller's contract.
        unsafe {
            _mm256_storeu_ps(out.add(i * ld), lo);
            _mm256_storeu_ps(out.add(i * ld + 8), hi);
        }
    }
}
