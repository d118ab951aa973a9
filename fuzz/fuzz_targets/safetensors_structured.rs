//! A well-formed safetensors *encoding* of arbitrary tensor entries: the header is always valid
//! JSON, so the fuzzer spends its time on what the loader must check (offsets past the end,
//! overlapping or unaligned ranges, byte length vs dtype x shape, overflowing shapes and offsets,
//! a header length that lies) instead of on JSON syntax.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};

#[derive(Debug, Arbitrary)]
struct Input {
    tensors: Vec<Entry>,
    metadata: Vec<(String, String)>,
    /// Extra bytes after the data (or, if negative, bytes cut from its end).
    data_len_delta: i16,
    /// Added to the true header length in the length field.
    header_len_delta: i8,
    /// Spaces after the JSON, as the safetensors writer pads the header to 8 bytes.
    padding: u8,
}

#[derive(Debug, Arbitrary)]
struct Entry {
    name: String,
    dtype: Dtype,
    shape: Vec<Dim>,
    offsets: Offsets,
}

#[derive(Debug, Arbitrary)]
enum Dtype {
    F32,
    F16,
    BF16,
    I8,
    F64,
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum Dim {
    Small(u8),
    Any(u64),
}

#[derive(Debug, Arbitrary)]
enum Offsets {
    /// Right after the previous entry, with the right length plus `delta` bytes.
    Contiguous { delta: i8 },
    /// Whatever the fuzzer picks.
    Raw(u64, u64),
    /// Not a pair.
    List(Vec<u64>),
}

fuzz_target!(|input: Input| {
    gattn_fuzz::check_safetensors(encode(&input));
});

fn encode(input: &Input) -> Vec<u8> {
    let mut header = Map::new();
    let mut end = 0u64;
    for entry in input.tensors.iter().take(16) {
        let (dtype, size) = match &entry.dtype {
            Dtype::F32 => ("F32".to_string(), 4u64),
            Dtype::F16 => ("F16".to_string(), 2),
            Dtype::BF16 => ("BF16".to_string(), 2),
            Dtype::I8 => ("I8".to_string(), 1),
            Dtype::F64 => ("F64".to_string(), 8),
            Dtype::Other(s) => (s.clone(), 1),
        };
        let shape: Vec<u64> = entry
            .shape
            .iter()
            .take(6)
            .map(|d| match d {
                Dim::Small(n) => u64::from(*n % 8),
                Dim::Any(n) => *n,
            })
            .collect();
        let offsets = match &entry.offsets {
            Offsets::Contiguous { delta } => {
                let bytes = shape.iter().fold(size, |acc, &d| acc.wrapping_mul(d));
                let begin = end;
                end = begin.wrapping_add(bytes).wrapping_add_signed(i64::from(*delta));
                json!([begin, end])
            }
            Offsets::Raw(begin, stop) => {
                end = *stop;
                json!([begin, stop])
            }
            Offsets::List(list) => json!(list),
        };
        header.insert(
            entry.name.clone(),
            json!({"dtype": dtype, "shape": shape, "data_offsets": offsets}),
        );
    }
    if !input.metadata.is_empty() {
        let metadata: Map<String, Value> = input
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        header.insert("__metadata__".into(), Value::Object(metadata));
    }
    let mut header = serde_json::to_vec(&Value::Object(header)).expect("a map serializes");
    header.extend(std::iter::repeat_n(b' ', usize::from(input.padding % 8)));
    let length_field = (header.len() as u64).wrapping_add_signed(i64::from(input.header_len_delta));
    // Only as much data as the (capped) last offset says, so a huge offset does not allocate.
    let data_len = end
        .min(1 << 16)
        .saturating_add_signed(i64::from(input.data_len_delta)) as usize;
    let mut bytes = length_field.to_le_bytes().to_vec();
    bytes.extend_from_slice(&header);
    bytes.extend((0..data_len).map(|i| i as u8));
    bytes
}
