use gattn_model::{LogitsFor, Qwen3Model};

use crate::analysis::AnalysisError;

/// Prompts longer than this are refused by [`head_averaged_maps`]: every layer's
/// `[tokens, heads, tokens]` probabilities are materialized.
pub const MAX_MAP_TOKENS: usize = 1024;

/// The attention probabilities of one layer, averaged over heads.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerMap {
    /// 0-based layer index.
    pub layer: usize,
    pub tokens: usize,
    /// `[tokens (query), tokens (key)]`, row-major; zero above the diagonal (causal).
    pub probs: Vec<f32>,
}

/// Runs `tokens` through the model on the reference attention path and returns the head-averaged
/// probabilities of `layers` (0-based, see [`parse_layers`](crate::analysis::parse_layers)).
pub fn head_averaged_maps(
    model: &Qwen3Model,
    tokens: &[u32],
    layers: &[usize],
) -> Result<Vec<LayerMap>, AnalysisError> {
    let n = tokens.len();
    if n > MAX_MAP_TOKENS {
        return Err(AnalysisError::TooLongForMaps {
            tokens: n,
            max: MAX_MAP_TOKENS,
        });
    }
    check_positions(model, n)?;
    if let Some(&layer) = layers.iter().find(|&&l| l >= model.layers.len()) {
        return Err(AnalysisError::LayerOutOfRange {
            layer: layer + 1,
            layers: model.layers.len(),
        });
    }
    let mut maps = Vec::new();
    model.forward_with_maps(
        tokens,
        &mut model.new_cache(n),
        LogitsFor::Last,
        Some(&mut maps),
    )?;
    let heads = model.config.num_attention_heads;
    Ok(layers
        .iter()
        .map(|&layer| LayerMap {
            layer,
            tokens: n,
            probs: average_heads(&maps[layer], n, heads),
        })
        .collect())
}

/// `[n, heads, n]` -> `[n, n]`, the mean over heads.
fn average_heads(map: &[f32], n: usize, heads: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; n * n];
    for (q, rows) in map.chunks_exact(heads * n).enumerate() {
        let target = &mut out[q * n..][..n];
        for row in rows.chunks_exact(n) {
            for (t, &p) in target.iter_mut().zip(row) {
                *t += p;
            }
        }
        target.iter_mut().for_each(|t| *t /= heads as f32);
    }
    out
}

pub(crate) fn check_positions(model: &Qwen3Model, tokens: usize) -> Result<(), AnalysisError> {
    let max_positions = model.config.max_position_embeddings;
    if tokens > max_positions {
        return Err(AnalysisError::TooLongForModel {
            tokens,
            max_positions,
        });
    }
    if tokens == 0 {
        return Err(gattn_model::ModelError::EmptyPrompt.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_averaged_per_query_and_key() {
        // n = 2, heads = 2: query 0 [h0: 1 0][h1: 1 0], query 1 [h0: .2 .8][h1: .6 .4].
        let map = [1.0, 0.0, 1.0, 0.0, 0.2, 0.8, 0.6, 0.4];
        let avg = average_heads(&map, 2, 2);
        let want = [1.0, 0.0, 0.4, 0.6];
        assert!(
            avg.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6),
            "{avg:?}"
        );
    }
}
