//! Matrix-matrix kernels on AMX tiles (Intel Sapphire Rapids and later), for prefill: bf16
//! weights (`bf16`) and the int8 weight layout (`int8`), at the `SimdLevel::Amx` level (which
//! runs the AVX-512 kernels for everything else). The proptests run them at that level beside
//! the AVX-512 level, against the same naive references. `tiles` wraps the instructions,
//! `transpose` moves 16 x 16 blocks between layouts.

pub(crate) mod bf16;
pub(crate) mod int8;
pub(crate) mod tiles;
pub(crate) mod transpose;
