//! Arbitrary bytes as tokenizer.json. Seeds: the builtin models' byte-level tokenizer and a small
//! word-level one.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gattn_fuzz::check_tokenizer_json(data));
