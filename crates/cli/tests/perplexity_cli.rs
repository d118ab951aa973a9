//! `gattn-cpu perplexity` end to end on the builtin elementwise model and its builtin text: the
//! f32 perplexity equals exp(mean NLL) computed here from `gattn-cpu logits` on the same windows;
//! a run against its own saved logits has KL divergence 0; files are never clobbered.

use std::path::Path;
use std::process::Output;

use gattn_eval::perplexity::BUILTIN_TEXT;
use support::{expect_exit, gattn_cpu_with_cache as gattn_cpu, read_npy};

mod support;

const CTX: usize = 96;
const CHUNKS: usize = 2;

fn json(o: &Output) -> serde_json::Value {
    expect_exit(o, 0);
    serde_json::from_slice(&o.stdout).expect("--json prints one JSON document")
}

/// `perplexity` on the builtin text with `extra` arguments.
fn perplexity(cache: &Path, extra: &[&str]) -> Output {
    let (ctx, chunks) = (CTX.to_string(), CHUNKS.to_string());
    let mut args = vec![
        "perplexity",
        "-m",
        "builtin:elementwise",
        "-c",
        &ctx,
        "--chunks",
        &chunks,
        "-t",
        "1",
    ];
    args.extend_from_slice(extra);
    gattn_cpu(cache, &args)
}

#[test]
fn f32_perplexity_equals_exp_mean_nll_from_logits() {
    let cache = tempfile::tempdir().unwrap();
    let report = json(&perplexity(
        cache.path(),
        &[
            "--builtin-text",
            "--weights",
            "f32",
            "--kv",
            "f32",
            "--json",
        ],
    ));

    // The tiny models' tokenizer maps each byte of ASCII text to the token of that value.
    assert!(BUILTIN_TEXT.is_ascii());
    let tokens: Vec<u32> = BUILTIN_TEXT.bytes().map(u32::from).collect();
    let out = tempfile::tempdir().unwrap();
    let npy = out.path().join("window.npy");
    let (mut nll_sum, mut scored) = (0.0f64, 0usize);
    for w in 0..CHUNKS {
        let window = &tokens[w * CTX..(w + 1) * CTX];
        let ids: Vec<String> = window.iter().map(u32::to_string).collect();
        expect_exit(
            &gattn_cpu(
                cache.path(),
                &[
                    "logits",
                    "-m",
                    "builtin:elementwise",
                    "--weights",
                    "f32",
                    "--kv",
                    "f32",
                    "--prompt-ids",
                    &ids.join(","),
                    "--out",
                    npy.to_str().unwrap(),
                    // One file rewritten per window.
                    "--force",
                ],
            ),
            0,
        );
        let (shape, logits) = read_npy(&npy);
        let vocab = shape[1];
        // llama-perplexity: logits at positions CTX/2 ..= CTX-2 predict the next token.
        for pos in CTX / 2..CTX - 1 {
            let row = &logits[pos * vocab..(pos + 1) * vocab];
            let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let lse = max
                + row
                    .iter()
                    .map(|&v| (v as f64 - max).exp())
                    .sum::<f64>()
                    .ln();
            nll_sum += lse - row[window[pos + 1] as usize] as f64;
            scored += 1;
        }
    }
    let expected = (nll_sum / scored as f64).exp();
    let got = report["perplexity"].as_f64().unwrap();
    assert_eq!(report["tokens_scored"].as_u64(), Some(scored as u64));
    assert!(
        ((got - expected) / expected).abs() < 1e-5,
        "perplexity {got}, exp(mean NLL) from logits {expected}"
    );
    assert!(report["perplexity_stderr"].as_f64().unwrap() > 0.0);
    assert_eq!(report["windows"].as_array().unwrap().len(), CHUNKS);
}

#[test]
fn kl_divergence_against_saved_logits() {
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let base = out.path().join("base.lp");
    let base_arg = base.to_str().unwrap();
    let f32_run = ["--weights", "f32", "--kv", "f32", "--json"];
    let saved = json(&perplexity(
        cache.path(),
        &[&f32_run[..], &["--save-logits", base_arg]].concat(),
    ));
    assert!(base.exists());

    // The same run against its own logits: no divergence, the same top token everywhere.
    let same = json(&perplexity(
        cache.path(),
        &[&f32_run[..], &["--kl-divergence", base_arg]].concat(),
    ));
    assert!(same["mean_kld"].as_f64().unwrap().abs() < 1e-6, "{same}");
    assert_eq!(same["kl_divergence"]["same_top"].as_f64(), Some(1.0));
    let base_ppl = same["kl_divergence"]["base_perplexity"].as_f64().unwrap();
    let ppl = saved["perplexity"].as_f64().unwrap();
    assert!((base_ppl / ppl - 1.0).abs() < 1e-5, "{base_ppl} vs {ppl}");

    // int8 weights and KV diverge a little, measurably.
    let int8 = json(&perplexity(
        cache.path(),
        &[
            "--weights",
            "int8",
            "--kv",
            "int8",
            "--json",
            "--kl-divergence",
            base_arg,
        ],
    ));
    let kld = int8["mean_kld"].as_f64().unwrap();
    assert!(kld > 1e-7 && kld < 0.5, "int8 mean KLD {kld}");

    // Saving again refuses to overwrite, and --force replaces the file.
    let o = perplexity(
        cache.path(),
        &[&f32_run[..], &["--save-logits", base_arg]].concat(),
    );
    expect_exit(&o, 1);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    expect_exit(
        &perplexity(
            cache.path(),
            &[&f32_run[..], &["--save-logits", base_arg, "--force"]].concat(),
        ),
        0,
    );

    // Other windows than the base's are refused before anything runs.
    let o = gattn_cpu(
        cache.path(),
        &[
            "perplexity",
            "-m",
            "builtin:elementwise",
            "-c",
            "64",
            "--chunks",
            "2",
            "--kl-divergence",
            base_arg,
        ],
    );
    expect_exit(&o, 1);
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not match"));
}

#[test]
fn bad_inputs_are_clear_errors() {
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let junk = out.path().join("junk.lp");
    std::fs::write(&junk, vec![0u8; 500]).unwrap();
    let o = perplexity(cache.path(), &["--kl-divergence", junk.to_str().unwrap()]);
    expect_exit(&o, 1);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("junk.lp") && stderr.contains("magic"),
        "{stderr}"
    );

    let short = out.path().join("short.txt");
    std::fs::write(&short, "too short").unwrap();
    let o = perplexity(cache.path(), &["-f", short.to_str().unwrap()]);
    expect_exit(&o, 1);
    assert!(String::from_utf8_lossy(&o.stderr).contains("too few"));
}

#[test]
fn default_run_prints_a_perplexity_offline() {
    let cache = tempfile::tempdir().unwrap();
    let o = gattn_cpu(
        cache.path(),
        &["perplexity", "-m", "builtin:elementwise", "--chunks", "1"],
    );
    expect_exit(&o, 0);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("Final estimate: PPL = "), "{stdout}");
    assert!(stdout.contains("[1] "), "{stdout}");
}
