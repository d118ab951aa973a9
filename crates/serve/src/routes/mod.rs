//! The HTTP routes: OpenAI's completions, chat and models, llama-server's tokenize and health,
//! and RULER's `/generate`.

mod chat;
mod completions;
mod generate;
mod info;
mod tokens;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware;
use axum::routing::{get, post, put};

use crate::error::ApiError;
use crate::guards;
use crate::state::AppState;

pub fn router(state: Arc<AppState>, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/v1/completions", post(completions::handle))
        .route("/completions", post(completions::handle))
        .route("/v1/chat/completions", post(chat::handle))
        .route("/chat/completions", post(chat::handle))
        .route("/v1/models", get(info::models))
        .route("/models", get(info::models))
        .route("/health", get(info::health))
        .route("/tokenize", post(tokens::tokenize))
        .route("/detokenize", post(tokens::detokenize))
        .route("/generate", put(generate::handle).post(generate::handle))
        .fallback(async || ApiError::new(StatusCode::NOT_FOUND, "no such endpoint"))
        .method_not_allowed_fallback(async || {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "this endpoint does not take that method",
            )
        })
        .layer(middleware::from_fn_with_state(
            state.clone(),
            guards::require_key,
        ))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::from_fn(move |request, next| {
            guards::refuse_oversized(max_body_bytes, request, next)
        }))
        .with_state(state)
}
