//! The attention share of a timed prefill: the fused kernel alone, timed on a cache of the model's
//! shape and KV dtype holding `depth + prompt` synthetic rows, chunk by chunk at the positions the
//! prefill had, and its FLOP rate against the peak of the instructions the kernel multiplies with
//! (`matrix_peak::attention_prefill_peak`), measured in the same run.

use std::time::Instant;

use gattn_kernels::KernelTable;
use gattn_kernels::attention::{self, AttentionCall, AttentionShape, GateScores, KvLayer};
use gattn_kernels::matrix_peak::{
    MatrixPeak, attention_prefill_peak, measure_attention_peak_in_current_pool,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::{BenchSettings, Spread};
use crate::error::Result;
use crate::model::Qwen3Model;

#[derive(Debug, Clone, Serialize)]
pub struct AttentionRate {
    /// FLOP of the prefill's attention, all layers: `4 * heads * head_dim` per (query, key
    /// attended) pair, causal.
    pub flop: f64,
    /// Median over repetitions of one layer's attention, times the layers.
    pub seconds: f64,
    pub flops_per_second: f64,
    /// `seconds` / the median timed prefill.
    pub share_of_prefill: f64,
    /// The peak of the instructions this attention runs on (`tdpbf16ps` where its prefill
    /// uses AMX tiles; else `vdpbf16ps`, `vpdpbusd`, `vpmaddwd` or the level's f32 FMA), half
    /// of the FLOP on the scores' and half on `P V`'s; none at the scalar level.
    pub peak: Option<PeakReport>,
    /// `flops_per_second` / the peak.
    pub ratio_to_peak: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PeakReport {
    /// [`gattn_kernels::matrix_peak::AttentionInstructions::name`]: one instruction's name, or
    /// `SCORES (Q K) + VALUES (P V)`.
    pub instruction: String,
    /// Both halves at their instructions' peaks: `2 / (1 / scores + 1 / values)`.
    pub flops_per_second: f64,
    pub scores: InstructionPeak,
    pub values: InstructionPeak,
}

#[derive(Debug, Clone, Serialize)]
pub struct InstructionPeak {
    /// [`gattn_kernels::matrix_peak::PeakInstruction::name`].
    pub instruction: &'static str,
    pub flops_per_second: f64,
}

impl From<MatrixPeak> for InstructionPeak {
    fn from(peak: MatrixPeak) -> Self {
        InstructionPeak {
            instruction: peak.instruction.name(),
            flops_per_second: peak.flops_per_second,
        }
    }
}

/// Attention FLOP of `prompt` queries on top of `depth` cached tokens, per layer.
pub fn attention_flop_per_layer(shape: AttentionShape, depth: usize, prompt: usize) -> f64 {
    // Query t (0-based in the prompt) attends keys 0 ..= depth + t.
    let keys = prompt as f64 * (depth as f64 + 1.0) + (prompt as f64 * (prompt as f64 - 1.0)) / 2.0;
    4.0 * (shape.num_heads * shape.head_dim) as f64 * keys
}

/// Times the attention of the prefill `settings` describes (chunks of the model's
/// `prefill_chunk`), in the current rayon pool.
pub fn measure_attention(
    model: &Qwen3Model,
    settings: &BenchSettings,
    median_prefill_seconds: f64,
) -> Result<AttentionRate> {
    let config = &model.config;
    let shape = AttentionShape {
        num_heads: config.num_attention_heads,
        num_kv_heads: config.num_key_value_heads,
        head_dim: config.head_dim,
    };
    let (depth, prompt) = (settings.depth, settings.prompt_tokens);
    let mut rng = StdRng::seed_from_u64(settings.seed ^ 0xa77e_0715);
    let mut layer = KvLayer::new(model.kv_dtype, shape.num_kv_heads, shape.head_dim)?;
    layer.reserve(depth + prompt)?;
    const FILL_ROWS: usize = 1024;
    let row = shape.num_kv_heads * shape.head_dim;
    let mut rows = vec![0.0f32; 2 * FILL_ROWS * row];
    while layer.len() < depth + prompt {
        let n = FILL_ROWS.min(depth + prompt - layer.len());
        rows.iter_mut()
            .for_each(|x| *x = rng.random_range(-1.0..1.0));
        let (k, v) = rows.split_at(FILL_ROWS * row);
        layer.append(&k[..n * row], &v[..n * row])?;
    }
    let chunk = model.prefill_chunk.min(prompt);
    let q_row = shape.num_heads * shape.head_dim;
    let q: Vec<f32> = (0..chunk * q_row)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let mut out = vec![0.0f32; chunk * q_row];
    let table = KernelTable::current();
    let mut seconds = Vec::with_capacity(settings.repetitions);
    for _ in 0..settings.repetitions {
        let start = Instant::now();
        for c0 in (0..prompt).step_by(chunk) {
            let n = chunk.min(prompt - c0);
            let call = AttentionCall {
                shape,
                queries: &q[..n * q_row],
                q_start: depth + c0,
                n,
                kv: &layer,
                gate: GateScores::None,
            };
            attention::prefill_on(table, call, &mut out[..n * q_row], None)?;
        }
        seconds.push(start.elapsed().as_secs_f64());
    }
    let layers = config.num_hidden_layers as f64;
    let seconds = Spread::of(&seconds).median * layers;
    let flop = attention_flop_per_layer(shape, depth, prompt) * layers;
    let flops_per_second = flop / seconds;
    let peak = attention_prefill_peak(table, model.kv_dtype, shape.head_dim)
        .and_then(measure_attention_peak_in_current_pool)
        .map(|p| PeakReport {
            instruction: p.instructions.name(),
            flops_per_second: p.flops_per_second,
            scores: p.scores.into(),
            values: p.values.into(),
        });
    Ok(AttentionRate {
        flop,
        seconds,
        flops_per_second,
        share_of_prefill: seconds / median_prefill_seconds,
        ratio_to_peak: peak.as_ref().map(|p| flops_per_second / p.flops_per_second),
        peak,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flop_counts_every_causal_pair() {
        let shape = AttentionShape {
            num_heads: 2,
            num_kv_heads: 1,
            head_dim: 4,
        };
        // 3 queries on top of 5 keys attend 6 + 7 + 8 keys.
        assert_eq!(attention_flop_per_layer(shape, 5, 3), 4.0 * 8.0 * 21.0);
        assert_eq!(attention_flop_per_layer(shape, 0, 1), 32.0);
    }
}
