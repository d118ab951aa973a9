//! Matrix-matrix kernels on AMX tiles (Intel Sapphire Rapids and later), for prefill: bf16
//! weights (`bf16`) and the int8 weight layout (`int8` on `tdpbssd`, or `int8_bf16` widened to
//! bf16 where `GATTN_AMX_INT8=bf16` asks for it): the AMX entries of the AVX-512 level's
//! kernel table (which keeps the AVX-512 kernels for everything else). The proptests run that
//! table beside the plain AVX-512 one, against the same naive references. `tiles` wraps the
//! instructions, `transpose` moves 16 x 16 blocks between layouts.

pub(crate) mod bf16;
#[cfg(test)]
mod bf16_order;
pub(crate) mod int8;
pub(crate) mod int8_bf16;
// Under `emulated-amx`, a software model with the same interface (for tests on hosts without AMX).
#[cfg_attr(feature = "emulated-amx", path = "tiles_emulated.rs")]
pub(crate) mod tiles;
pub(crate) mod transpose;

use rayon::prelude::*;

/// Tokens in one tile of activations (16 rows).
const TILE_TOKENS: usize = 16;

/// Packs the activations `x` (`[m, k]`) tile by tile, in parallel: `pack(tokens, live, dst)`
/// for each tile of 16 tokens, `tokens` its `live` rows of `x` (fewer in the last tile, none in
/// a padding tile) and `dst` its `tile_len` elements of `out`.
pub(crate) fn pack_token_tiles<T: Send>(
    x: &[f32],
    m: usize,
    k: usize,
    out: &mut [T],
    tile_len: usize,
    pack: impl Fn(&[f32], usize, &mut [T]) + Sync,
) {
    out.par_chunks_mut(tile_len)
        .enumerate()
        .for_each(|(tile, dst)| {
            let first = (tile * TILE_TOKENS).min(m);
            let live = TILE_TOKENS.min(m - first);
            pack(&x[first * k..(first + live) * k], live, dst);
        });
}
