use serde::Serialize;

use gattn_model::{LayerStats, LogitsFor, Qwen3Model};

use crate::analysis::AnalysisError;
use crate::analysis::maps::check_positions;

/// One model's sink, gate and activation statistics over one prompt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SinkReport {
    /// What the user called the model (`builtin:elementwise`, a directory).
    pub model: String,
    /// `none`, `headwise` or `elementwise`.
    pub gate: String,
    pub tokens: usize,
    pub layers: Vec<LayerSink>,
}

/// One layer's row of a [`SinkReport`]. Gate fields are `null` for a model without a gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerSink {
    /// 1-based, as in the paper.
    pub layer: usize,
    /// Attention probability on the first token, averaged over every (query, head) row (query 0
    /// included, whose share is always 1): the paper's attention-sink metric.
    pub first_token_share: f64,
    /// Mean sigmoid(gate) over every gate value.
    pub mean_gate: Option<f64>,
    /// Fraction of gate values below 0.1.
    pub gate_below_0_1: Option<f64>,
    /// Mean sigmoid(gate) of the first token's query, and of every other query.
    pub first_token_gate: Option<f64>,
    pub other_tokens_gate: Option<f64>,
    /// max |h| of the residual stream after the layer ("massive activations"), and where.
    pub max_abs_hidden: f32,
    pub max_abs_position: usize,
}

/// Streams `tokens` through the model (in chunks of its `prefill_chunk`, so activations stay
/// bounded whatever the prompt) and returns each layer's statistics from the fused kernel's
/// accumulators: no `tokens x tokens` map is ever built.
pub fn sink_statistics(
    model: &Qwen3Model,
    tokens: &[u32],
) -> Result<Vec<LayerStats>, AnalysisError> {
    check_positions(model, tokens.len())?;
    let mut cache = model.new_cache(tokens.len());
    let mut stats = vec![LayerStats::default(); model.layers.len()];
    model.forward_with_stats(tokens, &mut cache, LogitsFor::Last, &mut stats)?;
    Ok(stats)
}

/// [`sink_statistics`] as a report, labelled `label`.
pub fn sink_report(
    label: &str,
    model: &Qwen3Model,
    tokens: &[u32],
) -> Result<SinkReport, AnalysisError> {
    let stats = sink_statistics(model, tokens)?;
    let layers = stats
        .iter()
        .enumerate()
        .map(|(i, s)| LayerSink {
            layer: i + 1,
            first_token_share: s.attention.sink_share().unwrap_or(0.0),
            mean_gate: s.attention.mean_gate(),
            gate_below_0_1: s.attention.gate_below_0_1_fraction(),
            first_token_gate: s.attention.mean_first_token_gate(),
            other_tokens_gate: s.attention.mean_rest_gate(),
            max_abs_hidden: s.max_abs_hidden,
            max_abs_position: s.max_abs_position,
        })
        .collect();
    Ok(SinkReport {
        model: label.to_string(),
        gate: model.config.gate.name().to_string(),
        tokens: tokens.len(),
        layers,
    })
}

/// A plain-text table per report, layers as rows.
pub fn sink_table(reports: &[SinkReport]) -> String {
    let mut out = String::new();
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    for report in reports {
        out.push_str(&format!(
            "{} (gate: {}, {} tokens)\n",
            report.model, report.gate, report.tokens
        ));
        out.push_str(
            "layer  first-token share  mean gate  gates < 0.1  gate tok0  gate rest  max |h|  at\n",
        );
        for l in &report.layers {
            out.push_str(&format!(
                "{:>5}  {:>17.4}  {:>9}  {:>11}  {:>9}  {:>9}  {:>7.1}  {:>2}\n",
                l.layer,
                l.first_token_share,
                opt(l.mean_gate),
                opt(l.gate_below_0_1),
                opt(l.first_token_gate),
                opt(l.other_tokens_gate),
                l.max_abs_hidden,
                l.max_abs_position
            ));
        }
        let mean = report
            .layers
            .iter()
            .map(|l| l.first_token_share)
            .sum::<f64>()
            / report.layers.len().max(1) as f64;
        out.push_str(&format!(
            "mean first-token share over layers: {mean:.4}\n\n"
        ));
    }
    out
}
