//! Server-sent events: one `data: {json}` chunk per generation event, then `data: [DONE]`.
//! Dropping the response (the client hung up) drops the event receiver, which the worker sees.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::job::Event;
use crate::state::{generation_failed, stopping};

struct StreamState<F> {
    events: Option<UnboundedReceiver<Event>>,
    pending: VecDeque<String>,
    to_chunks: F,
}

/// Streams `prelude`, then `to_chunks(event)` for each event; a failure becomes an error chunk.
pub fn sse<F>(
    events: UnboundedReceiver<Event>,
    prelude: Vec<Value>,
    to_chunks: F,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>>
where
    F: FnMut(Event) -> Vec<Value> + Send + 'static,
{
    let state = StreamState {
        events: Some(events),
        pending: prelude.iter().map(Value::to_string).collect(),
        to_chunks,
    };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(data) = state.pending.pop_front() {
                return Some((Ok(SseEvent::default().data(data)), state));
            }
            let events = state.events.as_mut()?;
            let (chunks, last) = match events.recv().await {
                Some(Event::Failed(message)) => (vec![generation_failed(message).body()], true),
                Some(event) => {
                    let last = matches!(event, Event::Done { .. });
                    ((state.to_chunks)(event), last)
                }
                None => (vec![stopping().body()], true),
            };
            state.pending.extend(chunks.iter().map(Value::to_string));
            if last {
                state.pending.push_back("[DONE]".into());
                state.events = None;
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}
