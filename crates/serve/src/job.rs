//! What a route hands the workers ([`Job`]) and what comes back ([`Event`]).

use std::time::Instant;

use gattn_model::SamplingParams;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// One generation, checked against the context and vocabulary by the route.
#[derive(Debug, Clone)]
pub struct GenerationRequest {
    pub prompt: Vec<u32>,
    /// Already clamped so that the KV cache has room.
    pub max_tokens: usize,
    pub sampling: SamplingParams,
    /// Generation ends before the first of these strings (not included in the text).
    pub stop: Vec<String>,
    /// Tokens that end generation besides the model's end-of-sequence tokens (chat turn end).
    pub extra_eos: Vec<u32>,
    /// How many most-likely alternatives to report with each token's log-probability; `None`
    /// for no log-probabilities.
    pub logprobs: Option<usize>,
    /// Also report the log-probability of every prompt token (`echo` with `logprobs`).
    pub prompt_logprobs: bool,
    /// Send text as it is generated; otherwise one [`Event::Text`] at the end.
    pub stream: bool,
}

/// A token with its log-probability under the model and the most likely alternatives.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    pub id: u32,
    pub text: String,
    /// `None` for the first prompt token, which nothing predicts.
    pub logprob: Option<f32>,
    /// (text, log-probability), most likely first.
    pub top: Vec<(String, f32)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// End of sequence or a stop string.
    Stop,
    /// `max_tokens` or the context reached.
    Length,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
}

#[derive(Debug)]
pub enum Event {
    /// One entry per prompt token (`prompt_logprobs`), sent before any text.
    PromptLogprobs(Vec<TokenLogprob>),
    /// Generated text that no stop string can still claim, and the tokens generated since the
    /// last event (with log-probabilities when asked).
    Text {
        text: String,
        tokens: Vec<TokenLogprob>,
    },
    Done {
        finish: FinishReason,
        usage: Usage,
    },
    Failed(String),
}

/// A queued generation: the request, where its events go, and what the log line names.
pub struct Job {
    pub id: u64,
    pub route: &'static str,
    pub request: GenerationRequest,
    pub events: UnboundedSender<Event>,
    pub queued_at: Instant,
}

impl Job {
    pub fn new(
        id: u64,
        route: &'static str,
        request: GenerationRequest,
    ) -> (Job, UnboundedReceiver<Event>) {
        let (events, receiver) = unbounded_channel();
        let job = Job {
            id,
            route,
            request,
            events,
            queued_at: Instant::now(),
        };
        (job, receiver)
    }
}
