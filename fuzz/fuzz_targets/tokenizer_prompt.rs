//! Arbitrary bytes as a prompt through the byte-level tokenizer that `gattn-cpu init` writes
//! (`gattn_model::init::byte_tokenizer`): Qwen's pre-tokenizer regex, NFC, ChatML specials.
//! Invalid UTF-8 goes in lossily (as a file read with replacement characters would); valid UTF-8
//! must come back from decode exactly as its NFC form, and streaming decode must agree with
//! decoding all ids at once.
#![no_main]

use std::sync::OnceLock;

use gattn_model::init::byte_tokenizer::{VOCAB_SIZE, tokenizer_json};
use gattn_model::{TextStream, Tokenizer};
use libfuzzer_sys::fuzz_target;
use unicode_normalization::UnicodeNormalization;

fn tokenizer() -> &'static Tokenizer {
    static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| {
        // Tokenizer reads only files: write the JSON once per fuzzing process.
        let path = std::env::temp_dir().join(format!(
            "gattn-fuzz-tokenizer-{}.json",
            std::process::id()
        ));
        std::fs::write(&path, tokenizer_json().to_string()).expect("temp dir is writable");
        let tokenizer = Tokenizer::from_file(&path).expect("the byte tokenizer loads");
        let _ = std::fs::remove_file(&path);
        tokenizer
    })
}

fuzz_target!(|data: &[u8]| {
    let tokenizer = tokenizer();
    let text = String::from_utf8_lossy(data);
    let ids = match tokenizer.encode(&text) {
        Ok(ids) => ids,
        Err(e) => panic!("encoding a string failed: {e}"),
    };
    assert!(ids.iter().all(|&id| (id as usize) < VOCAB_SIZE));
    let decoded = tokenizer.decode(&ids).expect("ids from encode decode");
    let normalized: String = text.nfc().collect();
    assert_eq!(decoded, normalized, "decode(encode(text)) is not NFC(text)");

    let mut stream = TextStream::new(tokenizer);
    let mut streamed = String::new();
    for &id in &ids {
        streamed.push_str(&stream.push(id).expect("a valid id streams"));
    }
    streamed.push_str(&stream.finish().expect("finish"));
    assert_eq!(streamed, decoded, "streamed text differs from the full decode");

    // Ids straight from the fuzzer (in range): decode must not panic.
    let raw_ids: Vec<u32> = data
        .iter()
        .map(|&b| u32::from(b) % VOCAB_SIZE as u32)
        .collect();
    let _ = tokenizer.decode(&raw_ids);
});
