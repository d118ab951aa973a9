//! Dispatch: maps a `SimdLevel` to the pulp instruction set the generic kernels are instantiated
//! for, and a KV dtype to its word format. NEON goes through pulp's `aarch64::Neon` on aarch64;
//! elsewhere it is unsupported (callers get an error before anything runs).

use super::kv::{KvDtype, KvHeadView};
use super::microkernel::{Bf16Words, F32Words, Int8Words};
use super::tile::{PartialRows, QueryRow, attend_range};
use crate::SimdLevel;
use pulp::{Simd, WithSimd};

pub(crate) use crate::dispatch::run_at;
use std::ops::Range;

/// One work item: the rows of one KV head against a range of its keys.
pub(crate) struct AttendRange<'a> {
    /// The level `run_at` runs this at (it picks the int8-KV score kernel).
    pub level: SimdLevel,
    pub kv: KvHeadView<'a>,
    pub q: &'a [f32],
    pub rows: &'a [QueryRow],
    pub keys: Range<usize>,
}

impl WithSimd for AttendRange<'_> {
    type Output = PartialRows;

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> PartialRows {
        let AttendRange {
            level,
            kv,
            q,
            rows,
            keys,
        } = self;
        let vnni = int8_scores_use_vnni(level);
        match kv.dtype {
            KvDtype::F32 => attend_range::<S, F32Words>(simd, kv, q, rows, keys, false),
            KvDtype::Bf16 => attend_range::<S, Bf16Words>(simd, kv, q, rows, keys, false),
            KvDtype::Int8 => attend_range::<S, Int8Words>(simd, kv, q, rows, keys, vnni),
        }
    }
}

/// Whether attention at `level` scores an int8 K cache with AVX512-VNNI (`gattn-cpu info` shows
/// it); otherwise the f32 path decodes the key bytes (the queries are rounded to int8 either way).
pub fn int8_scores_use_vnni(level: SimdLevel) -> bool {
    cfg!(target_arch = "x86_64") && level.is_avx512() && crate::dispatch::cpu_features().avx512_vnni
}
