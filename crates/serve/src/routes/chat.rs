//! `POST /v1/chat/completions`: `messages` rendered with the checkpoint's chat template (the
//! minijinja path of `ruler --chat`), generation up to the end of the assistant turn.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use gattn_eval::run::ChatMessage;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{SamplingFields, parse_body, top_logprobs};
use crate::error::ApiError;
use crate::job::{Event, GenerationRequest, TokenLogprob};
use crate::state::{AppState, collect};
use crate::stream::sse;

const ROUTE: &str = "/v1/chat/completions";

#[derive(Deserialize)]
struct ChatRequest {
    #[serde(default)]
    messages: Value,
    #[serde(flatten)]
    sampling: SamplingFields,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    logprobs: bool,
    top_logprobs: Option<i64>,
    n: Option<i64>,
}

pub async fn handle(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: ChatRequest = parse_body(body)?;
    if request.n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request("only n = 1 is supported"));
    }
    let generation = prepare(&state, &request)?;
    let (id, created) = (
        format!("chatcmpl-{}", AppState::created()),
        AppState::created(),
    );
    if request.stream {
        let events = state.submit(ROUTE, generation)?;
        let model = state.model_name.clone();
        let with_logprobs = request.logprobs;
        let chunk = move |delta: Value, logprobs: Value, finish: Value| {
            json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
            })
        };
        let prelude = vec![chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
            Value::Null,
        )];
        let to_chunks = move |event: Event| match event {
            Event::Text { text, tokens } => {
                let logprobs = if with_logprobs {
                    chat_logprobs(&tokens)
                } else {
                    Value::Null
                };
                vec![chunk(json!({ "content": text }), logprobs, Value::Null)]
            }
            Event::Done { finish, .. } => {
                vec![chunk(json!({}), Value::Null, json!(finish.as_str()))]
            }
            Event::PromptLogprobs(_) | Event::Failed(_) => Vec::new(),
        };
        return Ok(sse(events, prelude, to_chunks).into_response());
    }
    let done = collect(state.submit(ROUTE, generation)?).await?;
    let logprobs = if request.logprobs {
        chat_logprobs(&done.tokens)
    } else {
        Value::Null
    };
    Ok(axum::Json(json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": state.model_name,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": done.text},
            "logprobs": logprobs,
            "finish_reason": done.finish.as_str(),
        }],
        "usage": {
            "prompt_tokens": done.usage.prompt_tokens,
            "completion_tokens": done.usage.completion_tokens,
            "total_tokens": done.usage.prompt_tokens + done.usage.completion_tokens,
        },
    }))
    .into_response())
}

fn prepare(state: &AppState, request: &ChatRequest) -> Result<GenerationRequest, ApiError> {
    let Some(template) = &state.chat else {
        return Err(ApiError::bad_request(
            "the checkpoint has no chat template (tokenizer_config.json `chat_template`): use /v1/completions",
        ));
    };
    let text = template
        .render(&messages(&request.messages)?)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let prompt = state.encode(&text)?;
    // Without max_tokens a reply may fill the context.
    let max_tokens = state.fit(&prompt, request.sampling.max_tokens(usize::MAX)?)?;
    let extra_eos = state.tokenizer().token_to_id(template.eos_token());
    let logprobs = match request.logprobs {
        true => Some(top_logprobs(request.top_logprobs, "top_logprobs")?.unwrap_or(0)),
        false => None,
    };
    Ok(GenerationRequest {
        prompt,
        max_tokens,
        sampling: request.sampling.sampling()?,
        stop: request.sampling.stops()?,
        extra_eos: extra_eos.into_iter().collect(),
        logprobs,
        prompt_logprobs: false,
        stream: request.stream,
    })
}

/// `messages`: `{"role", "content"}` objects; content is a string or a list of text parts.
fn messages(value: &Value) -> Result<Vec<ChatMessage>, ApiError> {
    let Some(items) = value.as_array().filter(|items| !items.is_empty()) else {
        return Err(ApiError::bad_request(
            "messages must be a non-empty list of {\"role\", \"content\"} objects",
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let fail = |what: &str| ApiError::bad_request(format!("messages[{index}]: {what}"));
            let role = item["role"]
                .as_str()
                .ok_or_else(|| fail("no `role` string"))?;
            let content = match &item["content"] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                Value::Array(parts) => parts
                    .iter()
                    .map(|part| {
                        part["text"]
                            .as_str()
                            .ok_or_else(|| fail("only text parts are supported"))
                    })
                    .collect::<Result<Vec<_>, _>>()?
                    .concat(),
                _ => return Err(fail("`content` must be a string or a list of text parts")),
            };
            Ok(ChatMessage {
                role: role.to_string(),
                content,
            })
        })
        .collect()
}

/// OpenAI's chat `logprobs`: `{"content": [{"token", "logprob", "bytes", "top_logprobs"}]}`.
fn chat_logprobs(tokens: &[TokenLogprob]) -> Value {
    let entry = |text: &str, logprob: f32| json!({"token": text, "logprob": logprob, "bytes": text.as_bytes()});
    let content: Vec<Value> = tokens
        .iter()
        .map(|t| {
            let mut value = entry(&t.text, t.logprob.unwrap_or(0.0));
            value["top_logprobs"] = t.top.iter().map(|(text, lp)| entry(text, *lp)).collect();
            value
        })
        .collect();
    json!({ "content": content })
}
