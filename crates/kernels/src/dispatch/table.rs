//! The kernel table: for every operation the kernels offer (mat-vec and mat-mat per weight
//! format, activation quantization, KV-row encoding, the int8-KV score loop), the function that
//! runs it, resolved once per SIMD level and CPU features (as ggml's per-type traits). VNNI,
//! AVX512-BF16, AMX and the vendor pick entries; they are not levels. A new ISA is a new kernel
//! file and a constructor here.
//!
//! Building a table is the proof that the CPU runs every kernel in it: [`KernelTable::get`] only
//! returns tables whose level and features were detected, and the entries' wrappers below are
//! safe to call for that reason.

use std::fmt;
use std::sync::OnceLock;

use super::SimdLevel;
#[cfg(target_arch = "x86_64")]
use super::{CpuFeatures, CpuVendor, cpu_features};
use crate::attention::kv::KvDtype;
use crate::attention::kv_encode::{self, EncodeRowFn};
use crate::attention::{Int8ScoresFn, LaneDots, int8_queries};
use crate::matmul::columns::ColumnBlock;
use crate::matmul::driver::{Bf16Input, ColumnsFn, Inputs};
use crate::matmul::int8::quantize::{self, QuantizeRowFn};
use crate::matmul::{WeightMatrix, float, int8};

/// One operation's kernel: the function and its human-readable name (`gattn-cpu info`).
#[derive(Clone, Copy)]
pub(crate) struct KernelEntry<F> {
    run: F,
    name: &'static str,
}

impl<F> fmt::Debug for KernelEntry<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

fn entry<F>(name: &'static str, run: F) -> KernelEntry<F> {
    KernelEntry { run, name }
}

/// The kernels of one SIMD level and set of CPU features.
#[derive(Debug)]
pub struct KernelTable {
    level: SimdLevel,
    amx: bool,
    /// The AMX table whose int8 mat-mat widens the weights to bf16 (`GATTN_AMX_INT8=bf16`).
    amx_int8_on_bf16: bool,
    f32_matvec: KernelEntry<ColumnsFn>,
    f32_matmat: KernelEntry<ColumnsFn>,
    bf16_matvec: KernelEntry<ColumnsFn>,
    bf16_matmat: KernelEntry<ColumnsFn>,
    int8_matvec: KernelEntry<ColumnsFn>,
    int8_matmat: KernelEntry<ColumnsFn>,
    quantize_row: KernelEntry<QuantizeRowFn>,
    kv_encode_row: KernelEntry<EncodeRowFn>,
    int8_kv_scores: KernelEntry<Option<Int8ScoresFn>>,
    /// The dot-product kernels prefill attention's vector path may use.
    lane_dots: LaneDots,
    /// How the activations of a product are prepared for the kernels above.
    pub(crate) inputs: InputForms,
}

/// What the mat-vec and mat-mat kernels of the table read as activations.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InputForms {
    pub bf16_matvec: Bf16Input,
    pub bf16_matmat: Bf16Input,
    /// Tokens the int8 mat-mat's activations are padded to a multiple of.
    pub int8_matmat_padding: usize,
    /// The int8 mat-mat reads the activations in AMX tile order too.
    pub int8_matmat_tile_order: bool,
    /// The int8 mat-mat reads the activations as bf16 rows in AMX tiles, not quantized.
    pub int8_matmat_as_bf16_rows: bool,
}

/// A column job of the table (safe to run: the table proved the CPU has its instructions).
#[derive(Clone, Copy)]
pub(crate) struct ColumnKernel(ColumnsFn);

impl ColumnKernel {
    /// Columns `col0 .. col0 + out.cols()` of `x w^T` for every token of `input` into `out`.
    #[inline]
    pub(crate) fn run(
        self,
        w: &WeightMatrix<'_>,
        input: &Inputs<'_>,
        col0: usize,
        out: &mut ColumnBlock<'_>,
    ) {
        // SAFETY: only a `KernelTable` makes a `ColumnKernel`, and it holds only kernels whose
        // instructions the CPU has.
        unsafe { (self.0)(w, input, col0, out) }
    }
}

/// The int8-KV score loop of the table (see [`int8_queries::scores_vnni_rows`]).
#[derive(Clone, Copy)]
pub(crate) struct Int8Scores(Int8ScoresFn);

impl Int8Scores {
    /// # Safety
    /// The contract of [`int8_queries::scores_vnni_rows`] apart from the CPU features, which
    /// the table checked.
    #[allow(
        clippy::too_many_arguments,
        reason = "the int8 score loop's own arguments, forwarded"
    )]
    #[inline]
    pub(crate) unsafe fn run(
        self,
        queries: &int8_queries::Int8Queries,
        first_row: usize,
        rows: usize,
        kv: crate::attention::KvHeadView<'_>,
        k0: usize,
        ntok: usize,
        p: &mut [f32],
        p_stride: usize,
    ) {
        // SAFETY: the caller's contract, and the table's check of the CPU.
        unsafe { (self.0)(queries, first_row, rows, kv, k0, ntok, p, p_stride) }
    }
}

impl fmt::Display for KernelTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl KernelTable {
    /// The table of this process (`GATTN_SIMD` or detection, see [`super::dispatch_choice`]).
    pub fn current() -> &'static KernelTable {
        super::dispatch_choice().table()
    }

    /// Every table this CPU can run, lowest level first, AMX after plain AVX-512 (the proptests
    /// iterate over these).
    pub fn all_supported() -> &'static [KernelTable] {
        static TABLES: OnceLock<Vec<KernelTable>> = OnceLock::new();
        TABLES.get_or_init(|| {
            let mut tables = Vec::new();
            for level in SimdLevel::all_supported() {
                match level {
                    #[cfg(target_arch = "x86_64")]
                    SimdLevel::Avx512 => {
                        let features = cpu_features();
                        tables.push(KernelTable::avx512(false, false, features));
                        if amx_usable(features) {
                            tables.push(KernelTable::avx512(true, false, features));
                        }
                    }
                    #[cfg(target_arch = "x86_64")]
                    SimdLevel::Avx2 => tables.push(KernelTable::avx2()),
                    #[cfg(target_arch = "aarch64")]
                    SimdLevel::Neon => tables.push(KernelTable::neon()),
                    _ => tables.push(KernelTable::scalar()),
                }
            }
            tables
        })
    }

    /// The AMX table with the other int8 mat-mat: weights widened to bf16 per job and
    /// `tdpbf16ps` (`GATTN_AMX_INT8=bf16`; its own proptest and the matmul bench run it beside
    /// [`all_supported`](Self::all_supported)'s `tdpbssd` table). `None` without AMX.
    pub fn amx_int8_on_bf16() -> Option<&'static KernelTable> {
        static TABLE: OnceLock<Option<KernelTable>> = OnceLock::new();
        TABLE
            .get_or_init(|| {
                #[cfg(target_arch = "x86_64")]
                if amx_usable(cpu_features()) {
                    return Some(KernelTable::avx512(true, true, cpu_features()));
                }
                None
            })
            .as_ref()
    }

    /// The table of `level`, with the AMX entries if `amx`; `None` where the CPU lacks them.
    pub fn get(level: SimdLevel, amx: bool) -> Option<&'static KernelTable> {
        Self::all_supported()
            .iter()
            .find(|t| t.level == level && t.amx == amx)
    }

    /// The table a call at `level` runs: this process's ([`current`](Self::current), with the
    /// AMX entries where they were chosen) when `level` is its level, else the table of `level`
    /// without AMX (`None` if the CPU lacks the level).
    pub fn of_level(level: SimdLevel) -> Option<&'static KernelTable> {
        let current = Self::current();
        if current.level == level {
            Some(current)
        } else {
            Self::for_level(level)
        }
    }

    /// The table of `level` without AMX (`None` if the CPU lacks the level).
    pub fn for_level(level: SimdLevel) -> Option<&'static KernelTable> {
        Self::get(level, false)
    }

    pub fn level(&self) -> SimdLevel {
        self.level
    }

    /// Does this table use AMX tiles (int8 and bf16 mat-mat)?
    pub fn amx(&self) -> bool {
        self.amx
    }

    /// `avx2`, `avx512`, `avx512+amx`, ...
    pub fn name(&self) -> &'static str {
        match (self.level, self.amx) {
            (SimdLevel::Avx512, true) if self.amx_int8_on_bf16 => "avx512+amx (int8 on bf16 tiles)",
            (SimdLevel::Avx512, true) => "avx512+amx",
            (level, _) => level.name(),
        }
    }

    /// Each operation and the kernel that runs it, in a fixed order (`gattn-cpu info`).
    pub fn entries(&self) -> [(&'static str, &'static str); 10] {
        [
            ("f32 mat-vec", self.f32_matvec.name),
            ("f32 mat-mat", self.f32_matmat.name),
            ("bf16 mat-vec", self.bf16_matvec.name),
            ("bf16 mat-mat", self.bf16_matmat.name),
            ("int8 mat-vec", self.int8_matvec.name),
            ("int8 mat-mat", self.int8_matmat.name),
            ("activation quantize", self.quantize_row.name),
            ("kv row encode", self.kv_encode_row.name),
            ("int8 kv scores", self.int8_kv_scores.name),
            ("prefill attention", self.prefill_attention()),
        ]
    }

    /// Where prefill attention runs (`attention::prefill_on` decides with
    /// [`crate::attention::prefill_uses_amx_tiles`]). The AMX tiles sum their bf16 products in
    /// an order no vector code reproduces (and over an int8 cache weigh V in bf16, not in the
    /// vector kernels' integers), so there (and only there) the logits differ in the last bits
    /// from every other level's; `GATTN_SIMD=avx512` gives those.
    fn prefill_attention(&self) -> &'static str {
        match (self.level, self.amx) {
            (_, true) => {
                "amx tiles (not bit-identical to the other levels): tdpbf16ps for a bf16 cache at \
                 head_dim a multiple of 32, tdpbusd + tdpbf16ps for an int8 cache at a multiple of \
                 64; else query rows in avx512 lanes: vdpbf16ps, int8 on vpdpbusd + vpdpwssd"
            }
            (SimdLevel::Avx512, false) => match (self.lane_dots.bf16, self.lane_dots.int8) {
                (true, true) => {
                    "query rows in avx512 lanes: vdpbf16ps, int8 on vpdpbusd + vpdpwssd"
                }
                (true, false) => "query rows in avx512 lanes: vdpbf16ps, int8 on fma + i32 sums",
                (false, true) => "query rows in avx512 lanes: fma, int8 on vpdpbusd + vpdpwssd",
                (false, false) => "query rows in avx512 lanes: fma, int8 on fma + i32 sums",
            },
            (SimdLevel::Avx2, _) => "query rows in avx2 lanes: fma, int8 on vpmaddwd",
            (SimdLevel::Neon, _) => "query rows in neon lanes: fma, int8 on fma + i32 sums",
            (SimdLevel::Scalar, _) => "query rows in scalar lanes: fma, int8 on fma + i32 sums",
        }
    }

    /// The dot-product kernels of prefill attention's vector path (`attention::lane_prefill`).
    pub(crate) fn lane_dots(&self) -> LaneDots {
        self.lane_dots
    }

    /// Do this table's bf16 products round the activations to bf16 (to nearest even, as
    /// llama.cpp's BF16 does)? Otherwise the weights are widened to f32, the activations kept.
    pub fn bf16_rounds_activations(&self) -> bool {
        self.inputs.bf16_matvec != Bf16Input::F32
    }

    /// Do this table's int8 mat-mats round the activations to bf16 (`GATTN_AMX_INT8=bf16`)
    /// rather than quantize them to int8 blocks as its mat-vecs do? Then an int8 model's logits
    /// depend on how a prompt is chunked, as a bf16 model's do.
    pub fn int8_matmat_rounds_activations_to_bf16(&self) -> bool {
        self.inputs.int8_matmat_as_bf16_rows
    }

    /// The column job for weights `w` and `m` tokens (resolved once per matrix, not per job).
    pub(crate) fn column_kernel(&self, w: &WeightMatrix<'_>, m: usize) -> ColumnKernel {
        let entry = match (w, m == 1) {
            (WeightMatrix::F32 { .. }, true) => self.f32_matvec,
            (WeightMatrix::F32 { .. }, false) => self.f32_matmat,
            (WeightMatrix::Bf16 { .. }, true) => self.bf16_matvec,
            (WeightMatrix::Bf16 { .. }, false) => self.bf16_matmat,
            (WeightMatrix::Int8(_), true) => self.int8_matvec,
            (WeightMatrix::Int8(_), false) => self.int8_matmat,
        };
        ColumnKernel(entry.run)
    }

    /// Quantizes one token (see `quantize::quantize_activations_into`).
    #[inline]
    pub(crate) fn quantize_row(
        &self,
        x: &[f32],
        qs: &mut [i8],
        scales: &mut [f32],
        fix: &mut [i32],
    ) {
        // SAFETY: the table holds only kernels the CPU runs.
        unsafe { (self.quantize_row.run)(x, qs, scales, fix) }
    }

    /// Encodes one K or V row (see `kv_encode`); returns its int8 scale.
    #[inline]
    pub(crate) fn encode_kv_row(&self, dtype: KvDtype, x: &[f32], words: &mut [u32]) -> f32 {
        // SAFETY: the table holds only kernels the CPU runs.
        unsafe { (self.kv_encode_row.run)(dtype, x, words) }
    }

    /// The integer score loop against an int8 K cache, where the CPU has one (else the
    /// attention tile widens the key bytes to f32).
    pub(crate) fn int8_kv_scores(&self) -> Option<Int8Scores> {
        self.int8_kv_scores.run.map(Int8Scores)
    }

    fn scalar() -> KernelTable {
        KernelTable {
            level: SimdLevel::Scalar,
            amx: false,
            amx_int8_on_bf16: false,
            f32_matvec: entry("scalar rows", float::matvec_job::<f32, float::RowsScalar>),
            f32_matmat: entry(
                "scalar rows, token by token",
                float::matmat_rows_job::<f32, float::RowsScalar>,
            ),
            bf16_matvec: entry(
                "scalar rows, widened to f32",
                float::matvec_job::<half::bf16, float::RowsScalar>,
            ),
            bf16_matmat: entry(
                "scalar rows, widened to f32, token by token",
                float::matmat_rows_job::<half::bf16, float::RowsScalar>,
            ),
            int8_matvec: entry("scalar row groups", int8::matvec_job::<int8::DotScalar>),
            int8_matmat: entry(
                "scalar row groups, token by token",
                int8::matmat_groups_job::<int8::DotScalar>,
            ),
            quantize_row: entry("scalar", quantize::quantize_row_generic),
            kv_encode_row: entry("scalar", kv_encode::encode_row_generic),
            int8_kv_scores: entry("key bytes widened to f32", None),
            lane_dots: LaneDots::default(),
            inputs: InputForms::PLAIN,
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn avx2() -> KernelTable {
        KernelTable {
            level: SimdLevel::Avx2,
            amx: false,
            amx_int8_on_bf16: false,
            f32_matvec: entry(
                "avx2 fma, 4 rows",
                float::matvec_job::<f32, float::RowsAvx2>,
            ),
            f32_matmat: entry("gemm crate panels", float::matmat_gemm_job::<f32>),
            bf16_matvec: entry(
                "avx2 fma, 4 rows, widened to f32",
                float::matvec_job::<half::bf16, float::RowsAvx2>,
            ),
            bf16_matmat: entry(
                "gemm crate panels, widened to f32",
                float::matmat_gemm_job::<half::bf16>,
            ),
            int8_matvec: entry("avx2 vpmaddubsw", int8::matvec_job::<int8::DotAvx2>),
            int8_matmat: entry("avx2 vpmaddubsw, 4 x 16 tiles", int8::matmat_avx2_job),
            quantize_row: entry("avx2", quantize::quantize_row_avx2),
            kv_encode_row: entry("avx2", kv_encode::encode_row_avx2),
            int8_kv_scores: entry("key bytes widened to f32", None),
            lane_dots: LaneDots {
                int8_pairs: true,
                ..LaneDots::default()
            },
            inputs: InputForms::PLAIN,
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn avx512(amx: bool, amx_int8_on_bf16: bool, features: CpuFeatures) -> KernelTable {
        use crate::matmul::amx;
        use crate::matmul::float::bf16dot;
        let mut inputs = InputForms::PLAIN;
        let (mut bf16_matvec, mut bf16_matmat) = (
            entry(
                "avx512 fma, widened to f32",
                float::matvec_job::<half::bf16, float::RowsAvx512> as ColumnsFn,
            ),
            entry(
                "gemm crate panels, widened to f32",
                float::matmat_gemm_job::<half::bf16> as ColumnsFn,
            ),
        );
        if features.avx512_bf16 {
            // Every line on Intel, where the hardware prefetcher alone left the stream short;
            // one line in 8 elsewhere (on AMD a prefetch per line costs more than it brings).
            bf16_matvec = if features.vendor == CpuVendor::Intel {
                entry(
                    "avx512-bf16 vdpbf16ps, prefetch every line",
                    bf16dot::matvec_job::<true>,
                )
            } else {
                entry(
                    "avx512-bf16 vdpbf16ps, prefetch one line in 8",
                    bf16dot::matvec_job::<false>,
                )
            };
            bf16_matmat = entry("avx512-bf16 vdpbf16ps, 6 x 4 tiles", bf16dot::matmat_job);
            inputs.bf16_matvec = Bf16Input::Rounded;
            inputs.bf16_matmat = Bf16Input::Rounded;
        }
        let (mut int8_matvec, mut int8_matmat) = (
            entry(
                "avx2 vpmaddubsw",
                int8::matvec_job::<int8::DotAvx2> as ColumnsFn,
            ),
            entry(
                "avx2 vpmaddubsw, token by token",
                int8::matmat_groups_job::<int8::DotAvx2> as ColumnsFn,
            ),
        );
        if features.avx512_vnni {
            int8_matvec = entry("avx512-vnni vpdpbusd", int8::matvec_job::<int8::DotVnni>);
            int8_matmat = entry("avx512-vnni vpdpbusd, 6 x 32 tiles", int8::matmat_vnni_job);
            inputs.int8_matmat_padding = int8::TILE_TOKENS;
        }
        if amx {
            assert!(amx_usable(features), "AMX entries need AMX and AVX512-BF16");
            bf16_matmat = entry(
                "amx tdpbf16ps (k a multiple of 32, else avx512-bf16)",
                amx::bf16::matmat_job,
            );
            inputs.bf16_matmat = Bf16Input::AmxTiles;
            if amx_int8_on_bf16 {
                int8_matmat = entry(
                    "amx tdpbf16ps, weights widened to bf16 per job",
                    amx::int8_bf16::matmat_job,
                );
                inputs.int8_matmat_as_bf16_rows = true;
            } else {
                int8_matmat = entry("amx tdpbssd", amx::int8::matmat_job);
                inputs.int8_matmat_padding = amx::int8::TOKEN_PADDING;
                inputs.int8_matmat_tile_order = true;
            }
        }
        KernelTable {
            level: SimdLevel::Avx512,
            amx,
            amx_int8_on_bf16: amx && amx_int8_on_bf16,
            f32_matvec: entry(
                "avx512 fma, row by row",
                float::matvec_job::<f32, float::RowsAvx512>,
            ),
            f32_matmat: entry("gemm crate panels", float::matmat_gemm_job::<f32>),
            bf16_matvec,
            bf16_matmat,
            int8_matvec,
            int8_matmat,
            quantize_row: entry("avx512", quantize::quantize_row_avx512),
            kv_encode_row: entry("avx512", kv_encode::encode_row_avx512),
            int8_kv_scores: if features.avx512_vnni {
                entry(
                    "avx512-vnni vpdpbusd (queries rounded to int8)",
                    Some(int8_queries::scores_vnni_rows as Int8ScoresFn),
                )
            } else {
                entry("key bytes widened to f32", None)
            },
            // Without VNNI the int8 scores stay on zmm FMAs: `vpmaddwd` on ymm does as many
            // products an instruction, and was never measured on such a CPU.
            lane_dots: LaneDots {
                bf16: features.avx512_bf16,
                int8: features.avx512_vnni,
                int8_pairs: false,
            },
            inputs,
        }
    }

    #[cfg(target_arch = "aarch64")]
    fn neon() -> KernelTable {
        KernelTable {
            level: SimdLevel::Neon,
            amx: false,
            amx_int8_on_bf16: false,
            f32_matvec: entry("neon fma", float::matvec_job::<f32, float::RowsNeon>),
            f32_matmat: entry("gemm crate panels", float::matmat_gemm_job::<f32>),
            bf16_matvec: entry(
                "neon fma, widened to f32",
                float::matvec_job::<half::bf16, float::RowsNeon>,
            ),
            bf16_matmat: entry(
                "gemm crate panels, widened to f32",
                float::matmat_gemm_job::<half::bf16>,
            ),
            int8_matvec: entry("neon vmull_s8", int8::matvec_job::<int8::DotNeon>),
            int8_matmat: entry(
                "neon vmull_s8, token by token",
                int8::matmat_groups_job::<int8::DotNeon>,
            ),
            quantize_row: entry("scalar (auto-vectorized)", quantize::quantize_row_generic),
            kv_encode_row: entry("scalar (auto-vectorized)", kv_encode::encode_row_generic),
            int8_kv_scores: entry("key bytes widened to f32", None),
            lane_dots: LaneDots::default(),
            inputs: InputForms::PLAIN,
        }
    }
}

impl InputForms {
    /// f32 activations for float weights, int8 rows unpadded.
    const PLAIN: InputForms = InputForms {
        bf16_matvec: Bf16Input::F32,
        bf16_matmat: Bf16Input::F32,
        int8_matmat_padding: 1,
        int8_matmat_tile_order: false,
        int8_matmat_as_bf16_rows: false,
    };
}

/// The AMX kernels pack and scale with AVX512-BF16 (every AMX CPU has it).
#[cfg(target_arch = "x86_64")]
fn amx_usable(features: CpuFeatures) -> bool {
    features.amx && features.avx512_bf16 && SimdLevel::Avx512.is_supported()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_table_is_found_again_and_names_every_entry() {
        let tables = KernelTable::all_supported();
        assert_eq!(tables[0].level(), SimdLevel::Scalar);
        for table in tables {
            let found = KernelTable::get(table.level(), table.amx()).expect("supported");
            assert!(std::ptr::eq(found, table));
            assert!(table.entries().iter().all(|(_, name)| !name.is_empty()));
        }
        assert_eq!(
            KernelTable::get(SimdLevel::Scalar, true).map(|t| t.name()),
            None,
            "AMX entries only at the AVX-512 level"
        );
    }

    /// `GATTN_AMX_INT8=bf16`'s table is the AMX table but for the int8 mat-mat, and says so.
    #[test]
    fn the_amx_table_with_int8_on_bf16_tiles_differs_only_in_the_int8_mat_mat() {
        let Some(variant) = KernelTable::amx_int8_on_bf16() else {
            assert!(KernelTable::get(SimdLevel::Avx512, true).is_none());
            return;
        };
        let plain = KernelTable::get(SimdLevel::Avx512, true).expect("AMX is present");
        for ((op, a), (_, b)) in variant.entries().iter().zip(plain.entries()) {
            assert_eq!(*a == b, *op != "int8 mat-mat", "{op}: {a} / {b}");
        }
        assert!(variant.amx() && variant.name() != plain.name());
        assert!(
            !KernelTable::all_supported()
                .iter()
                .any(|t| std::ptr::eq(t, variant))
        );
    }
}
