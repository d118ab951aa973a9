//! Linear-layer kernels on Qwen3-1.7B shapes, reported against this machine's limits measured in
//! the same run: mat-vec as GB/s of weights streamed (ratio to the read-bandwidth probe), 512-token
//! mat-mat as GFLOP/s against the peak of what the kernel multiplies with, measured in the same run
//! (int8: AMX `tdpbusd` where the mat-mat runs on tiles (`tdpbssd`, the same rate), else
//! AVX512-VNNI `vpdpbusd`, else AVX2 `vpmaddubsw`+`vpmaddwd`; bf16: AMX `tdpbf16ps`, else
//! AVX512-BF16 `vdpbf16ps`, else, widened to f32 on an AVX2 CPU, ymm FMA; f32: ymm FMA on an
//! AVX2 CPU). Where AMX is present, int8 weights also run on the AMX table's other int8 mat-mat
//! (`int8>bf16`: widened to bf16 tiles, `GATTN_AMX_INT8=bf16`), against the `tdpbf16ps` peak.
//! 2 threads (rayon pool). Each shape also prints a "paired" line: the median ratio of 9
//! alternations of one limit pass (bandwidth or peak) and one pass of the kernel.
//!
//! Mat-vec rotates over enough copies of the matrix to exceed the L3, as a model's layers do, so
//! the figures are DRAM figures; the calls run inside `with_spinning_workers`, as in a decode
//! step. `cargo bench -p gattn-benches --bench matmul -- --quick`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use gattn_kernels::bandwidth::{PROBE_BYTES, ReadProbe, measure_read_bandwidth_gbps};
use gattn_kernels::matmul::{KernelTable, Q8Matrix, WeightMatrix, matmul_at};
use gattn_kernels::matrix_peak::{PeakInstruction, run_one_pass};
use gattn_kernels::parallel::with_spinning_workers;
use half::bf16;

const THREADS: usize = 2;
const TOKENS: usize = 512;
/// Total weight bytes a mat-vec rotates over (8x L3).
const ROTATION_BYTES: usize = 256 << 20;
/// Alternations of one limit pass (read bandwidth, arithmetic peak) and one pass of the measured
/// work per shape (see `paired`).
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
    /// int8 weights on the AMX table whose int8 mat-mat widens them to bf16 tiles.
    Int8OnBf16,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::F32 => "f32",
            Format::Bf16 => "bf16",
            Format::Int8 => "int8",
            Format::Int8OnBf16 => "int8>bf16",
        }
    }

    /// The kernels this format's products run on (`None`: not on this CPU).
    fn table(self) -> Option<&'static KernelTable> {
        match self {
            Format::Int8OnBf16 => KernelTable::amx_int8_on_bf16(),
            _ => Some(KernelTable::current()),
        }
    }
}

/// Owned weights of one format. bf16 and int8 sit on 2 MiB pages, as the model's mmapped
/// checkpoints ask for and as the bandwidth probe reads.
enum Owned {
    F32(Vec<f32>),
    Bf16(HugePages),
    Int8 {
        packed: HugePages,
        scales: HugePages,
    },
}

impl Owned {
    fn matmul(&self, table: &KernelTable, n: usize, k: usize, x: &[f32], y: &mut [f32]) {
        match self {
            Owned::F32(w) => matmul_at(table, &WeightMatrix::f32(w, n, k).unwrap(), x, None, y),
            Owned::Bf16(w) => {
                let w = WeightMatrix::bf16(w.as_slice(), n, k).unwrap();
                matmul_at(table, &w, x, None, y)
            }
            Owned::Int8 { packed, scales } => {
                let q = Q8Matrix::from_parts(packed.as_slice(), scales.as_slice(), n, k).unwrap();
                matmul_at(table, &WeightMatrix::int8(&q), x, None, y)
            }
        }
        .unwrap()
    }

    /// Bytes one mat-vec streams.
    fn bytes(&self) -> usize {
        match self {
            Owned::F32(w) => w.len() * 4,
            Owned::Bf16(w) => w.0.len(),
            Owned::Int8 { packed, scales } => packed.0.len() + scales.0.len(),
        }
    }
}

/// A copy in anonymous memory that asks for transparent huge pages before it is written.
struct HugePages(memmap2::MmapMut);

impl HugePages {
    fn copy_of<T: bytemuck::Pod>(values: &[T]) -> Self {
        let bytes: &[u8] = bytemuck::cast_slice(values);
        let mut map = memmap2::MmapMut::map_anon(bytes.len()).unwrap();
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        map.copy_from_slice(bytes);
        HugePages(map)
    }

    fn as_slice<T: bytemuck::Pod>(&self) -> &[T] {
        bytemuck::cast_slice(&self.0)
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
        Format::Bf16 => {
            let w: Vec<bf16> = w.into_iter().map(bf16::from_f32).collect();
            Owned::Bf16(HugePages::copy_of(&w))
        }
        Format::Int8 | Format::Int8OnBf16 => {
            let q = Q8Matrix::quantize_f32(&w, n, k).unwrap();
            Owned::Int8 {
                packed: HugePages::copy_of(q.to_parts().0),
                scales: HugePages::copy_of(q.scale_bytes()),
            }
        }
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

/// A peak kernel: a vector dot product run as 12 accumulator chains, or an AMX tile product
/// (the kernels crate's probe).
#[derive(Clone, Copy)]
struct PeakKernel {
    /// The instruction(s) of one step, as the summary names them.
    name: &'static str,
    probe: Probe,
}

#[derive(Clone, Copy)]
enum Probe {
    /// `chains(n)` runs 12 independent accumulator chains of `n` steps, each step
    /// `ops_per_step` ops (one multiply-add = 2 ops, as FLOP counts).
    Chains {
        ops_per_step: u64,
        chains: fn(u64) -> f32,
    },
    /// One pass of `matrix_peak`'s probe of this instruction on each thread.
    Tile(PeakInstruction),
}

/// Steps per chain of a full peak pass (~60 ms) and of a paired one (~15 ms).
const PEAK_STEPS: u64 = 20_000_000;
const PAIRED_PEAK_STEPS: u64 = 5_000_000;

impl PeakKernel {
    /// The kernel of what `format`'s mat-mat multiplies with on this CPU: AVX512-VNNI
    /// `vpdpbusd` (64 u8 x i8 products) or AVX512-BF16 `vdpbf16ps` (32 bf16 products); without
    /// them on an AVX2 CPU (no AVX-512F, whose gemm panels use zmm) AVX2 `vpmaddubsw` +
    /// `vpmaddwd` (32 u8 x i8 products) and `vfmadd231ps` ymm (8 f32 products, bf16 weights
    /// widened to f32). `None` elsewhere.
    fn of(format: Format) -> Option<PeakKernel> {
        let on_tiles = format.table().is_some_and(|t| t.amx());
        match format {
            Format::Int8 if on_tiles => {
                return PeakKernel::tile("AMX tdpbusd", PeakInstruction::AmxInt8Tile);
            }
            Format::Bf16 | Format::Int8OnBf16 if on_tiles => {
                return PeakKernel::tile("AMX tdpbf16ps", PeakInstruction::AmxBf16Tile);
            }
            Format::Int8OnBf16 => return None,
            _ => {}
        }
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected;
            let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
            let avx512 = is_x86_feature_detected!("avx512f");
            // SAFETY (all): each kernel runs only after its features were detected.
            match format {
                Format::Int8 if is_x86_feature_detected!("avx512vnni") => Some(PeakKernel {
                    name: "VNNI vpdpbusd",
                    probe: Probe::Chains {
                        ops_per_step: 64 * 2,
                        chains: |n| unsafe { vnni_chains(n) },
                    },
                }),
                Format::Bf16 if is_x86_feature_detected!("avx512bf16") => Some(PeakKernel {
                    name: "BF16 vdpbf16ps",
                    probe: Probe::Chains {
                        ops_per_step: 32 * 2,
                        chains: |n| unsafe { bf16_chains(n) },
                    },
                }),
                // The AVX2 int8 kernels run at the AVX-512 level too (without VNNI).
                Format::Int8 if avx2 => Some(PeakKernel {
                    name: "AVX2 vpmaddubsw+vpmaddwd",
                    probe: Probe::Chains {
                        ops_per_step: 32 * 2,
                        chains: |n| unsafe { maddubs_chains(n) },
                    },
                }),
                Format::Bf16 | Format::F32 if avx2 && !avx512 => Some(PeakKernel {
                    name: "AVX2 FMA ymm",
                    probe: Probe::Chains {
                        ops_per_step: 8 * 2,
                        chains: |n| unsafe { fma_ymm_chains(n) },
                    },
                }),
                _ => None,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = format;
            None
        }
    }

    /// The AMX probe of `instruction`, where this process can run it.
    fn tile(name: &'static str, instruction: PeakInstruction) -> Option<PeakKernel> {
        instruction.is_available().then_some(PeakKernel {
            name,
            probe: Probe::Tile(instruction),
        })
    }

    /// One pass on every thread of the current (global) pool, the threads the kernels use, in
    /// GOP/s (`steps` per chain of a vector probe; a tile probe's pass has its own length).
    fn pass_gops(self, steps: u64) -> f64 {
        let threads = rayon::current_num_threads() as u64;
        let start = Instant::now();
        let ops = match self.probe {
            Probe::Chains {
                ops_per_step,
                chains,
            } => {
                rayon::broadcast(|_| std::hint::black_box(chains(steps)));
                (steps * 12 * ops_per_step * threads) as f64
            }
            Probe::Tile(instruction) => {
                rayon::broadcast(|_| run_one_pass(instruction).unwrap_or(0.0))
                    .iter()
                    .sum()
            }
        };
        ops / start.elapsed().as_secs_f64() / 1e9
    }

    /// The median of 5 full passes.
    fn median_gops(self) -> f64 {
        let mut rates: Vec<f64> = (0..5).map(|_| self.pass_gops(PEAK_STEPS)).collect();
        median(&mut rates)
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

/// The AVX2 int8 step: `vpmaddubsw` (32 u8 x i8 products summed in pairs to i16) then
/// `vpmaddwd` by ones (pairs to i32), as the AVX2 kernels do before adding to their
/// accumulator. Each chain feeds its i32 result back as the next u8 operand (the operands
/// must vary, or the pair would be hoisted out of the loop): 12 chains of 6 cycles' latency
/// (3 + 3 on Zen 3) cover a pair per cycle.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn maddubs_chains(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let b = _mm256_set1_epi8(std::hint::black_box(-2));
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_set1_epi8(std::hint::black_box(3)); 12];
    for _ in 0..iters {
        for c in acc.iter_mut() {
            *c = _mm256_madd_epi16(_mm256_maddubs_epi16(*c, b), ones);
        }
    }
    let sum = acc
        .iter()
        .fold(_mm256_setzero_si256(), |s, c| _mm256_add_epi32(s, *c));
    _mm256_extract_epi32::<0>(sum) as f32
}

/// 12 chains of `acc += 1e-3 * 1e-3` (`vfmadd231ps` ymm; 4 cycles' latency on 2 pipes needs 8).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma_ymm_chains(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let (a, b) = (
        _mm256_set1_ps(std::hint::black_box(1e-3)),
        _mm256_set1_ps(1e-3),
    );
    let mut acc = [_mm256_setzero_ps(); 12];
    for _ in 0..iters {
        for c in acc.iter_mut() {
            *c = _mm256_fmadd_ps(a, b, *c);
        }
    }
    let sum = acc
        .iter()
        .fold(_mm256_setzero_ps(), |s, c| _mm256_add_ps(s, *c));
    _mm256_cvtss_f32(sum)
}

struct Summary {
    lines: Vec<String>,
}

/// Median ratio, work rate and limit rate of `PAIRED_ROUNDS` alternations of one pass of a
/// limit probe (`limit`, returning its rate: read GB/s or peak GOP/s) and one timed `work`
/// (returning the bytes or ops it did), rates in 1e9 units per second. Each ratio compares two
/// passes taken a fraction of a second apart: on this shared host the bandwidth swings by a
/// third between runs minutes apart, and the cores are shared too, which limits probed once
/// before or after a benchmark cannot follow.
fn paired(mut limit: impl FnMut() -> f64, mut work: impl FnMut() -> usize) -> (f64, f64, f64) {
    let (mut ratios, mut work_rates, mut limits) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..PAIRED_ROUNDS {
        let limit_rate = limit();
        let start = Instant::now();
        let amount = work();
        let work_rate = amount as f64 / start.elapsed().as_secs_f64() / 1e9;
        ratios.push(work_rate / limit_rate);
        work_rates.push(work_rate);
        limits.push(limit_rate);
    }
    (
        median(&mut ratios),
        median(&mut work_rates),
        median(&mut limits),
    )
}

fn bench_matvec(c: &mut Criterion, summary: &mut Summary) {
    let probe = ReadProbe::new(PROBE_BYTES);
    let mut group = c.benchmark_group("matvec");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    let table = KernelTable::current();
    for &(name, k, n) in SHAPES {
        for format in [Format::Int8, Format::Bf16] {
            let one = make(format, n, k, 1);
            let bytes = one.bytes();
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
                    // As a decode step runs them: the other worker spins between the calls.
                    with_spinning_workers(|| {
                        for _ in 0..iters {
                            mats[next].matmul(table, n, k, &x, &mut y);
                            next = (next + 1) % mats.len();
                        }
                    });
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
            let (ratio, matvec_gbps, read_gbps) = paired(
                || probe.pass_gbps(),
                || {
                    with_spinning_workers(|| {
                        for w in &mats {
                            w.matmul(table, n, k, &x, &mut y);
                        }
                    });
                    bytes * mats.len()
                },
            );
            summary.lines.push(format!(
                "       {:4} {name:36} paired: {ratio:.2} x read bandwidth (median of {PAIRED_ROUNDS}; mat-vec {matvec_gbps:.1} GB/s, probe {read_gbps:.1} GB/s)",
                format.name()
            ));
        }
    }
    group.finish();
}

/// The arithmetic peak of each format's mat-mat probed at the start: the kernel's name and GOP/s
/// (None: no peak kernel for it on this CPU).
struct Peaks([Option<(&'static str, f64)>; 4]);

const PEAK_FORMATS: [Format; 4] = [Format::Int8, Format::Int8OnBf16, Format::Bf16, Format::F32];

impl Peaks {
    fn measure() -> Peaks {
        Peaks(
            PEAK_FORMATS.map(|format| {
                PeakKernel::of(format).map(|kernel| (kernel.name, kernel.median_gops()))
            }),
        )
    }

    fn of(&self, format: Format) -> Option<(&'static str, f64)> {
        self.0[PEAK_FORMATS.iter().position(|f| *f == format).unwrap()]
    }
}

fn bench_matmat(c: &mut Criterion, summary: &mut Summary, peaks: &Peaks) {
    let mut group = c.benchmark_group("matmat512");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3));
    for &(name, k, n) in SHAPES.iter().filter(|s| s.2 < 100_000) {
        for format in PEAK_FORMATS {
            let Some(table) = format.table() else {
                continue;
            };
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
                        w.matmul(table, n, k, &x, &mut y);
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
            let ratio = match peaks.of(format) {
                Some((name, peak)) => format!(" = {:.2} x {name} peak", gflops / peak),
                None => String::new(),
            };
            summary.lines.push(format!(
                "matmat {:9} 512 tok {name:36} {gflops:7.1} GFLOP/s{ratio}",
                format.name()
            ));
            if let Some(kernel) = PeakKernel::of(format) {
                // Enough calls to take about as long as the peak pass (~15 ms) or longer.
                let calls = (0.015 / secs).ceil().max(1.0) as usize;
                let (ratio, gflops, peak) = paired(
                    || kernel.pass_gops(PAIRED_PEAK_STEPS),
                    || {
                        for _ in 0..calls {
                            w.matmul(table, n, k, &x, &mut y);
                        }
                        flops * calls
                    },
                );
                summary.lines.push(format!(
                    "       {:9} 512 tok {name:36} paired: {ratio:.2} x peak (median of {PAIRED_ROUNDS}; {gflops:.1} GFLOP/s, peak pass {peak:.0})",
                    format.name()
                ));
            }
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
    let peaks = Peaks::measure();
    let mut summary = Summary { lines: Vec::new() };
    let filter_matmat = std::env::var("GATTN_BENCH_MATMUL")
        .map(|v| v == "matvec")
        .unwrap_or(false);
    let filter_matvec = std::env::var("GATTN_BENCH_MATMUL")
        .map(|v| v == "matmat")
        .unwrap_or(false);
    if !filter_matvec {
        bench_matvec(&mut criterion, &mut summary);
    }
    if !filter_matmat {
        bench_matmat(&mut criterion, &mut summary, &peaks);
    }
    let bw_after = measure_read_bandwidth_gbps(THREADS);
    criterion.final_summary();
    eprintln!("\n== matmul summary ({THREADS} threads) ==");
    eprintln!(
        "read bandwidth probe: {bw_before:.1} GB/s before, {bw_after:.1} GB/s after (mat-vec ratios use a probe taken right after each benchmark)"
    );
    for format in PEAK_FORMATS {
        match peaks.of(format) {
            Some((name, p)) => {
                eprintln!("{} mat-mat peak probe: {name} {p:.0} GOP/s", format.name())
            }
            None => eprintln!("{} mat-mat peak probe: none on this CPU", format.name()),
        }
    }
    for line in &summary.lines {
        eprintln!("{line}");
    }
}
