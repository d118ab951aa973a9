//! Writes a little-endian f32 `.npy` (format 1.0): magic, header dict padded to 64 bytes, data.

use std::path::Path;

use anyhow::Result;
use gattn_model::Existing;
use gattn_model::output::write_atomic;

/// Written atomically; an existing `path` is replaced only with `Existing::Replace`.
pub fn write_f32(path: &Path, shape: &[usize], values: &[f32], existing: Existing) -> Result<()> {
    assert_eq!(shape.iter().product::<usize>(), values.len());
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape_text}, }}");
    // magic (6) + version (2) + header length (2) + header + '\n' must be a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = Vec::with_capacity(10 + header.len() + values.len() * 4);
    bytes.extend_from_slice(b"\x93NUMPY\x01\x00");
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    values
        .iter()
        .for_each(|v| bytes.extend_from_slice(&v.to_le_bytes()));
    Ok(write_atomic(path, &bytes, existing)?)
}
