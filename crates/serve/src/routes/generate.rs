//! `PUT /generate` (and `POST`): the API of RULER's `pred/serve_vllm.py`, which its
//! `call_api.py --server_type vllm` drives. The body is `prompt` plus vLLM sampling fields
//! (`max_tokens`, `temperature`, `top_k`, `top_p`, `stop`, `seed`; others are ignored); the
//! answer is `{"text": ["<completion without the prompt>"]}`.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{SamplingFields, parse_body};
use crate::error::ApiError;
use crate::job::GenerationRequest;
use crate::state::{AppState, collect};

/// vLLM's `SamplingParams` default.
const DEFAULT_MAX_TOKENS: usize = 16;

#[derive(Deserialize)]
struct GenerateRequest {
    prompt: Option<String>,
    #[serde(flatten)]
    sampling: SamplingFields,
    #[serde(default)]
    stream: bool,
}

pub async fn handle(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: GenerateRequest = parse_body(body)?;
    let Some(prompt) = request.prompt else {
        return Err(ApiError::bad_request("the request has no `prompt` string"));
    };
    if request.stream {
        return Err(ApiError::bad_request(
            "/generate does not stream here: use /v1/completions with stream",
        ));
    }
    let ids = state.encode(&prompt)?;
    let max_tokens = state.fit(&ids, request.sampling.max_tokens(DEFAULT_MAX_TOKENS)?)?;
    let generation = GenerationRequest {
        prompt: ids,
        max_tokens,
        sampling: request.sampling.sampling()?,
        stop: request.sampling.stops()?,
        extra_eos: Vec::new(),
        logprobs: None,
        prompt_logprobs: false,
        stream: false,
    };
    let done = collect(state.submit("/generate", generation)?).await?;
    Ok(Json(json!({ "text": [done.text] })))
}
