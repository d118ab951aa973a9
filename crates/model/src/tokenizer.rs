//! `tokenizer.json` through the `tokenizers` crate, and streaming decode of generated tokens.

use std::path::{Path, PathBuf};

use gattn_tensor::input_file::read_regular;

use crate::error::{ModelError, Result};
use crate::panic_guard;

/// Bytes of prompt text read per token of context at most (Qwen3 averages ~4 bytes a token; 64
/// leaves room for long runs of spaces or digits), so a huge prompt is refused before the
/// tokenizer spends memory on all of it.
pub const PROMPT_BYTES_PER_TOKEN: u64 = 64;
/// ... but never less than this, so a small `-c` still takes an ordinary prompt file.
pub const MIN_PROMPT_BYTES: u64 = 1 << 20;

/// Bytes of prompt text allowed for a context of `ctx` tokens (see [`PROMPT_BYTES_PER_TOKEN`]).
pub fn prompt_byte_limit(ctx: usize) -> u64 {
    (ctx as u64)
        .saturating_mul(PROMPT_BYTES_PER_TOKEN)
        .max(MIN_PROMPT_BYTES)
}

/// Qwen3's tokenizer.json is 11 MB; a file 20 times larger is not a tokenizer.
const MAX_TOKENIZER_BYTES: u64 = 256 << 20;

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
        let bytes = read_regular(path, MAX_TOKENIZER_BYTES).map_err(|source| ModelError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let fail = |reason: String| ModelError::Tokenizer {
            path: path.to_path_buf(),
            reason,
        };
        let inner = panic_guard::catch(|| tokenizers::Tokenizer::from_bytes(&bytes))
            .map_err(|panic| fail(format!("the tokenizer library failed on it: {panic}")))?
            .map_err(|e| fail(e.to_string()))?;
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
            .guarded(|inner| inner.encode_fast(text, false))?
            .map_err(|e| self.error(e))?;
        Ok(encoding.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.guarded(|inner| inner.decode(ids, false))?
            .map_err(|e| self.error(e))
    }

    /// A panic inside the tokenizer library (a pre-tokenizer regex that backtracks without end
    /// panics in the regex engine) becomes an error naming this tokenizer.json.
    fn guarded<T>(&self, f: impl FnOnce(&tokenizers::Tokenizer) -> T) -> Result<T> {
        panic_guard::catch(|| f(&self.inner)).map_err(|panic| ModelError::Tokenizer {
            path: self.path.clone(),
            reason: format!("the tokenizer library failed (its regex or model?): {panic}"),
        })
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
