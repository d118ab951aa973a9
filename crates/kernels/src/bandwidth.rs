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
    buffer: Vec<u64>,
    slice_len: usize,
}

impl ReadProbe {
    /// A buffer of about `bytes`, one slice per worker of the current rayon pool.
    pub fn new(bytes: usize) -> Self {
        use rayon::prelude::*;
        let threads = rayon::current_num_threads().max(1);
        let words = (bytes / 8).max(threads * 64);
        // Filled by the threads that will read it, so pages are resident before timing starts.
        let mut buffer = vec![0u64; words];
        let slice_len = words.div_ceil(threads);
        buffer
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
        self.buffer.len() * 8
    }

    /// One timed pass over the whole buffer on the current pool, in GB/s.
    pub fn pass_gbps(&self) -> f64 {
        use rayon::prelude::*;
        let start = Instant::now();
        let sum = self
            .buffer
            .par_chunks(self.slice_len)
            .map(sum_words)
            .reduce(|| 0, u64::wrapping_add);
        let seconds = start.elapsed().as_secs_f64();
        std::hint::black_box(sum);
        (self.buffer.len() * 8) as f64 / seconds / 1e9
    }

    /// The median of `passes` (at least 1) passes, in GB/s.
    pub fn median_gbps(&self, passes: usize) -> f64 {
        let mut rates: Vec<f64> = (0..passes.max(1)).map(|_| self.pass_gbps()).collect();
        rates.sort_by(f64::total_cmp);
        rates[rates.len() / 2]
    }
}

/// Sums a slice with 8 independent accumulators, so the loop is limited by loads, not by adds.
fn sum_words(words: &[u64]) -> u64 {
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
