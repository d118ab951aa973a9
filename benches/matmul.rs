//! Linear-layer kernels on Qwen3-1.7B shapes, reported against this machine's limits measured in
//! the same run: mat-vec as GB/s of weights streamed (ratio to the read-bandwidth probe), 512-token
//! mat-mat as GFLOP/s (int8: ratio to a measured AVX512-VNNI peak, bf16: to an AVX512-BF16 one). 2 threads (rayon pool).
//!
//! Mat-vec rotates over enough copies of the matrix to exceed the 32 MiB L3, as a model's layers
//! do, so the figures are DRAM figures. `cargo bench -p gattn-benches --bench matmul -- --quick`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use gattn_kernels::bandwidth::{PROBE_BYTES, ReadProbe, measure_read_bandwidth_gbps};
use gattn_kernels::matmul::{Q8Matrix, WeightMatrix, matmul};
use half::bf16;

const THREADS: usize = 2;
const TOKENS: usize = 512;
/// Total weight bytes a mat-vec rotates over (8x L3).
const ROTATION_BYTES: usize = 256 << 20;
/// Alternations of one probe pass and one mat-vec rotation per shape (see `paired_matvec`).
const PAIRED_ROUNDS: usize = 9;

/// (name, k = in_features, n = out_features)
const SHAPES: &[(&str, usize, usize)] = &[
    ("o_proj 2048x2048", 2048, 2048),
    ("q_proj_gated_headwise 2048x2064", 2048, 2064),
    ("q_proj_gated_elementwise 2048x4096", 2048, 4096),
    ("gate_up 2048x6144", 2048, 6144),
    ("down 6144x2048", 6144, 2048),
    ("lm_head 2048x151936", 2048, 151936),
];

#[derive(Clone, Copy, PartialEq)]
enum Format {
    F32,
    Bf16,
    Int8,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::F32 => "f32",
            Format::Bf16 => "bf16",
            Format::Int8 => "int8",
        }
    }
}

/// Owned weights of one format.
enum Owned {
    F32(Vec<f32>),
    Bf16(Vec<bf16>),
    Int8(Q8Matrix<'static>),
}

impl Owned {
    fn view(&self, n: usize, k: usize) -> WeightMatrix<'_> {
        match self {
            Owned::F32(w) => WeightMatrix::f32(w, n, k).unwrap(),
            Owned::Bf16(w) => WeightMatrix::bf16(w, n, k).unwrap(),
            Owned::Int8(q) => WeightMatrix::int8(q),
        }
    }
}

/// Cheap deterministic values in [-0.5, 0.5) (generating 300M of them must not take long).
fn fill(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

fn make(format: Format, n: usize, k: usize, seed: u64) -> Owned {
    let w = fill(n * k, seed);
    match format {
        Format::F32 => Owned::F32(w),
        Format::Bf16 => Owned::Bf16(w.into_iter().map(bf16::from_f32).collect()),
        Format::Int8 => Owned::Int8(Q8Matrix::quantize_f32(&w, n, k).unwrap()),
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Seconds per call from criterion's samples (recorded by `iter_custom`).
struct Samples(Mutex<Vec<f64>>);

impl Samples {
    fn new() -> Self {
        Samples(Mutex::new(Vec::new()))
    }
    fn record(&self, total: Duration, iters: u64) {
        self.0
            .lock()
            .unwrap()
            .push(total.as_secs_f64() / iters as f64);
    }
    /// None when criterion's filter skipped the benchmark.
    fn median(&self) -> Option<f64> {
        let mut v = self.0.lock().unwrap();
        (!v.is_empty()).then(|| median(&mut v))
    }
}

/// Sustained dot-product throughput: 12 independent accumulator chains of `step` on every
/// thread, in GOP/s (`ops_per_call` per call of `step`, one multiply-add = 2 ops as FLOP counts).
fn measure_peak_gops(threads: usize, ops_per_call: u64, chains: fn(u64) -> f32) -> f64 {
    const ITERS: u64 = 20_000_000;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let mut rates = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        pool.broadcast(|_| std::hint::black_box(chains(ITERS)));
        let secs = start.elapsed().as_secs_f64();
        rates.push((ITERS * 12 * ops_per_call * threads as u64) as f64 / secs / 1e9);
    }
    median(&mut rates)
}

/// The AVX512-VNNI `vpdpbusd` (64 u8 x i8 products per instruction) and AVX512-BF16
/// `vdpbf16ps` (32 bf16 products) peaks of this CPU.
fn measure_peaks(threads: usize) -> Peaks {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected;
        // SAFETY (both): each kernel runs only after its feature was detected.
        Peaks {
            vnni: is_x86_feature_detected!("avx512vnni")
                .then(|| measure_peak_gops(threads, 64 * 2, |n| unsafe { vnni_chains(n) })),
            bf16: is_x86_feature_detected!("avx512bf16")
                .then(|| measure_peak_gops(threads, 32 * 2, |n| unsafe { bf16_chains(n) })),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = threads;
        Peaks {
            vnni: None,
            bf16: None,
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn vnni_chains(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let a = _mm512_set1_epi8(3);
    let b = _mm512_set1_epi8(-2);
    let mut acc = [_mm512_setzero_si512(); 12];
    for _ in 0..iters {
        for c in acc.iter_mut() {
            *c = _mm512_dpbusd_epi32(*c, a, b);
        }
    }
    let sum = acc
        .iter()
        .fold(_mm512_setzero_si512(), |s, c| _mm512_add_epi32(s, *c));
    _mm512_reduce_add_epi32(sum) as f32
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
fn bf16_chains(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    // SAFETY: 512 bits of plain data either way.
    let one: __m512bh = unsafe { std::mem::transmute(_mm512_set1_epi16(0x3f80)) };
    let mut acc = [_mm512_setzero_ps(); 12];
    for _ in 0..iters {
        for c in acc.iter_mut() {
            *c = _mm512_dpbf16_ps(*c, one, one);
        }
    }
    let sum = acc
        .iter()
        .fold(_mm512_setzero_ps(), |s, c| _mm512_add_ps(s, *c));
    _mm512_reduce_add_ps(sum)
}

/// The arithmetic peaks the mat-mat figures are compared with (None: not on this CPU).
#[derive(Clone, Copy)]
struct Peaks {
    vnni: Option<f64>,
    bf16: Option<f64>,
}

struct Summary {
    lines: Vec<String>,
}

/// Median ratio, mat-vec GB/s and probe GB/s of `PAIRED_ROUNDS` alternations of one probe pass
/// and one `rotation` (which returns the bytes it streamed). Each ratio compares two passes
/// taken a fraction of a second apart: on this shared host the bandwidth swings by a third
/// between runs minutes apart, which a probe taken before or after a benchmark cannot follow.
fn paired_matvec(probe: &ReadProbe, mut rotation: impl FnMut() -> usize) -> (f64, f64, f64) {
    let (mut ratios, mut matvec, mut read) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..PAIRED_ROUNDS {
        let probe_gbps = probe.pass_gbps();
        let start = Instant::now();
        let bytes = rotation();
        let matvec_gbps = bytes as f64 / start.elapsed().as_secs_f64() / 1e9;
        ratios.push(matvec_gbps / probe_gbps);
        matvec.push(matvec_gbps);
        read.push(probe_gbps);
    }
    (median(&mut ratios), median(&mut matvec), median(&mut read))
}

fn bench_matvec(c: &mut Criterion, summary: &mut Summary) {
    let probe = ReadProbe::new(PROBE_BYTES);
    let mut group = c.benchmark_group("matvec");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for &(name, k, n) in SHAPES {
        for format in [Format::Int8, Format::Bf16] {
            let one = make(format, n, k, 1);
            let bytes = one.view(n, k).bytes();
            let copies = ROTATION_BYTES.div_ceil(bytes).max(1);
            let mut mats = vec![one];
            for i in 1..copies {
                mats.push(make(format, n, k, 1 + i as u64));
            }
            let x = fill(k, 99);
            let mut y = vec![0.0f32; n];
            let samples = Samples::new();
            group.throughput(Throughput::Bytes(bytes as u64));
            group.bench_function(BenchmarkId::new(format.name(), name), |bench| {
                let mut next = 0;
                bench.iter_custom(|iters| {
                    let start = Instant::now();
                    for _ in 0..iters {
                        matmul(&mats[next].view(n, k), &x, None, &mut y).unwrap();
                        next = (next + 1) % mats.len();
                    }
                    let t = start.elapsed();
                    samples.record(t, iters);
                    t
                })
            });
            let Some(secs) = samples.median() else {
                continue;
            };
            let gbps = bytes as f64 / secs / 1e9;
            // Probed right after this benchmark: the machine is shared and its bandwidth drifts.
            let bandwidth = probe.median_gbps(5);
            summary.lines.push(format!(
                "matvec {:4} {name:36} {gbps:6.1} GB/s = {:.2} x read bandwidth ({bandwidth:.1} GB/s probed after it)",
                format.name(),
                gbps / bandwidth
            ));
            let (ratio, matvec_gbps, read_gbps) = paired_matvec(&probe, || {
                for w in &mats {
                    matmul(&w.view(n, k), &x, None, &mut y).unwrap();
                }
                bytes * mats.len()
            });
            summary.lines.push(format!(
                "       {:4} {name:36} paired: {ratio:.2} x read bandwidth (median of {PAIRED_ROUNDS}; mat-vec {matvec_gbps:.1} GB/s, probe {read_gbps:.1} GB/s)",
                format.name()
            ));
        }
    }
    group.finish();
}

fn bench_matmat(c: &mut Criterion, summary: &mut Summary, peaks: Peaks) {
    let mut group = c.benchmark_group("matmat512");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3));
    for &(name, k, n) in SHAPES.iter().filter(|s| s.2 < 100_000) {
        for format in [Format::Int8, Format::Bf16, Format::F32] {
            let w = make(format, n, k, 1);
            let x = fill(TOKENS * k, 7);
            let mut y = vec![0.0f32; TOKENS * n];
            let flops = 2 * TOKENS * n * k;
            let samples = Samples::new();
            group.throughput(Throughput::Elements(flops as u64));
            group.bench_function(BenchmarkId::new(format.name(), name), |bench| {
                bench.iter_custom(|iters| {
                    let start = Instant::now();
                    for _ in 0..iters {
                        matmul(&w.view(n, k), &x, None, &mut y).unwrap();
                    }
                    let t = start.elapsed();
                    samples.record(t, iters);
                    t
                })
            });
            let Some(secs) = samples.median() else {
                continue;
            };
            let gflops = flops as f64 / secs / 1e9;
            let ratio = match (format, peaks.vnni, peaks.bf16) {
                (Format::Int8, Some(peak), _) => format!(" = {:.2} x VNNI peak", gflops / peak),
                (Format::Bf16, _, Some(peak)) => format!(" = {:.2} x BF16 peak", gflops / peak),
                _ => String::new(),
            };
            summary.lines.push(format!(
                "matmat {:4} 512 tok {name:36} {gflops:7.1} GFLOP/s{ratio}",
                format.name()
            ));
        }
    }
    group.finish();
}

fn main() {
    // The kernels use the current (here: global) rayon pool; Criterion is not Send, so no install().
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(THREADS)
        .build_global();
    let mut criterion = Criterion::default().configure_from_args();
    let bw_before = measure_read_bandwidth_gbps(THREADS);
    let peaks = measure_peaks(THREADS);
    let mut summary = Summary { lines: Vec::new() };
    let filter_matmat = std::env::var("MATMUL_BENCH")
        .map(|v| v == "matvec")
        .unwrap_or(false);
    let filter_matvec = std::env::var("MATMUL_BENCH")
        .map(|v| v == "matmat")
        .unwrap_or(false);
    if !filter_matvec {
        bench_matvec(&mut criterion, &mut summary);
    }
    if !filter_matmat {
        bench_matmat(&mut criterion, &mut summary, peaks);
    }
    let bw_after = measure_read_bandwidth_gbps(THREADS);
    criterion.final_summary();
    eprintln!("\n== matmul summary ({THREADS} threads) ==");
    eprintln!(
        "read bandwidth probe: {bw_before:.1} GB/s before, {bw_after:.1} GB/s after (mat-vec ratios use a probe taken right after each benchmark)"
    );
    match peaks.vnni {
        Some(p) => eprintln!("AVX512-VNNI peak probe: {p:.0} GOP/s"),
        None => eprintln!("AVX512-VNNI peak probe: not available on this CPU"),
    }
    match peaks.bf16 {
        Some(p) => eprintln!("AVX512-BF16 peak probe: {p:.0} GFLOP/s"),
        None => eprintln!("AVX512-BF16 peak probe: not available on this CPU"),
    }
    for line in &summary.lines {
        eprintln!("{line}");
    }
}
