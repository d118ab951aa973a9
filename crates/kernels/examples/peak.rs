//! Prints the peak probe of every instruction this CPU runs (`matrix_peak`), a few rounds each,
//! on a rayon pool of `THREADS` (default: all) workers:
//! `cargo run --release -p gattn-kernels --example peak -- [ROUNDS]`. Beside each round, the
//! share of the pool's cores the process got during it (its CPU time / wall time / threads):
//! on a shared host a low share explains a low peak.

use std::time::Instant;

use gattn_kernels::matrix_peak::{PeakInstruction, measure_peak_in_current_pool};

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(5, |s| s.parse().expect("ROUNDS is a number"));
    if let Some(threads) = std::env::var("THREADS").ok().and_then(|s| s.parse().ok()) {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
            .expect("the first pool");
    }
    let threads = rayon::current_num_threads();
    println!("{threads} threads; GFLOP/s (share of the cores)");
    for instruction in PeakInstruction::ALL {
        if !instruction.is_available() {
            println!("{:16} not on this CPU", instruction.name());
            continue;
        }
        let rounds: Vec<String> = (0..rounds)
            .filter_map(|_| {
                let (cpu, wall) = (cpu_seconds(), Instant::now());
                let peak = measure_peak_in_current_pool(instruction)?;
                let share = (cpu_seconds() - cpu) / wall.elapsed().as_secs_f64() / threads as f64;
                Some(format!("{:.1} ({share:.2})", peak.flops_per_second / 1e9))
            })
            .collect();
        println!("{:16} {}", instruction.name(), rounds.join("  "));
    }
}

/// User + system CPU time of the whole process.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // utime and stime are fields 14 and 15, counted after the parenthesised command name.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| {
        f.iter().filter_map(|t| t.parse::<f64>().ok()).sum()
    });
    ticks / 100.0
}
