//! The saved-logits file of `--save-logits`: the top-k log-probabilities of every scored
//! position of a base run, which `--kl-divergence` compares later runs with.
//!
//! Layout (all little-endian; 104-byte header, then fixed-size records):
//!
//! | offset | bytes | field |
//! | --- | --- | --- |
//! | 0 | 8 | magic `GATTNLP\0` |
//! | 8 | 4 | version, u32 = 1 |
//! | 12 | 4 | `vocab_size`, u32 |
//! | 16 | 4 | `ctx`: window length in tokens, u32 |
//! | 20 | 4 | `stride`: tokens between window starts, u32 |
//! | 24 | 4 | `top_k`: log-probabilities kept per position, u32 |
//! | 28 | 4 | `windows`: number of windows, u32 |
//! | 32 | 8 | `positions`: number of records, u64 |
//! | 40 | 32 | model fingerprint: SHA-256 of the model's shape ([`model_fingerprint`]) |
//! | 72 | 32 | text fingerprint: SHA-256 of the windows' token ids ([`text_fingerprint`]) |
//!
//! Each record (`12 + 8 * top_k` bytes): the correct (next) token's id (u32) and log-probability
//! (f32), the log-sum-exp of the position's logits (f32: the normaliser, so `logit = logprob +
//! logsumexp` for the kept tokens), then `top_k` pairs of token id (u32) and log-probability
//! (f32), most likely first. Records follow the windows in order, each window's scored positions
//! in order.
//!
//! The reader treats the file as hostile: the header's counts are checked against the file's
//! length before anything is read, every id against `vocab_size`, every log-probability for NaN,
//! sign and order; a bad file is an error naming the file and the field, never a panic or an
//! allocation sized by the file.

use gattn_tensor::input_file::open_regular;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use gattn_model::Qwen3Config;
use gattn_model::output::{AtomicFile, Existing, OutputError};
use sha2::{Digest, Sha256};

use super::PerplexityError;
use super::windows::Window;

pub const MAGIC: [u8; 8] = *b"GATTNLP\0";
pub const VERSION: u32 = 1;
pub const HEADER_BYTES: u64 = 104;
/// Largest `vocab_size` a file may declare.
pub const MAX_VOCAB: u32 = 1 << 24;
/// Log-probabilities are stored as f32 after an f64 normalisation: a kept value may exceed 0 by
/// rounding, never by more than this.
const LOGPROB_SLACK: f32 = 1e-4;

/// Everything a saved-logits file says about the run that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogitsFileHeader {
    pub vocab_size: u32,
    pub ctx: u32,
    pub stride: u32,
    pub top_k: u32,
    pub windows: u32,
    pub positions: u64,
    pub model_fingerprint: [u8; 32],
    pub text_fingerprint: [u8; 32],
}

impl LogitsFileHeader {
    /// Bytes of one record.
    pub fn record_bytes(&self) -> u64 {
        12 + 8 * self.top_k as u64
    }

    fn to_bytes(&self) -> [u8; HEADER_BYTES as usize] {
        let mut b = [0u8; HEADER_BYTES as usize];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.vocab_size.to_le_bytes());
        b[16..20].copy_from_slice(&self.ctx.to_le_bytes());
        b[20..24].copy_from_slice(&self.stride.to_le_bytes());
        b[24..28].copy_from_slice(&self.top_k.to_le_bytes());
        b[28..32].copy_from_slice(&self.windows.to_le_bytes());
        b[32..40].copy_from_slice(&self.positions.to_le_bytes());
        b[40..72].copy_from_slice(&self.model_fingerprint);
        b[72..104].copy_from_slice(&self.text_fingerprint);
        b
    }

    /// Checks that this run (`run`) is the one the file can be compared with: same model shape,
    /// same windows over the same tokens.
    pub fn check_matches(
        &self,
        run: &LogitsFileHeader,
        path: &Path,
    ) -> Result<(), PerplexityError> {
        let mismatch = |field, saved: String, run: String| {
            Err(PerplexityError::Mismatch {
                path: path.to_path_buf(),
                field,
                saved,
                run,
            })
        };
        if self.model_fingerprint != run.model_fingerprint || self.vocab_size != run.vocab_size {
            return mismatch(
                "model shape",
                format!(
                    "vocab {} ({})",
                    self.vocab_size,
                    hex8(&self.model_fingerprint)
                ),
                format!(
                    "vocab {} ({})",
                    run.vocab_size,
                    hex8(&run.model_fingerprint)
                ),
            );
        }
        if (self.ctx, self.stride) != (run.ctx, run.stride) {
            return mismatch(
                "windows (-c, --stride)",
                format!("-c {} --stride {}", self.ctx, self.stride),
                format!("-c {} --stride {}", run.ctx, run.stride),
            );
        }
        if self.windows != run.windows || self.positions != run.positions {
            return mismatch(
                "window count (--chunks)",
                format!("{} windows", self.windows),
                format!("{} windows", run.windows),
            );
        }
        if self.text_fingerprint != run.text_fingerprint {
            return mismatch(
                "text fingerprint",
                hex8(&self.text_fingerprint),
                hex8(&run.text_fingerprint),
            );
        }
        Ok(())
    }
}

fn hex8(bytes: &[u8; 32]) -> String {
    bytes[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of the model's shape: what must agree for two runs' distributions to be comparable
/// (the weight format, KV storage and RoPE scaling may differ: that is what is measured).
pub fn model_fingerprint(config: &Qwen3Config) -> [u8; 32] {
    let shape = format!(
        "vocab={} hidden={} intermediate={} layers={} heads={} kv_heads={} head_dim={} gate={}",
        config.vocab_size,
        config.hidden_size,
        config.intermediate_size,
        config.num_hidden_layers,
        config.num_attention_heads,
        config.num_key_value_heads,
        config.head_dim,
        config.gate.name()
    );
    Sha256::digest(shape.as_bytes()).into()
}

/// SHA-256 of the token ids (u32 little-endian) of every window, in order.
pub fn text_fingerprint(windows: &[Window], tokens: &[u32]) -> [u8; 32] {
    let mut hash = Sha256::new();
    for window in windows {
        for id in window.tokens(tokens) {
            hash.update(id.to_le_bytes());
        }
    }
    hash.finalize().into()
}

/// One scored position as saved.
#[derive(Debug, Clone, PartialEq)]
pub struct PositionRecord {
    /// The token that came next in the text.
    pub target: u32,
    pub target_logprob: f32,
    pub logsumexp: f32,
    /// `(token id, log-probability)`, most likely first.
    pub top: Vec<(u32, f32)>,
}

/// The shared writer's errors in this module's terms (`--force` named as before).
fn output_error(path: &Path, error: OutputError) -> PerplexityError {
    match error {
        OutputError::Exists { .. } | OutputError::DirNotEmpty { .. } => PerplexityError::Exists {
            path: path.to_path_buf(),
        },
        OutputError::Io { source, .. } => PerplexityError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        },
    }
}

/// Writes a saved-logits file to a temporary file beside `path`, renamed over it by
/// [`finish`](Self::finish): a failed run leaves no partial file behind.
pub struct LogitsFileWriter {
    header: LogitsFileHeader,
    out: AtomicFile,
}

impl LogitsFileWriter {
    /// Refuses an existing `path` unless `force`. `header.positions` is filled in by `finish`.
    pub fn create(
        path: &Path,
        header: LogitsFileHeader,
        force: bool,
    ) -> Result<LogitsFileWriter, PerplexityError> {
        let mut out = AtomicFile::create(path, Existing::from_force(force))
            .map_err(|e| output_error(path, e))?;
        out.write_all(&header.to_bytes())
            .map_err(|source| PerplexityError::Io {
                action: "write",
                path: path.to_path_buf(),
                source,
            })?;
        Ok(LogitsFileWriter {
            header: LogitsFileHeader {
                positions: 0,
                ..header
            },
            out,
        })
    }

    pub fn write(&mut self, record: &PositionRecord) -> Result<(), PerplexityError> {
        if record.top.len() != self.header.top_k as usize {
            return Err(PerplexityError::InvalidArgument {
                what: "saved-logits record",
                reason: format!(
                    "{} top entries, the header says {}",
                    record.top.len(),
                    self.header.top_k
                ),
            });
        }
        let mut bytes = Vec::with_capacity(self.header.record_bytes() as usize);
        bytes.extend_from_slice(&record.target.to_le_bytes());
        bytes.extend_from_slice(&record.target_logprob.to_le_bytes());
        bytes.extend_from_slice(&record.logsumexp.to_le_bytes());
        for (id, logprob) in &record.top {
            bytes.extend_from_slice(&id.to_le_bytes());
            bytes.extend_from_slice(&logprob.to_le_bytes());
        }
        self.out.write_all(&bytes).map_err(|e| self.io(e))?;
        self.header.positions += 1;
        Ok(())
    }

    /// Writes the final header and moves the file into place.
    pub fn finish(mut self) -> Result<LogitsFileHeader, PerplexityError> {
        let header = self.header.to_bytes();
        let path = self.out.path().to_path_buf();
        let temp = self.out.temp_file().map_err(|e| output_error(&path, e))?;
        temp.seek(SeekFrom::Start(0))
            .and_then(|_| temp.write_all(&header))
            .map_err(|e| self.io(e))?;
        self.out.commit().map_err(|e| output_error(&path, e))?;
        Ok(self.header)
    }

    fn io(&self, source: std::io::Error) -> PerplexityError {
        PerplexityError::Io {
            action: "write",
            path: self.out.path().to_path_buf(),
            source,
        }
    }
}

/// Reads a saved-logits file record by record (memory: one record).
pub struct LogitsFileReader {
    path: PathBuf,
    header: LogitsFileHeader,
    input: BufReader<File>,
    read: u64,
}

impl LogitsFileReader {
    pub fn open(path: &Path) -> Result<LogitsFileReader, PerplexityError> {
        let io = |source| PerplexityError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        };
        // Streamed record by record, so any size is fine; but only a regular file (a FIFO blocks).
        let (file, len) = open_regular(path, u64::MAX).map_err(io)?;
        let bad = |field: &str, reason: String| PerplexityError::BadLogitsFile {
            path: path.to_path_buf(),
            field: field.to_string(),
            reason,
        };
        if len < HEADER_BYTES {
            return Err(bad(
                "header",
                format!("the file is {len} bytes, shorter than the {HEADER_BYTES}-byte header"),
            ));
        }
        let mut input = BufReader::new(file);
        let mut b = [0u8; HEADER_BYTES as usize];
        input.read_exact(&mut b).map_err(io)?;
        if b[0..8] != MAGIC {
            return Err(bad(
                "magic",
                format!(
                    "{:?}, expected {:?} (not a saved-logits file)",
                    &b[0..8],
                    MAGIC
                ),
            ));
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let version = u32_at(8);
        if version != VERSION {
            return Err(bad(
                "version",
                format!("{version}, this build reads {VERSION}"),
            ));
        }
        let header = LogitsFileHeader {
            vocab_size: u32_at(12),
            ctx: u32_at(16),
            stride: u32_at(20),
            top_k: u32_at(24),
            windows: u32_at(28),
            positions: u64::from_le_bytes(b[32..40].try_into().expect("8 bytes")),
            model_fingerprint: b[40..72].try_into().expect("32 bytes"),
            text_fingerprint: b[72..104].try_into().expect("32 bytes"),
        };
        if header.vocab_size == 0 || header.vocab_size > MAX_VOCAB {
            return Err(bad(
                "vocab_size",
                format!("{} (expected 1..={MAX_VOCAB})", header.vocab_size),
            ));
        }
        // top_k up to the vocabulary (exact KL); the length check below bounds what a record
        // allocates by the file's own size.
        if header.top_k == 0 || header.top_k > header.vocab_size {
            return Err(bad(
                "top_k",
                format!("{} (expected 1..={})", header.top_k, header.vocab_size),
            ));
        }
        if header.ctx < 4 || header.stride == 0 || header.windows == 0 {
            return Err(bad(
                "ctx/stride/windows",
                format!(
                    "ctx {}, stride {}, windows {} (expected ctx >= 4, stride >= 1, windows >= 1)",
                    header.ctx, header.stride, header.windows
                ),
            ));
        }
        let per_window = Window {
            start: 0,
            ctx: header.ctx as usize,
        }
        .scored() as u64;
        // At most 2^32 x 2^31: no overflow.
        let scored = per_window * header.windows as u64;
        if scored != header.positions {
            return Err(bad(
                "positions",
                format!(
                    "{}, but {} windows of {} tokens score {scored} positions",
                    header.positions, header.windows, header.ctx
                ),
            ));
        }
        let body = header
            .positions
            .checked_mul(header.record_bytes())
            .and_then(|b| b.checked_add(HEADER_BYTES));
        if body != Some(len) {
            return Err(bad(
                "positions",
                format!(
                    "{} records of {} bytes do not fill the file of {len} bytes (truncated or \
                     trailing bytes)",
                    header.positions,
                    header.record_bytes()
                ),
            ));
        }
        Ok(LogitsFileReader {
            path: path.to_path_buf(),
            header,
            input,
            read: 0,
        })
    }

    pub fn header(&self) -> &LogitsFileHeader {
        &self.header
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next record, checked; `None` after the last.
    pub fn next_record(&mut self) -> Result<Option<PositionRecord>, PerplexityError> {
        if self.read == self.header.positions {
            return Ok(None);
        }
        let position = self.read;
        let mut head = [0u8; 12];
        self.read_exact(&mut head, position)?;
        let target = u32::from_le_bytes(head[0..4].try_into().expect("4 bytes"));
        let target_logprob = f32::from_le_bytes(head[4..8].try_into().expect("4 bytes"));
        let logsumexp = f32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        self.check_id(position, "target", target)?;
        self.check_logprob(position, "target log-probability", target_logprob)?;
        if !logsumexp.is_finite() {
            return Err(self.bad(position, "logsumexp", format!("{logsumexp} is not finite")));
        }
        let mut top = Vec::with_capacity(self.header.top_k as usize);
        let mut pair = [0u8; 8];
        for _ in 0..self.header.top_k {
            self.read_exact(&mut pair, position)?;
            let id = u32::from_le_bytes(pair[0..4].try_into().expect("4 bytes"));
            let logprob = f32::from_le_bytes(pair[4..8].try_into().expect("4 bytes"));
            self.check_id(position, "top id", id)?;
            self.check_logprob(position, "top log-probability", logprob)?;
            if let Some(&(_, previous)) = top.last()
                && logprob > previous
            {
                return Err(self.bad(
                    position,
                    "top log-probabilities",
                    format!("not in descending order ({previous} then {logprob})"),
                ));
            }
            top.push((id, logprob));
        }
        self.read += 1;
        Ok(Some(PositionRecord {
            target,
            target_logprob,
            logsumexp,
            top,
        }))
    }

    fn read_exact(&mut self, buf: &mut [u8], position: u64) -> Result<(), PerplexityError> {
        self.input.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                self.bad(
                    position,
                    "record",
                    "the file ends inside it (truncated)".into(),
                )
            } else {
                PerplexityError::Io {
                    action: "read",
                    path: self.path.clone(),
                    source: e,
                }
            }
        })
    }

    fn check_id(&self, position: u64, field: &str, id: u32) -> Result<(), PerplexityError> {
        if id >= self.header.vocab_size {
            return Err(self.bad(
                position,
                field,
                format!("{id} is not below vocab_size {}", self.header.vocab_size),
            ));
        }
        Ok(())
    }

    fn check_logprob(&self, position: u64, field: &str, v: f32) -> Result<(), PerplexityError> {
        if v.is_nan() || v > LOGPROB_SLACK {
            return Err(self.bad(position, field, format!("{v} is not a log-probability")));
        }
        Ok(())
    }

    fn bad(&self, position: u64, field: &str, reason: String) -> PerplexityError {
        PerplexityError::BadLogitsFile {
            path: self.path.clone(),
            field: format!("position {position}: {field}"),
            reason,
        }
    }
}
