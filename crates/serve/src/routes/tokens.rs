//! llama-server's `POST /tokenize` (`{"content"}` -> `{"tokens"}`) and `POST /detokenize`.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{parse_body, token_ids};
use crate::error::ApiError;
use crate::logprobs::token_text;
use crate::state::AppState;

#[derive(Deserialize)]
struct TokenizeRequest {
    content: String,
    /// Also give each token's text: `[{"id", "piece"}]`.
    #[serde(default)]
    with_pieces: bool,
}

#[derive(Deserialize)]
struct DetokenizeRequest {
    tokens: Vec<Value>,
}

pub async fn tokenize(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: TokenizeRequest = parse_body(body)?;
    let ids = state.encode(&request.content)?;
    if !request.with_pieces {
        return Ok(Json(json!({ "tokens": ids })));
    }
    let pieces: Vec<Value> = ids
        .iter()
        .map(|&id| json!({"id": id, "piece": token_text(state.tokenizer(), id)}))
        .collect();
    Ok(Json(json!({ "tokens": pieces })))
}

pub async fn detokenize(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: DetokenizeRequest = parse_body(body)?;
    let ids = token_ids(&request.tokens)?;
    Ok(Json(json!({ "content": state.decode(&ids)? })))
}
