//! The saved-logits file: round trip, atomic and non-clobbering writes, and hostile files
//! (truncated, wrong magic, huge counts, bad ids or log-probabilities) refused with the field.

use std::path::Path;

use gattn_eval::perplexity::logits_file::HEADER_BYTES;
use gattn_eval::perplexity::{
    LogitsFileHeader, LogitsFileReader, LogitsFileWriter, PerplexityError, PositionRecord,
};

/// Two windows of 8 tokens: 3 scored positions each.
fn header(top_k: u32) -> LogitsFileHeader {
    LogitsFileHeader {
        vocab_size: 10,
        ctx: 8,
        stride: 8,
        top_k,
        windows: 2,
        positions: 6,
        model_fingerprint: [7; 32],
        text_fingerprint: [9; 32],
    }
}

fn record(i: u32) -> PositionRecord {
    PositionRecord {
        target: i % 10,
        target_logprob: -(i as f32) - 0.5,
        logsumexp: 3.25 + i as f32,
        top: vec![(i % 10, -0.1), ((i + 1) % 10, -2.5), ((i + 2) % 10, -7.0)],
    }
}

fn write_file(path: &Path) {
    let mut writer = LogitsFileWriter::create(path, header(3), false).unwrap();
    for i in 0..6 {
        writer.write(&record(i)).unwrap();
    }
    let written = writer.finish().unwrap();
    assert_eq!(written.positions, 6);
}

fn read_all(path: &Path) -> Result<Vec<PositionRecord>, PerplexityError> {
    let mut reader = LogitsFileReader::open(path)?;
    let mut records = Vec::new();
    while let Some(r) = reader.next_record()? {
        records.push(r);
    }
    Ok(records)
}

/// The error message of reading `bytes` as a saved-logits file (it must fail).
fn read_error(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.lp");
    std::fs::write(&path, bytes).unwrap();
    let error = read_all(&path)
        .expect_err("a bad file is refused")
        .to_string();
    assert!(error.contains("bad.lp"), "names the file: {error}");
    error
}

fn valid_bytes() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ok.lp");
    write_file(&path);
    std::fs::read(&path).unwrap()
}

#[test]
fn round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("base.lp");
    write_file(&path);
    let reader = LogitsFileReader::open(&path).unwrap();
    assert_eq!(*reader.header(), header(3));
    let records = read_all(&path).unwrap();
    assert_eq!(records, (0..6).map(record).collect::<Vec<_>>());
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        HEADER_BYTES + 6 * (12 + 8 * 3)
    );
}

#[test]
fn refuses_to_overwrite_without_force_and_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("base.lp");
    std::fs::write(&path, b"user data").unwrap();
    let error = LogitsFileWriter::create(&path, header(3), false)
        .err()
        .expect("an existing file is refused");
    assert!(matches!(error, PerplexityError::Exists { .. }), "{error}");
    assert_eq!(std::fs::read(&path).unwrap(), b"user data");

    // With --force it is replaced, but only when the writer finishes.
    let mut writer = LogitsFileWriter::create(&path, header(3), true).unwrap();
    writer.write(&record(0)).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"user data");
    drop(writer); // an interrupted run
    assert_eq!(std::fs::read(&path).unwrap(), b"user data");
    let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(leftovers, 1, "the temporary file is removed");
    std::fs::remove_file(&path).unwrap();
    write_file(&path);
    assert_eq!(read_all(&path).unwrap().len(), 6);
}

#[test]
fn a_record_of_the_wrong_width_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = LogitsFileWriter::create(&dir.path().join("x.lp"), header(4), false).unwrap();
    assert!(writer.write(&record(0)).is_err());
}

#[test]
fn hostile_headers() {
    let good = valid_bytes();
    assert!(read_error(&good[..50]).contains("header"));
    assert!(read_error(&[]).contains("header"));

    let mut magic = good.clone();
    magic[0] = b'X';
    assert!(read_error(&magic).contains("magic"));

    let mut version = good.clone();
    version[8] = 9;
    assert!(read_error(&version).contains("version"));

    let mut vocab = good.clone();
    vocab[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(read_error(&vocab).contains("vocab_size"));

    let mut top_k = good.clone();
    top_k[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(read_error(&top_k).contains("top_k"));

    // A huge count must fail on the file's length, before any allocation.
    let mut positions = good.clone();
    positions[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
    positions[32..40].copy_from_slice(&(3 * u32::MAX as u64).to_le_bytes());
    assert!(read_error(&positions).contains("positions"));

    let mut count = good.clone();
    count[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(read_error(&count).contains("positions"));

    assert!(read_error(&good[..good.len() - 1]).contains("truncated"));
    let mut trailing = good.clone();
    trailing.push(0);
    assert!(read_error(&trailing).contains("trailing"));
}

#[test]
fn hostile_records() {
    let good = valid_bytes();
    let first = HEADER_BYTES as usize;
    let record_bytes = 12 + 8 * 3;

    let mut target = good.clone();
    target[first..first + 4].copy_from_slice(&10u32.to_le_bytes());
    assert!(read_error(&target).contains("position 0: target"));

    let mut id = good.clone();
    let second_id = first + record_bytes + 12;
    id[second_id..second_id + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(read_error(&id).contains("position 1: top id"));

    let mut nan = good.clone();
    nan[first + 16..first + 20].copy_from_slice(&f32::NAN.to_le_bytes());
    assert!(read_error(&nan).contains("position 0: top log-probability"));

    let mut positive = good.clone();
    positive[first + 4..first + 8].copy_from_slice(&1.0f32.to_le_bytes());
    assert!(read_error(&positive).contains("target log-probability"));

    let mut order = good.clone();
    order[first + 24..first + 28].copy_from_slice(&0.0f32.to_le_bytes());
    assert!(read_error(&order).contains("descending"));

    let mut lse = good;
    lse[first + 8..first + 12].copy_from_slice(&f32::INFINITY.to_le_bytes());
    assert!(read_error(&lse).contains("logsumexp"));
}

#[test]
fn missing_file_names_the_path() {
    let error = LogitsFileReader::open(Path::new("/nonexistent/base.lp"))
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("/nonexistent/base.lp"), "{error}");
}
