//! The runner's files from hand-made predictions: tables, the chart PNG, tolerant reading,
//! self-checking records, merge (complete, partial, refused) and compare. No model needed.

use std::path::{Path, PathBuf};

use gattn_eval::TaskName;
use gattn_eval::run::{
    CHART_SIZE, LabelledRun, MergeOptions, MergeOutcome, PREDICTIONS_FILE, PredictionRecord,
    PredictionsWriter, RunError, RunSettings, Timings, compare_runs, load_run, merge_runs,
    read_predictions, score_table, summary_csv, write_predictions, write_reports,
};
use gattn_model::Existing;

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
        digest: String::new(),
    }
    .sealed()
}

fn settings() -> RunSettings {
    RunSettings {
        model: "m".into(),
        weights: "f32".into(),
        model_fingerprint: "f00d".into(),
        kv: "f32".into(),
        rope_scaling: None,
        chat: false,
        seed: 42,
        essays: "builtin".into(),
        data_fingerprint: "builtin".into(),
        tasks: vec![TaskName::NiahSingle1, TaskName::Vt],
        lengths: vec![4096, 8192],
        samples: 2,
        shard: "0/1".into(),
        kernels: "scalar".into(),
        missing: Vec::new(),
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
    write_run_with(dir, &settings(), records);
}

fn write_run_with(dir: &Path, settings: &RunSettings, records: &[PredictionRecord]) {
    std::fs::create_dir_all(dir).unwrap();
    settings.write(dir).unwrap();
    write_predictions(&dir.join(PREDICTIONS_FILE), records, Existing::Replace).unwrap();
}

#[test]
fn truncated_tail_is_dropped_and_a_bad_middle_line_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(PREDICTIONS_FILE);
    write_predictions(&path, &records()[..2], Existing::Refuse).unwrap();
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
fn a_record_edited_by_hand_is_an_error_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(PREDICTIONS_FILE);
    write_predictions(&path, &records(), Existing::Refuse).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[1].contains("\"score\":0.0"), "{}", lines[1]);
    let edits = [
        (
            lines[1].replace("\"score\":0.0", "\"score\":7.5"),
            "score 7.5",
        ),
        (lines[1].replace("7654321", "1111111"), "digest"),
        (lines[1].replace("\"seed\":42", "\"seed\":43"), "digest"),
    ];
    for (edited, expected) in edits {
        let mut changed = lines.clone();
        changed[1] = &edited;
        std::fs::write(&path, changed.join("\n") + "\n").unwrap();
        match read_predictions(&path) {
            Err(e @ RunError::BadRecord { line: 2, .. }) => {
                let message = e.to_string();
                assert!(message.contains(PREDICTIONS_FILE), "{message}");
                assert!(message.contains(expected), "{message}");
            }
            other => panic!("expected a bad line 2, got {other:?}"),
        }
    }
}

/// Every sample of `settings()`'s plan, half of them right.
fn sweep() -> Vec<PredictionRecord> {
    settings()
        .planned_sweep()
        .into_iter()
        .map(|i| {
            let answer = if i.index == 0 { "1234567" } else { "0" };
            record(i.task, i.length, i.index, answer, &["1234567"])
        })
        .collect()
}

/// Writes the records of shard `index` of `count` into `dir`.
fn write_shard(dir: &Path, index: usize, count: usize) -> Vec<PredictionRecord> {
    let shard = RunSettings {
        shard: format!("{index}/{count}"),
        ..settings()
    };
    let planned = shard.planned().unwrap();
    let records: Vec<PredictionRecord> = sweep()
        .into_iter()
        .filter(|r| planned.contains(&r.item()))
        .collect();
    write_run_with(dir, &shard, &records);
    records
}

fn merge(inputs: &[&Path], out: &Path, partial: bool) -> Result<MergeOutcome, RunError> {
    let inputs: Vec<PathBuf> = inputs.iter().map(|p| p.to_path_buf()).collect();
    let options = MergeOptions {
        partial,
        existing: Existing::Refuse,
    };
    merge_runs(&inputs, out, options)
}

#[test]
fn merge_of_shards_equals_the_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = |name: &str| tmp.path().join(name);
    let (whole, a, b) = (dir("whole"), dir("a"), dir("b"));
    write_run(&whole, &sweep());
    write_reports(&whole, &settings(), &sweep()).unwrap();
    write_shard(&a, 0, 2);
    write_shard(&b, 1, 2);
    let outcome = merge(&[&b, &a], &dir("merged"), false).unwrap();
    assert_eq!((outcome.samples, outcome.missing.len()), (8, 0));
    let read = |d: &Path, f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    assert_eq!(
        read(&dir("merged"), "summary.csv"),
        read(&whole, "summary.csv")
    );
    assert_eq!(
        read(&dir("merged"), "results.md"),
        read(&whole, "results.md")
    );
    assert_eq!(
        read(&dir("merged"), PREDICTIONS_FILE),
        read(&whole, PREDICTIONS_FILE)
    );

    // An existing output is not written into without --force, and stays as it was.
    let before = read(&dir("merged"), PREDICTIONS_FILE);
    let err = merge(&[&a, &b], &dir("merged"), false).unwrap_err();
    assert!(err.to_string().contains("is not empty"), "{err}");
    assert!(err.to_string().contains("--force"), "{err}");
    assert_eq!(read(&dir("merged"), PREDICTIONS_FILE), before);
    let forced = MergeOptions {
        partial: false,
        existing: Existing::Replace,
    };
    merge_runs(&[a.clone(), b.clone()], &dir("merged"), forced).unwrap();
}

#[test]
fn merge_refuses_missing_duplicated_and_mismatched_shards() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = |name: &str| tmp.path().join(name);
    let (a, b, c) = (dir("a"), dir("b"), dir("c"));
    write_shard(&a, 0, 3);
    let b_records = write_shard(&b, 1, 3);
    write_shard(&c, 2, 3);

    let err = merge(&[&a, &c], &dir("out1"), false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing shard 1/3"), "{err}");
    assert!(err.contains("--partial"), "{err}");
    assert!(!dir("out1").exists(), "a refused merge writes nothing");

    let outcome = merge(&[&a, &c], &dir("partial"), true).unwrap();
    assert_eq!(outcome.missing, vec!["shard 1/3".to_string()]);
    assert_eq!(outcome.samples, 8 - b_records.len());
    let md = std::fs::read_to_string(dir("partial").join("results.md")).unwrap();
    assert!(md.contains("**Partial merge**: missing shard 1/3"), "{md}");
    let saved = RunSettings::read(&dir("partial")).unwrap().unwrap();
    assert_eq!(saved.missing, vec!["shard 1/3".to_string()]);
    // A partial merge is not a shard to merge again.
    let err = merge(&[&dir("partial")], &dir("out2"), false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("partial merge"), "{err}");

    let err = merge(&[&a, &b, &a, &c], &dir("out3"), false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("shard 0/3 is given twice"), "{err}");

    // A shard of another split.
    let d = dir("d");
    write_shard(&d, 1, 2);
    let err = merge(&[&a, &d], &dir("out4"), true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("is shard 1/2 but"), "{err}");

    // An unfinished shard: its missing samples are named.
    write_run_with(
        &b,
        &RunSettings {
            shard: "1/3".into(),
            ..settings()
        },
        &b_records[1..],
    );
    let err = merge(&[&a, &b, &c], &dir("out5"), false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("shard 1/3"), "{err}");
    assert!(
        err.contains(&format!("1 of its {} samples", b_records.len())),
        "{err}"
    );

    // Other settings: the field and both values.
    let e = dir("e");
    write_run_with(
        &e,
        &RunSettings {
            kv: "int8".into(),
            shard: "1/3".into(),
            ..settings()
        },
        &[],
    );
    let err = merge(&[&a, &e, &c], &dir("out6"), true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("--kv is f32 here but int8 there"), "{err}");
}

#[test]
fn a_record_from_outside_the_plan_or_twice_is_refused_on_load() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let mut records = sweep();
    records.push(records[0].clone());
    write_run(&a, &records);
    let err = load_run(&a).unwrap_err().to_string();
    assert!(
        err.contains("line 2: niah_single_1 length 4096 sample 0 is already on line 1"),
        "{err}"
    );
    write_run(&a, &[record(TaskName::Vt, 4096, 5, "x", &["x"])]);
    let err = load_run(&a).unwrap_err().to_string();
    assert!(
        err.contains("line 1: vt length 4096 sample 5 is not in this run's plan"),
        "{err}"
    );
}

#[test]
fn an_old_run_json_is_refused_naming_what_it_lacks() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("run.json"),
        r#"{"model":"m","weights":"f32","rope_scaling":null,"chat":false,"seed":42,"essays":"builtin"}"#,
    )
    .unwrap();
    let err = RunSettings::read(tmp.path()).unwrap_err().to_string();
    assert!(err.contains("has no `model_fingerprint`"), "{err}");
    assert!(err.contains("older gattn-cpu"), "{err}");
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
    compare_runs(&runs, &out, Existing::Refuse).unwrap();
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(md.contains("| baseline | 50.00 | 0.00 |"), "{md}");
    assert!(md.contains("| gated | 50.00 | - |"), "{md}");
    assert!(md.contains("| vt / gated | 50.00 | - |"), "{md}");
    let csv = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    assert!(csv.contains("gated,average,4096,50.00,3\n"), "{csv}");
    assert!(out.join("compare.png").exists());

    // Again into the same directory: refused, files unchanged; with Replace it is rewritten.
    let before = std::fs::read(out.join("compare.md")).unwrap();
    let err = compare_runs(&runs, &out, Existing::Refuse).unwrap_err();
    assert!(
        err.to_string().contains("compare.csv exists; pass --force"),
        "{err}"
    );
    assert_eq!(std::fs::read(out.join("compare.md")).unwrap(), before);
    compare_runs(&runs, &out, Existing::Replace).unwrap();
}

#[test]
fn hostile_labels_keep_the_tables_well_formed() {
    let tmp = tempfile::tempdir().unwrap();
    let x = tmp.path().join("x");
    write_run(&x, &records());
    let label = "a|b,\"c\"\nd `e` *f*";
    let runs = [LabelledRun {
        label: label.into(),
        dir: x,
    }];
    let out = tmp.path().join("cmp");
    compare_runs(&runs, &out, Existing::Refuse).unwrap();
    let csv_text = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    let mut reader = csv::Reader::from_reader(csv_text.as_bytes());
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert!(!rows.is_empty());
    for row in &rows {
        assert_eq!(row.len(), 5, "{csv_text}");
        assert_eq!(&row[0], label);
    }
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    for line in md.lines().filter(|l| l.starts_with('|')) {
        // Every table row has the header's cells: unescaped pipes only as separators.
        let separators = line.matches('|').count() - line.matches("\\|").count();
        assert_eq!(separators, 4, "{line}\n{md}");
    }
    assert!(md.contains("a\\|b,\"c\"<br>d \\`e\\` \\*f\\*"), "{md}");
}
