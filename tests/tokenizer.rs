//! The tokenizer that `init` writes: Qwen's pre-tokenizer regex (with its `\s+(?!\S)` lookahead)
//! on long inputs, round trips, special tokens and streaming decode of split UTF-8 characters.

use gattn_model::init::byte_tokenizer::{SPECIAL_TOKENS, tokenizer_json};
use gattn_model::{TextStream, Tokenizer};

fn byte_tokenizer() -> (tempfile::TempDir, Tokenizer) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, tokenizer_json().to_string()).unwrap();
    let tokenizer = Tokenizer::from_file(&path).unwrap();
    (dir, tokenizer)
}

#[test]
fn round_trips_text_with_specials_and_unicode() {
    let (_dir, tokenizer) = byte_tokenizer();
    let text =
        "<|im_start|>user\nWhat's the gate? 门控注意力 🚪  \n\n  tabs\tand  spaces<|im_end|>";
    let ids = tokenizer.encode(text).unwrap();
    assert_eq!(ids[0], tokenizer.token_to_id(SPECIAL_TOKENS[1]).unwrap());
    assert_eq!(
        *ids.last().unwrap(),
        tokenizer.token_to_id(SPECIAL_TOKENS[2]).unwrap()
    );
    assert_eq!(tokenizer.decode(&ids).unwrap(), text);
}

#[test]
fn encodes_a_128k_token_input() {
    let (_dir, tokenizer) = byte_tokenizer();
    // Prose plus long whitespace runs, where `\s+(?!\S)` must backtrack: 131072+ tokens.
    let sentence = "The grass is green. The sky is blue.   The sun is yellow.\n\n";
    let mut text = sentence.repeat(131_072 / sentence.len() + 1);
    text.push_str(&" ".repeat(20_000));
    text.push_str("needle\n");
    let ids = tokenizer.encode(&text).unwrap();
    assert_eq!(ids.len(), text.len(), "one token per byte");
    assert!(ids.len() >= 131_072);
    assert_eq!(tokenizer.decode(&ids).unwrap(), text);
}

#[test]
fn streaming_decode_waits_for_whole_characters() {
    let (_dir, tokenizer) = byte_tokenizer();
    let text = "a门🚪b";
    let ids = tokenizer.encode(text).unwrap();
    let mut stream = TextStream::new(&tokenizer);
    let mut pieces = Vec::new();
    for &id in &ids {
        pieces.push(stream.push(id).unwrap());
    }
    pieces.push(stream.finish().unwrap());
    assert!(pieces.iter().all(|p| !p.contains('\u{FFFD}')), "{pieces:?}");
    assert_eq!(pieces.concat(), text);
    assert_eq!(pieces[1], "", "the first byte of 门 alone is not printed");
}

#[test]
fn a_missing_or_broken_tokenizer_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    let err = Tokenizer::from_file(&path).err().unwrap().to_string();
    assert!(
        err.contains("tokenizer.json") && err.contains("not found"),
        "{err}"
    );
    std::fs::write(&path, "{\"model\": 3}").unwrap();
    let err = Tokenizer::from_file(&path).err().unwrap().to_string();
    assert!(err.contains("tokenizer.json"), "{err}");
}
