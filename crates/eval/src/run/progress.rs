//! Progress over all pending samples, on stderr. On a terminal an indicatif bar; otherwise
//! (batch jobs, CI, pipes) one line per sample, which reads well in a job log.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::run::plan::WorkItem;
use crate::run::report::length_label;

/// The bar advances in target tokens, not samples: a 128K sample costs far more than a 4K
/// one, so counting tokens keeps the ETA honest over a sweep of mixed lengths.
pub struct Progress {
    bar: Option<ProgressBar>,
    lines: bool,
    total_samples: usize,
    done_samples: usize,
    total_tokens: u64,
    done_tokens: u64,
    start: Instant,
}

impl Progress {
    pub fn new(pending: &[WorkItem], visible: bool) -> Progress {
        let total_tokens: u64 = pending.iter().map(|i| i.length as u64).sum();
        let terminal = std::io::stderr().is_terminal();
        let bar = (visible && terminal).then(|| {
            let bar =
                ProgressBar::with_draw_target(Some(total_tokens), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {wide_bar} {msg} | eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar
        });
        let progress = Progress {
            bar,
            lines: visible && !terminal,
            total_samples: pending.len(),
            done_samples: 0,
            total_tokens,
            done_tokens: 0,
            start: Instant::now(),
        };
        progress.show_next(pending.first());
        progress
    }

    fn show_next(&self, next: Option<&WorkItem>) {
        let Some(bar) = &self.bar else { return };
        let done = format!("{}/{} samples", self.done_samples, self.total_samples);
        match next {
            Some(item) => bar.set_message(format!(
                "{done}, now {} @ {}",
                item.task,
                length_label(item.length)
            )),
            None => bar.set_message(done),
        }
    }

    fn eta(&self) -> Duration {
        if self.done_tokens == 0 {
            return Duration::ZERO;
        }
        let per_token = self.start.elapsed().as_secs_f64() / self.done_tokens as f64;
        Duration::from_secs_f64(per_token * (self.total_tokens - self.done_tokens) as f64)
    }

    /// One sample finished; `next` is the one about to start.
    pub fn finished(
        &mut self,
        item: &WorkItem,
        score: f64,
        took: Duration,
        next: Option<&WorkItem>,
    ) {
        self.done_samples += 1;
        self.done_tokens += item.length as u64;
        if let Some(bar) = &self.bar {
            bar.set_position(self.done_tokens);
            self.show_next(next);
        } else if self.lines {
            eprintln!(
                "ruler: [{}/{}] {} @ {} #{}: score {score:.0} in {:.1} s, eta {:.0} s",
                self.done_samples,
                self.total_samples,
                item.task,
                length_label(item.length),
                item.index,
                took.as_secs_f64(),
                self.eta().as_secs_f64()
            );
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
