//! Arbitrary bytes as a prompt through the byte-level tokenizer that `gattn-cpu init` writes
//! (`gattn_model::init::byte_tokenizer`): Qwen's pre-tokenizer regex, NFC, ChatML specials.
//! Invalid UTF-8 goes in lossily (as a file read with replacement characters would); valid UTF-8
//! must come back from decode exactly as its NFC form, and streaming decode must agree with
//! decoding all ids at once.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gattn_fuzz::check_tokenizer_prompt(data);
});
