//! Simulates int8 weights with another block size than the kernels' 64, to measure what the
//! block size costs in accuracy: loads a model with f32 weights, replaces every weight the int8
//! path quantizes (the layers' linears and the lm_head; not the embedding lookup) by its int8
//! quantize-dequantize with blocks of BLOCK values along the input (symmetric, scale amax/127,
//! round to nearest even, as the kernels' `quantize_weight_rows`), runs the f32 reference path
//! with f32 KV, and prints the perplexity report (JSON) against a base run's saved logits.
//! Activations stay f32: this isolates the weights' share of int8's error.
//!
//! ```sh
//! gattn-cpu perplexity -m builtin:baseline --weights f32 --kv f32 --save-logits /tmp/base.lp
//! cargo run --release -p gattn-eval --example int8_block_kld -- builtin:baseline 32 /tmp/base.lp
//! ```
//! Windows (-c, --chunks) and the text are taken from the base file's header and the builtin
//! text; a base made from another text is refused by its fingerprint.

use std::path::Path;
use std::sync::Arc;

use gattn_eval::perplexity::{
    BUILTIN_TEXT, LogitsFileReader, LogitsFiles, PerplexityRun, plan_windows, scored_logits,
};
use gattn_model::weights::{Linear, WeightData};
use gattn_model::{KvDtype, ModelSource, Qwen3Model, Tokenizer, WeightFormat};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, block, base] = args.as_slice() else {
        return Err("usage: int8_block_kld MODEL BLOCK BASE.lp".into());
    };
    let block: usize = block.parse()?;
    let base = Path::new(base);
    let dir = model.parse::<ModelSource>()?.dir()?;
    let saved = LogitsFileReader::open(base)?.header().clone();

    let mut model = Qwen3Model::load(&dir, WeightFormat::F32)?;
    model.kv_dtype = KvDtype::F32;
    for layer in &mut model.layers {
        let attention = &mut layer.self_attn;
        let mlp = &mut layer.mlp;
        for linear in [
            &mut attention.q_proj,
            &mut attention.k_proj,
            &mut attention.v_proj,
            &mut attention.o_proj,
            &mut mlp.gate_proj,
            &mut mlp.up_proj,
            &mut mlp.down_proj,
        ] {
            quantize_dequantize(linear, block);
        }
    }
    quantize_dequantize(&mut model.lm_head, block);

    let tokens = Tokenizer::from_dir(&dir)?.encode(BUILTIN_TEXT)?;
    let windows = plan_windows(
        tokens.len(),
        saved.ctx as usize,
        Some(saved.stride as usize),
        Some(saved.windows as usize),
    )?;
    let files = LogitsFiles {
        compare: Some(base),
        ..LogitsFiles::default()
    };
    let mut run = PerplexityRun::new(&model.config, &windows, &tokens, files)?;
    let mut cache = model.new_cache(saved.ctx as usize);
    for window in &windows {
        let logits = scored_logits(&model, window, &tokens, &mut cache)?;
        run.add_window(window, &tokens, &logits)?;
    }
    println!("{}", serde_json::to_string_pretty(&run.finish()?)?);
    Ok(())
}

/// Replaces the f32 weights of `linear` by their int8 blocks of `block`, dequantized.
fn quantize_dequantize(linear: &mut Linear, block: usize) {
    let WeightData::F32(weights) = &linear.weight else {
        unreachable!("loaded as f32");
    };
    let mut values = weights.as_ref().clone();
    for row in values.chunks_mut(linear.in_features) {
        for chunk in row.chunks_mut(block) {
            let amax = chunk.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            if amax == 0.0 {
                continue;
            }
            let (inv, scale) = (127.0 / amax, amax / 127.0);
            for v in chunk {
                *v = (*v * inv).round_ties_even().clamp(-127.0, 127.0) * scale;
            }
        }
    }
    linear.weight = WeightData::F32(Arc::new(values));
}
