//! Portable f32/bf16 row dot products (the oracle of the SIMD ones).

use super::FloatWeight;

/// `out[r] = w[r] . x` for the `out.len()` rows of `w` (`[rows, k]`).
pub fn matvec_rows<T: FloatWeight>(w: &[T], k: usize, x: &[f32], out: &mut [f32]) {
    for (r, o) in out.iter_mut().enumerate() {
        let row = &w[r * k..(r + 1) * k];
        *o = row
            .iter()
            .zip(x)
            .fold(0.0, |acc, (w, x)| acc + w.to_f32() * x);
    }
}
