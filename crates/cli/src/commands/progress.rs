//! The prefill progress bar on stderr: tokens done, tokens/s and time left. Drawn only when
//! stderr is a terminal and the prompt spans more than one chunk (short prompts need none).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct PrefillProgress {
    bar: Option<ProgressBar>,
}

impl PrefillProgress {
    pub fn new(prompt_tokens: usize, prefill_chunk: usize) -> Self {
        if prompt_tokens <= prefill_chunk {
            return PrefillProgress { bar: None };
        }
        let bar =
            ProgressBar::with_draw_target(Some(prompt_tokens as u64), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "prefill {bar:40} {pos}/{len} tokens, {per_sec}, {eta} left",
            )
            .expect("a valid template"),
        );
        PrefillProgress { bar: Some(bar) }
    }

    pub fn update(&mut self, tokens_done: usize) {
        if let Some(bar) = &self.bar {
            bar.set_position(tokens_done as u64);
        }
    }

    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
