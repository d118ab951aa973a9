//! The generation loop: prefill the prompt, then decode one token at a time until a stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::kv_cache::KvCache;
use crate::model::{LogitsFor, PrefillEnd, Qwen3Model};
use crate::sampling::Sampler;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced one of the end-of-sequence tokens (not passed to `on_token`).
    Eos,
    MaxTokens,
    /// The KV cache reached `--ctx`.
    ContextFull,
    /// `on_token` asked to stop (e.g. Ctrl-C).
    Interrupted,
}

#[derive(Debug, Clone)]
pub struct GenerationStats {
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub prefill_time: Duration,
    pub decode_time: Duration,
    pub stop: StopReason,
}

impl GenerationStats {
    pub fn prefill_tokens_per_second(&self) -> f64 {
        self.prompt_tokens as f64 / self.prefill_time.as_secs_f64().max(1e-9)
    }

    /// Decode speed over the tokens after the first (the first comes from the prefill's logits).
    pub fn decode_tokens_per_second(&self) -> f64 {
        self.generated_tokens.saturating_sub(1) as f64 / self.decode_time.as_secs_f64().max(1e-9)
    }
}

pub struct GenerateOptions<'a> {
    pub max_tokens: usize,
    pub eos_token_ids: &'a [u32],
    /// Set (e.g. by a Ctrl-C handler) to stop cleanly after the current prefill chunk or token.
    pub interrupt: Option<&'a AtomicBool>,
    /// Called after each prefill chunk with (prompt tokens done, prompt tokens): a progress bar.
    pub on_prefill_chunk: Option<&'a mut dyn FnMut(usize, usize)>,
}

impl<'a> GenerateOptions<'a> {
    /// Up to `max_tokens` tokens, stopping at any of `eos_token_ids`; no interrupt, no progress.
    pub fn new(max_tokens: usize, eos_token_ids: &'a [u32]) -> Self {
        GenerateOptions {
            max_tokens,
            eos_token_ids,
            interrupt: None,
            on_prefill_chunk: None,
        }
    }
}

/// Feeds `prompt` into `cache` (in chunks of the model's `prefill_chunk`) and samples up to
/// `max_tokens` tokens. `on_token` sees each generated token as it is sampled and returns `false`
/// to stop. The logits buffer, the sampler's buffers and the cache's scratch are reused: after the
/// first step, decoding allocates nothing (see [`crate::scratch`] for the one exception).
pub fn generate(
    model: &Qwen3Model,
    cache: &mut KvCache,
    prompt: &[u32],
    sampler: &mut Sampler,
    mut options: GenerateOptions<'_>,
    mut on_token: impl FnMut(u32) -> Result<bool>,
) -> Result<GenerationStats> {
    let interrupted = |options: &GenerateOptions<'_>| {
        options
            .interrupt
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    };
    let prefill_start = Instant::now();
    let mut logits = Vec::new();
    let prefill = model.prefill(prompt, cache, LogitsFor::Last, &mut logits, |done| {
        if let Some(progress) = options.on_prefill_chunk.as_mut() {
            progress(done, prompt.len());
        }
        !interrupted(&options)
    })?;
    let prefill_time = prefill_start.elapsed();
    if let PrefillEnd::Stopped { tokens_done } = prefill {
        return Ok(GenerationStats {
            prompt_tokens: tokens_done,
            generated_tokens: 0,
            prefill_time,
            decode_time: Duration::ZERO,
            stop: StopReason::Interrupted,
        });
    }

    let decode_start = Instant::now();
    let mut generated = 0;
    let stop = loop {
        if generated == options.max_tokens {
            break StopReason::MaxTokens;
        }
        let token = sampler.sample(&logits);
        if options.eos_token_ids.contains(&token) {
            break StopReason::Eos;
        }
        generated += 1;
        if !on_token(token)? || interrupted(&options) {
            break StopReason::Interrupted;
        }
        if generated == options.max_tokens {
            break StopReason::MaxTokens;
        }
        if cache.len() == cache.ctx() {
            break StopReason::ContextFull;
        }
        model.forward_into(&[token], cache, LogitsFor::Last, &mut logits)?;
    };
    Ok(GenerationStats {
        prompt_tokens: prompt.len(),
        generated_tokens: generated,
        prefill_time,
        decode_time: decode_start.elapsed(),
        stop,
    })
}
