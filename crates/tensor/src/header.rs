//! The safetensors header, parsed and checked before any tensor byte is touched: an 8-byte
//! little-endian length, a JSON object `{"name": {"dtype", "shape", "data_offsets"}, ...}` with an
//! optional `"__metadata__"` string map, then the tensor data.
//!
//! We check the header ourselves, with checked arithmetic throughout, instead of relying on
//! `safetensors::SafeTensors::read_metadata`: its final length check (`end + 8 + header_len`) can
//! overflow on offsets near `usize::MAX` (a panic in debug builds, a wrongly accepted file in
//! release ones), and its errors do not say which tensor is wrong. After `parse_header` succeeds
//! every tensor's byte range lies inside the buffer, no two ranges overlap, and each range is
//! exactly dtype size x product(shape) long.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use serde_json::{Map, Value};

use crate::dtype::DType;
use crate::error::{Result, TensorError};

/// Bytes of the length field in front of the JSON header.
const LENGTH_FIELD: usize = 8;
/// The same limit as the `safetensors` crate: real headers are well under a megabyte.
pub const MAX_HEADER_BYTES: u64 = 100_000_000;
const METADATA_KEY: &str = "__metadata__";

/// Where one tensor's bytes are inside the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorLocation {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Absolute byte range within the file; always in bounds.
    pub bytes: Range<usize>,
}

#[derive(Debug)]
pub(crate) struct Header {
    pub tensors: BTreeMap<String, TensorLocation>,
    pub metadata: BTreeMap<String, String>,
}

/// Parses and validates the header of the safetensors file `bytes` (`path` is for messages).
pub(crate) fn parse_header(path: &Path, bytes: &[u8]) -> Result<Header> {
    let invalid = |reason: String| TensorError::InvalidSafetensors {
        path: path.to_path_buf(),
        reason,
    };
    let file_len = bytes.len();
    let Some(length_field) = bytes.first_chunk::<LENGTH_FIELD>() else {
        return Err(invalid(format!(
            "file is {file_len} bytes, too short for a header"
        )));
    };
    let header_len = u64::from_le_bytes(*length_field);
    if header_len > MAX_HEADER_BYTES {
        return Err(invalid(format!(
            "header length field says {header_len} bytes, more than the {MAX_HEADER_BYTES}-byte limit: not a safetensors file?"
        )));
    }
    // At most 1e8, so it fits usize and the addition cannot overflow.
    let data_start = LENGTH_FIELD + header_len as usize;
    let Some(header_bytes) = bytes.get(LENGTH_FIELD..data_start) else {
        return Err(invalid(format!(
            "header length field ({header_len} bytes) points past the end of the file ({file_len} bytes): truncated?"
        )));
    };
    let text = std::str::from_utf8(header_bytes)
        .map_err(|e| invalid(format!("header is not UTF-8: {e}")))?;
    let object: Map<String, Value> = match crate::strict_json::parse_strict(text) {
        Ok(Value::Object(object)) => object,
        Ok(_) => return Err(invalid("header is not a JSON object".to_string())),
        Err(e) => return Err(invalid(format!("header is not valid JSON: {e}"))),
    };

    let data_len = file_len - data_start;
    let mut metadata = BTreeMap::new();
    let mut tensors = BTreeMap::new();
    for (name, entry) in &object {
        if name == METADATA_KEY {
            metadata = parse_metadata(entry).map_err(&invalid)?;
            continue;
        }
        let location = parse_entry(path, name, entry, data_start, data_len)?;
        tensors.insert(name.clone(), location);
    }
    check_ranges_tile_data(&tensors, data_start, data_len).map_err(invalid)?;
    Ok(Header { tensors, metadata })
}

fn parse_metadata(entry: &Value) -> std::result::Result<BTreeMap<String, String>, String> {
    match entry {
        Value::Null => Ok(BTreeMap::new()),
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| match value {
                Value::String(s) => Ok((key.clone(), s.clone())),
                other => Err(format!(
                    "`{METADATA_KEY}` entry `{key}` is {}, expected a string",
                    short(other)
                )),
            })
            .collect(),
        other => Err(format!(
            "`{METADATA_KEY}` is {}, expected an object of strings",
            short(other)
        )),
    }
}

/// One tensor's entry, checked on its own: known dtype, byte length = dtype x shape, in bounds.
fn parse_entry(
    path: &Path,
    name: &str,
    entry: &Value,
    data_start: usize,
    data_len: usize,
) -> Result<TensorLocation> {
    let invalid = |reason: String| TensorError::InvalidSafetensors {
        path: path.to_path_buf(),
        reason: format!("tensor `{name}`: {reason}"),
    };
    let Value::Object(fields) = entry else {
        return Err(invalid(format!(
            "entry is {}, expected an object with dtype, shape and data_offsets",
            short(entry)
        )));
    };
    let dtype_name = match fields.get("dtype") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(invalid(format!(
                "dtype is {}, expected a string",
                short(other)
            )));
        }
        None => return Err(invalid("dtype is missing".to_string())),
    };
    let dtype = DType::from_name(dtype_name).ok_or_else(|| TensorError::UnsupportedDType {
        path: path.to_path_buf(),
        name: name.to_string(),
        dtype: dtype_name.to_string(),
    })?;
    let shape = usize_list(fields.get("shape"))
        .ok_or_else(|| invalid("shape is missing or not a list of sizes".to_string()))?;
    let offsets = usize_list(fields.get("data_offsets"))
        .ok_or_else(|| invalid("data_offsets is missing or not a list of offsets".to_string()))?;
    let &[begin, end] = offsets.as_slice() else {
        return Err(invalid(format!(
            "data_offsets has {} entries, expected [begin, end]",
            offsets.len()
        )));
    };
    let needed = shape
        .iter()
        .try_fold(dtype.size_in_bytes(), |acc, &dim| acc.checked_mul(dim))
        .ok_or_else(|| {
            invalid(format!(
                "shape {shape:?} of {dtype} overflows the address space"
            ))
        })?;
    if end < begin {
        return Err(invalid(format!(
            "data_offsets [{begin}, {end}] end before they begin"
        )));
    }
    if end - begin != needed {
        return Err(invalid(format!(
            "data_offsets [{begin}, {end}] hold {} bytes, but {dtype} x shape {shape:?} needs {needed}",
            end - begin
        )));
    }
    if end > data_len {
        return Err(invalid(format!(
            "data_offsets [{begin}, {end}] reach past the end of the data ({data_len} bytes): truncated?"
        )));
    }
    Ok(TensorLocation {
        dtype,
        shape,
        // end <= data_len = file_len - data_start, so neither sum overflows.
        bytes: data_start + begin..data_start + end,
    })
}

/// The tensors must cover the data exactly, back to back: no overlap (two tensors sharing
/// bytes), no gap, nothing after the last one (as the safetensors format requires).
fn check_ranges_tile_data(
    tensors: &BTreeMap<String, TensorLocation>,
    data_start: usize,
    data_len: usize,
) -> std::result::Result<(), String> {
    let mut by_offset: Vec<(&str, &Range<usize>)> = tensors
        .iter()
        .map(|(name, loc)| (name.as_str(), &loc.bytes))
        .collect();
    by_offset.sort_by_key(|(_, range)| (range.start, range.end));
    let mut covered_to = data_start;
    let mut previous: Option<&str> = None;
    for (name, range) in by_offset {
        if range.start < covered_to {
            let other = previous.unwrap_or("?");
            return Err(format!("tensors `{other}` and `{name}` overlap"));
        }
        if range.start > covered_to {
            return Err(format!(
                "{} unused bytes before tensor `{name}`: the offsets are not contiguous",
                range.start - covered_to
            ));
        }
        covered_to = range.end;
        previous = Some(name);
    }
    let used = covered_to - data_start;
    if used != data_len {
        return Err(format!(
            "the tensors use {used} data bytes but the file has {data_len}: truncated or padded?"
        ));
    }
    Ok(())
}

fn usize_list(value: Option<&Value>) -> Option<Vec<usize>> {
    match value? {
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_u64().and_then(|n| usize::try_from(n).ok()))
            .collect(),
        _ => None,
    }
}

/// A JSON value for an error message, cut short so a huge value does not flood the terminal.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(60) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}
