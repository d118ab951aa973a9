/// Qwen3's RMSNorm over one vector: `x / sqrt(mean(x^2) + eps) * weight`, all in f32.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    assert_eq!(x.len(), weight.len());
    assert_eq!(x.len(), out.len());
    let inv_rms = inv_rms(x, eps);
    for i in 0..x.len() {
        out[i] = x[i] * inv_rms * weight[i];
    }
}

/// [`rms_norm`] in place: the same arithmetic in the same order (q_norm and k_norm, per head).
pub fn rms_norm_in_place(x: &mut [f32], weight: &[f32], eps: f32) {
    assert_eq!(x.len(), weight.len());
    let inv_rms = inv_rms(x, eps);
    for (v, w) in x.iter_mut().zip(weight) {
        *v = *v * inv_rms * w;
    }
}

fn inv_rms(x: &[f32], eps: f32) -> f32 {
    let mean_square = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    1.0 / (mean_square + eps).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_equals_out_of_place_bit_for_bit() {
        let weight: Vec<f32> = (0..8).map(|i| 0.5 + i as f32 * 0.25).collect();
        let x: Vec<f32> = (0..8).map(|i| (i as f32 - 3.3) * 1.7).collect();
        let mut expected = vec![0.0; 8];
        rms_norm(&x, &weight, 1e-6, &mut expected);
        let mut row = x.clone();
        rms_norm_in_place(&mut row, &weight, 1e-6);
        assert_eq!(row, expected);
    }
}
