//! Property tests of the loaders on hostile input: arbitrary bytes and mutated valid files
//! (bit flips, truncations, header edits) through `SafetensorsFile` and `Checkpoint`. Never a
//! panic; every error names the file; whatever is accepted hands out in-bounds views.

use std::path::Path;

use gattn_tensor::{Checkpoint, SafetensorsFile};
use proptest::prelude::*;

const NAME: &str = "prop-input.safetensors";

/// A small valid file: three tensors of different dtypes, back to back.
fn valid_file() -> Vec<u8> {
    let header = br#"{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},"c":{"dtype":"I8","shape":[3,1],"data_offsets":[32,35]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend((0..35u8).map(|i| i.wrapping_mul(37)));
    bytes
}

/// Loads `bytes`; on success touches every tensor, on failure checks the message names the file.
fn exercise(bytes: Vec<u8>) {
    match SafetensorsFile::from_bytes(Path::new(NAME), bytes) {
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.contains(NAME),
                "error `{message}` does not name the file"
            );
        }
        Ok(file) => {
            let names: Vec<String> = file.names().map(str::to_string).collect();
            for name in &names {
                let view = file.view(name).unwrap();
                let numel: usize = view.shape.iter().product();
                assert_eq!(view.bytes.len(), numel * view.dtype.size_in_bytes());
                view.expect_shape(view.shape).unwrap();
                if let Ok(values) = view.to_f32_vec() {
                    assert_eq!(values.len(), numel);
                }
                let _ = (
                    view.as_bf16_slice(),
                    view.as_f32_slice(),
                    view.as_i8_slice(),
                );
                assert_eq!(file.mapped(name).unwrap().bytes(), view.bytes);
            }
        }
    }
}

#[test]
fn the_valid_file_loads() {
    let file = SafetensorsFile::from_bytes(Path::new(NAME), valid_file()).unwrap();
    assert_eq!(file.names().collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(file.view("a").unwrap().to_f32_vec().unwrap().len(), 6);
    assert_eq!(file.metadata()["format"], "pt");
}

/// A header whose tensors are each valid but end 100 bytes short of `usize::MAX`. The
/// `safetensors` crate (0.6.2) computes `end + 8 + header_len` unchecked after validating the
/// offsets, which overflows here (a panic with overflow checks on); ours must refuse cleanly.
fn header_ending_near_usize_max() -> Vec<u8> {
    let size = 1u64 << 60;
    let mut entries = Vec::new();
    for i in 0..16u64 {
        let begin = i * size;
        let end = if i == 15 {
            u64::MAX - 100
        } else {
            begin + size
        };
        entries.push(format!(
            r#""t{i:02}":{{"dtype":"I8","shape":[{}],"data_offsets":[{begin},{end}]}}"#,
            end - begin
        ));
    }
    let header = format!("{{{}}}", entries.join(","));
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&[0; 64]);
    bytes
}

#[test]
fn offsets_near_usize_max_are_refused() {
    let e =
        SafetensorsFile::from_bytes(Path::new(NAME), header_ending_near_usize_max()).unwrap_err();
    assert!(e.to_string().contains(NAME), "{e}");
    assert!(e.to_string().contains("past the end"), "{e}");
}

#[test]
fn overlapping_tensors_are_refused() {
    let header = br#"{"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"I8","shape":[2],"data_offsets":[2,4]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(&[0; 4]);
    let e = SafetensorsFile::from_bytes(Path::new(NAME), bytes).unwrap_err();
    assert!(e.to_string().contains("overlap"), "{e}");
}

#[derive(Debug, Clone)]
enum Mutation {
    FlipBit(usize, u8),
    SetByte(usize, u8),
    Truncate(usize),
    Append(Vec<u8>),
    /// Replaces a run of header characters with digits or JSON punctuation.
    HeaderEdit(usize, String),
    SetLength(u64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, v)| Mutation::SetByte(i, v)),
        any::<usize>().prop_map(Mutation::Truncate),
        proptest::collection::vec(any::<u8>(), 1..16).prop_map(Mutation::Append),
        (any::<usize>(), "[0-9,:\\[\\]{}\"-]{1,6}").prop_map(|(i, s)| Mutation::HeaderEdit(i, s)),
        prop_oneof![Just(0u64), Just(u64::MAX), 0u64..400, Just(1u64 << 40)]
            .prop_map(Mutation::SetLength),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    let len = bytes.len().max(1);
    match mutation {
        Mutation::FlipBit(i, b) => {
            if let Some(byte) = bytes.get_mut(i % len) {
                *byte ^= 1 << b;
            }
        }
        Mutation::SetByte(i, v) => {
            if let Some(byte) = bytes.get_mut(i % len) {
                *byte = *v;
            }
        }
        Mutation::Truncate(i) => bytes.truncate(i % len),
        Mutation::Append(extra) => bytes.extend_from_slice(extra),
        Mutation::HeaderEdit(i, text) => {
            let header_end = bytes.len().min(8 + 200);
            if header_end > 8 {
                let at = 8 + i % (header_end - 8);
                let stop = (at + text.len()).min(bytes.len());
                bytes.splice(at..stop, text.bytes());
            }
        }
        Mutation::SetLength(n) => {
            if bytes.len() >= 8 {
                bytes[..8].copy_from_slice(&n.to_le_bytes());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        exercise(bytes);
    }

    #[test]
    fn arbitrary_bytes_behind_a_plausible_length_never_panic(
        header_len in 0u64..300,
        rest in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut bytes = header_len.to_le_bytes().to_vec();
        bytes.extend(rest);
        exercise(bytes);
    }

    #[test]
    fn mutated_valid_files_never_panic(mutations in proptest::collection::vec(mutation(), 1..4)) {
        let mut bytes = valid_file();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        exercise(bytes);
    }
}

proptest! {
    // Each case writes a checkpoint directory: fewer cases.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn mutated_checkpoint_dirs_never_panic(
        mutations in proptest::collection::vec(mutation(), 1..4),
        index_edit in proptest::option::of(("[a-z./]{0,12}", any::<bool>())),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = valid_file();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let file_name = match &index_edit {
            None => "model.safetensors".to_string(),
            Some((shard, listed_right)) => {
                let shard_file = "model-00001-of-00001.safetensors";
                let listed = if *listed_right { shard_file.to_string() } else { shard.clone() };
                let index = serde_json::json!({"weight_map": {"a": listed, "b": shard_file}});
                std::fs::write(dir.path().join("model.safetensors.index.json"), index.to_string()).unwrap();
                shard_file.to_string()
            }
        };
        std::fs::write(dir.path().join(&file_name), &bytes).unwrap();
        match Checkpoint::open_dir(dir.path()) {
            Err(e) => {
                // A missing tensor names the directory; everything else a file in it.
                let message = e.to_string();
                prop_assert!(message.contains(&dir.path().display().to_string()),
                    "error `{}` names no file of the checkpoint", message);
            }
            Ok(checkpoint) => {
                let names: Vec<String> = checkpoint.names().map(str::to_string).collect();
                for name in names {
                    let view = checkpoint.view(&name).unwrap();
                    let _ = view.to_f32_vec();
                    let _ = checkpoint.mapped(&name).unwrap().bytes().len();
                }
            }
        }
    }
}
