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
//! written once to a temporary directory (~10 GB, a few minutes). `GATTN_BENCH_GATE_WEIGHTS`
//! (bf16), `GATTN_BENCH_GATE_DEPTH` (synthetic cached tokens, 512) and `GATTN_BENCH_GATE_ROUNDS`
//! (40) set the case.
//! `cargo bench -p gattn-benches --bench gate_cost`

use std::path::{Path, PathBuf};
use std::time::Instant;

use gattn_benches::{DecodeAtDepth, write_random_qwen3_1_7b};
use gattn_model::{GateMode, KvDtype, Qwen3Model, WeightFormat};

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
        write_random_qwen3_1_7b(&dir, gate);
        dir
    });
    (dirs, Some(temp))
}

fn load(dir: &Path, format: WeightFormat) -> Qwen3Model {
    let mut model =
        Qwen3Model::load(dir, format).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()));
    model.kv_dtype = KvDtype::Bf16;
    model
}

/// Seconds of one decode step.
fn step_seconds(decode: &mut DecodeAtDepth<'_>) -> f64 {
    let start = Instant::now();
    decode.step();
    start.elapsed().as_secs_f64()
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
        "GATTN_BENCH_GATE_WEIGHTS",
        WeightFormat::Bf16,
        WeightFormat::parse,
    );
    let depth = env_or("GATTN_BENCH_GATE_DEPTH", 512, |s| s.parse().ok());
    let rounds = env_or("GATTN_BENCH_GATE_ROUNDS", 40, |s| s.parse().ok()).max(1);
    let (dirs, _temp) = checkpoints();
    let models = dirs.each_ref().map(|dir| load(dir, format));
    let mut cases = models
        .each_ref()
        .map(|model| DecodeAtDepth::new(model, depth));
    let bytes = cases
        .each_ref()
        .map(|case| case.traffic().total_bytes as f64);
    // Warm-up: every model's weights are read once (page cache, first-touch faults).
    for case in &mut cases {
        case.step();
    }
    let mut ratios = [Vec::new(), Vec::new()];
    let mut baseline_ms = Vec::new();
    for round in 0..rounds {
        let mut seconds = [0.0; 3];
        // Rotate the order so that no model always follows the same one.
        for i in 0..3 {
            let which = (round + i) % 3;
            seconds[which] = step_seconds(&mut cases[which]);
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
        bytes[0] / 1e9
    );
    for (gate, (gate_bytes, ratios)) in ["headwise", "elementwise"]
        .iter()
        .zip(bytes[1..].iter().zip(ratios.iter_mut()))
    {
        let (q1, median, q3) = quartiles(ratios);
        eprintln!(
            "{gate:11} / baseline step time: median {median:.4} (quartiles {q1:.4}-{q3:.4}); bytes read {:.4}x",
            gate_bytes / bytes[0]
        );
    }
}
