//! Memory planning: what a run needs (weights + KV cache + scratch) is computed from the config
//! before anything is allocated, and compared with what the machine can give.

use gattn_kernels::attention::KvDtype;
use gattn_kernels::matmul::int8::layout::BLOCK;

use crate::config::Qwen3Config;
use crate::error::{ModelError, Result};
use crate::kv_cache::KvCache;
use crate::weights::WeightFormat;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryPlan {
    /// Weights as held: f32 copies, or bf16 (mapped pages of the checkpoint count too: they must
    /// stay resident to run at speed).
    pub weight_bytes: u64,
    /// The KV cache when full (`ctx` tokens).
    pub kv_cache_bytes: u64,
    /// Activations and logits of one prefill chunk.
    pub scratch_bytes: u64,
}

impl MemoryPlan {
    pub fn new(
        config: &Qwen3Config,
        format: WeightFormat,
        kv: KvDtype,
        ctx: usize,
        chunk_tokens: usize,
    ) -> MemoryPlan {
        let params = config.parameter_count();
        let embedding = (config.vocab_size * config.hidden_size) as u64;
        // Saturating throughout: a plan for an absurd --ctx is "more than any machine", refused
        // by `check_fits`, not an overflow.
        let weight_bytes = match format {
            WeightFormat::F32 => params.saturating_mul(4),
            WeightFormat::Bf16 => params.saturating_mul(2),
            // 1 byte + a 4-byte f32 scale per block of weights; the embedding table stays bf16
            // beside its int8 lm_head (tied or not).
            WeightFormat::Int8 => params
                .saturating_add(params.saturating_mul(4) / BLOCK as u64)
                .saturating_add(embedding.saturating_mul(2)),
        };
        let chunk = chunk_tokens.min(ctx).max(1) as u64;
        let widest_row = [
            config.hidden_size,
            config.intermediate_size * 2,
            config.q_proj_rows(),
            config.vocab_size,
        ]
        .into_iter()
        .max()
        .unwrap_or(0) as u64;
        MemoryPlan {
            weight_bytes,
            kv_cache_bytes: KvCache::bytes_needed(config, ctx, kv),
            // ~8 live activation buffers of the widest row per chunk token, in f32.
            scratch_bytes: (8 * 4 * chunk).saturating_mul(widest_row),
        }
    }

    pub fn total(&self) -> u64 {
        self.weight_bytes
            .saturating_add(self.kv_cache_bytes)
            .saturating_add(self.scratch_bytes)
    }

    /// Refuses the plan, with the numbers, if it does not fit in `available` bytes.
    pub fn check_fits(&self, available: Option<u64>, ctx: usize) -> Result<()> {
        let Some(available) = available else {
            return Ok(());
        };
        if self.total() <= available {
            return Ok(());
        }
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        Err(ModelError::OutOfMemory(format!(
            "--ctx {ctx} needs {:.2} GiB (weights {:.2} + KV cache {:.2} + scratch {:.2}) but only {:.2} GiB is available; \
             lower --ctx{}",
            gib(self.total()),
            gib(self.weight_bytes),
            gib(self.kv_cache_bytes),
            gib(self.scratch_bytes),
            gib(available),
            if self.kv_cache_bytes > self.weight_bytes {
                " (the KV cache dominates)"
            } else {
                ""
            },
        )))
    }
}

/// A `NAME:   1234 kB` line of a /proc file, in bytes.
pub(crate) fn proc_field_bytes(file: &str, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|line| line.strip_prefix(name))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Bytes this process can still allocate: `MemAvailable` of /proc/meminfo, capped by a cgroup
/// (v2 or v1) memory limit; `None` where neither can be read (then no check is made).
pub fn available_memory() -> Option<u64> {
    let mut available = proc_field_bytes("/proc/meminfo", "MemAvailable:")?;
    for limit_file in [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ] {
        if let Some(limit) = std::fs::read_to_string(limit_file)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        {
            available = available.min(limit);
        }
    }
    Some(available)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GateMode;
    use crate::init::Preset;

    #[test]
    fn a_131072_context_of_the_1_7b_shape_is_planned_and_a_huge_one_refused() {
        let config = Preset::Qwen3_1_7b.config(GateMode::Elementwise);
        let plan = MemoryPlan::new(&config, WeightFormat::Bf16, KvDtype::F32, 131072, 512);
        // 28 layers x 8 kv heads x 128 dims x 2 (K, V) x 4 bytes x 131072 tokens = 28 GiB in f32.
        assert_eq!(plan.kv_cache_bytes, 28 * 8 * 128 * 2 * 4 * 131072);
        let bf16 = MemoryPlan::new(&config, WeightFormat::Bf16, KvDtype::Bf16, 131072, 512);
        assert_eq!(
            bf16.kv_cache_bytes,
            plan.kv_cache_bytes / 2,
            "bf16 KV fits 131072 tokens in 14 GiB"
        );
        bf16.check_fits(Some(24 << 30), 131072).unwrap();
        let err = plan
            .check_fits(Some(24 << 30), 131072)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--ctx 131072") && err.contains("KV cache"),
            "{err}"
        );
        assert!(plan.check_fits(None, 131072).is_ok());
        MemoryPlan::new(&config, WeightFormat::Bf16, KvDtype::F32, 4096, 512)
            .check_fits(Some(24 << 30), 4096)
            .unwrap();
    }
}
