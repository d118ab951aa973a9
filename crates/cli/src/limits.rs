//! Counts from the command line, checked against what the model and the machine can do before
//! anything is allocated, in one place: each refusal names the flag and the limit (exit 2).

use anyhow::Result;

use crate::failure::usage;

/// Worker threads at most: far beyond any core count this engine runs on, and few enough that
/// starting them cannot exhaust the process's thread or memory limits.
pub const MAX_THREADS: usize = 1024;

pub use gattn_model::tokenizer::prompt_byte_limit;

/// `value` of `flag` if it lies in `min..=max`; otherwise a usage error naming both bounds and
/// `why` the upper one exists.
pub fn check_count(flag: &str, value: usize, min: usize, max: usize, why: &str) -> Result<usize> {
    check_at_least(flag, value, min)?;
    if value > max {
        return Err(usage(format!("{flag} {value}: at most {max} ({why})")));
    }
    Ok(value)
}

/// `value` of `flag` if it is at least `min` (a count with no upper bound of its own).
pub fn check_at_least(flag: &str, value: usize, min: usize) -> Result<usize> {
    if value < min {
        return Err(usage(format!("{flag} {value}: must be at least {min}")));
    }
    Ok(value)
}

/// `-t/--threads`, if given: 1 to [`MAX_THREADS`].
pub fn check_threads(threads: Option<usize>) -> Result<Option<usize>> {
    threads
        .map(|n| check_count("--threads", n, 1, MAX_THREADS, "a sane thread limit"))
        .transpose()
}

/// Tokens of context at most: 2^32 - 1, beyond every model's positions. Below it, whether the KV
/// cache fits is the memory plan's to say (`MemoryPlan::check_fits`, with the figures); a
/// context beyond the model's positions is allowed, as llama.cpp allows it.
pub const MAX_CTX: usize = u32::MAX as usize;

/// A count of tokens (`-c`, `--stride`): `min` to [`MAX_CTX`].
pub fn check_tokens(flag: &str, value: usize, min: usize) -> Result<usize> {
    check_count(
        flag,
        value,
        min,
        MAX_CTX,
        "far beyond any model's positions",
    )
}

/// `-c/--ctx` of a command that holds a KV cache of that many tokens (default: the model's
/// max_position_embeddings, after --rope-scaling).
pub fn check_ctx(ctx: Option<usize>, max_positions: usize) -> Result<usize> {
    check_tokens("--ctx", ctx.unwrap_or(max_positions), 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gattn_model::tokenizer::MIN_PROMPT_BYTES;

    #[test]
    fn counts_outside_their_range_name_the_flag_and_the_limit() {
        assert_eq!(check_count("-n", 5, 1, 10, "x").unwrap(), 5);
        let low = check_count("-n", 0, 1, 10, "x").unwrap_err().to_string();
        assert_eq!(low, "-n 0: must be at least 1");
        let high = check_count("-n", usize::MAX, 1, 10, "why")
            .unwrap_err()
            .to_string();
        assert_eq!(high, format!("-n {}: at most 10 (why)", usize::MAX));
        assert!(check_threads(Some(usize::MAX)).is_err());
        assert_eq!(check_ctx(None, 4096).unwrap(), 4096);
        assert!(check_ctx(Some(0), 4096).is_err());
        assert!(check_ctx(Some(usize::MAX), 4096).is_err());
        assert_eq!(prompt_byte_limit(usize::MAX), u64::MAX);
        assert_eq!(prompt_byte_limit(1), MIN_PROMPT_BYTES);
    }
}
