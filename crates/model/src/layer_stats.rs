//! What [`Qwen3Model::forward_with_stats`](crate::Qwen3Model::forward_with_stats) accumulates per
//! layer: the fused kernel's attention-sink and gate statistics, and the largest activation of the
//! residual stream after the layer (the paper's "massive activations").

use gattn_kernels::attention::AttentionStats;

/// Per-layer statistics, summed over every forward call since the last reset (so a long prompt
/// can be fed in chunks).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerStats {
    /// Sink share and gate statistics, streamed by the attention kernel.
    pub attention: AttentionStats,
    /// max |h| over the hidden states leaving this layer (every token, every dimension).
    pub max_abs_hidden: f32,
    /// Absolute position of the token holding `max_abs_hidden`.
    pub max_abs_position: usize,
}

impl LayerStats {
    /// Folds the hidden states `[n, hidden]` of the tokens at positions `start..start + n` into
    /// the running maximum.
    pub fn observe_hidden(&mut self, hidden: &[f32], hidden_size: usize, start: usize) {
        for (row, values) in hidden.chunks_exact(hidden_size).enumerate() {
            let row_max = values.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            if row_max > self.max_abs_hidden {
                self.max_abs_hidden = row_max;
                self.max_abs_position = start + row;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_maximum_and_its_position_survive_chunks() {
        let mut stats = LayerStats::default();
        stats.observe_hidden(&[1.0, -2.0, 0.5, 0.5], 2, 0);
        assert_eq!((stats.max_abs_hidden, stats.max_abs_position), (2.0, 0));
        stats.observe_hidden(&[0.1, 0.2, -7.0, 3.0], 2, 2);
        assert_eq!((stats.max_abs_hidden, stats.max_abs_position), (7.0, 3));
        stats.observe_hidden(&[6.0, 0.0], 2, 4);
        assert_eq!((stats.max_abs_hidden, stats.max_abs_position), (7.0, 3));
    }
}
