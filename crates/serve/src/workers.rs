//! The worker threads: each owns a KV cache and takes the oldest queued job when it is free.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::generation::{self, EventSink};
use crate::job::{Event, Job};
use crate::state::Shared;

/// Starts `count` workers on `jobs`. They stop once the queue is closed (its senders dropped)
/// and empty, or when `shared.closing` is set and no job is waiting.
pub fn start(
    count: usize,
    shared: Arc<Shared>,
    jobs: Receiver<Job>,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    let jobs = Arc::new(Mutex::new(jobs));
    (0..count)
        .map(|index| {
            let (shared, jobs) = (shared.clone(), jobs.clone());
            std::thread::Builder::new()
                .name(format!("serve-worker-{index}"))
                .spawn(move || work(&shared, &jobs))
        })
        .collect()
}

fn work(shared: &Shared, jobs: &Mutex<Receiver<Job>>) {
    let mut cache = shared.model.new_cache(shared.ctx);
    loop {
        // The lock is held only while waiting for the next job, so jobs start in arrival order.
        let next = match jobs.lock() {
            Ok(receiver) => receiver.recv_timeout(Duration::from_millis(100)),
            Err(_) => return,
        };
        match next {
            Ok(job) => run_job(shared, &mut cache, job),
            Err(RecvTimeoutError::Timeout) if shared.closing.load(Ordering::Relaxed) => return,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

fn run_job(shared: &Shared, cache: &mut gattn_model::KvCache, job: Job) {
    if job.events.is_closed() {
        eprintln!(
            "request {}: {}: client gone before it started",
            job.id, job.route
        );
        return;
    }
    let waited = job.queued_at.elapsed();
    let events = job.events.clone();
    let mut send = |event: Event| events.send(event).is_ok();
    let cancelled = || shared.cancel_all.load(Ordering::Relaxed) || job.events.is_closed();
    let mut sink = EventSink::new(job.request.stream, &mut send, &cancelled);
    let result = generation::run(
        &shared.model,
        &shared.tokenizer,
        cache,
        &job.request,
        &mut sink,
    );
    match result {
        Ok(outcome) => eprintln!(
            "request {}: {}: prompt {} tokens, {:.1} tok/s | generated {} tokens, {:.2} tok/s | {} | queued {:.2} s",
            job.id,
            job.route,
            outcome.prompt_tokens,
            outcome.prefill_tokens_per_second(),
            outcome.generated_tokens,
            outcome.decode_tokens_per_second(),
            match outcome.finish {
                Some(finish) => finish.as_str(),
                None => "cancelled",
            },
            waited.as_secs_f64(),
        ),
        Err(error) => {
            eprintln!("request {}: {}: failed: {error}", job.id, job.route);
            job.events.send(Event::Failed(error.to_string())).ok();
        }
    }
}
