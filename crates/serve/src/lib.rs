//! `gattn-cpu serve`: an HTTP server over one loaded model, speaking the subset of OpenAI's API
//! that clients use (completions with logprobs and echo, chat, streaming), llama-server's
//! `/tokenize` and `/detokenize`, and the `PUT /generate` of RULER's `serve_vllm.py`.
//!
//! Requests are turned into [`job::Job`]s and queued in arrival order; `parallel` worker threads
//! (each with its own KV cache) run them, so the blocking model never runs on the async runtime.

mod api;
mod error;
mod generation;
mod guards;
mod job;
mod logprobs;
mod routes;
mod server;
mod state;
mod stop;
mod stream;
mod workers;

pub use error::ServeError;
pub use server::{ServeOptions, ServedModel, serve};
