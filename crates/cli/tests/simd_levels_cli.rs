//! int8-weight logits do not depend on the SIMD level: `gattn-cpu logits` under every
//! `GATTN_SIMD` value this CPU supports gives the same bits, with a bf16 and an int8 KV cache, on
//! random checkpoints whose head dims are those of the real models (64, 128) and one with a tail
//! (80), prefilled in chunks of 40, so later chunks attend to keys cached by earlier ones.
//! Left out: the AMX table where its prefill attention runs on tiles (a bf16 cache at head dims
//! in whole 32-dim chunks, an int8 one in 64-dim chunks), whose `tdpbf16ps` sums no emulation
//! was found to reproduce (`gattn_kernels::matmul::amx::bf16_order`).

mod support;

use gattn_kernels::KernelTable;
use gattn_kernels::attention::{KvDtype, prefill_uses_amx_tiles};
use gattn_model::init::{Preset, write_random_checkpoint};
use gattn_model::{GateMode, Qwen3Config};
use gattn_tensor::DType;
use support::{expect_exit, read_npy};

/// The `GATTN_SIMD` value that selects each kernel table of this CPU (but AMX's where its
/// prefill runs on tiles).
fn simd_values(kv: KvDtype, head_dim: usize) -> Vec<String> {
    KernelTable::all_supported()
        .iter()
        .filter(|table| !prefill_uses_amx_tiles(table, kv, head_dim))
        .map(|table| match table.amx() {
            true => "amx".to_string(),
            false => table.level().name().to_string(),
        })
        .collect()
}

/// A small random checkpoint: 2 layers, GQA group 2 (heads 4, KV heads 2), `head_dim`.
fn checkpoint(dir: &std::path::Path, head_dim: usize, gate: GateMode) {
    let config = Qwen3Config {
        vocab_size: 320,
        hidden_size: 128,
        intermediate_size: 256,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        head_dim,
        max_position_embeddings: 1024,
        ..Preset::Tiny.config(gate)
    };
    write_random_checkpoint(dir, &config, DType::BF16, 7).unwrap();
}

fn logits_bits(model: &std::path::Path, simd: &str, kv: &str, ids: &str) -> Vec<u32> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("logits.npy");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_gattn-cpu"))
        .args(["logits", "-m"])
        .arg(model)
        .args(["--weights", "int8", "--kv", kv, "--prefill-chunk", "40"])
        .args(["--prompt-ids", ids, "-t", "2", "--out"])
        .arg(&out)
        .env("GATTN_SIMD", simd)
        .env("GATTN_CACHE_DIR", dir.path())
        .output()
        .unwrap();
    expect_exit(&o, 0);
    let (shape, values) = read_npy(&out);
    assert_eq!(shape.first(), Some(&150));
    values.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn int8_logits_are_bit_identical_at_every_simd_level() {
    let ids: Vec<String> = (0..150u32)
        .map(|i| ((i * 37 + 11) % 300).to_string())
        .collect();
    let ids = ids.join(",");
    for (head_dim, gate) in [
        (64, GateMode::Headwise),
        (128, GateMode::Elementwise),
        (80, GateMode::Headwise),
    ] {
        let model = tempfile::tempdir().unwrap();
        checkpoint(model.path(), head_dim, gate);
        for (kv, dtype) in [("bf16", KvDtype::Bf16), ("int8", KvDtype::Int8)] {
            let values = simd_values(dtype, head_dim);
            let first = logits_bits(model.path(), &values[0], kv, &ids);
            for simd in &values[1..] {
                let other = logits_bits(model.path(), simd, kv, &ids);
                // The first differing (position, token), if any.
                let differing = first
                    .iter()
                    .zip(&other)
                    .position(|(a, b)| a != b)
                    .map(|i| (i / 320, i % 320));
                assert_eq!(
                    differing, None,
                    "head_dim {head_dim}, --kv {kv}: GATTN_SIMD={simd} differs from {} (first at \
                     (position, token) {differing:?})",
                    values[0]
                );
            }
        }
    }
}
