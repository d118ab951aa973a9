use gattn_kernels::attention::{self, AttentionStats};
use gattn_kernels::dispatch::simd_level;
use gattn_kernels::reference::{self, AttentionShape, GateScores};
use gattn_tensor::Checkpoint;

use crate::config::{GateMode, Qwen3Config};
use crate::error::Result;
use crate::kv_cache::LayerKvCache;
use crate::layers::norm::RmsNorm;
use crate::rope::RopeAngles;
use crate::weights::{Linear, WeightFormat};

/// Self-attention with GQA, per-head q/k RMSNorm, RoPE and the paper's optional output gate.
#[derive(Debug, Clone)]
pub struct Attention {
    /// Rows: `num_kv_heads` groups of `g * head_dim` queries (+ `g` or `g * head_dim` gate scores).
    pub q_proj: Linear,
    pub k_proj: Linear,
    pub v_proj: Linear,
    pub o_proj: Linear,
    pub q_norm: Option<RmsNorm>,
    pub k_norm: Option<RmsNorm>,
    pub shape: AttentionShape,
    pub gate: GateMode,
}

/// Which attention implementation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionPath {
    /// The fused streaming-softmax kernel with the gate in its epilogue (SIMD, multi-threaded).
    Fused,
    /// Materialized softmax over the dequantized cache, then the gate: the naive oracle.
    Reference,
}

/// What a layer reports about its attention besides its output.
pub enum LayerProbe<'a> {
    None,
    /// The probabilities `[n, num_heads, kv_len]` (reference path; short prompts only).
    Maps(&'a mut [f32]),
    /// Sink share and gate statistics, accumulated by the fused kernel without materializing
    /// probabilities (any prompt length).
    Stats(&'a mut AttentionStats),
}

/// The queries and gate scores of a chunk, separated from q_proj's interleaved output.
pub struct SplitQuery {
    /// `[n, num_heads, head_dim]`
    pub queries: Vec<f32>,
    /// `[n, num_heads]` (headwise), `[n, num_heads * head_dim]` (elementwise), empty (baseline).
    pub gate_scores: Vec<f32>,
}

impl Attention {
    pub fn load(
        checkpoint: &Checkpoint,
        prefix: &str,
        config: &Qwen3Config,
        format: WeightFormat,
    ) -> Result<Attention> {
        let (h, bias) = (config.hidden_size, config.attention_bias);
        let norm = |name: &str| -> Result<Option<RmsNorm>> {
            if !config.use_qk_norm {
                return Ok(None);
            }
            let name = format!("{prefix}.{name}.weight");
            RmsNorm::load(checkpoint, &name, config.head_dim, config.rms_norm_eps).map(Some)
        };
        Ok(Attention {
            q_proj: Linear::load(
                checkpoint,
                &format!("{prefix}.q_proj"),
                h,
                config.q_proj_rows(),
                bias,
                format,
            )?,
            k_proj: Linear::load(
                checkpoint,
                &format!("{prefix}.k_proj"),
                h,
                config.kv_dim(),
                bias,
                format,
            )?,
            v_proj: Linear::load(
                checkpoint,
                &format!("{prefix}.v_proj"),
                h,
                config.kv_dim(),
                bias,
                format,
            )?,
            o_proj: Linear::load(
                checkpoint,
                &format!("{prefix}.o_proj"),
                config.q_dim(),
                h,
                bias,
                format,
            )?,
            q_norm: norm("q_norm")?,
            k_norm: norm("k_norm")?,
            shape: AttentionShape {
                num_heads: config.num_attention_heads,
                num_kv_heads: config.num_key_value_heads,
                head_dim: config.head_dim,
            },
            gate: config.gate,
        })
    }

    /// x: `[n, hidden]` (already normed), the chunk's tokens at positions `cache.len() ..`;
    /// appends their K/V to `cache` and writes `[n, hidden]` to `out`.
    /// `probe` asks for the attention maps (computed by the reference path) or the kernel's stats.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        x: &[f32],
        n: usize,
        rope: &RopeAngles,
        cache: &mut LayerKvCache,
        path: AttentionPath,
        out: &mut [f32],
        probe: LayerProbe<'_>,
    ) -> Result<()> {
        let AttentionShape {
            num_heads,
            num_kv_heads,
            head_dim,
        } = self.shape;
        let q_start = cache.len();

        // 1. Projections: q_proj_out [n, q_rows], k and v [n, num_kv_heads * head_dim].
        let mut q_proj_out = vec![0.0; n * self.q_proj.out_features];
        let mut k = vec![0.0; n * num_kv_heads * head_dim];
        let mut v = vec![0.0; n * num_kv_heads * head_dim];
        self.q_proj.forward(x, n, &mut q_proj_out)?;
        self.k_proj.forward(x, n, &mut k)?;
        self.v_proj.forward(x, n, &mut v)?;

        // 2. Separate the gate scores from the queries.
        let SplitQuery {
            mut queries,
            gate_scores,
        } = split_query_and_gate(&q_proj_out, n, self.shape, self.gate);

        // 3. Per-head RMSNorm of queries and keys (never of the gate), then RoPE.
        if let Some(q_norm) = &self.q_norm {
            q_norm.forward_in_place(&mut queries);
        }
        if let Some(k_norm) = &self.k_norm {
            k_norm.forward_in_place(&mut k);
        }
        for t in 0..n {
            let (cos, sin) = (rope.cos(t), rope.sin(t));
            for head in queries[t * num_heads * head_dim..][..num_heads * head_dim]
                .chunks_exact_mut(head_dim)
            {
                reference::apply_rope_rotate_half(head, cos, sin);
            }
            for head in k[t * num_kv_heads * head_dim..][..num_kv_heads * head_dim]
                .chunks_exact_mut(head_dim)
            {
                reference::apply_rope_rotate_half(head, cos, sin);
            }
        }

        // 4. Cache K (after RoPE) and V; attend causally over everything cached, then the gate:
        //    attn_h *= sigmoid(gate_h).
        cache.append(&k, &v, n)?;
        let kv_len = cache.len();
        let gate = match self.gate {
            GateMode::None => GateScores::None,
            GateMode::Headwise => GateScores::Headwise(&gate_scores),
            GateMode::Elementwise => GateScores::Elementwise(&gate_scores),
        };
        let mut attn = vec![0.0; n * num_heads * head_dim];
        let (probs_out, stats) = match probe {
            LayerProbe::None => (None, None),
            LayerProbe::Maps(maps) => (Some(maps), None),
            LayerProbe::Stats(stats) => (None, Some(stats)),
        };
        if stats.is_some() || (path == AttentionPath::Fused && probs_out.is_none()) {
            // The gate is applied in the kernel's epilogue.
            attention::attend(
                simd_level(),
                self.shape,
                &queries,
                q_start,
                n,
                &cache.storage,
                gate,
                &mut attn,
                stats,
            )?;
        } else {
            let (k_heads, v_heads): (Vec<Vec<f32>>, Vec<Vec<f32>>) =
                (0..num_kv_heads).map(|j| cache.dequantized_head(j)).unzip();
            let k_refs: Vec<&[f32]> = k_heads.iter().map(Vec::as_slice).collect();
            let v_refs: Vec<&[f32]> = v_heads.iter().map(Vec::as_slice).collect();
            reference::causal_attention(
                self.shape, &queries, q_start, n, &k_refs, &v_refs, kv_len, &mut attn, probs_out,
            );
            reference::apply_output_gate(&mut attn, gate, head_dim);
        }

        // 5. o_proj.
        self.o_proj.forward(&attn, n, out)?;
        Ok(())
    }

    pub fn bytes(&self) -> usize {
        self.q_proj.bytes() + self.k_proj.bytes() + self.v_proj.bytes() + self.o_proj.bytes()
    }
}

/// q_proj's output per token is `num_kv_heads` groups; with `g` query heads per group, each group
/// holds `g * head_dim` queries followed by `g * s` gate scores (`s` = 0, 1 or head_dim).
/// Query head `h` is head `h % g` of group `h / g`.
pub fn split_query_and_gate(
    q_proj_out: &[f32],
    n: usize,
    shape: AttentionShape,
    gate: GateMode,
) -> SplitQuery {
    let AttentionShape {
        num_heads,
        num_kv_heads,
        head_dim,
    } = shape;
    let g = shape.group_size();
    let scores_per_head = gate.scores_per_head(head_dim);
    let group_len = g * (head_dim + scores_per_head);
    assert_eq!(q_proj_out.len(), n * num_kv_heads * group_len);
    let mut queries = Vec::with_capacity(n * num_heads * head_dim);
    let mut gate_scores = Vec::with_capacity(n * num_heads * scores_per_head);
    for group in q_proj_out.chunks_exact(group_len) {
        let (group_queries, group_gates) = group.split_at(g * head_dim);
        queries.extend_from_slice(group_queries);
        gate_scores.extend_from_slice(group_gates);
    }
    SplitQuery {
        queries,
        gate_scores,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_scores_follow_their_group() {
        // 4 heads, 2 kv heads (g = 2), head_dim 2, headwise: per token [q0 q0 q1 q1 g0 g1 | q2 q2 q3 q3 g2 g3].
        let shape = AttentionShape {
            num_heads: 4,
            num_kv_heads: 2,
            head_dim: 2,
        };
        let row = [0., 0., 1., 1., 10., 11., 2., 2., 3., 3., 12., 13.];
        let split = split_query_and_gate(&row, 1, shape, GateMode::Headwise);
        assert_eq!(split.queries, [0., 0., 1., 1., 2., 2., 3., 3.]);
        assert_eq!(split.gate_scores, [10., 11., 12., 13.]);
    }
}
