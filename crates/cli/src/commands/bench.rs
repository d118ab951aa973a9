//! `gattn-cpu bench`: prefill and decode speed against the read-bandwidth roofline, as text or JSON.

use anyhow::Result;
use serde::Serialize;

use gattn_model::bench::{
    BenchReport, BenchSettings, DepthFill, PAIRED_PROBE_BYTES, PROBE_BYTES, PROBE_PASSES,
    memory_plan,
};
use gattn_model::{Backend, ChunkProgress, available_memory, run_bench};

use crate::args::{BenchArgs, DepthFillArg};
use crate::commands::{load_config, load_model, model_dir};
use crate::failure::OrUsage;

/// The JSON document: the checkpoint directory beside the report.
#[derive(Serialize)]
struct BenchOutput<'a> {
    model_dir: String,
    #[serde(flatten)]
    report: &'a BenchReport,
}

pub fn run(args: BenchArgs) -> Result<()> {
    let dir = &model_dir(&args.model.model)?;
    let config = load_config(dir, &args.model.load)?;
    let settings = BenchSettings {
        prompt_tokens: args.prompt_tokens as usize,
        gen_tokens: args.gen_tokens as usize,
        depth: args.depth,
        depth_fill: match args.depth_fill {
            DepthFillArg::Prefill => DepthFill::Prefill,
            DepthFillArg::Synthetic => DepthFill::Synthetic,
        },
        repetitions: args.repetitions as usize,
        warmup: !args.no_warmup,
        prefill_chunk: args.model.load.prefill_chunk,
        seed: args.seed,
        probe_bytes: PROBE_BYTES,
        probe_passes: PROBE_PASSES,
        prefill_only: args.prefill_only,
    };
    settings.validate(&config).or_usage()?;
    // Checked before the weights and the cache are allocated, as `run` does.
    let format = args.model.load.weights.resolve(dir)?;
    memory_plan(
        &config,
        format,
        args.model.load.kv.resolve(Backend::for_format(format)),
        &settings,
    )
    .check_fits(available_memory(), settings.context())?;

    let model = load_model(&args.model, dir)?;
    let chunks = settings.prompt_tokens.div_ceil(model.prefill_chunk);
    let mut on_chunk = |c: ChunkProgress| {
        if args.prefill_only {
            eprintln!(
                "chunk {}/{chunks}: {}/{} tokens, {} in {:.2} s ({:.1} tok/s), {:.1} s elapsed",
                c.done.div_ceil(model.prefill_chunk),
                c.done,
                c.total,
                c.chunk_tokens,
                c.chunk_seconds,
                c.chunk_tokens as f64 / c.chunk_seconds,
                c.elapsed_seconds
            );
        }
    };
    let report = run_bench(&model, &settings, &mut on_chunk)?;
    if args.json {
        let output = BenchOutput {
            model_dir: dir.display().to_string(),
            report: &report,
        };
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else {
        print_summary(&dir.display().to_string(), &report);
    }
    Ok(())
}

fn print_summary(dir: &str, r: &BenchReport) {
    let (s, m) = (&r.settings, &r.model);
    println!(
        "model:      {dir} (gate {}, {} layers, hidden {}, {:.1} M parameters)",
        m.gate,
        m.layers,
        m.hidden_size,
        m.parameters as f64 / 1e6
    );
    println!(
        "setup:      weights {}, KV {}, SIMD {} ({}), {} threads of {}",
        m.weights,
        m.kv,
        r.machine.simd,
        r.machine.simd_reason,
        r.machine.threads,
        r.machine.machine_threads
    );
    let p = &r.prefill.tokens_per_second;
    println!(
        "prefill:    {} tokens after {} cached, in chunks of {}: {:.2} tok/s median (min {:.2}, max {:.2}) over {} repetitions{}",
        r.prefill.tokens,
        r.prefill.depth,
        s.prefill_chunk,
        p.median,
        p.min,
        p.max,
        s.repetitions,
        if s.warmup && !s.prefill_only {
            " after a warm-up"
        } else {
            ""
        }
    );
    if let Some(a) = &r.prefill.attention {
        let peak = match (&a.peak, a.ratio_to_peak) {
            (Some(peak), Some(ratio)) => {
                // Half the FLOP on each instruction: the peak is their rates' harmonic mean.
                let halves = if peak.scores.instruction == peak.values.instruction {
                    String::new()
                } else {
                    format!(
                        ", half at {:.3} and half at {:.3}",
                        peak.scores.flops_per_second / 1e12,
                        peak.values.flops_per_second / 1e12
                    )
                };
                format!(
                    "; {:.3} of the {} peak ({:.3} TFLOP/s{halves}, probed in this run)",
                    ratio,
                    peak.instruction,
                    peak.flops_per_second / 1e12
                )
            }
            _ => String::new(),
        };
        println!(
            "attention:  {:.1} GFLOP in {:.3} s (kernel alone, {:.2} of the prefill): {:.3} TFLOP/s{peak}",
            a.flop / 1e9,
            a.seconds,
            a.share_of_prefill,
            a.flops_per_second / 1e12
        );
    }
    let (Some(decode), Some(t), Some(b), Some(roofline)) =
        (&r.decode, &r.bytes_per_token, &r.bandwidth, &r.roofline)
    else {
        return print_memory(r);
    };
    let d = &decode.tokens_per_second;
    println!(
        "decode:     {} tokens after {} cached ({}): {:.3} tok/s median (p10 {:.3}, p90 {:.3}), {:.1} ms/token",
        decode.tokens,
        decode.depth,
        match s.depth_fill {
            DepthFill::Prefill => "prefilled",
            DepthFill::Synthetic => "synthetic keys/values",
        },
        d.median,
        d.p10,
        d.p90,
        decode.median_ms_per_token
    );
    println!(
        "per token:  {} read = weights {} + KV {} (mean KV length {:.1})",
        gb(t.total_bytes),
        gb(t.weight_bytes),
        gb(t.kv_bytes),
        decode.mean_kv_len
    );
    println!(
        "bandwidth:  {:.2} GB/s read (probes {:.2} before and {:.2} after the decode; {} x {} passes)",
        b.mean_gbps,
        b.before_gbps,
        b.after_gbps,
        gib(s.probe_bytes as u64),
        s.probe_passes
    );
    println!(
        "roofline:   {:.3} tok/s decode; achieved {:.3} of it",
        roofline.decode_tokens_per_second, roofline.ratio
    );
    println!(
        "paired:     {:.3} of the roofline (median over tokens of each token's GB/s / a {} probe pass right before it; passes median {:.2} GB/s)",
        roofline.paired_ratio,
        gib(PAIRED_PROBE_BYTES as u64),
        b.paired_median_gbps
    );
    print_memory(r);
}

fn print_memory(r: &BenchReport) {
    let mem = &r.memory;
    println!(
        "memory:     peak RSS {}; planned {} (weights {} + KV cache {} + scratch {})",
        mem.peak_rss_bytes.map_or("n/a".to_string(), gib),
        gib(mem.planned_bytes),
        gib(mem.planned_weight_bytes),
        gib(mem.planned_kv_cache_bytes),
        gib(mem.planned_scratch_bytes)
    );
}

fn gb(bytes: u64) -> String {
    format!("{:.4} GB", bytes as f64 / 1e9)
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}
