//! `tokenizer.json` through the `tokenizers` crate, and streaming decode of generated tokens.

use std::path::{Path, PathBuf};

use crate::error::{ModelError, Result};

pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    path: PathBuf,
}

impl Tokenizer {
    pub fn from_file(path: &Path) -> Result<Tokenizer> {
        if !path.exists() {
            return Err(ModelError::Tokenizer {
                path: path.to_path_buf(),
                reason: "not found (use --prompt-ids and --output ids with a checkpoint that has no tokenizer)".into(),
            });
        }
        let inner = tokenizers::Tokenizer::from_file(path).map_err(|e| ModelError::Tokenizer {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Ok(Tokenizer {
            inner,
            path: path.to_path_buf(),
        })
    }

    /// `dir/tokenizer.json`.
    pub fn from_dir(dir: &Path) -> Result<Tokenizer> {
        Self::from_file(&dir.join("tokenizer.json"))
    }

    /// Token ids of `text`, without adding special tokens (the text itself may contain them).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self
            .inner
            .encode_fast(text, false)
            .map_err(|e| self.error(e))?;
        Ok(encoding.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(|e| self.error(e))
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    fn error(&self, e: tokenizers::Error) -> ModelError {
        ModelError::Tokenizer {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }
}

/// Turns generated ids into text as they arrive. Byte-level BPE tokens can split a UTF-8
/// character, so text is only emitted once it decodes without a trailing replacement character.
/// Only the ids since the last emitted piece (plus the piece before, for context) are decoded at
/// each step, so a long generation costs constant work per token.
pub struct TextStream<'t> {
    tokenizer: &'t Tokenizer,
    ids: Vec<u32>,
    /// `ids[prefix..read]` is the last emitted piece; `ids[read..]` is not emitted yet.
    prefix: usize,
    read: usize,
}

impl<'t> TextStream<'t> {
    pub fn new(tokenizer: &'t Tokenizer) -> Self {
        TextStream {
            tokenizer,
            ids: Vec::new(),
            prefix: 0,
            read: 0,
        }
    }

    /// Adds a token; returns the new text that is complete.
    pub fn push(&mut self, id: u32) -> Result<String> {
        self.ids.push(id);
        let (emitted, text) = self.decode_window()?;
        if text.ends_with('\u{FFFD}') || text.len() <= emitted.len() {
            return Ok(String::new());
        }
        self.prefix = self.read;
        self.read = self.ids.len();
        Ok(new_suffix(&emitted, &text))
    }

    /// Whatever is left at the end, even an incomplete character.
    pub fn finish(&mut self) -> Result<String> {
        let (emitted, text) = self.decode_window()?;
        self.prefix = self.read;
        self.read = self.ids.len();
        Ok(new_suffix(&emitted, &text))
    }

    /// The text of the last emitted piece, and of that piece plus everything after it.
    fn decode_window(&self) -> Result<(String, String)> {
        let emitted = self.tokenizer.decode(&self.ids[self.prefix..self.read])?;
        let text = self.tokenizer.decode(&self.ids[self.prefix..])?;
        Ok((emitted, text))
    }
}

/// `text` minus its leading `emitted` (by characters: `emitted` decodes whole characters).
fn new_suffix(emitted: &str, text: &str) -> String {
    text.chars().skip(emitted.chars().count()).collect()
}
