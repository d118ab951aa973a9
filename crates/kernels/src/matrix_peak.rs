//! Peak probes of the arithmetic instructions the kernels run: how many FLOP per second this
//! machine retires with one instruction, on operands that stay in registers, all threads of the
//! current rayon pool together. The instructions: AMX bf16 tiles (`tdpbf16ps`) and u8 x i8 tiles
//! (`tdpbusd`, the scores over an int8 cache), AVX512-BF16 dot
//! products (`vdpbf16ps`), the integer dot products over an int8 cache (`vpdpbusd` for the
//! scores, `vpdpwssd` for `P V`; `vpmaddwd` with its `vpaddd` for both on AVX2), and f32 fused
//! multiply-adds at each vector width (`vfmadd231ps` on ymm and zmm, NEON `fmla`). An integer
//! multiply-add counts 2 "FLOP" like a float one.
//!
//! `gattn-cpu bench` reports attention's FLOP rate as a ratio to the peak of the instructions its
//! prefill runs on ([`attention_prefill_peak`]: one for the scores, one for `P V`, half the FLOP
//! each), measured in the same run on the same threads, as decode is reported against the
//! bandwidth probe.

use std::time::Instant;

use crate::attention::{KvDtype, prefill_uses_amx_tiles};
use crate::{KernelTable, SimdLevel};

/// An instruction the probe can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeakInstruction {
    /// AMX `tdpbf16ps`: 16 x 16 results of 32-term bf16 dot products.
    AmxBf16Tile,
    /// AMX `tdpbusd`: 16 x 16 results of 64-term u8 x i8 dot products.
    AmxInt8Tile,
    /// AVX512-BF16 `vdpbf16ps`: 16 lanes of 2-term bf16 dot products.
    Avx512Bf16Dot,
    /// AVX512-VNNI `vpdpbusd` on zmm: 16 lanes of 4-term u8 x i8 dot products.
    Avx512VnniDot,
    /// AVX512-VNNI `vpdpwssd` on zmm: 16 lanes of 2-term i16 dot products.
    Avx512VnniWords,
    /// AVX2 `vpmaddwd` and the `vpaddd` that accumulates it, on ymm: 8 lanes of 2-term i16 dot
    /// products (the pair counts as one instruction).
    Avx2WordPairs,
    /// AVX2 + FMA `vfmadd231ps` on ymm: 8 f32 lanes.
    FmaYmm,
    /// AVX-512F `vfmadd231ps` on zmm: 16 f32 lanes.
    FmaZmm,
    /// NEON `fmla` on `.4s`: 4 f32 lanes.
    NeonFmla,
}

impl PeakInstruction {
    pub const ALL: [PeakInstruction; 9] = [
        PeakInstruction::AmxBf16Tile,
        PeakInstruction::AmxInt8Tile,
        PeakInstruction::Avx512Bf16Dot,
        PeakInstruction::Avx512VnniDot,
        PeakInstruction::Avx512VnniWords,
        PeakInstruction::Avx2WordPairs,
        PeakInstruction::FmaYmm,
        PeakInstruction::FmaZmm,
        PeakInstruction::NeonFmla,
    ];

    /// The name reports carry (`prefill.attention.peak.instruction` of `bench --json`).
    pub fn name(self) -> &'static str {
        match self {
            PeakInstruction::AmxBf16Tile => "tdpbf16ps",
            PeakInstruction::AmxInt8Tile => "tdpbusd",
            PeakInstruction::Avx512Bf16Dot => "vdpbf16ps",
            PeakInstruction::Avx512VnniDot => "vpdpbusd zmm",
            PeakInstruction::Avx512VnniWords => "vpdpwssd zmm",
            PeakInstruction::Avx2WordPairs => "vpmaddwd+vpaddd ymm",
            PeakInstruction::FmaYmm => "vfmadd231ps ymm",
            PeakInstruction::FmaZmm => "vfmadd231ps zmm",
            PeakInstruction::NeonFmla => "fmla .4s",
        }
    }

    /// FLOP of one instruction (a multiply-add counts 2).
    fn flop(self) -> f64 {
        match self {
            PeakInstruction::AmxBf16Tile => 2.0 * 16.0 * 16.0 * 32.0,
            PeakInstruction::AmxInt8Tile => 2.0 * 16.0 * 16.0 * 64.0,
            PeakInstruction::Avx512Bf16Dot => 2.0 * 16.0 * 2.0,
            PeakInstruction::Avx512VnniDot => 2.0 * 16.0 * 4.0,
            PeakInstruction::Avx512VnniWords => 2.0 * 16.0 * 2.0,
            PeakInstruction::Avx2WordPairs => 2.0 * 8.0 * 2.0,
            PeakInstruction::FmaYmm => 2.0 * 8.0,
            PeakInstruction::FmaZmm => 2.0 * 16.0,
            PeakInstruction::NeonFmla => 2.0 * 4.0,
        }
    }

    /// Instructions per pass and thread: enough that a pass (~5-15 ms) is long beside the
    /// timer's resolution and the broadcast's start-up.
    fn per_pass(self) -> usize {
        match self {
            // A software model's rate means nothing: a few products show that the pass runs.
            PeakInstruction::AmxBf16Tile | PeakInstruction::AmxInt8Tile
                if crate::dispatch::AMX_EMULATED =>
            {
                1 << 4
            }
            PeakInstruction::AmxBf16Tile | PeakInstruction::AmxInt8Tile => 1 << 20,
            PeakInstruction::Avx512Bf16Dot
            | PeakInstruction::Avx512VnniDot
            | PeakInstruction::Avx512VnniWords => 1 << 24,
            PeakInstruction::Avx2WordPairs
            | PeakInstruction::FmaYmm
            | PeakInstruction::FmaZmm
            | PeakInstruction::NeonFmla => 1 << 26,
        }
    }

    /// Can this process run it (the CPU has it, and for AMX the OS granted the tiles)?
    pub fn is_available(self) -> bool {
        match self {
            PeakInstruction::AmxBf16Tile | PeakInstruction::AmxInt8Tile => {
                KernelTable::get(SimdLevel::Avx512, true).is_some()
            }
            PeakInstruction::Avx512Bf16Dot => {
                SimdLevel::Avx512.is_supported() && crate::dispatch::cpu_features().avx512_bf16
            }
            PeakInstruction::Avx512VnniDot | PeakInstruction::Avx512VnniWords => {
                SimdLevel::Avx512.is_supported() && crate::dispatch::cpu_features().avx512_vnni
            }
            PeakInstruction::Avx2WordPairs => SimdLevel::Avx2.is_supported(),
            PeakInstruction::FmaYmm => SimdLevel::Avx2.is_supported(),
            PeakInstruction::FmaZmm => SimdLevel::Avx512.is_supported(),
            PeakInstruction::NeonFmla => SimdLevel::Neon.is_supported(),
        }
    }

    /// The f32 FMA at `level`'s vector width, what its generic (pulp) kernels multiply-add with
    /// (`None` for the scalar level).
    pub fn vector_fma(level: SimdLevel) -> Option<PeakInstruction> {
        match level {
            SimdLevel::Scalar => None,
            SimdLevel::Avx2 => Some(PeakInstruction::FmaYmm),
            SimdLevel::Avx512 => Some(PeakInstruction::FmaZmm),
            SimdLevel::Neon => Some(PeakInstruction::NeonFmla),
        }
    }
}

/// The instructions attention's prefill multiplies with: one for the scores `Q K^T`, one for
/// `P V`. Each product is half of attention's FLOP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionInstructions {
    pub scores: PeakInstruction,
    pub values: PeakInstruction,
}

impl AttentionInstructions {
    /// One name where both products run on the same instruction, else `scores (Q K) + values
    /// (P V)`: what `bench` prints and records as `peak.instruction`.
    pub fn name(self) -> String {
        if self.scores == self.values {
            self.scores.name().to_string()
        } else {
            format!(
                "{} (Q K) + {} (P V)",
                self.scores.name(),
                self.values.name()
            )
        }
    }
}

/// The instructions attention's prefill runs its products on with `table`, a `dtype` cache and
/// `head_dim` (`None` at the scalar level): AMX tiles for both where
/// [`prefill_uses_amx_tiles`]; else, on the vector path, `vdpbf16ps` over a bf16 cache where
/// the CPU has AVX512-BF16, `vpdpbusd` and `vpdpwssd` (AVX512-VNNI) or `vpmaddwd` (AVX2) over an
/// int8 one, and the f32 FMA of the table's level for the rest (an int8 cache's integer `P V`
/// without a pair kernel included: plain code the compiler vectorizes).
pub fn attention_prefill_peak(
    table: &KernelTable,
    dtype: KvDtype,
    head_dim: usize,
) -> Option<AttentionInstructions> {
    if prefill_uses_amx_tiles(table, dtype, head_dim) {
        let scores = match dtype {
            KvDtype::Int8 => PeakInstruction::AmxInt8Tile,
            _ => PeakInstruction::AmxBf16Tile,
        };
        return Some(AttentionInstructions {
            scores,
            values: PeakInstruction::AmxBf16Tile,
        });
    }
    let fma = PeakInstruction::vector_fma(table.level())?;
    let dots = table.lane_dots();
    let (scores, values) = match dtype {
        KvDtype::Bf16 if dots.bf16 => (
            PeakInstruction::Avx512Bf16Dot,
            PeakInstruction::Avx512Bf16Dot,
        ),
        KvDtype::Int8 if dots.int8 => (
            PeakInstruction::Avx512VnniDot,
            PeakInstruction::Avx512VnniWords,
        ),
        KvDtype::Int8 if dots.int8_pairs => (
            PeakInstruction::Avx2WordPairs,
            PeakInstruction::Avx2WordPairs,
        ),
        _ => (fma, fma),
    };
    Some(AttentionInstructions { scores, values })
}

/// The peak of attention's FLOP on `instructions`, half of them on each: the rate at which
/// both halves would finish if each ran at its instruction's peak.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionPeak {
    pub instructions: AttentionInstructions,
    pub scores: MatrixPeak,
    pub values: MatrixPeak,
    /// `2 / (1 / scores + 1 / values)` FLOP per second.
    pub flops_per_second: f64,
}

/// [`AttentionPeak`] on the current rayon pool (each instruction probed once), or `None` where
/// this process cannot run one of them.
pub fn measure_attention_peak_in_current_pool(
    instructions: AttentionInstructions,
) -> Option<AttentionPeak> {
    let scores = measure_peak_in_current_pool(instructions.scores)?;
    let values = if instructions.values == instructions.scores {
        scores
    } else {
        measure_peak_in_current_pool(instructions.values)?
    };
    Some(AttentionPeak {
        instructions,
        scores,
        values,
        flops_per_second: halves_rate(scores.flops_per_second, values.flops_per_second),
    })
}

/// The rate of work split in two equal halves, run one after the other at `a` and at `b`.
pub fn halves_rate(a: f64, b: f64) -> f64 {
    2.0 / (1.0 / a + 1.0 / b)
}

/// The peak of one instruction on the current rayon pool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatrixPeak {
    pub instruction: PeakInstruction,
    /// Median over the passes, all threads together (a multiply-add counts 2).
    pub flops_per_second: f64,
}

/// Passes of the probe; the fastest is reported: on a shared host a pass can only be slowed (a
/// neighbour on one of the cores halved the median of some runs, and the kernels' ratios to it
/// came out above 1), never sped up.
const PASSES: usize = 5;

/// The peak of `instruction` on every worker of the current rayon pool, or `None` where this
/// process cannot run it.
pub fn measure_peak_in_current_pool(instruction: PeakInstruction) -> Option<MatrixPeak> {
    if !instruction.is_available() {
        return None;
    }
    let flop_per_thread = instruction.flop() * instruction.per_pass() as f64;
    let threads = rayon::current_num_threads();
    let mut rates: Vec<f64> = (0..PASSES)
        .map(|_| {
            let start = Instant::now();
            // SAFETY: `is_available` checked the CPU (and the OS, for AMX) above.
            rayon::broadcast(|_| unsafe { run_pass(instruction) });
            flop_per_thread * threads as f64 / start.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    Some(MatrixPeak {
        instruction,
        flops_per_second: rates[PASSES - 1],
    })
}

/// One pass of `instruction` on the calling thread, returning its FLOP (`None` where this
/// process cannot run it): for callers that time passes themselves, e.g. in CPU seconds.
pub fn run_one_pass(instruction: PeakInstruction) -> Option<f64> {
    if !instruction.is_available() {
        return None;
    }
    // SAFETY: `is_available` checked the CPU (and the OS, for AMX) above.
    unsafe { run_pass(instruction) };
    Some(instruction.flop() * instruction.per_pass() as f64)
}

/// # Safety
/// `instruction.is_available()`.
unsafe fn run_pass(instruction: PeakInstruction) {
    let n = instruction.per_pass();
    // SAFETY: the caller's contract: the instruction's features are present.
    unsafe {
        match instruction {
            #[cfg(target_arch = "x86_64")]
            PeakInstruction::AmxBf16Tile => x86::tile_pass::<false>(n),
            #[cfg(target_arch = "x86_64")]
            PeakInstruction::AmxInt8Tile => x86::tile_pass::<true>(n),
            #[cfg(target_arch = "x86_64")]
            PeakInstruction::Avx512Bf16Dot => x86::bf16_dot_pass(n),
            #[cfg(target_arch = "x86_64")]
            PeakInstruction::Avx512VnniDot => x86::vnni_dot_pass(n),
            #[cfg(target_arch = "x86_64")]
            PeakInstruction::Avx512VnniWords => x86::vnni_words_pass(n),
            #[cfg(target_arch = "x86_64")]
            PeakInstruction::Avx2WordPairs => x86::word_pairs_pass(n),
            #[cfg(target_arch = "x86_64")]
            PeakInstruction::FmaYmm => x86::fma_ymm_pass(n),
            #[cfg(target_arch = "x86_64")]
            PeakInstruction::FmaZmm => x86::fma_zmm_pass(n),
            #[cfg(target_arch = "aarch64")]
            PeakInstruction::NeonFmla => neon::fmla_pass(n),
            _ => unreachable!("{instruction:?} is not available on this architecture"),
        }
    }
}

/// `$chains` independent accumulators from `$zero`, each stepped `$n / $chains` times by
/// `$step` on its own value `$x`: no step waits for another chain's, so enough chains (latency x
/// pipes) keep the instruction's pipes full. The result is kept from the optimizer.
#[cfg(target_arch = "x86_64")]
macro_rules! independent_chains {
    ($n:expr, $chains:expr, $zero:expr, |$x:ident| $step:expr) => {{
        let mut acc = [$zero; $chains];
        for _ in 0..$n / $chains {
            for $x in acc.iter_mut() {
                *$x = $step;
            }
        }
        std::hint::black_box(acc);
    }};
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    /// Four independent accumulator tiles over two A and two B tiles (what the prefill
    /// microkernels do, without the loads): `tdpbf16ps`, or `tdpbusd` with `INT8`.
    ///
    /// # Safety
    /// AMX must be usable by this process.
    pub(super) unsafe fn tile_pass<const INT8: bool>(n: usize) {
        use crate::aligned::Aligned;
        use crate::attention::score_product;
        use crate::matmul::amx::tiles::Tiles;
        // Small values (bf16 1/1024 pairs), so the sums stay normal numbers throughout.
        let operand = Aligned([0x3a80_3a80u32; 256]);
        // SAFETY: the caller's contract.
        let tiles = unsafe { Tiles::configure() };
        tiles.zero::<0>();
        tiles.zero::<1>();
        tiles.zero::<2>();
        tiles.zero::<3>();
        let ptr = operand.0.as_ptr().cast::<u8>();
        // SAFETY: the operand is 16 rows of 64 bytes.
        unsafe {
            tiles.load::<4>(ptr, 64);
            tiles.load::<5>(ptr, 64);
            tiles.load::<6>(ptr, 64);
            tiles.load::<7>(ptr, 64);
        }
        for _ in 0..n / 4 {
            score_product::<INT8, 0, 4, 6>(&tiles);
            score_product::<INT8, 1, 4, 7>(&tiles);
            score_product::<INT8, 2, 5, 6>(&tiles);
            score_product::<INT8, 3, 5, 7>(&tiles);
        }
    }

    /// Eight independent accumulators (the instruction's latency over its throughput).
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) fn bf16_dot_pass(n: usize) {
        let a: __m512bh = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3), _mm512_set1_ps(1e-3));
        independent_chains!(n, 8, _mm512_setzero_ps(), |x| _mm512_dpbf16_ps(*x, a, a));
    }

    /// `FMA_CHAINS` accumulators of `vpdpbusd` (5 cycles' latency on Intel, 2 pipes on server
    /// cores): the sums wrap harmlessly, nothing reads them.
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) fn vnni_dot_pass(n: usize) {
        let (a, b) = (
            _mm512_set1_epi32(std::hint::black_box(0x0102_0304)),
            _mm512_set1_epi32(0x0403_0201),
        );
        independent_chains!(n, FMA_CHAINS, _mm512_setzero_si512(), |x| {
            _mm512_dpbusd_epi32(*x, a, b)
        });
    }

    /// The same for `vpdpwssd` (i16 pairs, `P V` over int8 values), the instruction itself
    /// (`word_dots`).
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) fn vnni_words_pass(n: usize) {
        let (a, b) = (
            _mm512_set1_epi32(std::hint::black_box(0x0102_0304)),
            _mm512_set1_epi32(0x0403_0201),
        );
        independent_chains!(n, FMA_CHAINS, _mm512_setzero_si512(), |x| {
            // SAFETY: the caller's contract (AVX512-VNNI).
            unsafe { crate::word_dots::vpdpwssd(*x, a, b) }
        });
    }

    /// `FMA_CHAINS` accumulators, each `acc += vpmaddwd(a_i, b)` as the AVX2 int8 scores do
    /// (`n` pairs of instructions). The `a_i` are read from memory each round, as the kernel's
    /// rows are: the opaque `black_box` of their address keeps the compiler from hoisting the
    /// products, which would otherwise be loop-invariant.
    #[target_feature(enable = "avx2")]
    pub(super) fn word_pairs_pass(n: usize) {
        let operands: [__m256i; FMA_CHAINS] =
            std::array::from_fn(|i| _mm256_set1_epi32(0x0003_0005 + i as i32));
        let b = _mm256_set1_epi32(0x0007_0002);
        let mut acc = [_mm256_setzero_si256(); FMA_CHAINS];
        for _ in 0..n / FMA_CHAINS {
            std::hint::black_box(&operands);
            for (x, a) in acc.iter_mut().zip(&operands) {
                *x = _mm256_add_epi32(*x, _mm256_madd_epi16(*a, b));
            }
        }
        std::hint::black_box(acc);
    }

    /// Independent FMA chains a core must keep in flight: latency x pipes. Zen 3/4 and Intel
    /// cores since Skylake have 2 FMA pipes of 4 cycles' latency (8 chains); 12 covers a
    /// 6-cycle latency and leaves 2 of AVX2's 16 registers for the operands.
    const FMA_CHAINS: usize = 12;

    /// `FMA_CHAINS` accumulators, each `acc += 1e-3 * 1e-3` (`vfmadd231ps`, the kernels' form;
    /// the factor hidden from the compiler): the sums stay normal numbers of a few units, and
    /// an FMA of one chain never waits for another.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn fma_ymm_pass(n: usize) {
        let (a, b) = (
            _mm256_set1_ps(std::hint::black_box(1e-3)),
            _mm256_set1_ps(1e-3),
        );
        independent_chains!(n, FMA_CHAINS, _mm256_setzero_ps(), |x| {
            _mm256_fmadd_ps(a, b, *x)
        });
    }

    /// The same on zmm (AVX-512 has 32 registers: 12 chains fit with room to spare).
    #[target_feature(enable = "avx512f")]
    pub(super) fn fma_zmm_pass(n: usize) {
        let (a, b) = (
            _mm512_set1_ps(std::hint::black_box(1e-3)),
            _mm512_set1_ps(1e-3),
        );
        independent_chains!(n, FMA_CHAINS, _mm512_setzero_ps(), |x| {
            _mm512_fmadd_ps(a, b, *x)
        });
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use core::arch::aarch64::*;

    /// 16 chains: cores such as Apple's have 4 FMA pipes of 4 cycles' latency; NEON has 32
    /// registers.
    const CHAINS: usize = 16;

    /// As `fma_ymm_pass`, on 4 lanes.
    #[target_feature(enable = "neon")]
    pub(super) fn fmla_pass(n: usize) {
        let (a, b) = (vdupq_n_f32(std::hint::black_box(1e-3)), vdupq_n_f32(1e-3));
        let mut acc = [vdupq_n_f32(0.0); CHAINS];
        for _ in 0..n / CHAINS {
            for x in acc.iter_mut() {
                *x = vfmaq_f32(*x, a, b);
            }
        }
        std::hint::black_box(acc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_reports_a_positive_rate_for_every_instruction_this_cpu_runs() {
        for instruction in PeakInstruction::ALL {
            let peak = measure_peak_in_current_pool(instruction);
            assert_eq!(
                peak.is_some(),
                instruction.is_available(),
                "{instruction:?}"
            );
            if let Some(peak) = peak {
                assert!(
                    peak.flops_per_second.is_finite() && peak.flops_per_second > 0.0,
                    "{peak:?}"
                );
            }
        }
    }

    #[test]
    fn attention_is_reported_against_instructions_every_vector_table_can_run() {
        for table in KernelTable::all_supported() {
            for dtype in [KvDtype::F32, KvDtype::Bf16, KvDtype::Int8] {
                let instructions = attention_prefill_peak(table, dtype, 128);
                match table.level() {
                    SimdLevel::Scalar => assert_eq!(instructions, None),
                    _ => assert!(
                        instructions
                            .is_some_and(|i| i.scores.is_available() && i.values.is_available()),
                        "{table} {dtype:?}: {instructions:?}"
                    ),
                }
            }
        }
        let pair = |scores, values| Some(AttentionInstructions { scores, values });
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = KernelTable::get(SimdLevel::Avx2, false) {
            use PeakInstruction::{Avx2WordPairs, FmaYmm};
            assert_eq!(
                attention_prefill_peak(avx2, KvDtype::Bf16, 128),
                pair(FmaYmm, FmaYmm)
            );
            assert_eq!(
                attention_prefill_peak(avx2, KvDtype::Int8, 128),
                pair(Avx2WordPairs, Avx2WordPairs)
            );
        }
        if let Some(avx512) = KernelTable::get(SimdLevel::Avx512, false) {
            let features = crate::dispatch::cpu_features();
            let bf16_or_fma = if features.avx512_bf16 {
                PeakInstruction::Avx512Bf16Dot
            } else {
                PeakInstruction::FmaZmm
            };
            // Without VNNI an int8 cache's products run on the generic path.
            let (scores, values) = if features.avx512_vnni {
                (
                    PeakInstruction::Avx512VnniDot,
                    PeakInstruction::Avx512VnniWords,
                )
            } else {
                (PeakInstruction::FmaZmm, PeakInstruction::FmaZmm)
            };
            assert_eq!(
                attention_prefill_peak(avx512, KvDtype::Bf16, 128),
                pair(bf16_or_fma, bf16_or_fma)
            );
            assert_eq!(
                attention_prefill_peak(avx512, KvDtype::Int8, 128),
                pair(scores, values)
            );
        }
        if let Some(amx) = KernelTable::get(SimdLevel::Avx512, true) {
            use PeakInstruction::{AmxBf16Tile, AmxInt8Tile, Avx512VnniDot, Avx512VnniWords};
            assert_eq!(
                attention_prefill_peak(amx, KvDtype::Bf16, 128),
                pair(AmxBf16Tile, AmxBf16Tile)
            );
            assert_eq!(
                attention_prefill_peak(amx, KvDtype::Int8, 128),
                pair(AmxInt8Tile, AmxBf16Tile)
            );
            // At head dims in part chunks an int8 cache stays on the vector path, with both
            // integer dot products.
            assert_eq!(
                attention_prefill_peak(amx, KvDtype::Int8, 96),
                pair(Avx512VnniDot, Avx512VnniWords)
            );
        }
    }

    #[test]
    fn the_attention_peak_is_the_rate_of_its_two_halves() {
        assert_eq!(halves_rate(2.0, 2.0), 2.0);
        // One unit at 1 and one at 3 take 1 + 1/3 seconds: 2 units in 4/3 s.
        assert!((halves_rate(1.0, 3.0) - 1.5).abs() < 1e-12);
        let table = KernelTable::current();
        if let Some(instructions) = attention_prefill_peak(table, KvDtype::Int8, 128) {
            let peak = measure_attention_peak_in_current_pool(instructions).unwrap();
            let (s, v) = (peak.scores.flops_per_second, peak.values.flops_per_second);
            assert_eq!(peak.scores.instruction, instructions.scores);
            assert_eq!(peak.values.instruction, instructions.values);
            assert!(peak.flops_per_second >= s.min(v) && peak.flops_per_second <= s.max(v));
            assert_eq!(peak.flops_per_second, halves_rate(s, v));
        }
    }
}
