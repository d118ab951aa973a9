use gattn_kernels::attention::{self, AttentionCall, AttentionStats};
use gattn_kernels::dispatch::simd_level;
use gattn_kernels::reference::{self, AttentionShape, GateScores};
use gattn_tensor::Checkpoint;
use rayon::prelude::*;

use crate::backend::Backend;
use crate::config::{GateMode, Qwen3Config};
use crate::error::{ModelError, Result};
use crate::kv_cache::LayerKvCache;
use crate::layers::norm::RmsNorm;
use crate::rope::RopeAngles;
use crate::rows::for_each_row_mut;
use crate::scratch::{AttentionScratch, sized};
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

/// What a layer reports about its attention besides its output.
pub enum LayerProbe<'a> {
    None,
    /// The probabilities `[n, num_heads, kv_len]`: only the reference backend materializes
    /// them (short prompts only).
    Maps(&'a mut [f32]),
    /// Sink share and gate statistics: only the fused kernel of the fast backend accumulates
    /// them (without materializing probabilities: any prompt length).
    Stats(&'a mut AttentionStats),
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
    /// `probe` asks for the attention maps (reference backend) or the fused kernel's stats (fast
    /// backend); asked of the other backend it is an error, not a silent switch.
    #[allow(
        clippy::too_many_arguments,
        reason = "as DecoderLayer::forward, plus the output; the kernel's own arguments are one AttentionCall"
    )]
    pub fn forward(
        &self,
        x: &[f32],
        n: usize,
        rope: &RopeAngles,
        cache: &mut LayerKvCache,
        backend: Backend,
        out: &mut [f32],
        probe: LayerProbe<'_>,
        scratch: &mut AttentionScratch,
    ) -> Result<()> {
        let AttentionShape {
            num_heads,
            num_kv_heads,
            head_dim,
        } = self.shape;
        let q_start = cache.len();
        let q_dim = num_heads * head_dim;
        let kv_dim = num_kv_heads * head_dim;

        // 1. Projections, one read of x: q_proj_out [n, q_rows], keys and values [n, kv_dim].
        let q_proj_out = sized(&mut scratch.q_proj_out, n * self.q_proj.out_features);
        let keys = sized(&mut scratch.keys, n * kv_dim);
        let values = sized(&mut scratch.values, n * kv_dim);
        Linear::forward_shared_input(
            &[&self.q_proj, &self.k_proj, &self.v_proj],
            x,
            n,
            &mut [&mut *q_proj_out, &mut *keys, &mut *values],
            backend,
        )?;

        // 2. Separate the gate scores from the queries: [n, q_dim] and [n, num_heads * s].
        let queries = sized(&mut scratch.queries, n * q_dim);
        let gate_scores = sized(
            &mut scratch.gate_scores,
            n * num_heads * self.gate.scores_per_head(head_dim),
        );
        split_query_and_gate(q_proj_out, n, self.shape, self.gate, queries, gate_scores);

        // 3. Per-head RMSNorm of queries and keys (never of the gate), then RoPE; token by token.
        let norm_and_rotate = |norm: &Option<RmsNorm>, t: usize, row: &mut [f32]| {
            let (cos, sin) = (rope.cos(t), rope.sin(t));
            for head in row.chunks_exact_mut(head_dim) {
                if let Some(norm) = norm {
                    norm.forward_row_in_place(head, backend);
                }
                reference::apply_rope_rotate_half(head, cos, sin);
            }
        };
        for_each_row_mut(queries, q_dim, |t, row| {
            norm_and_rotate(&self.q_norm, t, row)
        });
        for_each_row_mut(keys, kv_dim, |t, row| norm_and_rotate(&self.k_norm, t, row));

        // 4. Cache K (after RoPE) and V; attend causally over everything cached, then the gate:
        //    attn_h *= sigmoid(gate_h).
        cache.append(keys, values, n)?;
        let gate = match self.gate {
            GateMode::None => GateScores::None,
            GateMode::Headwise => GateScores::Headwise(gate_scores),
            GateMode::Elementwise => GateScores::Elementwise(gate_scores),
        };
        let attn_out = sized(&mut scratch.attn_out, n * q_dim);
        let call = AttentionCall {
            shape: self.shape,
            queries,
            q_start,
            n,
            kv: &cache.storage,
            gate,
        };
        let decode = &mut scratch.decode;
        match (backend, probe) {
            (Backend::Fast, LayerProbe::None) => {
                attention::attend(simd_level(), call, attn_out, None, decode)?
            }
            (Backend::Fast, LayerProbe::Stats(stats)) => {
                attention::attend(simd_level(), call, attn_out, Some(stats), decode)?
            }
            (Backend::Reference, LayerProbe::None) => {
                reference_attention(call, cache, attn_out, None)
            }
            (Backend::Reference, LayerProbe::Maps(maps)) => {
                reference_attention(call, cache, attn_out, Some(maps))
            }
            (Backend::Fast, LayerProbe::Maps(_)) => {
                return Err(ModelError::ProbeNeedsBackend {
                    probe: "attention maps",
                    backend: Backend::Reference,
                });
            }
            (Backend::Reference, LayerProbe::Stats(_)) => {
                return Err(ModelError::ProbeNeedsBackend {
                    probe: "attention statistics",
                    backend: Backend::Fast,
                });
            }
        }

        // 5. o_proj: [n, q_dim] -> [n, hidden].
        self.o_proj.forward(attn_out, n, out, backend)?;
        Ok(())
    }

    pub fn bytes(&self) -> usize {
        self.q_proj.bytes() + self.k_proj.bytes() + self.v_proj.bytes() + self.o_proj.bytes()
    }
}

/// q_proj's output per token is `num_kv_heads` groups; with `g` query heads per group, each group
/// holds `g * head_dim` queries followed by `g * s` gate scores (`s` = 0, 1 or head_dim).
/// Query head `h` is head `h % g` of group `h / g`. Writes `queries` `[n, num_heads * head_dim]`
/// and `gate_scores` `[n, num_heads * s]`.
pub fn split_query_and_gate(
    q_proj_out: &[f32],
    n: usize,
    shape: AttentionShape,
    gate: GateMode,
    queries: &mut [f32],
    gate_scores: &mut [f32],
) {
    let AttentionShape {
        num_heads,
        num_kv_heads,
        head_dim,
    } = shape;
    let g = shape.group_size();
    let scores_per_head = gate.scores_per_head(head_dim);
    let group_len = g * (head_dim + scores_per_head);
    assert_eq!(q_proj_out.len(), n * num_kv_heads * group_len);
    assert_eq!(queries.len(), n * num_heads * head_dim);
    assert_eq!(gate_scores.len(), n * num_heads * scores_per_head);
    // Token by token: each token's projections, queries and gate scores are its own rows.
    let split_tokens = |projections: &[f32], queries: &mut [f32], gate_scores: &mut [f32]| {
        let query_chunks = queries.chunks_exact_mut(g * head_dim);
        let mut gate_chunks = gate_scores.chunks_exact_mut(g * scores_per_head.max(1));
        for (group, group_queries) in projections.chunks_exact(group_len).zip(query_chunks) {
            let (queries_part, gates_part) = group.split_at(g * head_dim);
            group_queries.copy_from_slice(queries_part);
            if scores_per_head > 0 {
                let group_gates = gate_chunks.next().expect("one gate chunk per group");
                group_gates.copy_from_slice(gates_part);
            }
        }
    };
    let tokens = SPLIT_TOKENS_PER_TASK;
    if n <= tokens {
        // A decode step: on this thread, allocating nothing.
        split_tokens(q_proj_out, queries, gate_scores);
        return;
    }
    // Blocks of tokens in parallel: one thread copying a 512-token chunk's projections was ~1 %
    // of its prefill, with the other cores idle.
    let gate_row = num_heads * scores_per_head;
    let mut gate_blocks: Vec<&mut [f32]> = if gate_row == 0 {
        (0..n.div_ceil(tokens))
            .map(|_| Default::default())
            .collect()
    } else {
        gate_scores.chunks_mut(tokens * gate_row).collect()
    };
    q_proj_out
        .par_chunks(tokens * num_kv_heads * group_len)
        .zip(queries.par_chunks_mut(tokens * num_heads * head_dim))
        .zip(gate_blocks.par_iter_mut())
        .for_each(|((projections, queries), gate_scores)| {
            split_tokens(projections, queries, gate_scores)
        });
}

/// Tokens per parallel task of [`split_query_and_gate`].
const SPLIT_TOKENS_PER_TASK: usize = 16;

/// The oracle: softmax materialized over the dequantized cache (`cache` holds `call.kv`), then
/// the gate.
fn reference_attention(
    call: AttentionCall<'_>,
    cache: &LayerKvCache,
    attn_out: &mut [f32],
    probs_out: Option<&mut [f32]>,
) {
    let AttentionCall {
        shape,
        queries,
        q_start,
        n,
        gate,
        ..
    } = call;
    let (k_heads, v_heads): (Vec<Vec<f32>>, Vec<Vec<f32>>) = (0..shape.num_kv_heads)
        .map(|j| cache.dequantized_head(j))
        .unzip();
    let k_refs: Vec<&[f32]> = k_heads.iter().map(Vec::as_slice).collect();
    let v_refs: Vec<&[f32]> = v_heads.iter().map(Vec::as_slice).collect();
    // Against an int8 cache the kernels round the queries to int8 too: the oracle does the same.
    let queries = attention::queries_as_used(cache.storage.dtype(), queries, shape.head_dim);
    reference::causal_attention(
        shape,
        &queries,
        q_start,
        n,
        &k_refs,
        &v_refs,
        cache.len(),
        attn_out,
        probs_out,
    );
    reference::apply_output_gate(attn_out, gate, shape.head_dim);
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
        let (mut queries, mut gate_scores) = ([0.0; 8], [0.0; 4]);
        split_query_and_gate(
            &row,
            1,
            shape,
            GateMode::Headwise,
            &mut queries,
            &mut gate_scores,
        );
        assert_eq!(queries, [0., 0., 1., 1., 2., 2., 3., 3.]);
        assert_eq!(gate_scores, [10., 11., 12., 13.]);
    }

    /// Over several parallel blocks of tokens (the last one short), every gate mode: each value
    /// lands where the layout says, the query head `h` of token `t` from group `h / g`.
    #[test]
    fn many_tokens_split_in_blocks_keep_every_value_in_place() {
        let shape = AttentionShape {
            num_heads: 4,
            num_kv_heads: 2,
            head_dim: 3,
        };
        let (g, d, n) = (2, 3, 2 * SPLIT_TOKENS_PER_TASK + 5);
        for gate in [GateMode::None, GateMode::Headwise, GateMode::Elementwise] {
            let s = gate.scores_per_head(d);
            let group_len = g * (d + s);
            let q_proj_out: Vec<f32> = (0..n * 2 * group_len).map(|i| i as f32).collect();
            let mut queries = vec![0.0; n * 4 * d];
            let mut gate_scores = vec![0.0; n * 4 * s];
            split_query_and_gate(&q_proj_out, n, shape, gate, &mut queries, &mut gate_scores);
            for t in 0..n {
                for h in 0..4 {
                    let group = &q_proj_out[(t * 2 + h / g) * group_len..][..group_len];
                    let q = &queries[(t * 4 + h) * d..][..d];
                    assert_eq!(q, &group[(h % g) * d..][..d], "{gate:?} t {t} h {h}");
                    let scores = &gate_scores[(t * 4 + h) * s..][..s];
                    assert_eq!(
                        scores,
                        &group[g * d + (h % g) * s..][..s],
                        "{gate:?} t {t} h {h}"
                    );
                }
            }
        }
    }
}
