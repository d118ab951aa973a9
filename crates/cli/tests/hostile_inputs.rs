//! Hostile inputs, subcommand by subcommand: huge, zero and out-of-range counts, non-finite
//! floats, special files (devices, FIFOs, directories), oversized and strict-format violations
//! in checkpoints, tokenizers and templates. Every case must end, within a time bound, with the
//! exit code of the contract (2: a flag or its value; 1: a file's content), a message naming the
//! thing at fault, no panic, and every file that existed before it unchanged.

mod support;

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A case that has not ended by then is a hang: it is killed and fails.
const TIME_BOUND: Duration = Duration::from_secs(20);
const MAX: &str = "18446744073709551615";

/// A scratch directory holding a tiny `init` checkpoint (`model/`), the builtin-model cache and
/// whatever files a case needs.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let fixture = Fixture {
            dir: tempfile::tempdir().unwrap(),
        };
        let model = fixture.path("model");
        let o = support::gattn_cpu_with_cache(
            Path::new(&fixture.path("cache")),
            &[
                "init", "--preset", "tiny", "--gate", "headwise", "--out", &model,
            ],
        );
        support::expect_exit(&o, 0);
        fixture
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }

    /// A copy of the tiny checkpoint as `name/`, for a case to spoil.
    fn model_copy(&self, name: &str) -> String {
        let to = self.dir.path().join(name);
        std::fs::create_dir(&to).unwrap();
        for entry in std::fs::read_dir(self.dir.path().join("model")).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
        to.to_str().unwrap().to_string()
    }

    /// A copy of the tiny checkpoint as `name/` whose `file` is a FIFO.
    #[cfg(unix)]
    fn model_with_fifo(&self, name: &str, file: &str) -> String {
        let copy = self.model_copy(name);
        let path = format!("{copy}/{file}");
        std::fs::remove_file(&path).unwrap();
        mkfifo(&path);
        copy
    }

    /// Edits the JSON file `file` of the checkpoint copy `model`.
    fn edit_json(&self, model: &str, file: &str, edit: impl FnOnce(&mut serde_json::Value)) {
        let path = Path::new(model).join(file);
        let mut value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        edit(&mut value);
        std::fs::write(path, serde_json::to_string(&value).unwrap()).unwrap();
    }

    /// Runs every case, each checked as the module says.
    fn check(&self, cases: &[Case]) {
        for case in cases {
            let before = snapshot(self.dir.path());
            let (code, stderr) = run_bounded(&self.path("cache"), case.args);
            assert!(
                !stderr.contains("panicked"),
                "{:?} panicked:\n{stderr}",
                case.args
            );
            assert_eq!(
                code, case.code,
                "{:?}: exit code; stderr:\n{stderr}",
                case.args
            );
            assert!(
                stderr.contains(case.says),
                "{:?}: stderr should say `{}`:\n{stderr}",
                case.args,
                case.says
            );
            let after = snapshot(self.dir.path());
            for (path, hash) in &before {
                assert_eq!(
                    after.get(path),
                    Some(hash),
                    "{:?} changed or removed {}",
                    case.args,
                    path.display()
                );
            }
        }
    }
}

struct Case<'a> {
    args: &'a [&'a str],
    code: i32,
    /// A part of the message: the flag, file, tensor or field at fault.
    says: &'a str,
}

fn case<'a>(args: &'a [&'a str], code: i32, says: &'a str) -> Case<'a> {
    Case { args, code, says }
}

/// Runs the binary, killing it after [`TIME_BOUND`]; returns its exit code and stderr.
fn run_bounded(cache: &str, args: &[&str]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gattn-cpu"))
        .args(args)
        .env("GATTN_CACHE_DIR", cache)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read stderr on a thread, so that a chatty child cannot block on a full pipe.
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        pipe.read_to_string(&mut text).ok();
        text
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > TIME_BOUND {
            child.kill().ok();
            child.wait().ok();
            panic!("{args:?} did not end within {TIME_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = reader.join().unwrap();
    (status.code().unwrap_or(-1), stderr)
}

/// Every regular file under `dir` and a hash of its bytes (special files are not opened).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, u64> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let mut hasher = DefaultHasher::new();
                std::fs::read(&path).unwrap().hash(&mut hasher);
                files.insert(path, hasher.finish());
            }
        }
    }
    files
}

#[cfg(unix)]
fn mkfifo(path: &str) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {path}");
}

#[test]
fn huge_and_zero_counts_are_refused_naming_the_flag() {
    let f = Fixture::new();
    let m = &f.path("model");
    let out = &f.path("ruler-out");
    f.check(&[
        case(&["run", "-m", m, "-p", "hi", "-t", MAX], 2, "--threads"),
        case(&["run", "-m", m, "-p", "hi", "-t", "0"], 2, "--threads"),
        case(&["run", "-m", m, "-p", "hi", "-c", "0"], 2, "--ctx"),
        case(&["run", "-m", m, "-p", "hi", "-c", MAX], 2, "--ctx"),
        case(&["bench", "-m", m, "-r", "4000000000"], 2, "--repetitions"),
        case(&["bench", "-m", m, "-d", MAX, "-p", "4"], 2, "--depth"),
        case(
            &["bench", "-m", m, "-d", MAX, "--depth-fill", "synthetic"],
            2,
            "--depth",
        ),
        case(&["bench", "-m", m, "-n", MAX, "-p", "4"], 2, "--gen"),
        case(&["bench", "-m", m, "-p", "0"], 2, "--prompt"),
        case(&["bench", "-m", m, "-t", MAX], 2, "--threads"),
        case(
            &["ruler", "-m", m, "-n", "1000000000", "-o", out],
            2,
            "--samples",
        ),
        case(
            &["ruler", "-m", m, "--samples", "0", "-o", out],
            2,
            "--samples",
        ),
        case(&["ruler", "-m", m, "-t", MAX, "-o", out], 2, "--threads"),
        case(
            &[
                "ruler",
                "-m",
                m,
                "--lengths",
                "300",
                "--tasks",
                "vt",
                "-o",
                out,
            ],
            2,
            "300",
        ),
        case(
            &[
                "ruler",
                "-m",
                m,
                "--lengths",
                "1000000K",
                "-n",
                "1",
                "-o",
                out,
            ],
            2,
            "--lengths",
        ),
        case(&["perplexity", "-m", m, "--chunks", "0"], 2, "--chunks"),
        case(&["perplexity", "-m", m, "-c", "2"], 2, "--ctx"),
        case(&["perplexity", "-m", m, "--stride", "0"], 2, "--stride"),
        case(&["perplexity", "-m", m, "--top-k", "0"], 2, "--top-k"),
        case(&["info", "-m", m, "-c", "0"], 2, "--ctx"),
        case(&["info", "-t", MAX], 2, "--threads"),
        case(&["sink", "-m", m, "-p", "hi", "-t", MAX], 2, "--threads"),
        case(
            &["attn-map", "-m", m, "-p", "hi", "-t", MAX, "-o", out],
            2,
            "--threads",
        ),
        case(
            &["attn-map", "-m", m, "-p", "hi", "--layers", "99", "-o", out],
            2,
            "99",
        ),
        case(
            &["logits", "-m", m, "--prompt-ids", "1", "-t", MAX, "-o", out],
            2,
            "--threads",
        ),
        case(&["serve", "-m", m, "-c", "0"], 2, "--ctx"),
        case(&["serve", "-m", m, "--parallel", MAX], 2, "--parallel"),
        case(&["serve", "-m", m, "-t", MAX], 2, "--threads"),
    ]);
}

#[test]
fn non_finite_and_out_of_range_floats_are_refused() {
    let f = Fixture::new();
    let m = &f.path("model");
    for (flag, value) in [
        ("--temperature", "NaN"),
        ("--temperature", "-1"),
        ("--temperature", "inf"),
        ("--top-p", "NaN"),
        ("--top-p", "-0.5"),
        ("--top-p", "1.5"),
        ("--rope-scaling", "yarn:NaN"),
        ("--rope-scaling", "yarn:0.5"),
        ("--rope-scaling", "linear:inf"),
        ("--rope-scaling", "cubic:2"),
    ] {
        let flag_value = format!("{flag}={value}");
        f.check(&[case(&["run", "-m", m, "-p", "hi", &flag_value], 2, flag)]);
    }
    f.check(&[case(
        &["info", "-m", m, "--rope-scaling", "yarn:0"],
        2,
        "--rope-scaling",
    )]);
    // YaRN parameters from config.json: the field is named.
    for (field, value) in [
        ("beta_fast", serde_json::json!(-1.0)),
        ("beta_slow", serde_json::json!(0.0)),
        ("beta_fast", serde_json::json!(0.5)),
        ("attention_factor", serde_json::json!(-2.0)),
    ] {
        let copy = f.model_copy(&format!("yarn-{field}-{value}"));
        f.edit_json(&copy, "config.json", |c| {
            let mut scaling = serde_json::json!({"rope_type": "yarn", "factor": 2.0});
            scaling[field] = value;
            c["rope_scaling"] = scaling;
        });
        f.check(&[case(&["run", "-m", &copy, "-p", "hi", "-n", "1"], 1, field)]);
    }
}

#[cfg(unix)]
#[test]
fn devices_fifos_and_directories_are_refused_without_hanging() {
    let f = Fixture::new();
    let m = &f.path("model");
    let fifo = &f.path("prompt.fifo");
    mkfifo(fifo);
    let dir = &f.path("model");
    let out = &f.path("out");

    let fifo_config = f.model_with_fifo("fifo-config", "config.json");
    let fifo_shard = f.model_with_fifo("fifo-shard", "model.safetensors");
    let fifo_tokenizer = f.model_with_fifo("fifo-tokenizer", "tokenizer.json");
    let fifo_template = f.model_with_fifo("fifo-template", "tokenizer_config.json");
    let dir_shard = f.model_copy("dir-shard");
    let shard = Path::new(&dir_shard).join("model.safetensors");
    std::fs::remove_file(&shard).unwrap();
    std::fs::create_dir(&shard).unwrap();

    f.check(&[
        case(&["run", "-m", m, "-f", "/dev/zero"], 1, "character device"),
        case(&["run", "-m", m, "-f", fifo], 1, "FIFO"),
        case(&["run", "-m", m, "-f", dir], 1, "directory"),
        case(&["sink", "-m", m, "-f", "/dev/zero"], 1, "character device"),
        case(
            &["attn-map", "-m", m, "--layers", "1", "-f", fifo, "-o", out],
            1,
            "FIFO",
        ),
        case(
            &["perplexity", "-m", m, "-f", "/dev/zero"],
            1,
            "character device",
        ),
        case(&["perplexity", "-m", m, "-f", fifo], 1, "FIFO"),
        case(
            &["perplexity", "-m", m, "--kl-divergence", fifo],
            1,
            "prompt.fifo",
        ),
        case(
            &[
                "ruler",
                "--lengths",
                "1K",
                "-m",
                m,
                "--tasks",
                "qa_1",
                "--squad",
                "/dev/zero",
                "-o",
                out,
            ],
            1,
            "character device",
        ),
        case(
            &[
                "ruler",
                "--lengths",
                "1K",
                "-m",
                m,
                "--tasks",
                "qa_2",
                "--hotpotqa",
                fifo,
                "-o",
                out,
            ],
            1,
            "FIFO",
        ),
        case(
            &[
                "ruler",
                "--lengths",
                "1K",
                "-m",
                m,
                "--essays",
                "/dev/zero",
                "-o",
                out,
            ],
            1,
            "/dev/zero",
        ),
        case(&["run", "-m", &fifo_config, "-p", "hi"], 1, "FIFO"),
        case(&["info", "-m", &fifo_config], 1, "FIFO"),
        case(&["run", "-m", &fifo_shard, "-p", "hi"], 1, "FIFO"),
        case(&["quantize", "-m", &fifo_shard, "-o", out], 1, "FIFO"),
        case(
            &["bench", "-m", &fifo_shard, "-p", "4", "-n", "1"],
            1,
            "FIFO",
        ),
        case(&["run", "-m", &dir_shard, "-p", "hi"], 1, "directory"),
        case(&["run", "-m", &fifo_tokenizer, "-p", "hi"], 1, "FIFO"),
        case(
            &[
                "ruler",
                "--lengths",
                "1K",
                "-m",
                &fifo_template,
                "--chat",
                "-o",
                out,
            ],
            1,
            "FIFO",
        ),
    ]);
}

#[test]
fn prompts_beyond_the_context_are_refused_before_tokenizing() {
    let f = Fixture::new();
    let m = &f.path("model");
    // 10 MB of text with a small context: refused by size, not tokenized.
    let big = f.path("big.txt");
    std::fs::write(&big, "all work and no play ".repeat(500_000)).unwrap();
    let not_utf8 = f.path("latin1.txt");
    std::fs::write(&not_utf8, b"caf\xe9").unwrap();
    f.check(&[
        case(&["run", "-m", m, "-f", &big, "-c", "64"], 1, "big.txt"),
        case(&["sink", "-m", m, "-f", &big], 1, "big.txt"),
        case(&["run", "-m", m, "-f", &not_utf8], 1, "UTF-8"),
        case(
            &["run", "-m", m, "--prompt-ids", "999999", "-n", "1"],
            1,
            "999999",
        ),
    ]);
}

#[test]
fn strict_formats_refuse_what_two_readers_could_read_two_ways() {
    let f = Fixture::new();
    let duplicate = f.model_copy("duplicate-key");
    let config = Path::new(&duplicate).join("config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replacen('{', "{\"vocab_size\": 7, ", 1)).unwrap();

    let eos = f.model_copy("eos-outside");
    f.edit_json(&eos, "config.json", |c| {
        c["eos_token_id"] = 1_000_000.into()
    });
    let generation_eos = f.model_copy("generation-eos-outside");
    std::fs::write(
        Path::new(&generation_eos).join("generation_config.json"),
        r#"{"eos_token_id": [1, 4000000]}"#,
    )
    .unwrap();
    let wrong_type = f.model_copy("wrong-type");
    f.edit_json(&wrong_type, "config.json", |c| {
        c["hidden_size"] = "64".into()
    });

    let both = f.model_copy("single-and-index");
    std::fs::write(
        Path::new(&both).join("model.safetensors.index.json"),
        r#"{"weight_map": {"model.norm.weight": "model.safetensors"}}"#,
    )
    .unwrap();
    let index_duplicate = f.model_copy("index-duplicate");
    std::fs::rename(
        Path::new(&index_duplicate).join("model.safetensors"),
        Path::new(&index_duplicate).join("shard-1.safetensors"),
    )
    .unwrap();
    std::fs::write(
        Path::new(&index_duplicate).join("model.safetensors.index.json"),
        r#"{"weight_map": {"model.norm.weight": "shard-1.safetensors"}, "weight_map": {}}"#,
    )
    .unwrap();
    let header_duplicate = f.model_copy("header-duplicate");
    duplicate_first_header_key(&Path::new(&header_duplicate).join("model.safetensors"));

    let template_duplicate = f.model_copy("template-duplicate");
    let tc = Path::new(&template_duplicate).join("tokenizer_config.json");
    let text = std::fs::read_to_string(&tc).unwrap();
    std::fs::write(&tc, text.replacen('{', "{\"chat_template\": \"x\", ", 1)).unwrap();
    let out = &f.path("out");

    f.check(&[
        case(
            &["run", "-m", &duplicate, "-p", "hi"],
            1,
            "`vocab_size` appears twice",
        ),
        case(&["info", "-m", &duplicate], 1, "config.json"),
        case(&["run", "-m", &eos, "-p", "hi"], 1, "eos_token_id"),
        case(
            &["run", "-m", &generation_eos, "-p", "hi"],
            1,
            "generation_config.json",
        ),
        case(&["run", "-m", &wrong_type, "-p", "hi"], 1, "hidden_size"),
        case(
            &["run", "-m", &both, "-p", "hi"],
            1,
            "both model.safetensors",
        ),
        case(
            &["run", "-m", &index_duplicate, "-p", "hi"],
            1,
            "appears twice",
        ),
        case(
            &["run", "-m", &header_duplicate, "-p", "hi"],
            1,
            "appears twice",
        ),
        case(
            &[
                "ruler",
                "--lengths",
                "1K",
                "-m",
                &template_duplicate,
                "--chat",
                "-o",
                out,
            ],
            1,
            "appears twice",
        ),
        case(
            &["quantize", "-m", &duplicate, "-o", out],
            1,
            "appears twice",
        ),
    ]);
}

/// Rewrites the safetensors header with its first tensor's entry written twice (the data
/// offsets count from the end of the header, so they stay valid): `{"a":X,...}` becomes
/// `{"a":X,"a":X,...}`.
fn duplicate_first_header_key(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + len]).unwrap().trim_end();
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(header).unwrap();
    let (key, value) = object
        .iter()
        .find(|(k, _)| k.as_str() != "__metadata__")
        .unwrap();
    let entry = format!("{}:{}", serde_json::to_string(key).unwrap(), value);
    let twice = format!("{{{entry},{}", &header[1..]);
    let mut new_header = twice.into_bytes();
    // Pad with spaces to a multiple of 8, as writers do; the data follows.
    while new_header.len() % 8 != 0 {
        new_header.push(b' ');
    }
    let mut out = (new_header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&new_header);
    out.extend_from_slice(&bytes[8 + len..]);
    std::fs::write(path, out).unwrap();
}

#[test]
fn runaway_tokenizers_and_templates_end_with_an_error_naming_the_file() {
    let f = Fixture::new();
    let regex = f.model_copy("backtracking-regex");
    f.edit_json(&regex, "tokenizer.json", |t| {
        t["pre_tokenizer"] = serde_json::json!({
            "type": "Split", "pattern": {"Regex": "(a|a)+$"},
            "behavior": "Isolated", "invert": false
        });
    });
    let broken = f.model_copy("broken-tokenizer");
    std::fs::write(Path::new(&broken).join("tokenizer.json"), "{\"model\": 3}").unwrap();
    let looping = f.model_copy("looping-template");
    f.edit_json(&looping, "tokenizer_config.json", |t| {
        t["chat_template"] = "{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}\
            {% endfor %}{% endfor %}"
            .into();
    });
    let prompt = format!("{}b", "a".repeat(40));
    let out = &f.path("out");
    f.check(&[
        case(
            &["run", "-m", &regex, "-p", &prompt, "-n", "1"],
            1,
            "tokenizer.json",
        ),
        case(
            &["run", "-m", &broken, "-p", "hi", "-n", "1"],
            1,
            "tokenizer.json",
        ),
        case(
            &[
                "ruler",
                "--lengths",
                "1K",
                "-m",
                &looping,
                "--chat",
                "--tasks",
                "vt",
                "-o",
                out,
            ],
            1,
            "tokenizer_config.json",
        ),
    ]);
}

#[test]
fn nan_weights_are_refused_by_quantize_before_it_writes() {
    let f = Fixture::new();
    let nan = f.model_copy("nan-weights");
    let path = Path::new(&nan).join("model.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    let name = "model.layers.0.mlp.up_proj.weight";
    let start = header[name]["data_offsets"][0].as_u64().unwrap() as usize;
    assert_eq!(header[name]["dtype"], "BF16");
    bytes[8 + len + start..][..2].copy_from_slice(&0x7FC0u16.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let out = f.path("quantized");
    f.check(&[case(&["quantize", "-m", &nan, "-o", &out], 1, name)]);
    assert!(!Path::new(&out).exists(), "quantize wrote {out}");
}

#[test]
fn usage_errors_exit_2_and_data_errors_exit_1() {
    let f = Fixture::new();
    let m = &f.path("model");
    let out = &f.path("out");
    let missing = &f.path("missing");
    f.check(&[
        // Usage: flags and their values, wherever they are checked.
        case(&["run", "--no-such-flag"], 2, "--no-such-flag"),
        case(&["ruler", "-m", m, "--tasks", "nope", "-o", out], 2, "nope"),
        case(
            &["ruler", "-m", m, "--shard", "3/2", "-o", out],
            2,
            "--shard",
        ),
        case(
            &["ruler", "-m", m, "--tasks", "qa_1", "-o", out],
            2,
            "--squad",
        ),
        case(
            &["ruler", "-m", m, "--tasks", "qa_2", "-o", out],
            2,
            "--hotpotqa",
        ),
        case(
            &["run", "-m", m, "-p", "hi", "--rope-scaling", "yarn"],
            2,
            "--rope-scaling",
        ),
        case(
            &["run", "-m", "builtin:nope", "-p", "hi"],
            2,
            "builtin:nope",
        ),
        // Data: files that are not what they should be.
        case(&["run", "-m", missing, "-p", "hi"], 1, "missing"),
        case(&["run", "-m", m, "-f", missing], 1, "missing"),
        case(&["quantize", "-m", missing, "-o", out], 1, "missing"),
        case(
            &[
                "ruler",
                "--lengths",
                "1K",
                "-m",
                m,
                "--tasks",
                "qa_1",
                "--squad",
                missing,
                "-o",
                out,
            ],
            1,
            "missing",
        ),
    ]);
}
