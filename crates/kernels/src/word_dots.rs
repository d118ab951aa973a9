//! `vpdpwssd` (AVX512-VNNI: 16 lanes of 2-term i16 dot products added to i32) as the instruction
//! itself. Written with the intrinsic, LLVM splits it into `vpmaddwd` + `vpaddd` for CPUs it does
//! not know to run it fast (the generic x86-64 tuning these kernels are compiled with): two
//! instructions for one, which halved the rate of lane prefill's int8 `P V` on an Intel Xeon
//! whose `vpdpwssd` retires as fast as `vpdpbusd` (docs/performance.md).

#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::__m512i;

/// `acc + sum of the two i16 products in each 32-bit lane of a and b`, wrapping.
///
/// # Safety
/// The CPU has AVX512-VNNI.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512vnni")]
pub(crate) unsafe fn vpdpwssd(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
    let mut acc = acc;
    // SAFETY: the caller's contract; registers only.
    unsafe {
        core::arch::asm!(
            "vpdpwssd {acc}, {a}, {b}",
            acc = inout(zmm_reg) acc,
            a = in(zmm_reg) a,
            b = in(zmm_reg) b,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    acc
}
