//! What the routes share: the model, the job queue, and the checks every request goes through.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;

use axum::http::StatusCode;
use gattn_eval::run::ChatTemplate;
use gattn_model::{Qwen3Model, Tokenizer};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::error::ApiError;
use crate::job::{Event, FinishReason, GenerationRequest, Job, TokenLogprob, Usage};

/// What the workers share with the routes.
pub struct Shared {
    pub model: Qwen3Model,
    pub tokenizer: Tokenizer,
    /// Tokens each worker's KV cache holds, prompt included (`--ctx`).
    pub ctx: usize,
    /// Set when the server stops: idle workers exit.
    pub closing: AtomicBool,
    /// Set on a second Ctrl-C: running generations end at their next token.
    pub cancel_all: AtomicBool,
}

pub struct AppState {
    pub shared: std::sync::Arc<Shared>,
    pub jobs: Sender<Job>,
    pub chat: Option<ChatTemplate>,
    /// The name `/v1/models` lists and responses carry (the `-m` value).
    pub model_name: String,
    pub api_key: Option<String>,
    next_id: AtomicU64,
}

/// A finished generation, as the non-streaming routes answer it.
pub struct Completion {
    pub prompt_logprobs: Vec<TokenLogprob>,
    pub text: String,
    pub tokens: Vec<TokenLogprob>,
    pub finish: FinishReason,
    pub usage: Usage,
}

impl AppState {
    pub fn new(
        shared: std::sync::Arc<Shared>,
        jobs: Sender<Job>,
        chat: Option<ChatTemplate>,
        model_name: String,
        api_key: Option<String>,
    ) -> AppState {
        AppState {
            shared,
            jobs,
            chat,
            model_name,
            api_key,
            next_id: AtomicU64::new(1),
        }
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.shared.tokenizer
    }

    /// Text longer than the context could hold at any plausible bytes per token is refused
    /// before the tokenizer spends memory on all of it (as `run` refuses a prompt file).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, ApiError> {
        let ctx = self.shared.ctx;
        let limit = gattn_model::tokenizer::prompt_byte_limit(ctx);
        if text.len() as u64 > limit {
            return Err(ApiError::bad_request(format!(
                "the prompt is {} bytes, more than the {limit} read for a context of {ctx} tokens (--ctx)",
                text.len()
            ))
            .with_code("context_length_exceeded"));
        }
        self.tokenizer()
            .encode(text)
            .map_err(|e| ApiError::bad_request(format!("cannot tokenize the prompt: {e}")))
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String, ApiError> {
        self.check_ids(ids)?;
        self.tokenizer()
            .decode(ids)
            .map_err(|e| ApiError::bad_request(format!("cannot decode the tokens: {e}")))
    }

    /// Refuses token ids outside the model's vocabulary.
    pub fn check_ids(&self, ids: &[u32]) -> Result<(), ApiError> {
        let vocab = self.shared.model.config.vocab_size;
        match ids.iter().find(|&&id| id as usize >= vocab) {
            Some(id) => Err(ApiError::bad_request(format!(
                "token id {id} is out of the vocabulary (0..{vocab})"
            ))),
            None => Ok(()),
        }
    }

    /// Checks a prompt against the context and returns the most tokens that may be generated:
    /// `max_tokens` clamped so that the KV cache has room (`ctx - prompt + 1`: the last token
    /// is sampled but never fed back).
    pub fn fit(&self, prompt: &[u32], max_tokens: usize) -> Result<usize, ApiError> {
        let ctx = self.shared.ctx;
        if prompt.is_empty() {
            return Err(ApiError::bad_request("the prompt is empty"));
        }
        self.check_ids(prompt)?;
        if prompt.len() > ctx {
            return Err(ApiError::bad_request(format!(
                "the prompt has {} tokens but the context is {ctx} tokens (--ctx)",
                prompt.len()
            ))
            .with_code("context_length_exceeded"));
        }
        Ok(max_tokens.min(ctx + 1 - prompt.len()))
    }

    /// Queues a generation; its events arrive on the returned receiver.
    pub fn submit(
        &self,
        route: &'static str,
        request: GenerationRequest,
    ) -> Result<UnboundedReceiver<Event>, ApiError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (job, events) = Job::new(id, route, request);
        self.jobs.send(job).map_err(|_| stopping())?;
        Ok(events)
    }

    pub fn created() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// Waits for all of a queued generation.
pub async fn collect(mut events: UnboundedReceiver<Event>) -> Result<Completion, ApiError> {
    let mut prompt_logprobs = Vec::new();
    let (mut text, mut tokens) = (String::new(), Vec::new());
    while let Some(event) = events.recv().await {
        match event {
            Event::PromptLogprobs(rows) => prompt_logprobs = rows,
            Event::Text { text: t, tokens: k } => {
                text.push_str(&t);
                tokens.extend(k);
            }
            Event::Done { finish, usage } => {
                return Ok(Completion {
                    prompt_logprobs,
                    text,
                    tokens,
                    finish,
                    usage,
                });
            }
            Event::Failed(message) => return Err(generation_failed(message)),
        }
    }
    Err(stopping())
}

pub fn generation_failed(message: String) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("generation failed: {message}"),
    )
}

/// The workers are gone or ended the job unfinished: the server is shutting down.
pub fn stopping() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "the server is shutting down",
    )
}
