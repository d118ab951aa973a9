//! One full decode step (forward of one token: 28 layers + lm_head) of the Qwen3-1.7B shape, after
//! 512 and 4096 cached tokens, for bf16 and int8 weights (bf16 KV cache), on 2 threads; each as a
//! ratio of its bytes read per token (weights + KV, as `gattn-cpu bench` counts them) per second
//! to the read bandwidth probed right before and after it.
//!
//! The checkpoint is `GATTN_BENCH_MODEL` (e.g. a `gattn-cpu init --preset qwen3-1.7b --dtype bf16`
//! directory) or else a random one written once to a temporary directory (~3.4 GB, a minute or
//! so). The cache is filled with synthetic keys and values rather than by a prefill: a decode
//! step's cost does not depend on their values, and a 4096-token prefill would take minutes here.
//! After each step the cache is truncated back, so every step sees the same depth.
//! `GATTN_BENCH_DECODE_WEIGHTS=bf16,int8` and `GATTN_BENCH_DECODE_DEPTHS=512,4096` pick the cases.
//! `cargo bench -p gattn-benches --bench decode`

use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput};
use gattn_benches::{DecodeAtDepth, median_seconds, write_random_qwen3_1_7b};
use gattn_kernels::bandwidth::measure_read_bandwidth_gbps;
use gattn_model::{GateMode, KvDtype, Qwen3Model, WeightFormat};

const THREADS: usize = 2;

fn list_from_env<T>(name: &str, default: &str, parse: impl Fn(&str) -> Option<T>) -> Vec<T> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|item| parse(item.trim()).unwrap_or_else(|| panic!("{name}: cannot parse {item:?}")))
        .collect()
}

/// The checkpoint directory, and the temporary directory that owns it (if one was written).
fn checkpoint() -> (PathBuf, Option<tempfile::TempDir>) {
    if let Ok(dir) = std::env::var("GATTN_BENCH_MODEL") {
        return (PathBuf::from(dir), None);
    }
    let temp = tempfile::tempdir().expect("a temporary directory for the checkpoint");
    eprintln!("(set GATTN_BENCH_MODEL to reuse a checkpoint)");
    write_random_qwen3_1_7b(temp.path(), GateMode::None);
    (temp.path().to_path_buf(), Some(temp))
}

fn main() {
    // The model uses the current (here: global) rayon pool; Criterion is not Send, so no install().
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(THREADS)
        .build_global();
    let formats = list_from_env(
        "GATTN_BENCH_DECODE_WEIGHTS",
        "bf16,int8",
        WeightFormat::parse,
    );
    let depths = list_from_env("GATTN_BENCH_DECODE_DEPTHS", "512,4096", |s| s.parse().ok());
    let (dir, _temp) = checkpoint();
    let mut criterion = Criterion::default().configure_from_args();
    let mut summary = Vec::new();
    for format in formats {
        let mut model = Qwen3Model::load(&dir, format)
            .unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()));
        model.kv_dtype = KvDtype::Bf16;
        let mut group = criterion.benchmark_group("decode_step");
        // A step takes a large fraction of a second: one iteration per sample.
        group
            .sampling_mode(SamplingMode::Flat)
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(4));
        for &depth in &depths {
            let mut decode = DecodeAtDepth::new(&model, depth);
            // Each step attends over depth + 1 rows (its own K/V appended first).
            let traffic = decode.traffic();
            let mut step = || decode.step();
            group.throughput(Throughput::Bytes(traffic.total_bytes));
            group.bench_function(format!("{}/{depth}", format.name()), |b| b.iter(&mut step));
            let before = measure_read_bandwidth_gbps(THREADS);
            let seconds = median_seconds(7, &mut step);
            let after = measure_read_bandwidth_gbps(THREADS);
            let bandwidth = 0.5 * (before + after);
            let gbps = traffic.total_bytes as f64 / seconds / 1e9;
            summary.push(format!(
                "decode step {:4} weights, {depth:5} cached: {:7.1} ms = {:5.2} tok/s, {:.3} GB read ({:.3} weights + {:.3} KV) at {gbps:5.1} GB/s = {:5.1}% of read bandwidth {bandwidth:.1} GB/s (probes {before:.1}, {after:.1})",
                format.name(),
                seconds * 1e3,
                1.0 / seconds,
                traffic.total_bytes as f64 / 1e9,
                traffic.weight_bytes as f64 / 1e9,
                traffic.kv_bytes as f64 / 1e9,
                100.0 * gbps / bandwidth,
            ));
        }
        group.finish();
    }
    criterion.final_summary();
    eprintln!(
        "\n== decode summary ({THREADS} threads, {}) ==",
        dir.display()
    );
    for line in &summary {
        eprintln!("summary: {line}");
    }
}
