//! Outputs under hostile conditions: every command with an output refuses to write onto
//! existing files without `--force` (exit 1, the files byte-identical) and replaces them with
//! it; two `ruler` runs on one directory; resume and merge with mismatched settings, missing or
//! duplicated shards and hand-edited records; directory names that would break a table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::expect_exit;

mod support;

/// Every command here ends well within this on a loaded 2-core machine (debug build).
const TIME_BOUND: Duration = Duration::from_secs(60);

/// A temporary root holding the builtin-model cache and the test's files.
struct Scratch {
    root: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            root: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// Runs the binary; fails the test if it takes longer than [`TIME_BOUND`] (a hang).
    fn run(&self, args: &[&str]) -> Output {
        let (out, err) = (self.path("stdout"), self.path("stderr"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_gattn-cpu"))
            .args(args)
            .env("GATTN_CACHE_DIR", self.path("cache"))
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > TIME_BOUND {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("{args:?} ran over {TIME_BOUND:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        Output {
            status,
            stdout: std::fs::read(&out).unwrap(),
            stderr: std::fs::read(&err).unwrap(),
        }
    }

    /// A tiny random checkpoint at `name`.
    fn model(&self, name: &str) -> PathBuf {
        let dir = self.path(name);
        let o = self.run(&["init", "--preset", "tiny", "--seed", "3", "-o", s(&dir)]);
        expect_exit(&o, 0);
        dir
    }

    fn ruler(&self, model: &Path, out: &Path, extra: &[&str]) -> Output {
        self.run(&ruler_args(model, out, "2", extra))
    }
}

/// A one-task `ruler` run of `samples` samples at 1024 tokens.
fn ruler_args<'a>(
    model: &'a Path,
    out: &'a Path,
    samples: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "ruler",
        "-m",
        s(model),
        "--tasks",
        "niah_single_1",
        "--lengths",
        "1024",
        "-n",
        samples,
        "-t",
        "1",
        "--no-progress",
        "-o",
        s(out),
    ];
    args.extend_from_slice(extra);
    args
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every file under `path` (or `path` itself) with its bytes, but the run lock (which holds
/// the pid of the last process that took it).
fn snapshot(path: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    if path.is_file() {
        if !path.ends_with(".lock") {
            files.insert(path.to_path_buf(), std::fs::read(path).unwrap());
        }
        return files;
    }
    for entry in std::fs::read_dir(path).unwrap() {
        files.extend(snapshot(&entry.unwrap().path()));
    }
    files
}

/// Fails naming the files that differ (not their bytes).
fn assert_unchanged(before: &BTreeMap<PathBuf, Vec<u8>>, path: &Path, what: &str) {
    let after = snapshot(path);
    let changed: Vec<_> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert!(changed.is_empty(), "{what} changed {changed:?}");
}

/// Runs `args` onto `target` (which exists): refused with exit 1 naming `--force`, `target`
/// unchanged; then with `--force` it succeeds.
fn refused_then_forced(scratch: &Scratch, args: &[&str], target: &Path) {
    let before = snapshot(target);
    assert!(!before.is_empty(), "{} has files", target.display());
    let o = scratch.run(args);
    expect_exit(&o, 1);
    assert!(stderr(&o).contains("--force"), "{args:?}: {}", stderr(&o));
    assert_eq!(
        snapshot(target),
        before,
        "{args:?} changed {}",
        target.display()
    );
    let forced = [args, &["--force"]].concat();
    let o = scratch.run(&forced);
    expect_exit(&o, 0);
}

#[test]
fn no_command_overwrites_without_force() {
    let scratch = Scratch::new();
    let model = scratch.model("model");

    // init onto an existing checkpoint.
    let init = ["init", "--preset", "tiny", "--seed", "4", "-o", s(&model)];
    refused_then_forced(&scratch, &init, &model);
    // Even with --force, a shard that the new checkpoint would not replace is refused.
    let shard = model.join("model-00001-of-00002.safetensors");
    std::fs::write(&shard, b"an older sharded checkpoint").unwrap();
    let before = snapshot(&model);
    let o = scratch.run(&[&init[..], &["--force"]].concat());
    expect_exit(&o, 1);
    assert!(
        stderr(&o).contains("model-00001-of-00002.safetensors"),
        "{}",
        stderr(&o)
    );
    assert_unchanged(&before, &model, "init --force over a sharded checkpoint");
    std::fs::remove_file(&shard).unwrap();

    // logits onto the checkpoint's own weights file.
    let weights = model.join("model.safetensors");
    let logits = [
        "logits",
        "-m",
        s(&model),
        "--prompt-ids",
        "1,2,3",
        "-o",
        s(&weights),
    ];
    refused_then_forced(&scratch, &logits, &weights);
    // (the weights are now an .npy: write a checkpoint again for the rest)
    let model = scratch.model("model2");

    // quantize into a non-empty directory.
    let q = scratch.model("q");
    let quantize = ["quantize", "-m", s(&model), "-o", s(&q)];
    refused_then_forced(&scratch, &quantize, &q);

    // attn-map onto its own earlier output.
    let maps = scratch.path("maps");
    let attn = [
        "attn-map",
        "-m",
        s(&model),
        "-p",
        "abcd",
        "--layers",
        "1",
        "-o",
    ];
    let attn = [&attn[..], &[s(&maps)]].concat();
    expect_exit(&scratch.run(&attn), 0);
    refused_then_forced(&scratch, &attn, &maps);

    // ruler into a directory of somebody else's files.
    let foreign = scratch.path("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("results.md"), "my notes").unwrap();
    let o = scratch.ruler(&model, &foreign, &[]);
    expect_exit(&o, 1);
    assert!(stderr(&o).contains("is not empty"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(foreign.join("results.md")).unwrap(),
        "my notes"
    );

    // merge and compare onto an existing run.
    let run = scratch.path("run");
    expect_exit(&scratch.ruler(&model, &run, &[]), 0);
    let other = scratch.path("other");
    expect_exit(&scratch.ruler(&model, &other, &[]), 0);
    let merge = ["ruler", "merge", s(&other), "-o", s(&run)];
    refused_then_forced(&scratch, &merge, &run);
    let cmp = scratch.path("cmp");
    let compare = ["ruler", "compare", s(&run), s(&other), "-o", s(&cmp)];
    expect_exit(&scratch.run(&compare), 0);
    refused_then_forced(&scratch, &compare, &cmp);
}

#[test]
fn a_second_run_on_one_directory_fails_fast_naming_the_first() {
    let scratch = Scratch::new();
    let model = scratch.model("model");
    let out = scratch.path("out");
    // Enough samples that the first run is still going when the second starts.
    let mut first = Command::new(env!("CARGO_BIN_EXE_gattn-cpu"))
        .args(ruler_args(&model, &out, "500", &[]))
        .env("GATTN_CACHE_DIR", scratch.path("cache"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = first.id().to_string();
    let lock = out.join(".lock");
    let start = Instant::now();
    while std::fs::read_to_string(&lock).unwrap_or_default() != pid {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the first run took no lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    let o = scratch.run(&ruler_args(&model, &out, "500", &[]));
    let waited = started.elapsed();
    first.kill().unwrap();
    first.wait().unwrap();
    expect_exit(&o, 1);
    assert!(
        stderr(&o).contains(&format!("in use by process {pid}")),
        "{}",
        stderr(&o)
    );
    assert!(
        waited < Duration::from_secs(20),
        "the second run waited {waited:?}"
    );

    // Once the first is gone the lock is free; another plan in its directory is refused.
    let o = scratch.ruler(&model, &out, &[]);
    expect_exit(&o, 1);
    assert!(
        stderr(&o).contains("--samples is 2 here but 500 there"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn resume_and_merge_refuse_other_settings_and_edited_records() {
    let scratch = Scratch::new();
    let model = scratch.model("model");
    let run = scratch.path("run");
    expect_exit(&scratch.ruler(&model, &run, &["--kv", "bf16"]), 0);

    let before = snapshot(&run);
    let o = scratch.ruler(&model, &run, &["--kv", "int8"]);
    expect_exit(&o, 1);
    assert!(
        stderr(&o).contains("--kv is int8 here but bf16 there"),
        "{}",
        stderr(&o)
    );
    assert_unchanged(&before, &run, "a refused resume");

    // A hand-edited score: resume, merge and compare name the file and the line.
    let predictions = run.join("predictions.jsonl");
    let text = std::fs::read_to_string(&predictions).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut record: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    record["score"] = serde_json::json!(7.5);
    let edited = format!("{}\n{}\n", lines[0], record);
    std::fs::write(&predictions, &edited).unwrap();
    let merged = scratch.path("merged");
    let cmp = scratch.path("cmp");
    for o in [
        scratch.ruler(&model, &run, &["--kv", "bf16"]),
        scratch.run(&["ruler", "merge", s(&run), "-o", s(&merged)]),
        scratch.run(&["ruler", "compare", s(&run), "-o", s(&cmp)]),
    ] {
        expect_exit(&o, 1);
        let err = stderr(&o);
        assert!(err.contains("predictions.jsonl: line 2"), "{err}");
        assert!(err.contains("score 7.5 but the prediction scores"), "{err}");
    }
    assert_eq!(std::fs::read_to_string(&predictions).unwrap(), edited);
}

#[test]
fn merge_needs_every_shard_once_unless_partial() {
    let scratch = Scratch::new();
    let model = scratch.model("model");
    let shard = |i: usize| {
        let dir = scratch.path(&format!("shard{i}"));
        let shard = format!("{i}/3");
        let o = scratch.run(&ruler_args(&model, &dir, "3", &["--shard", &shard]));
        expect_exit(&o, 0);
        dir
    };
    let (a, b, c) = (shard(0), shard(1), shard(2));
    let out = scratch.path("merged");

    let o = scratch.run(&["ruler", "merge", s(&a), s(&c), "-o", s(&out)]);
    expect_exit(&o, 1);
    assert!(stderr(&o).contains("missing shard 1/3"), "{}", stderr(&o));
    assert!(!out.exists());

    let o = scratch.run(&["ruler", "merge", s(&a), s(&b), s(&b), s(&c), "-o", s(&out)]);
    expect_exit(&o, 1);
    assert!(
        stderr(&o).contains("shard 1/3 is given twice"),
        "{}",
        stderr(&o)
    );

    let o = scratch.run(&["ruler", "merge", s(&a), s(&c), "--partial", "-o", s(&out)]);
    expect_exit(&o, 0);
    assert!(
        stderr(&o).contains("PARTIAL: missing shard 1/3"),
        "{}",
        stderr(&o)
    );
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("missing shard 1/3"), "{md}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["missing"], serde_json::json!(["shard 1/3"]));

    // A partial merge resumes like a run: the missing samples are evaluated.
    let o = scratch.run(&ruler_args(&model, &out, "3", &[]));
    expect_exit(&o, 0);
    assert!(
        stderr(&o).contains("1 samples evaluated, 2 already done"),
        "{}",
        stderr(&o)
    );
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(!md.contains("Partial"), "{md}");

    // Complete: no note.
    let full = scratch.path("full");
    let o = scratch.run(&["ruler", "merge", s(&c), s(&a), s(&b), "-o", s(&full)]);
    expect_exit(&o, 0);
    let md = std::fs::read_to_string(full.join("results.md")).unwrap();
    assert!(!md.contains("Partial"), "{md}");
}

#[test]
fn hostile_directory_names_give_well_formed_tables() {
    let scratch = Scratch::new();
    let name = "m|o,d\"el\n`x`";
    let model = scratch.model(name);
    let out = scratch.path("run|a,\"b\"\nc");
    expect_exit(&scratch.ruler(&model, &out, &[]), 0);
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    let title = md.lines().next().unwrap();
    assert_eq!(title, "# RULER: m\\|o,d\"el<br>\\`x\\`", "{md}");

    let cmp = scratch.path("cmp");
    let o = scratch.run(&["ruler", "compare", s(&out), "-o", s(&cmp)]);
    expect_exit(&o, 0);
    let csv = std::fs::read_to_string(cmp.join("compare.csv")).unwrap();
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    assert_eq!(reader.headers().unwrap().len(), 5);
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2, "{csv}"); // niah_single_1 and the average
    for row in &rows {
        assert_eq!(row.len(), 5, "{csv}");
        assert_eq!(&row[0], "run|a,\"b\"\nc");
    }
    let md = std::fs::read_to_string(cmp.join("compare.md")).unwrap();
    for line in md.lines().filter(|l| l.starts_with('|')) {
        let separators = line.matches('|').count() - line.matches("\\|").count();
        assert_eq!(separators, 3, "{line}\n{md}"); // | label | 1K |
    }
}
