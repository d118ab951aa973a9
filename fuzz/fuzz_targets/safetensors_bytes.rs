//! Arbitrary bytes as a safetensors file: header length, header JSON, offsets and data all come
//! from the fuzzer. Seeds: the headers of the test fixtures (tensor data cut down to fit).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gattn_fuzz::check_safetensors(data.to_vec());
});
