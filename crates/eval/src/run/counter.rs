//! Token counts in the evaluated model's own tokens, so samples fill the target length as
//! RULER fills them.

use std::cell::RefCell;

use gattn_model::{ModelError, Tokenizer};

use crate::tokens::TokenCounter;

/// A [`TokenCounter`] over the model's tokenizer (no special tokens added, as the runner feeds
/// the prompt). The trait cannot fail, so the first tokenizer error is kept and handed out by
/// [`TokenizerCounter::take_error`]; the runner checks it after every sample.
pub struct TokenizerCounter<'t> {
    tokenizer: &'t Tokenizer,
    error: RefCell<Option<ModelError>>,
}

impl<'t> TokenizerCounter<'t> {
    pub fn new(tokenizer: &'t Tokenizer) -> Self {
        TokenizerCounter {
            tokenizer,
            error: RefCell::new(None),
        }
    }

    pub fn tokenizer(&self) -> &'t Tokenizer {
        self.tokenizer
    }

    /// The first error the tokenizer reported since the last call, if any.
    pub fn take_error(&self) -> Option<ModelError> {
        self.error.borrow_mut().take()
    }
}

impl TokenCounter for TokenizerCounter<'_> {
    fn count_tokens(&self, text: &str) -> usize {
        match self.tokenizer.encode(text) {
            Ok(ids) => ids.len(),
            Err(e) => {
                self.error.borrow_mut().get_or_insert(e);
                // Over-count, so a failing tokenizer can never make a sample look shorter.
                text.len()
            }
        }
    }
}
