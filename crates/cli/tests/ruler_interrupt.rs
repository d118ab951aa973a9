//! Ctrl-C during `gattn-cpu ruler` keeps every finished sample: a run sent SIGINT after its first
//! records, then resumed, ends with the same predictions as a run never interrupted.
#![cfg(unix)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{expect_exit, gattn_cpu_with_cache};

mod support;

fn ruler_args(out: &Path) -> Vec<&str> {
    vec![
        "ruler",
        "-m",
        "builtin:baseline",
        "--tasks",
        "niah_single_1,niah_multikey_2",
        "--lengths",
        "1024",
        "-n",
        "3",
        "-t",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]
}

/// What a sample's record must reproduce, by (task, length, index); timings differ run to run.
fn predictions(dir: &Path) -> BTreeMap<(String, u64, u64), serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("predictions.jsonl")).unwrap();
    let mut by_item = BTreeMap::new();
    for line in text.lines() {
        let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
        let key = (
            record["task"].as_str().unwrap().to_string(),
            record["length"].as_u64().unwrap(),
            record["index"].as_u64().unwrap(),
        );
        record.as_object_mut().unwrap().remove("timings");
        assert!(
            by_item.insert(key, record).is_none(),
            "a sample twice: {line}"
        );
    }
    by_item
}

fn complete_lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|text| text.matches('\n').count())
        .unwrap_or(0)
}

#[test]
fn ctrl_c_keeps_finished_samples_and_resume_completes_the_run() {
    let cache = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (whole, interrupted) = (tmp.path().join("whole"), tmp.path().join("interrupted"));

    let o = gattn_cpu_with_cache(cache.path(), &ruler_args(&whole));
    expect_exit(&o, 0);
    let want = predictions(&whole);
    assert_eq!(want.len(), 6, "2 tasks x 3 samples");

    // Interrupted as soon as its first record is complete (5 samples still to go).
    let mut child = Command::new(env!("CARGO_BIN_EXE_gattn-cpu"))
        .args(ruler_args(&interrupted))
        .env("GATTN_CACHE_DIR", cache.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let records = interrupted.join("predictions.jsonl");
    let deadline = Instant::now() + Duration::from_secs(300);
    while complete_lines(&records) == 0 {
        assert!(Instant::now() < deadline, "no record after 300 s");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before its first record"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -INT failed");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "not interrupted: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let kept = complete_lines(&records);
    assert!(
        (1..6).contains(&kept),
        "{kept} records kept: the interrupt came too late to test anything"
    );

    let o = gattn_cpu_with_cache(cache.path(), &ruler_args(&interrupted));
    expect_exit(&o, 0);
    let resumed = String::from_utf8_lossy(&o.stderr);
    assert!(
        resumed.contains(&format!(
            "{} samples evaluated, {kept} already done",
            6 - kept
        )),
        "{resumed}"
    );
    assert_eq!(predictions(&interrupted), want);
    assert_eq!(
        std::fs::read_to_string(interrupted.join("summary.csv")).unwrap(),
        std::fs::read_to_string(whole.join("summary.csv")).unwrap()
    );
}
