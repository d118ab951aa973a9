//! The request fields the routes share (OpenAI's names), parsed into checked values. Unknown
//! fields are ignored, as OpenAI-compatible servers do.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use gattn_model::SamplingParams;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;

/// Most alternatives `logprobs` / `top_logprobs` may ask for.
pub const MAX_TOP_LOGPROBS: usize = 20;

/// The body as JSON of type `T`; a body over the size limit is a 413, bad JSON a 400.
pub fn parse_body<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let body =
        body.map_err(|rejection| ApiError::new(rejection.status(), rejection.body_text()))?;
    serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "the request body is not valid JSON for this endpoint: {e}"
        ))
    })
}

/// Sampling and length fields of completions, chat and `/generate`.
#[derive(Debug, Default, Deserialize)]
pub struct SamplingFields {
    pub max_tokens: Option<i64>,
    /// OpenAI's newer name for `max_tokens` in chat.
    pub max_completion_tokens: Option<i64>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    /// An extension (llama-server, vLLM); 0 or negative keeps every token.
    pub top_k: Option<i64>,
    pub seed: Option<i64>,
    #[serde(default)]
    pub stop: Value,
}

impl SamplingFields {
    /// Temperature 1 and no truncation unless asked, as OpenAI; seed 0 unless given, so the
    /// same request gives the same text.
    pub fn sampling(&self) -> Result<SamplingParams, ApiError> {
        let params = SamplingParams {
            temperature: self.temperature.unwrap_or(1.0),
            top_k: self.top_k.map_or(0, |k| k.max(0) as usize),
            top_p: self.top_p.unwrap_or(1.0),
            seed: self.seed.unwrap_or(0) as u64,
        };
        params
            .check()
            .map_err(|(field, why)| ApiError::bad_request(format!("{field} {why}")))?;
        Ok(params)
    }

    /// `max_tokens` (or `max_completion_tokens`), `default` when absent.
    pub fn max_tokens(&self, default: usize) -> Result<usize, ApiError> {
        match self.max_tokens.or(self.max_completion_tokens) {
            None => Ok(default),
            Some(n) if n >= 0 => Ok(n as usize),
            Some(n) => Err(ApiError::bad_request(format!(
                "max_tokens must be >= 0, not {n}"
            ))),
        }
    }

    /// `stop`: absent, a string, or a list of strings.
    pub fn stops(&self) -> Result<Vec<String>, ApiError> {
        match &self.stop {
            Value::Null => Ok(Vec::new()),
            Value::String(s) => Ok(vec![s.clone()]),
            Value::Array(items) => items
                .iter()
                .map(|item| {
                    item.as_str().map(str::to_string).ok_or_else(|| {
                        ApiError::bad_request(format!("stop must hold strings, not {item}"))
                    })
                })
                .collect(),
            other => Err(ApiError::bad_request(format!(
                "stop must be a string or a list of strings, not {other}"
            ))),
        }
    }
}

/// `logprobs` / `top_logprobs`: how many alternatives, within [`MAX_TOP_LOGPROBS`].
pub fn top_logprobs(n: Option<i64>, field: &str) -> Result<Option<usize>, ApiError> {
    match n {
        None => Ok(None),
        Some(n) if (0..=MAX_TOP_LOGPROBS as i64).contains(&n) => Ok(Some(n as usize)),
        Some(n) => Err(ApiError::bad_request(format!(
            "{field} must be between 0 and {MAX_TOP_LOGPROBS}, not {n}"
        ))),
    }
}

/// One prompt of a completion request.
pub enum PromptInput {
    Text(String),
    Ids(Vec<u32>),
}

/// `prompt`: a string, a list of token ids, or a list of either (one choice each).
pub fn prompts(value: &Value) -> Result<Vec<PromptInput>, ApiError> {
    let shape_error = || {
        ApiError::bad_request(
            "prompt must be a string, a list of token ids, or a list of strings or of token-id lists",
        )
    };
    match value {
        Value::String(s) => Ok(vec![PromptInput::Text(s.clone())]),
        Value::Array(items) if items.is_empty() => {
            Err(ApiError::bad_request("the prompt is empty"))
        }
        Value::Array(items) if items.iter().all(Value::is_number) => {
            Ok(vec![PromptInput::Ids(token_ids(items)?)])
        }
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(PromptInput::Text(s.clone())),
                Value::Array(ids) => Ok(PromptInput::Ids(token_ids(ids)?)),
                _ => Err(shape_error()),
            })
            .collect(),
        Value::Null => Err(ApiError::bad_request("the request has no prompt")),
        _ => Err(shape_error()),
    }
}

/// Token ids as JSON numbers: non-negative integers that fit a u32.
pub fn token_ids(items: &[Value]) -> Result<Vec<u32>, ApiError> {
    items
        .iter()
        .map(|item| {
            item.as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "token ids must be non-negative integers, not {item}"
                    ))
                })
        })
        .collect()
}
