//! `gattn-cpu ruler` end to end on a tiny random checkpoint: outputs, resume, shards + merge,
//! the chat template, and refusing lengths over the context.

use std::path::Path;
use std::process::{Command, Output};

fn gattn_cpu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gattn-cpu"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn expect_exit(o: &Output, code: i32) {
    assert_eq!(o.status.code(), Some(code), "stderr: {}", stderr(o));
    assert!(!stderr(o).contains("panicked"), "{}", stderr(o));
}

fn init_tiny(dir: &Path) {
    let out = dir.to_str().unwrap();
    let o = gattn_cpu(&[
        "init",
        "--preset",
        "tiny",
        "--gate",
        "elementwise",
        "--seed",
        "3",
        "--out",
        out,
    ]);
    expect_exit(&o, 0);
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    read(path)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect()
}

/// Width and height from a PNG's IHDR chunk (the cli crate has no PNG decoder; the eval
/// tests decode the chart fully).
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

const TASKS: &str = "niah_single_1,niah_multikey_2";

fn ruler(model: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "ruler",
        "-m",
        model.to_str().unwrap(),
        "--tasks",
        TASKS,
        "--lengths",
        "1024",
        "-n",
        "2",
        "-t",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    gattn_cpu(&args)
}

#[test]
fn run_resume_shards_and_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("tiny");
    init_tiny(&model);

    // 2 tasks x 1 length x 2 samples.
    let full = tmp.path().join("full");
    let o = ruler(&model, &full, &[]);
    expect_exit(&o, 0);
    let records = lines(&full.join("predictions.jsonl"));
    assert_eq!(records.len(), 4);
    let mut keys: Vec<(String, u64, u64)> = records
        .iter()
        .map(|r| {
            (
                r["task"].as_str().unwrap().to_string(),
                r["length"].as_u64().unwrap(),
                r["index"].as_u64().unwrap(),
            )
        })
        .collect();
    keys.sort();
    let expected: Vec<(String, u64, u64)> = ["niah_multikey_2", "niah_single_1"]
        .iter()
        .flat_map(|t| (0..2).map(move |i| (t.to_string(), 1024, i)))
        .collect();
    assert_eq!(keys, expected);
    for r in &records {
        assert_eq!(r["prompt_hash"].as_str().unwrap().len(), 64);
        assert!(r["prompt_tokens"].as_u64().unwrap() + 128 <= 1024);
        assert!(r["references"].as_array().is_some_and(|a| !a.is_empty()));
        assert!(r["score"].as_f64().is_some());
        assert!(r["timings"]["prefill_ms"].as_f64().unwrap() > 0.0);
        assert!(r["generated_tokens"].as_u64().unwrap() <= 128);
    }
    let summary = read(&full.join("summary.csv"));
    let rows: Vec<&str> = summary.lines().collect();
    assert_eq!(rows[0], "task,length,score,samples,nulls");
    assert_eq!(rows.len(), 4, "{summary}");
    assert!(
        rows[1].starts_with("niah_single_1,1024,") && rows[1].contains(",2,"),
        "{summary}"
    );
    assert!(rows[2].starts_with("niah_multikey_2,1024,"), "{summary}");
    assert!(
        rows[3].starts_with("average,1024,") && rows[3].contains(",4,"),
        "{summary}"
    );
    let md = read(&full.join("results.md"));
    assert!(md.contains("| task | 1K |"), "{md}");
    assert!(
        md.contains("| niah_single_1 |") && md.contains("| **average** |"),
        "{md}"
    );
    assert_eq!(png_size(&full.join("chart.png")), (1100, 650));

    // A rerun resumes: nothing new.
    let before = read(&full.join("predictions.jsonl"));
    let o = ruler(&model, &full, &[]);
    expect_exit(&o, 0);
    assert!(
        stderr(&o).contains("0 samples evaluated, 4 already done"),
        "{}",
        stderr(&o)
    );
    assert_eq!(read(&full.join("predictions.jsonl")), before);

    // A run killed mid-write leaves a truncated last line: it is dropped and redone.
    let resumed = tmp.path().join("resumed");
    std::fs::create_dir_all(&resumed).unwrap();
    std::fs::copy(full.join("run.json"), resumed.join("run.json")).unwrap();
    let mut kept: Vec<&str> = before.lines().take(3).collect();
    let cut = &before.lines().nth(3).unwrap()[..40];
    kept.push(cut);
    std::fs::write(resumed.join("predictions.jsonl"), kept.join("\n")).unwrap();
    let o = ruler(&model, &resumed, &[]);
    expect_exit(&o, 0);
    assert!(
        stderr(&o).contains("1 samples evaluated, 3 already done"),
        "{}",
        stderr(&o)
    );
    assert_eq!(lines(&resumed.join("predictions.jsonl")).len(), 4);
    assert_eq!(read(&resumed.join("summary.csv")), summary);

    // Shards 0/2 and 1/2, merged, give the unsharded summary.
    let shard = |i: &str| {
        let dir = tmp.path().join(format!("shard{}", &i[..1]));
        let o = ruler(&model, &dir, &["--shard", i]);
        expect_exit(&o, 0);
        assert_eq!(lines(&dir.join("predictions.jsonl")).len(), 2);
        dir
    };
    let (s0, s1) = (shard("0/2"), shard("1/2"));
    let merged = tmp.path().join("merged");
    let o = gattn_cpu(&[
        "ruler",
        "merge",
        s0.to_str().unwrap(),
        s1.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    expect_exit(&o, 0);
    assert_eq!(read(&merged.join("summary.csv")), summary);
    assert_eq!(read(&merged.join("results.md")), md);
    let strip = |v: Vec<serde_json::Value>| -> Vec<(String, String, f64)> {
        let mut v: Vec<_> = v
            .into_iter()
            .map(|r| {
                (
                    format!("{}#{}", r["task"], r["index"]),
                    r["prediction"].as_str().unwrap().to_string(),
                    r["score"].as_f64().unwrap(),
                )
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    assert_eq!(
        strip(lines(&merged.join("predictions.jsonl"))),
        strip(records.clone())
    );

    // compare puts two runs into one table.
    let cmp = tmp.path().join("cmp");
    let o = gattn_cpu(&[
        "ruler",
        "compare",
        full.to_str().unwrap(),
        merged.to_str().unwrap(),
        "--labels",
        "a,b",
        "--out",
        cmp.to_str().unwrap(),
    ]);
    expect_exit(&o, 0);
    let table = read(&cmp.join("compare.md"));
    assert!(
        table.contains("| a |") && table.contains("| b |"),
        "{table}"
    );
    assert_eq!(png_size(&cmp.join("compare.png")), (1100, 650));
}

#[test]
fn chat_wraps_the_prompt_in_the_template() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("tiny");
    init_tiny(&model);
    let out = tmp.path().join("chat");
    let o = gattn_cpu(&[
        "ruler",
        "-m",
        model.to_str().unwrap(),
        "--tasks",
        "niah_single_1",
        "--lengths",
        "1024",
        "-n",
        "1",
        "--chat",
        "--out",
        out.to_str().unwrap(),
    ]);
    expect_exit(&o, 0);
    let r = &lines(&out.join("predictions.jsonl"))[0];
    let head = r["prompt_head"].as_str().unwrap();
    let tail = r["prompt_tail"].as_str().unwrap();
    assert!(
        head.starts_with("<|im_start|>user\nA special magic number"),
        "{head}"
    );
    assert!(
        tail.contains(
            "provided text?<|im_end|>\n<|im_start|>assistant\n The special magic number for"
        ),
        "{tail}"
    );
    assert!(
        tail.ends_with("mentioned in the provided text is"),
        "{tail}"
    );
    assert!(r["prompt_tokens"].as_u64().unwrap() + 128 <= 1024);
    assert!(read(&out.join("run.json")).contains("\"chat\": true"));

    // The raw run of the same sample differs only by the template.
    let raw = tmp.path().join("raw");
    let o = gattn_cpu(&[
        "ruler",
        "-m",
        model.to_str().unwrap(),
        "--tasks",
        "niah_single_1",
        "--lengths",
        "1024",
        "-n",
        "1",
        "--out",
        raw.to_str().unwrap(),
    ]);
    expect_exit(&o, 0);
    let raw_head = lines(&raw.join("predictions.jsonl"))[0]["prompt_head"].clone();
    assert!(
        raw_head
            .as_str()
            .unwrap()
            .starts_with("A special magic number")
    );

    // Mixing chat and raw predictions in one directory is refused.
    let o = gattn_cpu(&[
        "ruler",
        "-m",
        model.to_str().unwrap(),
        "--tasks",
        "niah_single_1",
        "--lengths",
        "1024",
        "-n",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    expect_exit(&o, 1);
    assert!(
        stderr(&o).contains("--chat is false here but true there"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn lengths_over_the_context_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("tiny");
    init_tiny(&model);
    let out = tmp.path().join("out");
    let m = model.to_str().unwrap();
    let o_ = out.to_str().unwrap();
    // The tiny preset holds 4096 positions.
    let o = gattn_cpu(&["ruler", "-m", m, "--lengths", "1024,8K", "--out", o_]);
    expect_exit(&o, 2); // a flag value: a usage error
    let err = stderr(&o);
    assert!(
        err.contains("--lengths 8192 is longer than the 4096 positions"),
        "{err}"
    );
    assert!(err.contains("max_position_embeddings 4096"), "{err}");
    assert!(
        err.contains("--rope-scaling yarn:2 would allow 8192"),
        "{err}"
    );

    let o = gattn_cpu(&[
        "ruler",
        "-m",
        m,
        "--lengths",
        "16K",
        "--rope-scaling",
        "yarn:2",
        "--out",
        o_,
    ]);
    expect_exit(&o, 2);
    let err = stderr(&o);
    assert!(err.contains("longer than the 8192 positions"), "{err}");
    assert!(
        err.contains("--rope-scaling yarn:4 would allow 16384"),
        "{err}"
    );
    assert!(!out.join("predictions.jsonl").exists());
}

#[test]
fn a_qa_task_named_without_its_dataset_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("tiny");
    init_tiny(&model);
    let out = tmp.path().join("out");
    let o = gattn_cpu(&[
        "ruler",
        "-m",
        model.to_str().unwrap(),
        "--tasks",
        "qa_1",
        "--lengths",
        "1024",
        "--kv",
        "int8",
        "--out",
        out.to_str().unwrap(),
    ]);
    // Not an empty table and exit 0: the task asked for cannot run.
    expect_exit(&o, 2);
    let err = stderr(&o);
    assert!(
        err.contains("--tasks names qa_1, which needs --squad"),
        "{err}"
    );
    assert!(!out.exists());
}
