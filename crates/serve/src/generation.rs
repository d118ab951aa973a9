//! One request's generation on a worker: prefill (with every prompt row's log-probabilities for
//! `echo`), then decode until a stop, sending [`Event`]s as text becomes final.
//!
//! This is `gattn_model::generate`'s loop with what a server needs besides: the logits each token
//! was drawn from (log-probabilities), stop strings, and cancellation when the client is gone.

use std::time::{Duration, Instant};

use gattn_model::{
    KvCache, LogitsFor, ModelError, PrefillEnd, Qwen3Model, Sampler, TextStream, Tokenizer,
};

use crate::job::{Event, FinishReason, GenerationRequest, TokenLogprob, Usage};
use crate::logprobs::{token_logprob, unpredicted};
use crate::stop::StopMatcher;

/// What the log line reports.
pub struct Outcome {
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub prefill_time: Duration,
    pub decode_time: Duration,
    /// `None` when the client went away (or the server is stopping) before the end.
    pub finish: Option<FinishReason>,
}

impl Outcome {
    pub fn prefill_tokens_per_second(&self) -> f64 {
        self.prompt_tokens as f64 / self.prefill_time.as_secs_f64().max(1e-9)
    }

    /// Over the tokens after the first, as `gattn-cpu run` counts it.
    pub fn decode_tokens_per_second(&self) -> f64 {
        self.generated_tokens.saturating_sub(1) as f64 / self.decode_time.as_secs_f64().max(1e-9)
    }
}

/// Where events go: sent at once when streaming, else gathered into one text event at the end.
/// `send` returns false once the client is gone.
pub struct EventSink<'a> {
    pub stream: bool,
    pub send: &'a mut dyn FnMut(Event) -> bool,
    pub cancelled: &'a dyn Fn() -> bool,
    text: String,
    tokens: Vec<TokenLogprob>,
}

impl<'a> EventSink<'a> {
    pub fn new(
        stream: bool,
        send: &'a mut dyn FnMut(Event) -> bool,
        cancelled: &'a dyn Fn() -> bool,
    ) -> Self {
        EventSink {
            stream,
            send,
            cancelled,
            text: String::new(),
            tokens: Vec::new(),
        }
    }

    /// False if the client is gone (its events have nowhere to go) or the server is stopping.
    fn text(&mut self, text: String, token: Option<TokenLogprob>) -> bool {
        self.text.push_str(&text);
        self.tokens.extend(token);
        if self.stream && !(self.text.is_empty() && self.tokens.is_empty()) {
            let event = self.take_text();
            return (self.send)(event) && !(self.cancelled)();
        }
        !(self.cancelled)()
    }

    fn take_text(&mut self) -> Event {
        Event::Text {
            text: std::mem::take(&mut self.text),
            tokens: std::mem::take(&mut self.tokens),
        }
    }

    fn done(&mut self, finish: FinishReason, usage: Usage) {
        if !self.text.is_empty() || !self.tokens.is_empty() || !self.stream {
            let event = self.take_text();
            (self.send)(event);
        }
        (self.send)(Event::Done { finish, usage });
    }
}

pub fn run(
    model: &Qwen3Model,
    tokenizer: &Tokenizer,
    cache: &mut KvCache,
    request: &GenerationRequest,
    sink: &mut EventSink<'_>,
) -> Result<Outcome, ModelError> {
    cache.clear();
    let prompt = &request.prompt;
    let mut outcome = Outcome {
        prompt_tokens: prompt.len(),
        generated_tokens: 0,
        prefill_time: Duration::ZERO,
        decode_time: Duration::ZERO,
        finish: None,
    };
    let prefill_start = Instant::now();
    let mut logits = Vec::new();
    if request.prompt_logprobs {
        let rows = prefill_with_logprobs(model, tokenizer, cache, request, &mut logits)?;
        if !(sink.send)(Event::PromptLogprobs(rows)) {
            return Ok(outcome);
        }
    } else if request.max_tokens > 0 {
        let end = model.prefill(prompt, cache, LogitsFor::Last, &mut logits, |_| {
            !(sink.cancelled)()
        })?;
        if let PrefillEnd::Stopped { .. } = end {
            return Ok(outcome);
        }
    }
    outcome.prefill_time = prefill_start.elapsed();

    let decode_start = Instant::now();
    let mut sampler = Sampler::new(request.sampling);
    let mut text = TextStream::new(tokenizer);
    let mut stops = StopMatcher::new(&request.stop);
    let is_eos = |t: u32| model.config.eos_token_ids.contains(&t) || request.extra_eos.contains(&t);
    let mut reached_stop_string = false;
    let finish = loop {
        if outcome.generated_tokens == request.max_tokens {
            break FinishReason::Length;
        }
        let token = sampler.sample(&logits);
        if is_eos(token) {
            break FinishReason::Stop;
        }
        outcome.generated_tokens += 1;
        let logprob = request
            .logprobs
            .map(|top_n| token_logprob(&logits, token, top_n, tokenizer));
        let (piece, stopped) = stops.push(&text.push(token)?);
        if !sink.text(piece, logprob) {
            outcome.decode_time = decode_start.elapsed();
            return Ok(outcome);
        }
        if stopped {
            reached_stop_string = true;
            break FinishReason::Stop;
        }
        if outcome.generated_tokens == request.max_tokens || cache.len() == cache.ctx() {
            break FinishReason::Length;
        }
        model.forward_into(&[token], cache, LogitsFor::Last, &mut logits)?;
    };
    outcome.decode_time = decode_start.elapsed();
    if !reached_stop_string {
        // The last bytes of an incomplete UTF-8 sequence, and text held for a stop string that
        // never came.
        let (rest, _) = stops.push(&text.finish()?);
        let rest = rest + &stops.finish();
        sink.text(rest, None);
    }
    outcome.finish = Some(finish);
    let usage = Usage {
        prompt_tokens: prompt.len(),
        completion_tokens: outcome.generated_tokens,
    };
    sink.done(finish, usage);
    Ok(outcome)
}

/// Prefills chunk by chunk with every row's logits (memory stays one chunk's rows), turning row
/// `i` into the log-probability of prompt token `i + 1`; leaves the last row in `last` for the
/// first generated token.
fn prefill_with_logprobs(
    model: &Qwen3Model,
    tokenizer: &Tokenizer,
    cache: &mut KvCache,
    request: &GenerationRequest,
    last: &mut Vec<f32>,
) -> Result<Vec<TokenLogprob>, ModelError> {
    let prompt = &request.prompt;
    let vocab = model.config.vocab_size;
    let top_n = request.logprobs.unwrap_or(0);
    let mut entries = vec![unpredicted(prompt[0], tokenizer)];
    let mut rows = Vec::new();
    for (index, chunk) in prompt.chunks(model.prefill_chunk.max(1)).enumerate() {
        let start = index * model.prefill_chunk.max(1);
        model.forward_into(chunk, cache, LogitsFor::All, &mut rows)?;
        for (offset, row) in rows.chunks_exact(vocab).enumerate() {
            if let Some(&next) = prompt.get(start + offset + 1) {
                entries.push(token_logprob(row, next, top_n, tokenizer));
            }
        }
    }
    last.clear();
    last.extend_from_slice(&rows[rows.len() - vocab..]);
    Ok(entries)
}
