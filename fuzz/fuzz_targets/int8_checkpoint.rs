//! Arbitrary bytes as the model.safetensors of an int8 checkpoint (`gattn-cpu quantize`):
//! header, `__metadata__` (format id, block), part names, dtypes, shapes and bytes all come from
//! the fuzzer. Seed: a real quantized tiny checkpoint (`corpus/int8_checkpoint/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gattn_fuzz::check_int8_checkpoint(data.to_vec());
});
