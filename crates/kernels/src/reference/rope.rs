/// Rotary position embedding, "rotate half" convention (HF Llama/Qwen): with `h = head_dim / 2`,
/// `out[i] = x[i] cos[i] - x[i+h] sin[i]` and `out[i+h] = x[i+h] cos[i] + x[i] sin[i]`.
/// `cos`/`sin` hold the `h` angles of this position (attention factor already applied).
pub fn apply_rope_rotate_half(x: &mut [f32], cos: &[f32], sin: &[f32]) {
    let half = x.len() / 2;
    assert_eq!(x.len(), 2 * half, "head_dim must be even for RoPE");
    assert_eq!(cos.len(), half);
    assert_eq!(sin.len(), half);
    for i in 0..half {
        let (a, b) = (x[i], x[i + half]);
        x[i] = a * cos[i] - b * sin[i];
        x[i + half] = b * cos[i] + a * sin[i];
    }
}
