//! 16 x 16 transposes of 32-bit elements in AVX-512 registers: the AMX kernels use one to pack
//! bf16 activation pairs into the tile layout and one to turn each result tile (weight rows by
//! tokens) into output rows (tokens by weight rows).

use core::arch::x86_64::*;

/// Transposes `r` in place: afterwards lane `j` of `r[i]` is what lane `i` of `r[j]` was.
/// 64 shuffles: 32-bit and 64-bit interleaves inside 128-bit lanes, then two rounds of
/// 128-bit lane shuffles.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn transpose16(r: &mut [__m512; 16]) {
    // t: rows 2i, 2i+1 interleaved; u[4g + c]: in 128-bit lane L, column 4L + c of rows 4g..4g+4.
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    let pd = _mm512_castps_pd;
    let ps = _mm512_castpd_ps;
    let mut u = [_mm512_setzero_ps(); 16];
    for g in 0..4 {
        let (lo, hi) = (t[4 * g], t[4 * g + 1]);
        let (lo2, hi2) = (t[4 * g + 2], t[4 * g + 3]);
        u[4 * g] = ps(_mm512_unpacklo_pd(pd(lo), pd(lo2)));
        u[4 * g + 1] = ps(_mm512_unpackhi_pd(pd(lo), pd(lo2)));
        u[4 * g + 2] = ps(_mm512_unpacklo_pd(pd(hi), pd(hi2)));
        u[4 * g + 3] = ps(_mm512_unpackhi_pd(pd(hi), pd(hi2)));
    }
    // Output row 4L + c gathers lane L of u[c], u[4 + c], u[8 + c], u[12 + c].
    for c in 0..4 {
        let x0 = _mm512_shuffle_f32x4::<0x88>(u[c], u[4 + c]);
        let x1 = _mm512_shuffle_f32x4::<0xDD>(u[c], u[4 + c]);
        let y0 = _mm512_shuffle_f32x4::<0x88>(u[8 + c], u[12 + c]);
        let y1 = _mm512_shuffle_f32x4::<0xDD>(u[8 + c], u[12 + c]);
        r[c] = _mm512_shuffle_f32x4::<0x88>(x0, y0);
        r[8 + c] = _mm512_shuffle_f32x4::<0xDD>(x0, y0);
        r[4 + c] = _mm512_shuffle_f32x4::<0x88>(x1, y1);
        r[12 + c] = _mm512_shuffle_f32x4::<0xDD>(x1, y1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose16_matches_the_index_swap() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        let m: Vec<f32> = (0..256).map(|v| v as f32).collect();
        let mut out = [[0.0f32; 16]; 16];
        // SAFETY: AVX-512F is present (checked above); m holds 16 rows of 16.
        unsafe {
            let mut r: [__m512; 16] =
                core::array::from_fn(|i| _mm512_loadu_ps(m[16 * i..].as_ptr()));
            transpose16(&mut r);
            for (row, v) in out.iter_mut().zip(r) {
                _mm512_storeu_ps(row.as_mut_ptr(), v);
            }
        }
        for (i, row) in out.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                assert_eq!(*v, m[16 * j + i], "({i}, {j})");
            }
        }
    }
}
