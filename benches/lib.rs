//! Shared helpers of the criterion benchmarks (the bench targets are added beside this file). The
//! read-bandwidth probe they report against lives in `gattn_kernels::bandwidth`, shared with
//! `gattn-cpu bench`.

use std::time::Instant;

/// Median wall time of `runs` calls of `f`, after one untimed warm-up call. The benches print
/// these beside criterion's estimates so that ratios compare numbers taken moments apart.
pub fn median_seconds(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
