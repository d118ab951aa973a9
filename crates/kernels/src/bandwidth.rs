//! Read-bandwidth probe: how fast this machine streams memory that is not in any cache.
//!
//! Benches and `gattn-cpu bench` print their figures as a ratio to this number, measured in the
//! same run, so a noisy shared machine moves both sides together. The buffer is far larger than
//! the last-level cache, each thread sums its own contiguous slice (the access pattern of a
//! row-parallel mat-vec), and the median of several passes is returned.

use std::time::Instant;

/// Bytes the probe streams per pass: 8x a 32 MiB L3, so caches hold almost none of it.
pub const PROBE_BYTES: usize = 256 << 20;

/// Median read bandwidth in GB/s (1e9 bytes per second) with `threads` threads (a dedicated rayon
/// pool of that size, so the caller's pool is untouched).
pub fn measure_read_bandwidth_gbps(threads: usize) -> f64 {
    measure_read_bandwidth_gbps_with(threads, PROBE_BYTES, 9)
}

/// As [`measure_read_bandwidth_gbps`] with an explicit buffer size and pass count.
pub fn measure_read_bandwidth_gbps_with(threads: usize, bytes: usize, passes: usize) -> f64 {
    let threads = threads.max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("building a rayon pool for the bandwidth probe");
    pool.install(|| measure_read_bandwidth_gbps_in_current_pool(bytes, passes))
}

/// The probe on the rayon pool the caller runs in (one slice per worker), e.g. the global pool a
/// command sized with `--threads`, so the probe and the measured work use the same threads.
pub fn measure_read_bandwidth_gbps_in_current_pool(bytes: usize, passes: usize) -> f64 {
    ReadProbe::new(bytes).median_gbps(passes)
}

/// A resident buffer to time read passes over, so a benchmark can alternate probe passes with
/// the work it measures and compare the two under the same host conditions.
pub struct ReadProbe {
    /// Anonymous memory asking for 2 MiB pages, as the checkpoint mappings do: the probe must
    /// not read on smaller pages than the weights it is compared with.
    buffer: memmap2::MmapMut,
    slice_len: usize,
}

impl ReadProbe {
    /// A buffer of about `bytes`, one slice per worker of the current rayon pool.
    pub fn new(bytes: usize) -> Self {
        use rayon::prelude::*;
        let threads = rayon::current_num_threads().max(1);
        let words = (bytes / 8).max(threads * 64);
        let mut buffer =
            memmap2::MmapMut::map_anon(words * 8).expect("mapping the bandwidth probe's buffer");
        #[cfg(target_os = "linux")]
        let _ = buffer.advise(memmap2::Advice::HugePage);
        let slice_len = words.div_ceil(threads);
        // Filled by the threads that will read it, so pages are resident before timing starts.
        bytemuck::cast_slice_mut::<u8, u64>(&mut buffer)
            .par_chunks_mut(slice_len)
            .enumerate()
            .for_each(|(i, chunk)| {
                for (j, w) in chunk.iter_mut().enumerate() {
                    *w = (i * 31 + j) as u64;
                }
            });
        ReadProbe { buffer, slice_len }
    }

    /// Bytes one pass reads (all of them resident).
    pub fn bytes(&self) -> usize {
        self.buffer.len()
    }

    /// One timed pass over the whole buffer on the current pool, in GB/s.
    pub fn pass_gbps(&self) -> f64 {
        use rayon::prelude::*;
        let start = Instant::now();
        let sum = bytemuck::cast_slice::<u8, u64>(&self.buffer)
            .par_chunks(self.slice_len)
            .map(sum_words)
            .reduce(|| 0, u64::wrapping_add);
        let seconds = start.elapsed().as_secs_f64();
        std::hint::black_box(sum);
        self.bytes() as f64 / seconds / 1e9
    }

    /// The median of `passes` (at least 1) passes, in GB/s.
    pub fn median_gbps(&self, passes: usize) -> f64 {
        let mut rates: Vec<f64> = (0..passes.max(1)).map(|_| self.pass_gbps()).collect();
        rates.sort_by(f64::total_cmp);
        rates[rates.len() / 2]
    }
}

/// Sums a slice with the widest loads the CPU has (whatever level the kernels are forced to: the
/// probe measures the machine). Why not plain Rust: compiled for baseline x86-64 it issues
/// 16-byte loads, which stream markedly slower than 64-byte loads on some CPUs, and that made
/// every roofline ratio look better than it was.
fn sum_words(words: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            return unsafe { sum_words_avx512(words) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { sum_words_avx2(words) };
        }
    }
    sum_words_portable(words)
}

/// 8 independent accumulators, so the loop is limited by loads, not by adds.
fn sum_words_portable(words: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let mut chunks = words.chunks_exact(8);
    for chunk in &mut chunks {
        for (a, w) in acc.iter_mut().zip(chunk) {
            *a = a.wrapping_add(*w);
        }
    }
    let tail: u64 = chunks.remainder().iter().fold(0, |a, w| a.wrapping_add(*w));
    acc.iter().fold(tail, |a, w| a.wrapping_add(*w))
}

/// Four 64-byte loads an iteration into four accumulators. Intrinsics, because the portable loop
/// inlined under `target_feature(enable = "avx512f")` compiles to code that streams slower.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn sum_words_avx512(words: &[u64]) -> u64 {
    use core::arch::x86_64::*;
    const STEP: usize = 4 * 8;
    let main = words.len() / STEP * STEP;
    let mut acc = [_mm512_setzero_si512(); 4];
    let p = words.as_ptr();
    for i in (0..main).step_by(STEP) {
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: i + 8j + 8 <= main <= words.len().
            let v = unsafe { _mm512_loadu_si512(p.add(i + 8 * j).cast()) };
            *a = _mm512_add_epi64(*a, v);
        }
    }
    let total = _mm512_add_epi64(
        _mm512_add_epi64(acc[0], acc[1]),
        _mm512_add_epi64(acc[2], acc[3]),
    );
    (_mm512_reduce_add_epi64(total) as u64).wrapping_add(sum_words_portable(&words[main..]))
}

/// Four 32-byte loads an iteration into four accumulators.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum_words_avx2(words: &[u64]) -> u64 {
    use core::arch::x86_64::*;
    const STEP: usize = 4 * 4;
    let main = words.len() / STEP * STEP;
    let mut acc = [_mm256_setzero_si256(); 4];
    let p = words.as_ptr();
    for i in (0..main).step_by(STEP) {
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: i + 4j + 4 <= main <= words.len().
            let v = unsafe { _mm256_loadu_si256(p.add(i + 4 * j).cast()) };
            *a = _mm256_add_epi64(*a, v);
        }
    }
    let mut lanes = [0u64; 4];
    let total = _mm256_add_epi64(
        _mm256_add_epi64(acc[0], acc[1]),
        _mm256_add_epi64(acc[2], acc[3]),
    );
    // SAFETY: lanes holds 4 u64.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), total) };
    lanes
        .iter()
        .fold(sum_words_portable(&words[main..]), |a, w| {
            a.wrapping_add(*w)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sum_is_the_wrapping_sum() {
        let words: Vec<u64> = (0..1000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        for len in [0, 1, 7, 31, 32, 33, 100, 1000] {
            let slice = &words[..len];
            let expected = slice.iter().fold(0u64, |a, w| a.wrapping_add(*w));
            assert_eq!(sum_words_portable(slice), expected, "portable, len {len}");
            assert_eq!(sum_words(slice), expected, "dispatched, len {len}");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 checked.
                let sum = unsafe { sum_words_avx2(slice) };
                assert_eq!(sum, expected, "avx2, len {len}");
            }
        }
    }
}
