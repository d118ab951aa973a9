//! `gattn-cpu bench`'s measurements: prefill and decode speed, peak memory, the bytes each decode
//! token reads, and the read bandwidth measured in the same run, giving achieved / roofline speed.
//!
//! Only the public model API is used (`new_cache`, `forward` with `LogitsFor::Last`), so the
//! figures are those of what `run` does. The command line formats the [`BenchReport`].

pub mod attention;
pub mod rss;
pub mod spread;
pub mod traffic;

use std::time::Instant;

use gattn_kernels::bandwidth::{ReadProbe, measure_read_bandwidth_gbps_in_current_pool};
use gattn_kernels::dispatch::dispatch_choice;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::config::Qwen3Config;
use crate::error::{ModelError, Result};
use crate::kv_cache::KvCache;
use crate::memory::MemoryPlan;
use crate::model::{LogitsFor, Qwen3Model};
use crate::sampling::argmax;
pub use attention::AttentionRate;
pub use spread::Spread;
pub use traffic::DecodeTraffic;

/// Bytes the bandwidth probe streams per pass: 32x a 32 MiB L3, as large as a layer group.
pub const PROBE_BYTES: usize = 1 << 30;
/// Passes of the probe; their median is reported.
pub const PROBE_PASSES: usize = 5;
/// Bytes of the probe pass timed right before each decode token (8x the L3, and short next to
/// a token: ~8 ms against 70-120 ms for the 1.7B shape).
pub const PAIRED_PROBE_BYTES: usize = gattn_kernels::bandwidth::PROBE_BYTES;

/// More timed prefills than any median needs; also bounds the time list allocated up front.
pub const MAX_REPETITIONS: usize = 10_000;

/// What to measure.
#[derive(Debug, Clone, Serialize)]
pub struct BenchSettings {
    /// Prompt tokens of the timed prefill (random ids), on top of `depth` cached tokens.
    pub prompt_tokens: usize,
    /// Tokens decoded (greedy) and timed one by one.
    pub gen_tokens: usize,
    /// Tokens in the cache before the timed prefill and before the timed decode (filled by an
    /// untimed chunked prefill, or synthetically: see [`DepthFill`]), as llama-bench's `-d`.
    pub depth: usize,
    pub depth_fill: DepthFill,
    /// Timed prefills; the median is reported.
    pub repetitions: usize,
    /// One untimed prefill of the prompt first (as llama-bench does), so the first timed one
    /// does not pay for faulting in the weights' pages.
    pub warmup: bool,
    /// Tokens per forward chunk when prefilling: the model's `prefill_chunk`, which does the
    /// chunking (here for the memory plan made before loading, and the report).
    pub prefill_chunk: usize,
    /// Seed of the random token ids.
    pub seed: u64,
    /// Bytes per pass of the bandwidth probe, and passes.
    pub probe_bytes: usize,
    pub probe_passes: usize,
    /// Time the prefill only, without the warm-up (a 131072-token prompt takes minutes): no
    /// decode, no probes; the caller hears of every chunk.
    pub prefill_only: bool,
}

/// How the `depth` tokens before the timed decode get into the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DepthFill {
    /// A real (untimed) prefill of random tokens: exact, but 32K+ tokens take many minutes.
    Prefill,
    /// Pseudo-random keys and values written straight into every layer's cache: decode speed
    /// and memory depend on how many rows attention streams, not on their values, so deep
    /// contexts (32768, 131072) can be measured in seconds.
    Synthetic,
}

impl BenchSettings {
    /// Tokens the cache of the run holds at most: depth + the prompt, or depth + gen.
    pub fn context(&self) -> usize {
        let after_depth = if self.prefill_only {
            self.prompt_tokens
        } else {
            self.prompt_tokens.max(self.gen_tokens)
        };
        self.depth + after_depth
    }

    /// Refuses counts of zero and runs that exceed the model's context, naming the flags.
    pub fn validate(&self, config: &Qwen3Config) -> Result<()> {
        for (flag, value) in [
            ("--prompt", self.prompt_tokens),
            ("--gen", self.gen_tokens),
            ("--repetitions", self.repetitions),
            ("--prefill-chunk", self.prefill_chunk),
        ] {
            if value == 0 {
                return Err(ModelError::InvalidArgument(format!(
                    "{flag} must be at least 1"
                )));
            }
        }
        if self.repetitions > MAX_REPETITIONS {
            return Err(ModelError::InvalidArgument(format!(
                "--repetitions {} is more than the {MAX_REPETITIONS} a median needs",
                self.repetitions
            )));
        }
        let max = config.max_position_embeddings;
        for (flag, value) in [("--gen", self.gen_tokens), ("--prompt", self.prompt_tokens)] {
            // Checked: a --depth near usize::MAX must not wrap past the context check.
            let total = self.depth.checked_add(value);
            if total.is_none_or(|t| t > max) {
                let total = total.map_or("more than 2^64".into(), |t| t.to_string());
                return Err(ModelError::InvalidArgument(format!(
                    "--depth {} + {flag} {value} = {total} exceeds the model's context of {max} tokens (max_position_embeddings)",
                    self.depth
                )));
            }
        }
        Ok(())
    }
}

/// Everything one `bench` run measured, with its settings.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub settings: BenchSettings,
    pub model: ModelSummary,
    pub machine: MachineSummary,
    pub prefill: PrefillReport,
    /// The decode and its roofline (none with `prefill_only`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode: Option<DecodeReport>,
    /// Bytes one decode token reads (weights + KV at the mean depth of the measured tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_per_token: Option<DecodeTraffic>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<BandwidthReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline: Option<Roofline>,
    pub memory: MemoryReport,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelSummary {
    pub gate: &'static str,
    pub layers: usize,
    pub hidden_size: usize,
    pub parameters: u64,
    /// `--weights`: f32, bf16 or int8.
    pub weights: &'static str,
    /// `--kv`: the KV-cache storage.
    pub kv: &'static str,
    /// Bytes of weights held (the embedding table and a tied lm_head counted once).
    pub weight_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MachineSummary {
    /// The SIMD level the kernels dispatch to, and why.
    pub simd: &'static str,
    pub simd_reason: String,
    /// Worker threads of the run (and of the probe).
    pub threads: usize,
    /// Hardware threads the machine offers.
    pub machine_threads: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct PrefillReport {
    pub tokens: usize,
    /// Tokens cached before each timed prefill.
    pub depth: usize,
    /// Per repetition, prompt tokens / wall seconds of the chunked prefill.
    pub tokens_per_second: Spread,
    pub seconds: Vec<f64>,
    /// The attention kernel's share and FLOP rate (none with `prefill_only`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention: Option<AttentionRate>,
}

/// One chunk of a timed prefill, as it finishes.
#[derive(Debug, Clone, Copy)]
pub struct ChunkProgress {
    /// Prompt tokens done (this chunk included) and in all.
    pub done: usize,
    pub total: usize,
    pub chunk_tokens: usize,
    pub chunk_seconds: f64,
    /// Since the prefill started.
    pub elapsed_seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct DecodeReport {
    pub depth: usize,
    pub tokens: usize,
    /// KV rows the measured tokens attend over, on average.
    pub mean_kv_len: f64,
    /// Per token, 1 / its wall time (forward + argmax).
    pub tokens_per_second: Spread,
    pub median_ms_per_token: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BandwidthReport {
    /// Median read bandwidth (1e9 bytes/s) of the probe right before and right after the decode.
    pub before_gbps: f64,
    pub after_gbps: f64,
    pub mean_gbps: f64,
    /// Median of the passes timed right before each decode token ([`PAIRED_PROBE_BYTES`]).
    pub paired_median_gbps: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Roofline {
    /// Read bandwidth / bytes per decode token: the decode speed if only memory traffic counted.
    pub decode_tokens_per_second: f64,
    /// Achieved median decode tokens/s / roofline tokens/s.
    pub ratio: f64,
    /// Median over the decode tokens of (bytes per token / the token's time) / (the probe pass
    /// right before it). On a shared host whose bandwidth moves by a third within minutes, each
    /// pair is measured under the same conditions, which the probes before and after the whole
    /// decode cannot promise.
    pub paired_ratio: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemoryReport {
    /// VmHWM (Linux), the bandwidth probe's transient buffer excluded; `None` elsewhere.
    pub peak_rss_bytes: Option<u64>,
    /// What `MemoryPlan` computed for this run's largest context.
    pub planned_bytes: u64,
    pub planned_weight_bytes: u64,
    pub planned_kv_cache_bytes: u64,
    pub planned_scratch_bytes: u64,
}

/// The memory plan of a run with `settings` (checked against free memory before loading).
pub fn memory_plan(
    config: &Qwen3Config,
    model_format: crate::WeightFormat,
    kv: crate::KvDtype,
    settings: &BenchSettings,
) -> MemoryPlan {
    MemoryPlan::new(
        config,
        model_format,
        kv,
        settings.context(),
        settings.prefill_chunk,
    )
}

/// Runs the measurements on `model` in the current rayon pool; `on_chunk` hears of every chunk of
/// the timed prefills.
pub fn run_bench(
    model: &Qwen3Model,
    settings: &BenchSettings,
    on_chunk: &mut dyn FnMut(ChunkProgress),
) -> Result<BenchReport> {
    settings.validate(&model.config)?;
    let config = &model.config;
    let mut rng = StdRng::seed_from_u64(settings.seed);
    let mut random_tokens = |n: usize| -> Vec<u32> {
        (0..n)
            .map(|_| rng.random_range(0..config.vocab_size as u32))
            .collect()
    };

    // One cache for the whole run: the depth is filled once, each prefill is timed on top of
    // it and taken off again, and the decode runs on top of it last.
    let prompt = random_tokens(settings.prompt_tokens);
    let mut cache = model.new_cache(settings.context());
    let mut token = match settings.depth_fill {
        DepthFill::Prefill if settings.depth > 0 => {
            let context = random_tokens(settings.depth);
            argmax(&model.forward(&context, &mut cache, LogitsFor::Last)?)
        }
        DepthFill::Synthetic => {
            fill_synthetic(config, &mut cache, settings.depth, settings.seed)?;
            random_tokens(1)[0]
        }
        DepthFill::Prefill => random_tokens(1)[0],
    };
    let mut logits = Vec::new();
    if settings.warmup && !settings.prefill_only {
        model.forward_into(&prompt, &mut cache, LogitsFor::Last, &mut logits)?;
        cache.truncate(settings.depth);
    }
    let mut prefill_seconds = Vec::with_capacity(settings.repetitions);
    for _ in 0..settings.repetitions {
        let start = Instant::now();
        let mut last = (0, start);
        model.prefill(&prompt, &mut cache, LogitsFor::Last, &mut logits, |done| {
            let now = Instant::now();
            on_chunk(ChunkProgress {
                done,
                total: prompt.len(),
                chunk_tokens: done - last.0,
                chunk_seconds: (now - last.1).as_secs_f64(),
                elapsed_seconds: (now - start).as_secs_f64(),
            });
            last = (done, now);
            true
        })?;
        prefill_seconds.push(start.elapsed().as_secs_f64());
        cache.truncate(settings.depth);
    }
    let prefill_rates: Vec<f64> = prefill_seconds
        .iter()
        .map(|s| settings.prompt_tokens as f64 / s)
        .collect();
    let median_prefill = Spread::of(&prefill_seconds).median;
    let attention = if settings.prefill_only {
        None
    } else {
        Some(attention::measure_attention(
            model,
            settings,
            median_prefill,
        )?)
    };

    let plan = memory_plan(config, model.format, model.kv_dtype, settings);
    let choice = dispatch_choice();
    let mut report = BenchReport {
        settings: BenchSettings {
            prefill_chunk: model.prefill_chunk,
            ..settings.clone()
        },
        model: ModelSummary {
            gate: config.gate.name(),
            layers: config.num_hidden_layers,
            hidden_size: config.hidden_size,
            parameters: config.parameter_count(),
            weights: model.format.name(),
            kv: model.kv_dtype.name(),
            weight_bytes: model.weight_bytes() as u64,
        },
        machine: MachineSummary {
            simd: choice.table().name(),
            simd_reason: choice.reason.clone(),
            threads: rayon::current_num_threads(),
            machine_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        },
        prefill: PrefillReport {
            tokens: settings.prompt_tokens,
            depth: settings.depth,
            tokens_per_second: Spread::of(&prefill_rates),
            seconds: prefill_seconds,
            attention,
        },
        decode: None,
        bytes_per_token: None,
        bandwidth: None,
        roofline: None,
        memory: MemoryReport {
            peak_rss_bytes: rss::peak_rss_bytes(),
            planned_bytes: plan.total(),
            planned_weight_bytes: plan.weight_bytes,
            planned_kv_cache_bytes: plan.kv_cache_bytes,
            planned_scratch_bytes: plan.scratch_bytes,
        },
    };
    if settings.prefill_only {
        return Ok(report);
    }

    // The probe allocates and touches its own buffer: read the peak before it, and reset the
    // peak after it, so the figure is the model's.
    let peak_before_probe = rss::peak_rss_bytes();
    let probe =
        || measure_read_bandwidth_gbps_in_current_pool(settings.probe_bytes, settings.probe_passes);
    let before_gbps = probe();
    // Resident through the decode; its bytes are taken off the decode's peak below.
    let paired_probe = ReadProbe::new(PAIRED_PROBE_BYTES);
    let reset = rss::reset_peak_rss();
    let mut decode_seconds = Vec::with_capacity(settings.gen_tokens);
    let mut paired_gbps = Vec::with_capacity(settings.gen_tokens);
    for _ in 0..settings.gen_tokens {
        paired_gbps.push(paired_probe.pass_gbps());
        let start = Instant::now();
        model.forward_into(&[token], &mut cache, LogitsFor::Last, &mut logits)?;
        token = argmax(&logits);
        decode_seconds.push(start.elapsed().as_secs_f64());
    }
    let peak_decode = if reset {
        rss::peak_rss_bytes().map(|peak| peak.saturating_sub(paired_probe.bytes() as u64))
    } else {
        None
    };
    drop(paired_probe);
    let after_gbps = probe();
    drop(cache);

    let decode_rates: Vec<f64> = decode_seconds.iter().map(|s| 1.0 / s).collect();
    let decode_spread = Spread::of(&decode_rates);
    let traffic = DecodeTraffic::of_decode(model, settings.depth, settings.gen_tokens);
    let mean_gbps = 0.5 * (before_gbps + after_gbps);
    let roofline_tps = mean_gbps * 1e9 / traffic.total_bytes as f64;
    let paired_ratios: Vec<f64> = decode_seconds
        .iter()
        .zip(&paired_gbps)
        .map(|(secs, gbps)| traffic.total_bytes as f64 / secs / (gbps * 1e9))
        .collect();
    report.decode = Some(DecodeReport {
        depth: settings.depth,
        tokens: settings.gen_tokens,
        mean_kv_len: traffic::mean_kv_len(settings.depth, settings.gen_tokens),
        tokens_per_second: decode_spread,
        median_ms_per_token: 1e3 * Spread::of(&decode_seconds).median,
    });
    report.bandwidth = Some(BandwidthReport {
        before_gbps,
        after_gbps,
        mean_gbps,
        paired_median_gbps: Spread::of(&paired_gbps).median,
    });
    report.roofline = Some(Roofline {
        decode_tokens_per_second: roofline_tps,
        ratio: decode_spread.median / roofline_tps,
        paired_ratio: Spread::of(&paired_ratios).median,
    });
    report.bytes_per_token = Some(traffic);
    report.memory.peak_rss_bytes = peak_before_probe.max(peak_decode);
    Ok(report)
}

/// Appends `depth` rows of pseudo-random (seeded) keys and values in [-1, 1) to every layer of
/// `cache`, a chunk at a time (so the f32 staging buffers stay small next to a 131072-token
/// cache). What `--depth-fill synthetic` and the decode-step criterion bench use.
pub fn fill_synthetic(
    config: &Qwen3Config,
    cache: &mut KvCache,
    depth: usize,
    seed: u64,
) -> Result<()> {
    const CHUNK_TOKENS: usize = 1024;
    let row = config.kv_dim();
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_f111);
    let mut keys = vec![0.0f32; CHUNK_TOKENS * row];
    let mut values = vec![0.0f32; CHUNK_TOKENS * row];
    let mut done = 0;
    while done < depth {
        let n = CHUNK_TOKENS.min(depth - done);
        for layer in 0..config.num_hidden_layers {
            for x in keys[..n * row]
                .iter_mut()
                .chain(values[..n * row].iter_mut())
            {
                *x = rng.random_range(-1.0..1.0);
            }
            cache
                .layer_mut(layer)
                .append(&keys[..n * row], &values[..n * row], n)?;
        }
        done += n;
    }
    Ok(())
}
