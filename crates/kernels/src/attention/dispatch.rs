//! Dispatch: maps a `SimdLevel` to the pulp instruction set the generic kernels are instantiated
//! for, and a KV dtype to its word format. NEON goes through pulp's `aarch64::Neon` on aarch64;
//! elsewhere it is unsupported (callers get an error before anything runs).

use super::kv::{KvDtype, KvHeadView};
use super::microkernel::{Bf16Words, F32Words, Int8Words};
use super::tile::{QueryRow, TileScratch, attend_range};
use crate::SimdLevel;
use crate::dispatch::KernelTable;
use pulp::{Simd, WithSimd};

pub(crate) use crate::dispatch::run_at;
use std::ops::Range;

/// One work item: the rows of one KV head against a range of its keys.
pub(crate) struct AttendRange<'a> {
    /// The level `run_at` runs this at (its kernel table picks the int8-KV score loop).
    pub level: SimdLevel,
    pub kv: KvHeadView<'a>,
    pub q: &'a [f32],
    pub rows: &'a [QueryRow],
    pub keys: Range<usize>,
    /// Where the rows' softmax state is written (`scratch.partial`), and the working buffers.
    pub scratch: &'a mut TileScratch,
}

impl WithSimd for AttendRange<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let AttendRange {
            level,
            kv,
            q,
            rows,
            keys,
            scratch,
        } = self;
        // An unsupported level never gets here (the entry points check); it would get none.
        let scores = KernelTable::for_level(level).and_then(KernelTable::int8_kv_scores);
        match kv.dtype {
            KvDtype::F32 => attend_range::<S, F32Words>(simd, kv, q, rows, keys, None, scratch),
            KvDtype::Bf16 => attend_range::<S, Bf16Words>(simd, kv, q, rows, keys, None, scratch),
            KvDtype::Int8 => attend_range::<S, Int8Words>(simd, kv, q, rows, keys, scores, scratch),
        }
    }
}
