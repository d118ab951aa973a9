//! Peak probe of the bf16 dot-product units: how many bf16 multiply-adds per second this
//! machine's matrix tiles (`tdpbf16ps` on AMX) or, without AMX, its AVX512-BF16 dot products
//! (`vdpbf16ps`) retire, on operands that stay in registers.
//!
//! `gattn-cpu bench` reports attention's FLOP rate as a ratio to this figure, measured in the
//! same run on the same threads, as decode is reported against the bandwidth probe.

use std::time::Instant;

use crate::KernelTable;

/// The peak of one instruction on the current rayon pool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatrixPeak {
    /// `tdpbf16ps` or `vdpbf16ps`.
    pub instruction: &'static str,
    /// Median over the passes, all threads together (a multiply-add counts 2).
    pub flops_per_second: f64,
}

/// Passes of the probe (the median is reported) and instructions per pass and thread: enough
/// that a pass is long beside the timer's resolution and the broadcast's start-up.
const PASSES: usize = 5;
const TILE_PRODUCTS_PER_PASS: usize = 1 << 20;
const VECTOR_PRODUCTS_PER_PASS: usize = 1 << 24;

/// The bf16 peak of `table`'s instructions on every worker of the current rayon pool, or `None`
/// where the table has neither AMX nor AVX512-BF16.
pub fn measure_bf16_peak_in_current_pool(table: &KernelTable) -> Option<MatrixPeak> {
    let (instruction, flops_per_thread) = pass_kind(table)?;
    let threads = rayon::current_num_threads();
    let mut rates: Vec<f64> = (0..PASSES)
        .map(|_| {
            let start = Instant::now();
            rayon::broadcast(|_| run_pass(instruction));
            flops_per_thread * threads as f64 / start.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    Some(MatrixPeak {
        instruction,
        flops_per_second: rates[PASSES / 2],
    })
}

/// Which instruction the probe runs with `table`, and the FLOP of one thread's pass.
fn pass_kind(table: &KernelTable) -> Option<(&'static str, f64)> {
    let level = table.level();
    if !cfg!(target_arch = "x86_64") || !level.is_supported() {
        return None;
    }
    if table.amx() {
        // 16 x 16 results of 32-term dot products.
        let flops = 2.0 * 16.0 * 16.0 * 32.0;
        return Some(("tdpbf16ps", flops * TILE_PRODUCTS_PER_PASS as f64));
    }
    if level == crate::SimdLevel::Avx512 && crate::dispatch::cpu_features().avx512_bf16 {
        // 16 lanes of 2-term dot products.
        let flops = 2.0 * 16.0 * 2.0;
        return Some(("vdpbf16ps", flops * VECTOR_PRODUCTS_PER_PASS as f64));
    }
    None
}

#[cfg(target_arch = "x86_64")]
fn run_pass(instruction: &str) {
    if instruction == "tdpbf16ps" {
        // SAFETY: `pass_kind` returned the tile instruction only where AMX is usable.
        unsafe { tile_pass() }
    } else {
        // SAFETY: `pass_kind` returned the vector instruction only where AVX512-BF16 is present.
        unsafe { vector_pass() }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn run_pass(_instruction: &str) {}

/// Four independent accumulator tiles over two A and two B tiles (what the prefill
/// microkernels do, without the loads).
///
/// # Safety
/// AMX must be usable by this process.
#[cfg(target_arch = "x86_64")]
unsafe fn tile_pass() {
    use crate::aligned::Aligned;
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
    for _ in 0..TILE_PRODUCTS_PER_PASS / 4 {
        tiles.dot_bf16::<0, 4, 6>();
        tiles.dot_bf16::<1, 4, 7>();
        tiles.dot_bf16::<2, 5, 6>();
        tiles.dot_bf16::<3, 5, 7>();
    }
}

/// Eight independent accumulators (the instruction's latency over its throughput).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
fn vector_pass() {
    use core::arch::x86_64::*;
    let a: __m512bh = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3), _mm512_set1_ps(1e-3));
    let mut acc = [_mm512_setzero_ps(); 8];
    for _ in 0..VECTOR_PRODUCTS_PER_PASS / 8 {
        for x in acc.iter_mut() {
            *x = _mm512_dpbf16_ps(*x, a, a);
        }
    }
    let mut sum = _mm512_setzero_ps();
    for x in acc {
        sum = _mm512_add_ps(sum, x);
    }
    std::hint::black_box(sum);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_reports_a_positive_rate_where_it_runs() {
        for table in KernelTable::all_supported() {
            if let Some(peak) = measure_bf16_peak_in_current_pool(table) {
                assert!(
                    peak.flops_per_second.is_finite() && peak.flops_per_second > 0.0,
                    "{table}: {peak:?}"
                );
            }
        }
    }
}
