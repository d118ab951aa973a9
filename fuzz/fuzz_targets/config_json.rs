//! Arbitrary text as config.json. Seeds: the configs of the test fixtures.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Qwen3Config::from_dir reads config.json with read_to_string, so non-UTF-8 never gets here.
    if let Ok(text) = std::str::from_utf8(data) {
        gattn_fuzz::check_config(text);
    }
});
