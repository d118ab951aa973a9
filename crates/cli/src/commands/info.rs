//! `gattn-cpu info`: what the dispatch chose, and the model's shapes and sizes.

use anyhow::Result;

use gattn_kernels::dispatch::{AMX_EMULATED, cpu_features, dispatch_choice};
use gattn_model::{KvCache, MemoryPlan, RopeScaling, available_memory};

use crate::args::InfoArgs;
use crate::commands::{init_threads, model_dir, rope_scaling};
use crate::limits::check_ctx;

pub fn run(args: InfoArgs) -> Result<()> {
    init_threads(args.threads)?;
    let choice = dispatch_choice();
    let features = cpu_features();
    let table = choice.table();
    println!("simd:      {table} ({})", choice.reason);
    println!(
        "cpu:       {}, avx512-vnni {}, avx512-bf16 {}, amx {}",
        features.vendor.name(),
        yes(features.avx512_vnni),
        yes(features.avx512_bf16),
        if AMX_EMULATED {
            "emulated"
        } else {
            yes(features.amx)
        }
    );
    println!("kernels:");
    for (operation, kernel) in table.entries() {
        println!("  {operation:<20} {kernel}");
    }
    println!("threads:   {}", rayon::current_num_threads());
    let Some(source) = &args.model else {
        return Ok(());
    };
    let dir = &model_dir(source)?;
    let mut model = gattn_model::Qwen3Model::load_as(dir, args.weights.format())?;
    if let Some(scaling) = rope_scaling(args.rope_scaling.as_deref(), &model.config)? {
        model.set_rope_scaling(scaling);
    }
    let config = &model.config;
    let ctx = check_ctx(args.ctx, config.max_position_embeddings)?;
    println!("model:     {}", dir.display());
    println!("gate:      {}", config.gate.name());
    println!(
        "shape:     {} layers, hidden {}, intermediate {}, {} heads / {} kv heads, head_dim {}, vocab {}",
        config.num_hidden_layers,
        config.hidden_size,
        config.intermediate_size,
        config.num_attention_heads,
        config.num_key_value_heads,
        config.head_dim,
        config.vocab_size
    );
    println!(
        "attention: qk-norm {}, bias {}, tied embeddings {}",
        yes(config.use_qk_norm),
        yes(config.attention_bias),
        yes(config.tie_word_embeddings)
    );
    let rope = match &config.rope_scaling {
        RopeScaling::None => "none".to_string(),
        RopeScaling::Linear { factor } => format!("linear x{factor}"),
        RopeScaling::Yarn(y) => format!(
            "yarn x{} over {}",
            y.factor, y.original_max_position_embeddings
        ),
    };
    println!(
        "rope:      theta {}, scaling {rope}, max positions {}",
        config.rope_theta, config.max_position_embeddings
    );
    println!("params:    {:.2} M", config.parameter_count() as f64 / 1e6);
    println!(
        "weights:   {} as {} ({} backend)",
        gib(model.weight_bytes() as u64),
        model.format.name(),
        model.backend.name()
    );
    let kv = args.kv.resolve(model.backend);
    println!(
        "kv cache:  {} at --ctx {ctx} ({}; grows in chunks of {} tokens)",
        gib(KvCache::bytes_needed(config, ctx, kv)),
        kv.name(),
        gattn_model::kv_cache::GROWTH_CHUNK_TOKENS
    );
    let plan = MemoryPlan::new(config, model.format, kv, ctx, model.prefill_chunk);
    let available = available_memory().map_or("unknown".to_string(), gib);
    println!(
        "memory:    {} needed, {available} available",
        gib(plan.total())
    );
    Ok(())
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn gib(bytes: u64) -> String {
    format!(
        "{:.3} GiB ({bytes} bytes)",
        bytes as f64 / (1u64 << 30) as f64
    )
}
