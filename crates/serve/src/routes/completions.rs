//! `POST /v1/completions`: text (or token ids) in, text out, with OpenAI's legacy `logprobs`
//! (`tokens`, `token_logprobs`, `top_logprobs`, `text_offset`) and `echo` of the prompt, which
//! lm-evaluation-harness's loglikelihood tasks read with `max_tokens` 0 or 1.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::api::{PromptInput, SamplingFields, parse_body, prompts, top_logprobs};
use crate::error::ApiError;
use crate::job::{Event, GenerationRequest, TokenLogprob};
use crate::state::{AppState, Completion, collect};
use crate::stream::sse;

const ROUTE: &str = "/v1/completions";
/// OpenAI's default `max_tokens` for completions.
const DEFAULT_MAX_TOKENS: usize = 16;

#[derive(Deserialize)]
struct CompletionRequest {
    #[serde(default)]
    prompt: Value,
    #[serde(flatten)]
    sampling: SamplingFields,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    echo: bool,
    logprobs: Option<i64>,
    n: Option<i64>,
}

/// One prompt, tokenized and checked, with its text for `echo`.
struct Prepared {
    prompt_text: String,
    request: GenerationRequest,
}

pub async fn handle(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: CompletionRequest = parse_body(body)?;
    if request.n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request("only n = 1 is supported"));
    }
    let prepared = prompts(&request.prompt)?
        .into_iter()
        .map(|prompt| prepare(&state, &request, prompt))
        .collect::<Result<Vec<_>, _>>()?;
    let id = format!("cmpl-{}", AppState::created());
    if request.stream {
        let [one] = <[Prepared; 1]>::try_from(prepared)
            .map_err(|_| ApiError::bad_request("stream takes a single prompt"))?;
        return stream(&state, id, one, request.echo);
    }
    // Queue every prompt before waiting, so that --parallel workers take them together.
    let mut pending = Vec::new();
    for one in &prepared {
        pending.push(state.submit(ROUTE, one.request.clone())?);
    }
    let (mut choices, mut prompt_tokens, mut completion_tokens) = (Vec::new(), 0, 0);
    for (index, (one, events)) in prepared.iter().zip(pending).enumerate() {
        let done = collect(events).await?;
        prompt_tokens += done.usage.prompt_tokens;
        completion_tokens += done.usage.completion_tokens;
        choices.push(choice(index, one, &done, request.echo));
    }
    Ok(axum::Json(json!({
        "id": id,
        "object": "text_completion",
        "created": AppState::created(),
        "model": state.model_name,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }))
    .into_response())
}

fn prepare(
    state: &AppState,
    request: &CompletionRequest,
    prompt: PromptInput,
) -> Result<Prepared, ApiError> {
    let (prompt_text, ids) = match prompt {
        PromptInput::Text(text) => {
            let ids = state.encode(&text)?;
            (text, ids)
        }
        PromptInput::Ids(ids) => (state.decode(&ids)?, ids),
    };
    let max_tokens = state.fit(&ids, request.sampling.max_tokens(DEFAULT_MAX_TOKENS)?)?;
    let logprobs = top_logprobs(request.logprobs, "logprobs")?;
    Ok(Prepared {
        prompt_text,
        request: GenerationRequest {
            prompt: ids,
            max_tokens,
            sampling: request.sampling.sampling()?,
            stop: request.sampling.stops()?,
            extra_eos: Vec::new(),
            logprobs,
            prompt_logprobs: request.echo && logprobs.is_some(),
            stream: request.stream,
        },
    })
}

fn choice(index: usize, prepared: &Prepared, done: &Completion, echo: bool) -> Value {
    let text = if echo {
        prepared.prompt_text.clone() + &done.text
    } else {
        done.text.clone()
    };
    let logprobs = prepared.request.logprobs.map(|_| {
        let tokens: Vec<&TokenLogprob> = done.prompt_logprobs.iter().chain(&done.tokens).collect();
        let start = if echo {
            0
        } else {
            prepared.prompt_text.chars().count()
        };
        legacy_logprobs(&tokens, start)
    });
    json!({
        "index": index,
        "text": text,
        "logprobs": logprobs,
        "finish_reason": done.finish.as_str(),
    })
}

/// OpenAI's completions `logprobs` object; `text_offset` counts characters from `start`.
fn legacy_logprobs(tokens: &[&TokenLogprob], start: usize) -> Value {
    let mut offset = start;
    let text_offset: Vec<usize> = tokens
        .iter()
        .map(|t| {
            let at = offset;
            offset += t.text.chars().count();
            at
        })
        .collect();
    let top = |t: &TokenLogprob| match t.logprob {
        None => Value::Null,
        Some(_) => {
            let mut alternatives = Map::new();
            for (text, logprob) in &t.top {
                // Two ids can read the same; the first (most likely) keeps the key.
                alternatives.entry(text.clone()).or_insert(json!(logprob));
            }
            Value::Object(alternatives)
        }
    };
    json!({
        "tokens": tokens.iter().map(|t| &t.text).collect::<Vec<_>>(),
        "token_logprobs": tokens.iter().map(|t| t.logprob).collect::<Vec<_>>(),
        "top_logprobs": tokens.iter().map(|t| top(t)).collect::<Vec<_>>(),
        "text_offset": text_offset,
    })
}

fn stream(
    state: &AppState,
    id: String,
    prepared: Prepared,
    echo: bool,
) -> Result<Response, ApiError> {
    let events = state.submit(ROUTE, prepared.request.clone())?;
    let (model, created) = (state.model_name.clone(), AppState::created());
    let with_logprobs = prepared.request.logprobs.is_some();
    let chunk = move |text: String, logprobs: Value, finish: Value| {
        json!({
            "id": id,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}],
        })
    };
    // With echo the prompt comes first: with its log-probabilities when they were asked for
    // (the worker sends them), else at once.
    let prelude = if echo && !with_logprobs {
        vec![chunk(
            prepared.prompt_text.clone(),
            Value::Null,
            Value::Null,
        )]
    } else {
        Vec::new()
    };
    let mut offset = 0;
    let mut logprobs_of = move |tokens: &[TokenLogprob]| {
        if !with_logprobs {
            return Value::Null;
        }
        let refs: Vec<&TokenLogprob> = tokens.iter().collect();
        let value = legacy_logprobs(&refs, offset);
        offset += tokens.iter().map(|t| t.text.chars().count()).sum::<usize>();
        value
    };
    let prompt_text = prepared.prompt_text;
    let to_chunks = move |event: Event| match event {
        Event::PromptLogprobs(rows) => {
            vec![chunk(prompt_text.clone(), logprobs_of(&rows), Value::Null)]
        }
        Event::Text { text, tokens } => vec![chunk(text, logprobs_of(&tokens), Value::Null)],
        Event::Done { finish, .. } => {
            vec![chunk(String::new(), Value::Null, json!(finish.as_str()))]
        }
        Event::Failed(_) => Vec::new(),
    };
    Ok(sse(events, prelude, to_chunks).into_response())
}
