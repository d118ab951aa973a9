//! What is refused before a route runs: a missing API key, a body declared over the size limit.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::{AUTHORIZATION, CONTENT_LENGTH};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

/// `--api-key`: every route but `/health` needs `Authorization: Bearer KEY`.
pub async fn require_key(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
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

/// A body whose `Content-Length` is over `limit` is refused from the header, before it is read
/// (a body sent without a length is cut at the limit by `DefaultBodyLimit`, also a 413).
pub async fn refuse_oversized(limit: usize, request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    match declared {
        Some(bytes) if bytes > limit as u64 => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is {bytes} bytes; the limit is {limit}"),
        )
        .into_response(),
        _ => next.run(request).await,
    }
}
