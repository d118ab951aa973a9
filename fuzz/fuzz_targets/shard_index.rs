//! Arbitrary text as model.safetensors.index.json. Seed: the index of the sharded fixture.
//! An accepted index must only name plain files inside the checkpoint directory.
#![no_main]

use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;

const INDEX_PATH: &str = "fuzz/model.safetensors.index.json";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let index = match gattn_tensor::parse_shard_index(Path::new(INDEX_PATH), text) {
        Ok(index) => index,
        Err(e) => {
            gattn_fuzz::assert_names(&e, "model.safetensors.index.json");
            return;
        }
    };
    assert!(!index.shards.is_empty());
    assert!(index.shards.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
    for shard in &index.shards {
        let inside = Path::new(shard)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
        assert!(inside && !shard.is_empty(), "shard `{shard}` escapes the directory");
        let joined = Path::new("/checkpoint").join(shard);
        assert!(joined.starts_with("/checkpoint"));
    }
    for shard in index.weight_map.values() {
        assert!(index.shards.binary_search(shard).is_ok());
    }
});
