//! What the CLI test binaries share: running the binary with its own builtin-model cache,
//! checking how it exited, and reading the `.npy` files it writes.

// Each test binary includes this module and uses a part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs the binary with its builtin-model cache in `cache`.
pub fn gattn_cpu_with_cache(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gattn-cpu"))
        .args(args)
        .env("GATTN_CACHE_DIR", cache)
        .output()
        .expect("the binary runs")
}

/// Fails with the command's output unless it exited with `code` and did not panic.
pub fn expect_exit(o: &Output, code: i32) {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout: {}\nstderr: {stderr}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A little-endian f32 .npy as the binary writes it (header padded to 64 bytes): (shape, values).
pub fn read_npy(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    assert_eq!((10 + header_len) % 64, 0);
    assert!(header.contains("'descr': '<f4'"), "{header}");
    let dims = header
        .split("'shape': (")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap();
    let shape = dims
        .split(',')
        .filter(|d| !d.trim().is_empty())
        .map(|d| d.trim().parse().unwrap())
        .collect();
    let values = bytes[10 + header_len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (shape, values)
}
