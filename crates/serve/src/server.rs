//! Starting and stopping: the worker threads, the async runtime, the listener, the signals.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gattn_eval::run::ChatTemplate;
use gattn_model::{Qwen3Model, Tokenizer};
use tokio::net::TcpListener;

use crate::error::ServeError;
use crate::routes;
use crate::state::{AppState, Shared};
use crate::workers;

/// The loaded model and what turns text into its tokens.
pub struct ServedModel {
    pub model: Qwen3Model,
    pub tokenizer: Tokenizer,
    /// `None`: the chat endpoint answers 400.
    pub chat: Option<ChatTemplate>,
    /// The id clients see in `/v1/models` and responses.
    pub name: String,
}

pub struct ServeOptions {
    pub host: String,
    /// 0: any free port (the address is printed).
    pub port: u16,
    /// KV-cache tokens per worker, prompt included.
    pub ctx: usize,
    /// Generations run at once, each with its own KV cache.
    pub parallel: usize,
    pub api_key: Option<String>,
    /// Larger request bodies are refused with 413.
    pub max_body_bytes: usize,
}

/// Serves until SIGINT or SIGTERM: then no new connections are taken and the requests in flight
/// finish (a second signal cancels them); returns once every worker has stopped.
pub fn serve(served: ServedModel, options: ServeOptions) -> Result<(), ServeError> {
    if options.parallel == 0 {
        return Err(ServeError::NoWorkers);
    }
    let shared = Arc::new(Shared {
        model: served.model,
        tokenizer: served.tokenizer,
        ctx: options.ctx,
        closing: AtomicBool::new(false),
        cancel_all: AtomicBool::new(false),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("serve-http")
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let address = format!("{}:{}", options.host, options.port);
    let listener = runtime
        .block_on(TcpListener::bind(&address))
        .map_err(|source| ServeError::Bind {
            address: address.clone(),
            source,
        })?;
    let local = listener.local_addr().map_err(ServeError::Serve)?;

    let (jobs, queue) = std::sync::mpsc::channel();
    let workers =
        workers::start(options.parallel, shared.clone(), queue).map_err(ServeError::Runtime)?;
    let state = Arc::new(AppState::new(
        shared.clone(),
        jobs,
        served.chat,
        served.name.clone(),
        options.api_key,
    ));
    let app = routes::router(state, options.max_body_bytes);
    eprintln!(
        "serving {} on http://{local} (ctx {}, {} at once); stop with Ctrl-C",
        served.name, options.ctx, options.parallel
    );
    let result = runtime.block_on(async {
        axum::serve(listener, app)
            .with_graceful_shutdown(stop_signal(shared.clone()))
            .await
    });
    // The router (and with it the queue's sender) is gone: idle workers exit.
    shared.closing.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().ok();
    }
    runtime.shutdown_background();
    eprintln!("server stopped");
    result.map_err(ServeError::Serve)
}

/// Resolves on the first SIGINT or SIGTERM; a second one cancels the running generations.
async fn stop_signal(shared: Arc<Shared>) {
    signal().await;
    eprintln!(
        "stopping: no new connections; requests in flight finish (signal again to cancel them)"
    );
    tokio::spawn(async move {
        signal().await;
        eprintln!("cancelling the requests in flight");
        shared.cancel_all.store(true, Ordering::Relaxed);
    });
}

async fn signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut terminate) = signal(SignalKind::terminate()) else {
        tokio::signal::ctrl_c().await.ok();
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
