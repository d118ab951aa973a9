//! Prefill attention on AMX tiles (issue 25): flash attention whose two products, `Q K^T` and
//! `P V`, are tile products, the online softmax between them in AVX-512, and the gate fused in
//! the same epilogue as the vector kernel (`epilogue::write_row`). Over a bf16 cache both are
//! `tdpbf16ps` with f32 sums (queries and probabilities rounded to bf16); over an int8 cache
//! `Q K^T` is `tdpbusd` on the stored key bytes and the queries rounded to int8 (as the vector
//! kernels round them), and `P V` is `tdpbf16ps` on V's integers with each key's V scale folded
//! into its probability.
//!
//! Work split: one item per (KV head, block of query positions); a block's rows are its
//! positions times the query heads of the KV head (GQA shares every K/V tile), in tiles of 16,
//! processed in pairs. Each item streams its keys in steps of `KEY_STEP`: V of the step is
//! packed once, then every pair of query tiles that sees the step takes its scores, softmax and
//! `P V` on it while it is in cache. `tiles` holds the microkernels and the layouts.

#[cfg(target_arch = "x86_64")]
mod block;
#[cfg(target_arch = "x86_64")]
mod split;
#[cfg(target_arch = "x86_64")]
mod tiles;

use super::kv::KvDtype;
use crate::KernelTable;
#[cfg(target_arch = "x86_64")]
pub(crate) use split::prefill;
#[cfg(target_arch = "x86_64")]
pub(crate) use tiles::score_product;

/// Relative error of the exponential the tile prefill takes its probabilities with (they are
/// rounded to bf16 next): for scores at most 86 below the row's shift (`2^y`, `y >= -124`), the
/// degree-4 Taylor remainder of `2^f` (`|f| <= 1/2`) is 5.3e-5 (5.6e-5 measured over the range,
/// with the coefficients in f32); the argument `y`, one fused multiply-add of the score's key
/// part by its lane factor times `log2(e)` less the shift times `log2(e)`, is off by about
/// `(|score| + |shift|) 2^-24 log2(e)`, which adds 1.2e-5 at scores of 100; further below, the
/// probability is 0. The bound of the tile prefill's output counts it beside the bf16 rounding
/// (`attention_prefill_rounded`).
pub const AMX_PREFILL_EXP_REL_ERROR: f32 = 1e-4;

/// Dims of one `Q K` tile product over a bf16 cache (16 bf16 pairs).
const DIM_CHUNK: usize = 32;
/// Dims of one `Q K` tile product over an int8 cache (16 groups of 4 bytes).
const INT8_DIM_CHUNK: usize = 64;

/// Does prefill with `table`'s kernels on a `dtype` cache of `head_dim` run on AMX tiles?
/// (Other cases run the vector kernel: the tiles read the stored rows in whole chunks of 64
/// bytes, 32 bf16 or 64 int8 dims.)
pub fn prefill_uses_amx_tiles(table: &KernelTable, dtype: KvDtype, head_dim: usize) -> bool {
    let whole_chunks = match dtype {
        KvDtype::Bf16 => head_dim.is_multiple_of(DIM_CHUNK),
        KvDtype::Int8 => head_dim.is_multiple_of(INT8_DIM_CHUNK),
        KvDtype::F32 => false,
    };
    cfg!(target_arch = "x86_64") && table.amx() && whole_chunks
}
