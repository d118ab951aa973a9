//! The runner's files from hand-made predictions: tables, the chart PNG, tolerant reading,
//! merge and compare. No model needed.

use std::path::Path;

use gattn_eval::TaskName;
use gattn_eval::run::{
    CHART_SIZE, LabelledRun, PREDICTIONS_FILE, PredictionRecord, PredictionsWriter, RunError,
    RunSettings, Timings, compare_runs, merge_runs, read_predictions, score_table, summary_csv,
    write_predictions, write_reports,
};

fn record(
    task: TaskName,
    length: usize,
    index: usize,
    prediction: &str,
    refs: &[&str],
) -> PredictionRecord {
    let references: Vec<String> = refs.iter().map(|s| s.to_string()).collect();
    PredictionRecord {
        task,
        length,
        index,
        seed: 42,
        prompt_hash: format!("{task}-{length}-{index}"),
        prompt_tokens: length - 200,
        prompt_head: String::new(),
        prompt_tail: String::new(),
        prediction: prediction.to_string(),
        score: gattn_eval::score(task, prediction, &references),
        references,
        generated_tokens: 3,
        stop: "eos".into(),
        timings: Timings::default(),
    }
}

fn settings() -> RunSettings {
    RunSettings {
        model: "m".into(),
        weights: "f32".into(),
        rope_scaling: None,
        chat: false,
        seed: 42,
        essays: "builtin".into(),
    }
}

fn records() -> Vec<PredictionRecord> {
    vec![
        record(TaskName::NiahSingle1, 4096, 0, " 1234567.", &["1234567"]),
        record(TaskName::NiahSingle1, 4096, 1, " 7654321", &["1111111"]),
        record(TaskName::Vt, 4096, 0, " X Y", &["X", "Y", "Z", "W"]),
        record(TaskName::NiahSingle1, 8192, 0, "\n", &["1"]),
    ]
}

#[test]
fn summary_rows_follow_ruler_scoring() {
    let table = score_table(&records());
    assert_eq!(
        summary_csv(&table),
        "task,length,score,samples,nulls\n\
         niah_single_1,4096,50.00,2,0\n\
         niah_single_1,8192,0.00,1,1\n\
         vt,4096,50.00,1,0\n\
         average,4096,50.00,3,0\n\
         average,8192,0.00,1,1\n"
    );
}

#[test]
fn reports_and_a_decodable_chart() {
    let dir = tempfile::tempdir().unwrap();
    write_reports(dir.path(), &settings(), &records()).unwrap();
    let md = std::fs::read_to_string(dir.path().join("results.md")).unwrap();
    assert!(md.contains("| task | 4K | 8K |"), "{md}");
    assert!(md.contains("| niah_single_1 | 50.00 | 0.00 |"), "{md}");
    assert!(md.contains("| vt | 50.00 | - |"), "{md}");
    assert!(
        md.contains("| **average** | **50.00** | **0.00** |"),
        "{md}"
    );
    let file = std::fs::File::open(dir.path().join("chart.png")).unwrap();
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((info.width, info.height), CHART_SIZE);
    // Not a blank canvas: lines and text drew dark pixels.
    let dark = pixels
        .chunks(3)
        .filter(|p| p.iter().all(|&c| c < 60))
        .count();
    assert!(dark > 1000, "{dark} dark pixels");
}

fn write_run(dir: &Path, records: &[PredictionRecord]) {
    std::fs::create_dir_all(dir).unwrap();
    settings().write(dir).unwrap();
    write_predictions(&dir.join(PREDICTIONS_FILE), records).unwrap();
}

#[test]
fn truncated_tail_is_dropped_and_a_bad_middle_line_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(PREDICTIONS_FILE);
    write_predictions(&path, &records()[..2]).unwrap();
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"task\":\"vt\",\"len");
    std::fs::write(&path, &text).unwrap();
    let file = read_predictions(&path).unwrap();
    assert_eq!(file.records.len(), 2);
    assert!(file.truncated_tail);
    // Appending after the repair yields whole lines only.
    let mut writer = PredictionsWriter::open(&path, &file).unwrap();
    writer.append(&records()[2]).unwrap();
    let again = read_predictions(&path).unwrap();
    assert_eq!(again.records, records()[..3].to_vec());
    assert!(!again.truncated_tail);

    std::fs::write(
        &path,
        format!("garbage\n{}", std::fs::read_to_string(&path).unwrap()),
    )
    .unwrap();
    match read_predictions(&path) {
        Err(RunError::BadRecord { line: 1, .. }) => {}
        other => panic!("expected a bad line 1, got {other:?}"),
    }
}

#[test]
fn merge_of_shards_equals_the_whole_and_checks_consistency() {
    let tmp = tempfile::tempdir().unwrap();
    let all = records();
    let (whole, a, b) = (
        tmp.path().join("whole"),
        tmp.path().join("a"),
        tmp.path().join("b"),
    );
    write_run(&whole, &all);
    write_reports(&whole, &settings(), &all).unwrap();
    write_run(&a, &[all[0].clone(), all[2].clone()]);
    // b overlaps a on one identical sample.
    write_run(&b, &[all[1].clone(), all[3].clone(), all[2].clone()]);
    let out = tmp.path().join("merged");
    let outcome = merge_runs(&[a.clone(), b.clone()], &out).unwrap();
    assert_eq!((outcome.samples, outcome.duplicates), (4, 1));
    let read = |d: &Path, f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    assert_eq!(read(&out, "summary.csv"), read(&whole, "summary.csv"));
    assert_eq!(read(&out, "results.md"), read(&whole, "results.md"));

    // The same sample with another prompt cannot be merged.
    let mut changed = all[2].clone();
    changed.prompt_hash = "different".into();
    let c = tmp.path().join("c");
    write_run(&c, &[changed]);
    let err = merge_runs(&[a.clone(), c], &tmp.path().join("bad")).unwrap_err();
    assert!(err.to_string().contains("different prompt"), "{err}");

    // Nor runs with other settings.
    let d = tmp.path().join("d");
    write_run(&d, &all[..1]);
    RunSettings {
        seed: 7,
        ..settings()
    }
    .write(&d)
    .unwrap();
    let err = merge_runs(&[a, d], &tmp.path().join("bad2")).unwrap_err();
    assert!(
        err.to_string().contains("--seed is 42 here but 7 there"),
        "{err}"
    );
}

#[test]
fn compare_tables_every_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (x, y) = (tmp.path().join("x"), tmp.path().join("y"));
    write_run(&x, &records());
    write_run(&y, &records()[..3]);
    let out = tmp.path().join("cmp");
    let runs = [
        LabelledRun {
            label: "baseline".into(),
            dir: x,
        },
        LabelledRun {
            label: "gated".into(),
            dir: y,
        },
    ];
    compare_runs(&runs, &out).unwrap();
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(md.contains("| baseline | 50.00 | 0.00 |"), "{md}");
    assert!(md.contains("| gated | 50.00 | - |"), "{md}");
    assert!(md.contains("| vt / gated | 50.00 | - |"), "{md}");
    let csv = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    assert!(csv.contains("gated,average,4096,50.00,3\n"), "{csv}");
    assert!(out.join("compare.png").exists());
}
