//! `GET /v1/models` and `GET /health` (the server listens only once the model is loaded).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::state::AppState;

pub async fn models(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{
            "id": state.model_name,
            "object": "model",
            "created": AppState::created(),
            "owned_by": "gattn-cpu",
            "meta": {
                "n_ctx": state.shared.ctx,
                "n_vocab": state.shared.model.config.vocab_size,
            },
        }],
    }))
}

pub async fn health() -> Json<Value> {
    Json(json!({"status": "ok"}))
}
