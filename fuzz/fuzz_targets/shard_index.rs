//! Arbitrary text as model.safetensors.index.json. Seed: the index of the sharded fixture.
//! An accepted index must only name plain files inside the checkpoint directory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gattn_fuzz::check_shard_index(data);
});
