//! `--api-key`: every route but `/health` needs `Authorization: Bearer KEY`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

pub async fn require_key(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let Some(key) = &state.api_key else {
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    if given == Some(key.as_str()) || request.uri().path() == "/health" {
        return next.run(request).await;
    }
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "missing or wrong API key: send the header `Authorization: Bearer KEY` with --api-key's KEY",
    )
    .into_response()
}
