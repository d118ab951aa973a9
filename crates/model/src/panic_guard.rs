//! Third-party code that can panic on hostile input (the `tokenizers` crate inside its regex
//! engine, on a pre-tokenizer pattern that backtracks without end) is run through [`catch`], so
//! that the panic becomes an error naming the file instead of a crash with a backtrace hint.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

thread_local! {
    /// Set while [`catch`] runs on this thread: its panics are reported as errors, not printed.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`; a panic inside it is returned as its message. Panics on other threads, or outside
/// `catch`, are printed by the previous hook as before.
pub(crate) fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static QUIET_HOOK: Once = Once::new();
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CATCHING.with(Cell::get) {
                previous(info);
            }
        }));
    });
    let was = CATCHING.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(was));
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "an unknown panic".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message_and_a_value_passes_through() {
        assert_eq!(catch(|| 7), Ok(7));
        assert_eq!(
            catch(|| -> u8 { panic!("boom {}", 1) }),
            Err("boom 1".into())
        );
    }
}
