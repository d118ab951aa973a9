//! How a failed command is reported: its message and its exit code.
//!
//! The exit-code contract (README, "Exit codes"): 0 success; 1 a data or run error (a bad
//! checkpoint, tokenizer, prompt file, dataset, or a failed run); 2 a usage error (a flag or
//! its value); 130 interrupted by Ctrl-C. Clap exits with 2 for what it parses itself; a value
//! the commands check later is wrapped in a [`UsageError`], which `main` maps to 2.

use std::fmt;

use gattn_eval::EvalError;
use gattn_eval::run::RunError;

/// A flag or flag value that cannot be used; the message names the flag and the limit.
#[derive(Debug)]
pub struct UsageError(String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A usage error with this message (e.g. `--threads 0`).
pub fn usage(message: impl fmt::Display) -> anyhow::Error {
    UsageError(message.to_string()).into()
}

/// Marks the error of a check of command-line values as a usage error (its whole chain is kept
/// in the message).
pub trait OrUsage<T> {
    fn or_usage(self) -> anyhow::Result<T>;
}

impl<T, E: Into<anyhow::Error>> OrUsage<T> for Result<T, E> {
    fn or_usage(self) -> anyhow::Result<T> {
        self.map_err(|e| usage(message(&e.into())))
    }
}

/// The error and its causes joined by ": ", each said once: many library errors put their
/// source's text in their own message and also expose it as the source.
pub fn message(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// The process exit code of a failed command.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    let is_usage = error.chain().any(|cause| {
        cause.is::<UsageError>()
            || cause.downcast_ref::<RunError>().is_some_and(is_ruler_usage)
            || cause.downcast_ref::<EvalError>().is_some_and(is_eval_usage)
    });
    if is_usage { 2 } else { 1 }
}

/// The RULER runner checks its own flags (lengths, shard, samples) deep inside.
fn is_ruler_usage(error: &RunError) -> bool {
    match error {
        RunError::InvalidArgument(_)
        | RunError::BadShard(_)
        | RunError::LengthOverContext { .. } => true,
        RunError::Eval(eval) => is_eval_usage(eval),
        _ => false,
    }
}

fn is_eval_usage(error: &EvalError) -> bool {
    matches!(
        error,
        EvalError::UnknownTask(..) | EvalError::LengthTooShort { .. }
    )
}
