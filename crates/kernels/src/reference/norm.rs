/// Qwen3's RMSNorm over one vector: `x / sqrt(mean(x^2) + eps) * weight`, all in f32.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    assert_eq!(x.len(), weight.len());
    assert_eq!(x.len(), out.len());
    let mean_square = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let inv_rms = 1.0 / (mean_square + eps).sqrt();
    for i in 0..x.len() {
        out[i] = x[i] * inv_rms * weight[i];
    }
}
