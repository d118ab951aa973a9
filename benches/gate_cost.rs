//! What the gate costs at the model level: the decode-step time of the headwise and elementwise
//! Qwen3-1.7B shapes over the baseline's, with the three models interleaved token by token.
//!
//! Why interleaved and not one benchmark after another: the host's read bandwidth moves by a
//! third within minutes, more than the effect measured (issue 5 asks headwise within 1% of the
//! baseline, elementwise within its ~7% of extra bytes). Here each round times one step of each
//! model within half a second (in a rotating order), and the ratios of each round are kept.
//!
//! Checkpoints: `GATTN_BENCH_GATE_MODELS=none=DIR,headwise=DIR,elementwise=DIR` (e.g. three
//! `gattn-cpu init --preset qwen3-1.7b --dtype bf16 --gate G` directories), or else random ones
//! written once to a temporary directory (~10 GB, a few minutes). `GATE_BENCH_WEIGHTS` (bf16),
//! `GATE_BENCH_DEPTH` (synthetic cached tokens, 512) and `GATE_BENCH_ROUNDS` (40) set the case.
//! `cargo bench -p gattn-benches --bench gate_cost`

use std::path::{Path, PathBuf};
use std::time::Instant;

use gattn_model::bench::{DecodeTraffic, fill_synthetic};
use gattn_model::init::{Preset, write_random_checkpoint};
use gattn_model::{GateMode, KvCache, KvDtype, LogitsFor, Qwen3Model, WeightFormat};
use gattn_tensor::DType;

const THREADS: usize = 2;
const GATES: [GateMode; 3] = [GateMode::None, GateMode::Headwise, GateMode::Elementwise];

fn env_or<T>(name: &str, default: T, parse: impl Fn(&str) -> Option<T>) -> T {
    match std::env::var(name) {
        Ok(text) => parse(text.trim()).unwrap_or_else(|| panic!("{name}: cannot parse {text:?}")),
        Err(_) => default,
    }
}

/// The three checkpoint directories (baseline, headwise, elementwise), and the temporary
/// directory that owns them if they were written here.
fn checkpoints() -> ([PathBuf; 3], Option<tempfile::TempDir>) {
    if let Ok(list) = std::env::var("GATTN_BENCH_GATE_MODELS") {
        let dir_of = |gate: GateMode| -> PathBuf {
            list.split(',')
                .find_map(|item| {
                    let (name, dir) = item.split_once('=')?;
                    (name.trim() == gate.name()).then(|| PathBuf::from(dir.trim()))
                })
                .unwrap_or_else(|| panic!("GATTN_BENCH_GATE_MODELS has no `{}=DIR`", gate.name()))
        };
        return (GATES.map(dir_of), None);
    }
    let temp = tempfile::tempdir().expect("a temporary directory for the checkpoints");
    let dirs = GATES.map(|gate| {
        let dir = temp.path().join(gate.name());
        eprintln!(
            "writing a random Qwen3-1.7B-shape checkpoint ({} gate) to {}",
            gate.name(),
            dir.display()
        );
        // The same seed for all three: the weights they share are the same.
        write_random_checkpoint(&dir, &Preset::Qwen3_1_7b.config(gate), DType::BF16, 0)
            .expect("writing the checkpoint");
        dir
    });
    (dirs, Some(temp))
}

/// One model, its cache at `depth` tokens, and what a step reads.
struct Case {
    model: Qwen3Model,
    cache: KvCache,
    depth: usize,
    bytes: u64,
}

impl Case {
    fn load(dir: &Path, format: WeightFormat, depth: usize) -> Case {
        let mut model = Qwen3Model::load(dir, format)
            .unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()));
        model.kv_dtype = KvDtype::Bf16;
        let mut cache = model.new_cache(depth + 1);
        fill_synthetic(&model.config, &mut cache, depth, 0).expect("the cache has room");
        let bytes = DecodeTraffic::of_decode(&model, depth, 1).total_bytes;
        Case {
            model,
            cache,
            depth,
            bytes,
        }
    }

    /// Seconds of one decode step; the cache is truncated back to `depth` afterwards.
    fn step_seconds(&mut self) -> f64 {
        let start = Instant::now();
        let logits = self
            .model
            .forward(&[17], &mut self.cache, LogitsFor::Last)
            .expect("a decode step");
        let seconds = start.elapsed().as_secs_f64();
        std::hint::black_box(logits);
        for layer in 0..self.model.config.num_hidden_layers {
            self.cache.layer_mut(layer).storage.truncate(self.depth);
        }
        seconds
    }
}

/// (25th percentile, median, 75th percentile) of `values`.
fn quartiles(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    (at(0.25), at(0.5), at(0.75))
}

fn main() {
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(THREADS)
        .build_global();
    let format = env_or(
        "GATE_BENCH_WEIGHTS",
        WeightFormat::Bf16,
        WeightFormat::parse,
    );
    let depth = env_or("GATE_BENCH_DEPTH", 512, |s| s.parse().ok());
    let rounds = env_or("GATE_BENCH_ROUNDS", 40, |s| s.parse().ok()).max(1);
    let (dirs, _temp) = checkpoints();
    let mut cases = dirs.each_ref().map(|dir| Case::load(dir, format, depth));
    // Warm-up: every model's weights are read once (page cache, first-touch faults).
    for case in &mut cases {
        case.step_seconds();
    }
    let mut ratios = [Vec::new(), Vec::new()];
    let mut baseline_ms = Vec::new();
    for round in 0..rounds {
        let mut seconds = [0.0; 3];
        // Rotate the order so that no model always follows the same one.
        for i in 0..3 {
            let which = (round + i) % 3;
            seconds[which] = cases[which].step_seconds();
        }
        ratios[0].push(seconds[1] / seconds[0]);
        ratios[1].push(seconds[2] / seconds[0]);
        baseline_ms.push(seconds[0] * 1e3);
    }

    eprintln!(
        "\n== gate cost: {} weights, {depth} cached tokens, {THREADS} threads, {rounds} interleaved rounds ==",
        format.name()
    );
    let (_, base_ms, _) = quartiles(&mut baseline_ms);
    eprintln!(
        "baseline decode step: median {base_ms:.1} ms, {:.3} GB read",
        cases[0].bytes as f64 / 1e9
    );
    for (gate, (case, ratios)) in ["headwise", "elementwise"]
        .iter()
        .zip(cases[1..].iter().zip(ratios.iter_mut()))
    {
        let (q1, median, q3) = quartiles(ratios);
        eprintln!(
            "{gate:11} / baseline step time: median {median:.4} (quartiles {q1:.4}-{q3:.4}); bytes read {:.4}x",
            case.bytes as f64 / cases[0].bytes as f64
        );
    }
}
