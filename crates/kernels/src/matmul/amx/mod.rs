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
