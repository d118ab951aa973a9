//! Attention kernels on one thread, timed in CPU seconds of that thread, beside the f32 FMA peak
//! of the same thread timed the same way: ratios that hold on a loaded, shared machine (a thread
//! that is preempted stops its own clock), where wall-clock GFLOP/s do not.
//!
//! One layer of the Qwen3-1.7B shape (16 heads, 8 KV heads, head_dim 128):
//! - prefill of `GATTN_BENCH_CPU_QUERIES` (128) queries after `GATTN_BENCH_CPU_OFFSET` (4096)
//!   cached keys: GFLOP per CPU-second (4 * head_dim FLOP per query-key pair), its ratio to the
//!   f32 FMA peak and to the peak of the instructions prefill runs on for that cache
//!   (`matrix_peak::attention_prefill_peak`: `vdpbf16ps` for bf16 where the CPU has it, an
//!   int8 cache's scores on `vpdpbusd` and its `P V` on `vpdpwssd`, or both on `vpmaddwd`; half
//!   the FLOP on each product);
//! - decode of one query after the same offset: GB of K/V read per CPU-second.
//!
//! `cargo bench -p gattn-benches --bench attention_cpu`; `GATTN_BENCH_ATTN_DTYPES=bf16,int8,f32`
//! picks the caches, `GATTN_SIMD` the level.

use gattn_benches::{attention_dtypes, fill, kv_layer};
use gattn_kernels::KernelTable;
use gattn_kernels::attention::{
    AttentionCall, AttentionShape, DecodeScratch, GateScores, KvDtype, KvLayer, decode, prefill,
};
use gattn_kernels::dispatch::simd_level;
use gattn_kernels::matrix_peak::{
    PeakInstruction, attention_prefill_peak, halves_rate, run_one_pass,
};
use std::hint::black_box;

const SHAPE: AttentionShape = AttentionShape {
    num_heads: 16,
    num_kv_heads: 8,
    head_dim: 128,
};
/// Timed runs of each measurement (the median is printed).
const RUNS: usize = 5;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds this thread has run (Linux; elsewhere wall seconds since the first call).
fn thread_cpu_seconds() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid out-pointer for this clock.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::sync::OnceLock;
        use std::time::Instant;
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_secs_f64()
    }
}

/// Median over `RUNS` of `work / CPU seconds of f`, after one untimed call.
fn median_rate(work: f64, mut f: impl FnMut()) -> f64 {
    f();
    let mut rates: Vec<f64> = (0..RUNS)
        .map(|_| {
            let start = thread_cpu_seconds();
            f();
            work / (thread_cpu_seconds() - start)
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[RUNS / 2]
}

fn call<'a>(kv: &'a KvLayer, queries: &'a [f32], q_start: usize, n: usize) -> AttentionCall<'a> {
    AttentionCall {
        shape: SHAPE,
        queries,
        q_start,
        n,
        kv,
        gate: GateScores::None,
    }
}

fn main() {
    // Everything on this thread: a one-thread pool runs its jobs inline in `install`.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let level = simd_level();
    let offset = env_usize("GATTN_BENCH_CPU_OFFSET", 4096);
    let n = env_usize("GATTN_BENCH_CPU_QUERIES", 128);
    let table = KernelTable::of_level(level).expect("the level in use is supported");
    pool.install(|| {
        // The scalar level has no FMA probe: its ratios are left out (NaN).
        let peak_of = |instruction: Option<PeakInstruction>| {
            instruction.and_then(run_one_pass).map_or(f64::NAN, |flop| {
                median_rate(flop, || {
                    instruction.and_then(run_one_pass);
                })
            })
        };
        let fma = PeakInstruction::vector_fma(level);
        let peak = peak_of(fma);
        let name = fma.map_or("none", PeakInstruction::name);
        println!(
            "{level}: f32 FMA peak ({name}) {:.1} GFLOP per CPU-second",
            peak / 1e9
        );
        for dtype in attention_dtypes() {
            let kv = kv_layer(dtype, SHAPE, offset + n);
            let q_row = SHAPE.num_heads * SHAPE.head_dim;
            let mut q = vec![0.0; n * q_row];
            fill(3, &mut q);
            let mut out = vec![0.0; n * q_row];
            let pairs: f64 = (0..n).map(|t| (offset + t + 1) as f64).sum();
            let flops = 4.0 * SHAPE.head_dim as f64 * SHAPE.num_heads as f64 * pairs;
            let rate = median_rate(flops, || {
                prefill(level, call(&kv, &q, offset, n), &mut out, None).unwrap();
                black_box(&out);
            });
            println!(
                "{level} {dtype}: prefill {n} queries after {offset}: {:.1} GFLOP per CPU-second, \
                 {:.2} of the FMA peak",
                rate / 1e9,
                rate / peak
            );
            let own = attention_prefill_peak(table, dtype, SHAPE.head_dim);
            if let Some(own) = own.filter(|own| Some(own.scores) != fma || own.values != own.scores)
            {
                let scores_peak = peak_of(Some(own.scores));
                let values_peak = if own.values == own.scores {
                    scores_peak
                } else {
                    peak_of(Some(own.values))
                };
                let own_peak = halves_rate(scores_peak, values_peak);
                println!(
                    "{level} {dtype}: {:.2} of the {} peak ({:.1} GFLOP per CPU-second; {:.1} and \
                     {:.1} for each half)",
                    rate / own_peak,
                    own.name(),
                    own_peak / 1e9,
                    scores_peak / 1e9,
                    values_peak / 1e9
                );
            }
            // K and V rows of every KV head (int8: with their f32 scales), as decode reads them.
            let row_bytes = match dtype {
                KvDtype::F32 => 4 * SHAPE.head_dim,
                KvDtype::Bf16 => 2 * SHAPE.head_dim,
                KvDtype::Int8 => SHAPE.head_dim + 4,
            };
            let kv_bytes = ((offset + 1) * 2 * SHAPE.num_kv_heads * row_bytes) as f64;
            let mut scratch = DecodeScratch::default();
            let mut one = vec![0.0; q_row];
            let rate = median_rate(kv_bytes, || {
                let one_query = call(&kv, &q[..q_row], offset, 1);
                decode(level, one_query, &mut one, None, &mut scratch).unwrap();
                black_box(&one);
            });
            println!(
                "{level} {dtype}: decode after {offset}: {:.2} GB of K/V per CPU-second",
                rate / 1e9
            );
        }
    });
}
