//! `gattn-cpu sink`, `gattn-cpu attn-map` and `builtin:NAME` models end to end.

use std::path::{Path, PathBuf};

use gattn_eval::analysis::{combined_figure_size, model_figure_size};
use gattn_model::{LogitsFor, Qwen3Model, Tokenizer, WeightFormat};
use support::{expect_exit, gattn_cpu_with_cache as gattn_cpu, read_npy};

mod support;

const PROMPT: &str = "The gate removes the sink.";

fn init_tiny_at(cache: &Path, out: &Path, gate: &str) {
    let out = out.to_str().unwrap();
    let o = gattn_cpu(
        cache,
        &[
            "init", "--preset", "tiny", "--gate", gate, "-s", "3", "--out", out,
        ],
    );
    expect_exit(&o, 0);
}

fn init_tiny(cache: &Path, gate: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    init_tiny_at(cache, dir.path(), gate);
    dir
}

fn png_size(path: &Path) -> (u32, u32) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    (frame.width, frame.height)
}

/// attn-map writes the reference path's probabilities averaged over heads, as .npy, and PNGs of
/// the documented size; sink's streamed first-token share equals the share read off those maps.
#[test]
fn attn_map_equals_the_reference_maps_and_sink_streams_the_same_share() {
    let cache = tempfile::tempdir().unwrap();
    // Checkpoint directories named as the output files will be.
    let names = ["base", "gated"];
    let root = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = names.iter().map(|n| root.path().join(n)).collect();
    init_tiny_at(cache.path(), &dirs[0], "none");
    init_tiny_at(cache.path(), &dirs[1], "elementwise");
    let models: Vec<&str> = dirs.iter().map(|d| d.to_str().unwrap()).collect();
    let out = tempfile::tempdir().unwrap();
    // attn-map runs with its defaults: the reference kernels over an f32 cache (--kv auto), on
    // the checkpoint's bf16 weights widened exactly to f32, as the reference below holds them.
    // sink streams from the fused kernel: f32 weights and cache keep it within f32 rounding of
    // those maps (bf16 ones would round the activations, ~1e-3 off).
    let models_and_prompt = ["-m", models[0], "-m", models[1], "-p", PROMPT];
    let same_input = [&models_and_prompt[..], &["--kv", "f32", "--weights", "f32"]].concat();
    let out_dir = out.path().to_str().unwrap();
    let attn_map_args = [
        &["attn-map"][..],
        &models_and_prompt,
        &["--layers", "1,2", "-o", out_dir],
    ]
    .concat();
    let o = gattn_cpu(cache.path(), &attn_map_args);
    expect_exit(&o, 0);

    let sink = gattn_cpu(
        cache.path(),
        &[&["sink"][..], &same_input, &["--json"]].concat(),
    );
    expect_exit(&sink, 0);
    let reports: serde_json::Value = serde_json::from_slice(&sink.stdout).unwrap();
    let reports = reports.as_array().unwrap();
    assert_eq!(reports.len(), 2);

    for ((dir, name), report) in dirs.iter().zip(names).zip(reports) {
        let model = Qwen3Model::load(dir, WeightFormat::F32).unwrap();
        let tokens = Tokenizer::from_dir(dir).unwrap().encode(PROMPT).unwrap();
        let n = tokens.len();
        let heads = model.config.num_attention_heads;
        let mut maps = Vec::new();
        model
            .forward_with_maps(
                &tokens,
                &mut model.new_cache(n),
                LogitsFor::Last,
                Some(&mut maps),
            )
            .unwrap();
        let layers = report["layers"].as_array().unwrap();
        assert_eq!(layers.len(), model.layers.len(), "one entry per layer");
        assert_eq!(report["tokens"], n);
        for layer in 0..2 {
            let (shape, got) = read_npy(&out.path().join(format!("{name}-layer{}.npy", layer + 1)));
            assert_eq!(shape, [n, n]);
            for q in 0..n {
                for k in 0..n {
                    let want = (0..heads)
                        .map(|head| maps[layer][(q * heads + head) * n + k])
                        .sum::<f32>()
                        / heads as f32;
                    let g = got[q * n + k];
                    assert!(
                        (g - want).abs() < 1e-6,
                        "{name} layer {layer} [{q},{k}]: {g} vs {want}"
                    );
                }
            }
            let from_maps = (0..n).map(|q| got[q * n] as f64).sum::<f64>() / n as f64;
            let streamed = layers[layer]["first_token_share"].as_f64().unwrap();
            assert_eq!(layers[layer]["layer"], layer + 1);
            assert!(
                (from_maps - streamed).abs() < 1e-5,
                "{name} layer {layer}: maps {from_maps}, sink {streamed}"
            );
        }
        let gated = report["gate"] == "elementwise";
        assert_eq!(layers[0]["mean_gate"].is_null(), !gated, "{report}");
        assert!(layers[0]["max_abs_hidden"].as_f64().unwrap() > 0.0);
        assert_eq!(
            png_size(&out.path().join(format!("attn-map-{name}.png"))),
            model_figure_size(2)
        );
    }
    assert_eq!(
        png_size(&out.path().join("attn-map-combined.png")),
        combined_figure_size(2, 2)
    );

    // The table names every layer of every model.
    let table = gattn_cpu(cache.path(), &["sink", "-m", models[1], "-p", PROMPT]);
    expect_exit(&table, 0);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("first-token share") && text.contains("gate: elementwise"),
        "{text}"
    );
}

#[test]
fn a_layer_the_model_lacks_is_refused_with_a_message() {
    let cache = tempfile::tempdir().unwrap();
    let model = init_tiny(cache.path(), "headwise");
    let out = tempfile::tempdir().unwrap();
    let o = gattn_cpu(
        cache.path(),
        &[
            "attn-map",
            "-m",
            model.path().to_str().unwrap(),
            "-p",
            PROMPT,
            "--layers",
            "1,3",
            "-o",
            out.path().to_str().unwrap(),
        ],
    );
    expect_exit(&o, 2); // a flag value: a usage error
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--layers 3") && err.contains("2 layers"),
        "{err}"
    );
    let o = gattn_cpu(cache.path(), &["sink", "-p", PROMPT]);
    expect_exit(&o, 2); // --model is required
}

#[test]
fn builtin_models_run_without_a_model_directory() {
    let cache = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let o = gattn_cpu(cache.path(), args);
        expect_exit(&o, 0);
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let greedy = [
        "-p",
        "It is a truth",
        "-n",
        "8",
        "--temperature",
        "0",
        "--output",
        "ids",
    ];
    let explicit = run(&[&["run", "-m", "builtin:elementwise"][..], &greedy].concat());
    let default = run(&[&["run"][..], &greedy].concat());
    assert_eq!(explicit.trim().split(',').count(), 8, "{explicit}");
    assert_eq!(
        explicit, default,
        "the default model is builtin:elementwise"
    );
    let info = run(&["info", "-m", "builtin:baseline"]);
    assert!(info.contains("gate:      none"), "{info}");
    assert!(cache.path().join("builtin").is_dir());

    let o = gattn_cpu(cache.path(), &["run", "-m", "builtin:gated", "-p", "x"]);
    expect_exit(&o, 2);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("builtin:baseline, builtin:headwise, builtin:elementwise"),
        "{err}"
    );
}
