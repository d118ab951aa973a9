//! Where the windows of a perplexity run lie, and which of their positions are scored.

use super::PerplexityError;

/// One window of `ctx` tokens starting at `start` in the token stream.
///
/// It is run from an empty cache; the logits at positions `first_scored()..ctx - 1` are scored
/// against the tokens that follow them, as llama-perplexity does (`first = n_ctx / 2`): every
/// scored prediction has at least `ctx / 2` tokens of context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: usize,
    pub ctx: usize,
}

impl Window {
    /// The first position (within the window) whose logits are scored.
    pub fn first_scored(&self) -> usize {
        self.ctx / 2
    }

    /// How many predictions the window scores: `ctx - 1 - ctx / 2`.
    pub fn scored(&self) -> usize {
        self.ctx - 1 - self.first_scored()
    }

    /// The window's tokens in `tokens` (the whole stream).
    pub fn tokens<'a>(&self, tokens: &'a [u32]) -> &'a [u32] {
        &tokens[self.start..self.start + self.ctx]
    }

    /// The tokens the scored logits predict: positions `first_scored() + 1..ctx` of the window.
    pub fn targets<'a>(&self, tokens: &'a [u32]) -> &'a [u32] {
        &self.tokens(tokens)[self.first_scored() + 1..]
    }
}

/// Windows of `ctx` tokens over `n_tokens`, starting every `stride` tokens (`None`: `ctx`, i.e.
/// non-overlapping, as llama-perplexity), as many as fit, at most `max_windows`.
pub fn plan_windows(
    n_tokens: usize,
    ctx: usize,
    stride: Option<usize>,
    max_windows: Option<usize>,
) -> Result<Vec<Window>, PerplexityError> {
    if ctx < 4 {
        return Err(PerplexityError::InvalidArgument {
            what: "context (-c)",
            reason: format!("{ctx}: a window needs at least 4 tokens to score its second half"),
        });
    }
    let stride = stride.unwrap_or(ctx);
    if stride == 0 {
        return Err(PerplexityError::InvalidArgument {
            what: "stride",
            reason: "0: windows must advance by at least one token".into(),
        });
    }
    if max_windows == Some(0) {
        return Err(PerplexityError::InvalidArgument {
            what: "chunks",
            reason: "0: at least one window is needed".into(),
        });
    }
    if n_tokens < ctx {
        return Err(PerplexityError::TextTooShort {
            tokens: n_tokens,
            ctx,
        });
    }
    let fitting = (n_tokens - ctx) / stride + 1;
    let count = max_windows.map_or(fitting, |m| m.min(fitting));
    Ok((0..count)
        .map(|i| Window {
            start: i * stride,
            ctx,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_overlapping_windows_score_their_second_half() {
        let windows = plan_windows(1000, 256, None, None).unwrap();
        assert_eq!(windows.len(), 3);
        assert_eq!(windows[2].start, 512);
        assert_eq!(windows[0].first_scored(), 128);
        assert_eq!(windows[0].scored(), 127);
        let tokens: Vec<u32> = (0..1000).collect();
        assert_eq!(windows[1].targets(&tokens)[0], 256 + 129);
        assert_eq!(windows[1].targets(&tokens).len(), 127);
    }

    #[test]
    fn stride_and_chunk_limit() {
        let windows = plan_windows(100, 10, Some(5), Some(4)).unwrap();
        let starts: Vec<usize> = windows.iter().map(|w| w.start).collect();
        assert_eq!(starts, [0, 5, 10, 15]);
        assert_eq!(plan_windows(100, 10, Some(5), None).unwrap().len(), 19);
    }

    #[test]
    fn bad_plans_are_refused() {
        assert!(matches!(
            plan_windows(10, 16, None, None),
            Err(PerplexityError::TextTooShort {
                tokens: 10,
                ctx: 16
            })
        ));
        assert!(plan_windows(100, 2, None, None).is_err());
        assert!(plan_windows(100, 10, Some(0), None).is_err());
        assert!(plan_windows(100, 10, None, Some(0)).is_err());
    }
}
