//! Fused streaming-softmax attention with the output gate in its epilogue (issue 4).
//!
//! - `kv`: the per-layer K/V storage the kernel streams (f32, bf16 or int8, contiguous per KV head);
//!   `kv_encode` writes its rows. Against int8 K the queries are rounded to int8 too
//!   (`int8_queries`; [`queries_as_used`] gives references the same queries).
//! - [`prefill`]: a causal chunk of queries; [`decode`]: one query, sequence split across threads.
//! - [`AttentionStats`]: optional sink-share and gate accumulators, computed in the kernel.
//!
//! Files: `amx_prefill/` (prefill of a bf16 or int8 cache on AMX tiles), `microkernel` (SIMD inner loops, generic over pulp), `layout` (their lane order), `merge` (split-K's merge of a row's softmax states),
//! `int8_queries` (int8 query rows, and their VNNI score kernel),
//! `tile` (key tiles + online softmax of a block of rows), `prefetch` (the next tile's rows, asked
//! for during this tile's V sums), `epilogue` (divide by the sum, gate,
//! stats), `prefill` / `decode` (work decomposition over rayon), `dispatch` (level -> pulp type,
//! and the kernel table's int8-KV score loop).

mod amx_prefill;
mod checks;
mod decode;
mod dispatch;
mod epilogue;
pub(crate) mod int8_queries;
pub mod kv;
pub(crate) mod kv_encode;
mod lane_prefill;
mod layout;
mod merge;
mod microkernel;
mod prefetch;
mod prefill;
mod stats;
mod tile;

pub use crate::reference::{AttentionShape, GateScores};
#[cfg(target_arch = "x86_64")]
pub(crate) use amx_prefill::score_product;
pub use amx_prefill::{AMX_PREFILL_EXP_REL_ERROR, prefill_uses_amx_tiles};
pub use decode::{DecodeScratch, decode, decode_parts, decode_with_parts};
pub(crate) use int8_queries::Int8ScoresFn;
pub use int8_queries::queries_as_used;
pub use kv::{KvDtype, KvError, KvHeadView, KvLayer};
pub(crate) use lane_prefill::LaneDots;
pub use prefill::{prefill, prefill_key_parts, prefill_on, prefill_with_key_parts};
pub use stats::AttentionStats;

use crate::SimdLevel;
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum AttentionError {
    #[error("SIMD level {0} is not supported by this CPU")]
    UnsupportedLevel(SimdLevel),
    #[error(
        "bad attention shape {0:?}: heads must be a positive multiple of kv heads, head_dim > 0"
    )]
    BadShape(AttentionShape),
    #[error(
        "attention shape {shape:?} does not match the KV layer ({kv_heads} kv heads of dim {kv_head_dim})"
    )]
    KvShapeMismatch {
        shape: AttentionShape,
        kv_heads: usize,
        kv_head_dim: usize,
    },
    #[error("{what} has {got} values, expected {expected}")]
    BadLength {
        what: &'static str,
        got: usize,
        expected: usize,
    },
    #[error("queries up to position {q_end} need that many keys, the KV layer holds {kv_len}")]
    QueriesPastKeys { q_end: usize, kv_len: usize },
}

/// One attention call: the `n` queries at positions `q_start .. q_start + n` against the keys
/// cached in `kv` (at least `q_start + n` of them; later ones are ignored, by causality), with
/// the output gate. Built once by the caller and passed to [`attend`], [`prefill`], [`decode`].
#[derive(Debug, Clone, Copy)]
pub struct AttentionCall<'a> {
    pub shape: AttentionShape,
    /// `[n, num_heads, head_dim]`, after q_norm and RoPE.
    pub queries: &'a [f32],
    /// Absolute position of the first query.
    pub q_start: usize,
    pub n: usize,
    pub kv: &'a KvLayer,
    /// The chunk's gate scores (`[n, H]` headwise, `[n, H * D]` elementwise).
    pub gate: GateScores<'a>,
}

/// [`prefill`] for `n > 1`, [`decode`] (split across threads, in `scratch`) for `n == 1`.
pub fn attend(
    level: SimdLevel,
    call: AttentionCall<'_>,
    out: &mut [f32],
    stats: Option<&mut AttentionStats>,
    scratch: &mut DecodeScratch,
) -> Result<(), AttentionError> {
    if call.n == 1 {
        decode(level, call, out, stats, scratch)
    } else {
        prefill(level, call, out, stats)
    }
}

/// Values in `[-amplitude, amplitude]` from a fixed hash of their index and `seed`, for the
/// attention modules' unit tests.
#[cfg(test)]
pub(crate) fn pseudo_random(seed: u32, len: usize, amplitude: f32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| {
            let x = (i ^ seed).wrapping_mul(2_654_435_761).rotate_left(13) % 20_001;
            (x as f32 / 10_000.0 - 1.0) * amplitude
        })
        .collect()
}
