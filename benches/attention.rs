//! Attention benches: one layer of the Qwen3-1.7B shape (16 heads, 8 kv heads, head_dim 128).
//!
//! - decode at 1K, 8K, 32K, 128K cached tokens, per KV dtype: GB/s of KV read, and as a ratio to
//!   the read bandwidth measured in the same run (both on a 2-thread pool);
//! - the gate's cost: decode at 32K gated (headwise, elementwise) vs baseline;
//! - prefill of a 512-query chunk at offsets 0, 8K, 32K: GFLOP/s (4 * D flops per query-key pair);
//! - split-K: a 16-query chunk at 32K on one KV head (one work item for 2 threads), its keys split
//!   as `prefill` chooses against whole, alternated: the median ratio of their times.
//!
//! Criterion prints its own estimates; the summary lines (`summary: ...`) use the median of a
//! short timed loop run right after, so ratios compare numbers taken moments apart on this shared,
//! noisy machine. `GATTN_BENCH_ATTN_DTYPES=bf16,int8,f32` picks dtypes (default bf16,int8).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gattn_benches::{attention_dtypes, fill, kv_layer, median_seconds};
use gattn_kernels::attention::{
    AttentionCall, AttentionShape, DecodeScratch, GateScores, KvDtype, KvLayer, decode, prefill,
    prefill_key_parts, prefill_with_key_parts,
};
use gattn_kernels::bandwidth::measure_read_bandwidth_gbps;
use gattn_kernels::dispatch::simd_level;
use std::hint::black_box;
use std::time::Duration;

const SHAPE: AttentionShape = AttentionShape {
    num_heads: 16,
    num_kv_heads: 8,
    head_dim: 128,
};
const THREADS: usize = 2;

fn layer(dtype: KvDtype, tokens: usize) -> KvLayer {
    kv_layer(dtype, SHAPE, tokens)
}

/// `GATTN_BENCH_ATTN_ONLY=decode,gate,prefill,split` runs only those parts (default: all).
fn wanted(part: &str) -> bool {
    std::env::var("GATTN_BENCH_ATTN_ONLY").map_or(true, |only| only.split(',').any(|p| p == part))
}

fn pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(THREADS)
        .build()
        .unwrap()
}

fn bench_decode(c: &mut Criterion) {
    if !wanted("decode") {
        return;
    }
    let pool = pool();
    let level = simd_level();
    let bandwidth = measure_read_bandwidth_gbps(THREADS);
    eprintln!(
        "summary: read bandwidth {THREADS} threads {bandwidth:.1} GB/s at start, level {level}"
    );
    let row = SHAPE.num_heads * SHAPE.head_dim;
    let mut q = vec![0.0; row];
    fill(99, &mut q);
    let mut group = c.benchmark_group("attention_decode");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for dtype in attention_dtypes() {
        for tokens in [1024usize, 8192, 32768, 131072] {
            let kv = layer(dtype, tokens);
            let bytes = (tokens * kv.bytes_per_token()) as f64;
            let mut out = vec![0.0; row];
            let mut scratch = DecodeScratch::default();
            let mut run = || {
                pool.install(|| {
                    decode(
                        level,
                        AttentionCall {
                            shape: SHAPE,
                            queries: &q,
                            q_start: tokens - 1,
                            n: 1,
                            kv: &kv,
                            gate: GateScores::None,
                        },
                        &mut out,
                        None,
                        &mut scratch,
                    )
                    .unwrap()
                });
                black_box(&out);
            };
            group.throughput(Throughput::Bytes(bytes as u64));
            group.bench_function(format!("{dtype}/{tokens}"), |b| b.iter(&mut run));
            // The probe right before and after the timed loop: the ratio compares like moments.
            let before = measure_read_bandwidth_gbps(THREADS);
            let seconds = median_seconds(if tokens > 32768 { 7 } else { 21 }, &mut run);
            let after = measure_read_bandwidth_gbps(THREADS);
            let adjacent = 0.5 * (before + after);
            let gbps = bytes / seconds / 1e9;
            eprintln!(
                "summary: decode {dtype} {tokens:>6} keys: {:8.1} us, {gbps:6.1} GB/s KV read = {:5.1}% of read bandwidth {adjacent:.1} GB/s (probes {before:.1}, {after:.1})",
                seconds * 1e6,
                100.0 * gbps / adjacent
            );
        }
    }
    group.finish();
}

fn bench_gate_cost(c: &mut Criterion) {
    if !wanted("gate") {
        return;
    }
    let pool = pool();
    let level = simd_level();
    let tokens = 32768;
    let row = SHAPE.num_heads * SHAPE.head_dim;
    let kv = layer(KvDtype::Bf16, tokens);
    let mut q = vec![0.0; row];
    fill(5, &mut q);
    let mut headwise = vec![0.0; SHAPE.num_heads];
    fill(6, &mut headwise);
    let mut elementwise = vec![0.0; row];
    fill(7, &mut elementwise);
    let gates = [
        ("baseline", GateScores::None),
        ("headwise", GateScores::Headwise(&headwise)),
        ("elementwise", GateScores::Elementwise(&elementwise)),
    ];
    let mut group = c.benchmark_group("attention_gate");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    let mut medians = Vec::new();
    for (name, gate) in gates {
        let mut out = vec![0.0; row];
        let mut scratch = DecodeScratch::default();
        let mut run = || {
            pool.install(|| {
                decode(
                    level,
                    AttentionCall {
                        shape: SHAPE,
                        queries: &q,
                        q_start: tokens - 1,
                        n: 1,
                        kv: &kv,
                        gate,
                    },
                    &mut out,
                    None,
                    &mut scratch,
                )
                .unwrap()
            });
            black_box(&out);
        };
        group.bench_function(format!("decode_bf16_32k/{name}"), |b| b.iter(&mut run));
        medians.push((name, median_seconds(31, &mut run)));
    }
    group.finish();
    // Interleaved re-measure: alternating runs cancel slow drifts of the shared machine.
    let mut ratios = vec![Vec::new(); gates.len()];
    for _ in 0..15 {
        let mut t = [0.0; 3];
        for (i, (_, gate)) in gates.iter().enumerate() {
            let mut out = vec![0.0; row];
            let mut scratch = DecodeScratch::default();
            t[i] = median_seconds(3, || {
                pool.install(|| {
                    decode(
                        level,
                        AttentionCall {
                            shape: SHAPE,
                            queries: &q,
                            q_start: tokens - 1,
                            n: 1,
                            kv: &kv,
                            gate: *gate,
                        },
                        &mut out,
                        None,
                        &mut scratch,
                    )
                    .unwrap()
                });
            });
        }
        for i in 0..3 {
            ratios[i].push(t[i] / t[0]);
        }
    }
    for (i, (name, seconds)) in medians.iter().enumerate() {
        ratios[i].sort_by(f64::total_cmp);
        eprintln!(
            "summary: gate {name:>11}: decode bf16 32K {:8.1} us, median ratio to baseline {:.4} (interleaved)",
            seconds * 1e6,
            ratios[i][ratios[i].len() / 2]
        );
    }
}

fn bench_prefill(c: &mut Criterion) {
    if !wanted("prefill") {
        return;
    }
    let pool = pool();
    let level = simd_level();
    let n = 512;
    let row = SHAPE.num_heads * SHAPE.head_dim;
    let mut q = vec![0.0; n * row];
    fill(3, &mut q);
    let mut group = c.benchmark_group("attention_prefill");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(2));
    for offset in [0usize, 8192, 32768] {
        let kv = layer(KvDtype::Bf16, offset + n);
        let pairs: f64 = (0..n).map(|t| (offset + t + 1) as f64).sum();
        let flops = 4.0 * SHAPE.head_dim as f64 * SHAPE.num_heads as f64 * pairs;
        let mut out = vec![0.0; n * row];
        let mut run = || {
            pool.install(|| {
                prefill(
                    level,
                    AttentionCall {
                        shape: SHAPE,
                        queries: &q,
                        q_start: offset,
                        n,
                        kv: &kv,
                        gate: GateScores::None,
                    },
                    &mut out,
                    None,
                )
                .unwrap()
            });
            black_box(&out);
        };
        group.throughput(Throughput::Elements(flops as u64));
        group.bench_function(format!("bf16_512q/offset{offset}"), |b| b.iter(&mut run));
        let seconds = median_seconds(3, &mut run);
        eprintln!(
            "summary: prefill bf16 512 queries at offset {offset:>5}: {:8.2} ms, {:6.1} GFLOP/s",
            seconds * 1e3,
            flops / seconds / 1e9
        );
    }
    group.finish();
}

/// Split-K where the (KV head, query block) items are fewer than the threads: a short chunk deep
/// in the cache of a model with one KV head (GQA 8), as `prefill` splits it by itself against
/// its keys whole, per KV dtype, alternated (no criterion group: the ratio is the figure).
fn bench_prefill_split(_c: &mut Criterion) {
    if !wanted("split") {
        return;
    }
    const ONE_KV_HEAD: AttentionShape = AttentionShape {
        num_heads: 8,
        num_kv_heads: 1,
        head_dim: 128,
    };
    let pool = pool();
    let table = gattn_kernels::KernelTable::current();
    let (n, offset) = (16, 32768);
    let row = ONE_KV_HEAD.num_heads * ONE_KV_HEAD.head_dim;
    let mut q = vec![0.0; n * row];
    fill(5, &mut q);
    let parts = prefill_key_parts(ONE_KV_HEAD, n, offset + n, THREADS);
    for dtype in attention_dtypes() {
        let kv = kv_layer(dtype, ONE_KV_HEAD, offset + n);
        let mut out = vec![0.0; n * row];
        let mut run = |parts: usize| {
            let call = AttentionCall {
                shape: ONE_KV_HEAD,
                queries: &q,
                q_start: offset,
                n,
                kv: &kv,
                gate: GateScores::None,
            };
            pool.install(|| prefill_with_key_parts(table, call, &mut out, None, parts).unwrap());
            black_box(&out);
        };
        let mut ratios = Vec::new();
        for _ in 0..9 {
            let whole = median_seconds(3, || run(1));
            let split = median_seconds(3, || run(parts));
            ratios.push(whole / split);
        }
        ratios.sort_by(f64::total_cmp);
        eprintln!(
            "summary: prefill {dtype:?} 16 queries at 32K, one KV head, {THREADS} threads: keys in {parts} parts {:.2}x as fast as whole (median of 9 alternations)",
            ratios[ratios.len() / 2]
        );
    }
}

criterion_group!(
    benches,
    bench_decode,
    bench_gate_cost,
    bench_prefill,
    bench_prefill_split
);
criterion_main!(benches);
