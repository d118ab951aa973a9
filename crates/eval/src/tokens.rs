//! How long a text is, in the tokens of whoever will read it.

/// Counts tokens the way the evaluated model's tokenizer does (without special tokens).
/// The runner implements this with the model's tokenizer; tests use the simple counters below.
pub trait TokenCounter {
    fn count_tokens(&self, text: &str) -> usize;
}

impl<T: TokenCounter + ?Sized> TokenCounter for &T {
    fn count_tokens(&self, text: &str) -> usize {
        (**self).count_tokens(text)
    }
}

/// One token per whitespace-separated word: a stand-in tokenizer for tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct WhitespaceCounter;

impl TokenCounter for WhitespaceCounter {
    fn count_tokens(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
}

/// One token per `chars_per_token` characters (rounded up): a crude BPE-like stand-in.
#[derive(Debug, Clone, Copy)]
pub struct CharCounter {
    pub chars_per_token: usize,
}

impl TokenCounter for CharCounter {
    fn count_tokens(&self, text: &str) -> usize {
        text.chars().count().div_ceil(self.chars_per_token.max(1))
    }
}
