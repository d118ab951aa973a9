//! The one dispatch point: which SIMD level the fast kernels run at, and the [`KernelTable`] of
//! kernels resolved for it.
//!
//! Detected once (the first call of [`simd_level`]) from the CPU, unless the `GATTN_SIMD`
//! environment variable forces one (`scalar`, `avx2`, `avx512`, `amx`, `neon`), so tests and
//! users can exercise every path on one machine. `amx` is not a level but the AVX-512 level with
//! the AMX entries of the table; `avx512` on an AMX host leaves them out. With AMX,
//! `GATTN_AMX_INT8` (`tdpbssd`, the default, or `bf16`) picks the int8 mat-mat. Kernels also
//! take an explicit table (`*_at` functions, [`KernelTable::all_supported`]) for proptests.

pub(crate) mod table;

use std::fmt;
use std::sync::OnceLock;

use pulp::{Simd, WithSimd};

pub use table::KernelTable;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SimdLevel {
    /// Portable Rust, no intrinsics.
    Scalar,
    /// x86-64 AVX2 + FMA (pulp's V3).
    Avx2,
    /// x86-64 AVX-512 F/BW/VL (pulp's V4); VNNI, BF16 and AMX, where present, pick entries of
    /// the [`KernelTable`].
    Avx512,
    /// aarch64 NEON.
    Neon,
}

impl SimdLevel {
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
            SimdLevel::Neon => "neon",
        }
    }

    pub fn parse(s: &str) -> Option<SimdLevel> {
        match s.trim().to_ascii_lowercase().as_str() {
            "scalar" | "none" => Some(SimdLevel::Scalar),
            "avx2" | "x86-v3" | "v3" => Some(SimdLevel::Avx2),
            "avx512" | "x86-v4" | "v4" => Some(SimdLevel::Avx512),
            "neon" => Some(SimdLevel::Neon),
            _ => None,
        }
    }

    /// Can this CPU run kernels of this level?
    pub fn is_supported(self) -> bool {
        match self {
            SimdLevel::Scalar => true,
            SimdLevel::Avx2 => has_avx2(),
            SimdLevel::Avx512 => has_avx512(),
            SimdLevel::Neon => cfg!(target_arch = "aarch64"),
        }
    }

    /// Every level this CPU can run, lowest first (the proptests iterate over these).
    pub fn all_supported() -> Vec<SimdLevel> {
        [
            SimdLevel::Scalar,
            SimdLevel::Avx2,
            SimdLevel::Avx512,
            SimdLevel::Neon,
        ]
        .into_iter()
        .filter(|l| l.is_supported())
        .collect()
    }

    /// The best level this CPU supports.
    pub fn detect() -> SimdLevel {
        *Self::all_supported()
            .last()
            .expect("scalar is always supported")
    }
}

impl fmt::Display for SimdLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Extra CPU features that pick entries of the [`KernelTable`] at the AVX-512 level, and the
/// vendor (some tuning, such as how densely a mat-vec prefetches, differs per vendor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuFeatures {
    pub avx512_vnni: bool,
    pub avx512_bf16: bool,
    /// AMX-TILE, -BF16 and -INT8 present, and the OS granted this process the tile state (or,
    /// in a build with the `emulated-amx` feature, the software model of the tiles: see
    /// [`AMX_EMULATED`]).
    pub amx: bool,
    pub vendor: CpuVendor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuVendor {
    Intel,
    Amd,
    Other,
}

impl CpuVendor {
    pub fn name(self) -> &'static str {
        match self {
            CpuVendor::Intel => "intel",
            CpuVendor::Amd => "amd",
            CpuVendor::Other => "other",
        }
    }
}

/// This build runs the AMX kernels on a software model of the tiles (the `emulated-amx`
/// feature, for tests on hosts without AMX): `amx` then reports the model, not the CPU.
pub const AMX_EMULATED: bool = cfg!(feature = "emulated-amx");

/// Detected once (under a hypervisor each CPUID instruction traps, so asking per call is slow).
pub fn cpu_features() -> CpuFeatures {
    static FEATURES: OnceLock<CpuFeatures> = OnceLock::new();
    *FEATURES.get_or_init(detect_cpu_features)
}

fn detect_cpu_features() -> CpuFeatures {
    #[cfg(target_arch = "x86_64")]
    {
        CpuFeatures {
            avx512_vnni: std::arch::is_x86_feature_detected!("avx512vnni"),
            avx512_bf16: std::arch::is_x86_feature_detected!("avx512bf16"),
            amx: if AMX_EMULATED {
                true
            } else {
                cpu_has_amx() && os_grants_amx_tiles()
            },
            vendor: x86_vendor(),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        CpuFeatures {
            avx512_vnni: false,
            avx512_bf16: false,
            amx: false,
            vendor: CpuVendor::Other,
        }
    }
}

/// The vendor string of CPUID leaf 0 (EBX, EDX, ECX: "GenuineIntel", "AuthenticAMD").
#[cfg(target_arch = "x86_64")]
fn x86_vendor() -> CpuVendor {
    // CPUID is safe to execute on every x86_64 CPU (a safe intrinsic).
    let leaf = std::arch::x86_64::__cpuid(0);
    let mut name = [0u8; 12];
    for (chunk, reg) in name.chunks_exact_mut(4).zip([leaf.ebx, leaf.edx, leaf.ecx]) {
        chunk.copy_from_slice(&reg.to_le_bytes());
    }
    match &name {
        b"GenuineIntel" => CpuVendor::Intel,
        b"AuthenticAMD" => CpuVendor::Amd,
        _ => CpuVendor::Other,
    }
}

fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx2()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Why the level in force was chosen (shown by `gattn-cpu info`).
#[derive(Debug, Clone)]
pub struct DispatchChoice {
    pub level: SimdLevel,
    /// The AMX entries of the table are in force (`amx` or detection on an AMX host).
    pub amx: bool,
    /// With AMX, int8 mat-mats widen the weights to bf16 tiles (`GATTN_AMX_INT8=bf16`) instead
    /// of `tdpbssd` (the default).
    pub amx_int8_on_bf16: bool,
    pub reason: String,
}

impl DispatchChoice {
    /// The kernels this choice runs.
    pub fn table(&self) -> &'static KernelTable {
        if self.amx && self.amx_int8_on_bf16 {
            return KernelTable::amx_int8_on_bf16().expect("the choice is supported");
        }
        KernelTable::get(self.level, self.amx).expect("the choice is supported")
    }
}

static CHOICE: OnceLock<DispatchChoice> = OnceLock::new();

/// A `GATTN_SIMD` value: a level, and whether the AMX entries are asked for (`amx`).
fn parse_override(value: &str) -> Option<(SimdLevel, bool)> {
    match value.trim().to_ascii_lowercase().as_str() {
        "amx" => Some((SimdLevel::Avx512, true)),
        other => SimdLevel::parse(other).map(|level| (level, false)),
    }
}

/// Decides the level once: `GATTN_SIMD` if set (and supported), else the best detected.
/// An unsupported or unknown override falls back to detection and says so in `reason`.
/// `GATTN_AMX_INT8` then picks the int8 mat-mat of an AMX table.
pub fn dispatch_choice() -> &'static DispatchChoice {
    CHOICE.get_or_init(|| {
        let mut choice = level_choice();
        if choice.amx {
            let (on_bf16, note) = amx_int8_choice(std::env::var("GATTN_AMX_INT8").ok().as_deref());
            choice.amx_int8_on_bf16 = on_bf16;
            choice.reason.push_str(note);
        }
        choice
    })
}

/// The int8 mat-mat of an AMX table for a `GATTN_AMX_INT8` value: on bf16 tiles (`true`) or
/// `tdpbssd`, and what `reason` adds.
fn amx_int8_choice(value: Option<&str>) -> (bool, &'static str) {
    match value.map(|v| v.trim().to_ascii_lowercase()) {
        None => (false, ""),
        Some(v) if v == "bf16" => (true, "; GATTN_AMX_INT8=bf16"),
        Some(v) if v == "tdpbssd" => (false, ""),
        Some(_) => (
            false,
            "; GATTN_AMX_INT8 is not one of tdpbssd, bf16: int8 mat-mat on tdpbssd",
        ),
    }
}

/// The level and the AMX entries: `GATTN_SIMD` if set and supported, else detection.
fn level_choice() -> DispatchChoice {
    let detected = SimdLevel::detect();
    let detected_amx = KernelTable::get(detected, true).is_some();
    let fallback = |reason: String| DispatchChoice {
        level: detected,
        amx: detected_amx,
        amx_int8_on_bf16: false,
        reason,
    };
    let Ok(value) = std::env::var("GATTN_SIMD") else {
        return fallback("detected".to_string());
    };
    let detected_name = KernelTable::get(detected, detected_amx)
        .expect("the detected level is supported")
        .name();
    match parse_override(&value) {
        Some((level, amx)) if KernelTable::get(level, amx).is_some() => DispatchChoice {
            level,
            amx,
            amx_int8_on_bf16: false,
            reason: format!("forced by GATTN_SIMD={value}"),
        },
        Some(_) => fallback(format!(
            "GATTN_SIMD={value} asks for what this CPU lacks; using detected {detected_name}"
        )),
        None => fallback(format!(
            "GATTN_SIMD={value} is not one of scalar, avx2, avx512, amx, neon; using detected {detected_name}"
        )),
    }
}

/// The SIMD level every fast kernel runs at in this process.
pub fn simd_level() -> SimdLevel {
    dispatch_choice().level
}

/// Runs a pulp kernel `op` at `level` (the generic kernels: attention, activations). The level
/// must be supported (checked by the public entry points); if it somehow is not, the portable
/// scalar path runs instead.
pub(crate) fn run_at<Op: WithSimd>(level: SimdLevel, op: Op) -> Op::Output {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => {
            if let Some(simd) = pulp::x86::V4::try_new() {
                return Simd::vectorize(simd, op);
            }
        }
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => {
            if let Some(simd) = pulp::x86::V3::try_new() {
                return Simd::vectorize(simd, op);
            }
        }
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => {
            if let Some(simd) = pulp::aarch64::Neon::try_new() {
                return Simd::vectorize(simd, op);
            }
        }
        _ => {}
    }
    Simd::vectorize(pulp::Scalar::new(), op)
}

#[cfg(target_arch = "x86_64")]
fn cpu_has_amx() -> bool {
    // CPUID leaf 7, sub-leaf 0, EDX: bit 22 AMX-BF16, bit 24 AMX-TILE, bit 25 AMX-INT8.
    // (CPUID is a safe intrinsic; a leaf past the CPU's maximum reads as zeros or the
    // highest leaf, which never has all three bits.)
    let edx = core::arch::x86_64::__cpuid_count(7, 0).edx;
    let wanted = (1 << 22) | (1 << 24) | (1 << 25);
    edx & wanted == wanted
}

/// Linux hands out the 8 KiB of tile data per process on request; using a tile before that
/// raises SIGILL. The permission covers every thread of the process, so asking once suffices
/// (`cpu_features` asks once).
#[cfg(target_arch = "x86_64")]
fn os_grants_amx_tiles() -> bool {
    #[cfg(target_os = "linux")]
    {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: a plain system call with integer arguments.
        let status = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        status == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gattn_amx_int8_values_pick_the_int8_mat_mat_of_an_amx_table() {
        assert_eq!(amx_int8_choice(None), (false, ""));
        assert!(amx_int8_choice(Some("bf16")).0);
        assert!(amx_int8_choice(Some(" BF16 ")).0);
        assert_eq!(amx_int8_choice(Some("tdpbssd")), (false, ""));
        let (on_bf16, note) = amx_int8_choice(Some("fp8"));
        assert!(
            !on_bf16 && note.contains("not one of tdpbssd, bf16"),
            "{note}"
        );
    }

    #[test]
    fn gattn_simd_values_name_a_level_and_whether_amx_entries_are_wanted() {
        assert_eq!(parse_override("amx"), Some((SimdLevel::Avx512, true)));
        assert_eq!(parse_override(" AVX512 "), Some((SimdLevel::Avx512, false)));
        assert_eq!(parse_override("v3"), Some((SimdLevel::Avx2, false)));
        assert_eq!(parse_override("scalar"), Some((SimdLevel::Scalar, false)));
        assert_eq!(parse_override("sse2"), None);
    }

    #[test]
    fn the_choice_runs_a_supported_table() {
        let choice = dispatch_choice();
        let table = choice.table();
        assert_eq!((table.level(), table.amx()), (choice.level, choice.amx));
    }
}
