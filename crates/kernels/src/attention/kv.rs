//! KV storage of one layer: K (after RoPE) and V, contiguous per KV head so the attention kernel
//! streams each head's rows front to back.
//!
//! Every row (one token of one head) is stored as `row_words` 32-bit words, whatever the dtype:
//! - `F32`: one element per word (its bits);
//! - `Bf16`: two elements per word, element `2i` in the low half, `2i+1` in the high half;
//! - `Int8`: four elements per word, element `4i+j` in byte `j`, biased by +128 (so byte 128 is
//!   zero), with one f32 scale per token per head (symmetric, `max|x| / 127`).
//!
//! Words make the SIMD decode uniform (a bf16 is a shift or a mask of its word, an int8 a shift and
//! a mask) and pad odd head dims to a whole word with zeros, so the kernel needs no element tails.
//!
//! Memory is only reserved by [`KvLayer::reserve`] (the model decides the chunk size), never by
//! [`KvLayer::append`]; reserving does not touch the pages, so a 131072-token capacity is cheap until
//! it is filled.

use half::bf16;
use thiserror::Error;

use super::kv_encode::encode_row;
use crate::aligned::LineVec;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvDtype {
    F32,
    Bf16,
    Int8,
}

impl KvDtype {
    pub fn name(self) -> &'static str {
        match self {
            KvDtype::F32 => "f32",
            KvDtype::Bf16 => "bf16",
            KvDtype::Int8 => "int8",
        }
    }

    pub fn parse(s: &str) -> Option<KvDtype> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f32" => Some(KvDtype::F32),
            "bf16" => Some(KvDtype::Bf16),
            "int8" | "i8" => Some(KvDtype::Int8),
            _ => None,
        }
    }

    /// Elements packed in one 32-bit storage word.
    pub fn elems_per_word(self) -> usize {
        match self {
            KvDtype::F32 => 1,
            KvDtype::Bf16 => 2,
            KvDtype::Int8 => 4,
        }
    }

    /// Storage words of one row of `head_dim` elements (padded to a whole word).
    pub fn row_words(self, head_dim: usize) -> usize {
        head_dim.div_ceil(self.elems_per_word())
    }

    fn has_scales(self) -> bool {
        self == KvDtype::Int8
    }
}

impl std::fmt::Display for KvDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum KvError {
    #[error("KV append of {rows} rows does not fit: length {len}, capacity {capacity}")]
    CapacityExceeded {
        rows: usize,
        len: usize,
        capacity: usize,
    },
    #[error(
        "KV append: {what} has {got} values, expected a multiple of {row} (= kv_heads x head_dim)"
    )]
    BadRowLength {
        what: &'static str,
        got: usize,
        row: usize,
    },
    #[error("KV append: K has {k_rows} rows but V has {v_rows}")]
    KvRowMismatch { k_rows: usize, v_rows: usize },
    #[error("could not allocate {bytes} bytes for the KV cache")]
    Allocation { bytes: usize },
    #[error("KV layer needs num_kv_heads > 0 and head_dim > 0 (got {num_kv_heads}, {head_dim})")]
    EmptyShape {
        num_kv_heads: usize,
        head_dim: usize,
    },
}

/// K and V of one KV head.
#[derive(Debug, Clone, Default)]
struct HeadStore {
    /// Line-aligned, so a row of 128 bytes (head_dim 128 in int8) is two whole cache lines.
    k: LineVec<u32>,
    v: LineVec<u32>,
    /// Int8 only: one scale per token.
    k_scale: Vec<f32>,
    v_scale: Vec<f32>,
}

/// The K/V cache of one layer.
#[derive(Debug, Clone)]
pub struct KvLayer {
    dtype: KvDtype,
    num_kv_heads: usize,
    head_dim: usize,
    row_words: usize,
    len: usize,
    capacity: usize,
    heads: Vec<HeadStore>,
}

/// Borrowed read access to one KV head's first `len` rows, as the kernel streams them.
#[derive(Debug, Clone, Copy)]
pub struct KvHeadView<'a> {
    pub dtype: KvDtype,
    pub head_dim: usize,
    pub row_words: usize,
    pub len: usize,
    /// `[len, row_words]`
    pub k: &'a [u32],
    /// `[len, row_words]`
    pub v: &'a [u32],
    /// Int8: `[len]`; empty otherwise.
    pub k_scale: &'a [f32],
    /// Int8: `[len]`; empty otherwise.
    pub v_scale: &'a [f32],
}

impl KvLayer {
    /// An empty layer with no capacity.
    pub fn new(dtype: KvDtype, num_kv_heads: usize, head_dim: usize) -> Result<KvLayer, KvError> {
        if num_kv_heads == 0 || head_dim == 0 {
            return Err(KvError::EmptyShape {
                num_kv_heads,
                head_dim,
            });
        }
        Ok(KvLayer {
            dtype,
            num_kv_heads,
            head_dim,
            row_words: dtype.row_words(head_dim),
            len: 0,
            capacity: 0,
            heads: vec![HeadStore::default(); num_kv_heads],
        })
    }

    /// Bytes one token takes in a layer of this shape (K and V, all KV heads, scales included),
    /// for planning the cache before allocating it.
    pub fn bytes_per_token_for(dtype: KvDtype, num_kv_heads: usize, head_dim: usize) -> usize {
        let row = dtype.row_words(head_dim) * 4 + if dtype.has_scales() { 4 } else { 0 };
        2 * num_kv_heads * row
    }

    pub fn bytes_per_token(&self) -> usize {
        Self::bytes_per_token_for(self.dtype, self.num_kv_heads, self.head_dim)
    }

    pub fn dtype(&self) -> KvDtype {
        self.dtype
    }
    pub fn num_kv_heads(&self) -> usize {
        self.num_kv_heads
    }
    pub fn head_dim(&self) -> usize {
        self.head_dim
    }
    /// Tokens stored.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Tokens that fit without another [`reserve`](Self::reserve).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Grows the capacity to at least `new_capacity` tokens (no-op if already there). Allocates
    /// what is asked for (to whole cache lines), without touching the new pages; the caller picks
    /// chunk sizes.
    pub fn reserve(&mut self, new_capacity: usize) -> Result<(), KvError> {
        if new_capacity <= self.capacity {
            return Ok(());
        }
        let extra_tokens = new_capacity - self.len;
        let bytes = (new_capacity - self.capacity).saturating_mul(self.bytes_per_token());
        let row_words = self.row_words;
        let scales = self.dtype.has_scales();
        for head in &mut self.heads {
            let words = extra_tokens
                .checked_mul(row_words)
                .ok_or(KvError::Allocation { bytes })?;
            head.k
                .try_reserve_exact(words)
                .map_err(|_| KvError::Allocation { bytes })?;
            head.v
                .try_reserve_exact(words)
                .map_err(|_| KvError::Allocation { bytes })?;
            if scales {
                head.k_scale
                    .try_reserve_exact(extra_tokens)
                    .map_err(|_| KvError::Allocation { bytes })?;
                head.v_scale
                    .try_reserve_exact(extra_tokens)
                    .map_err(|_| KvError::Allocation { bytes })?;
            }
        }
        self.capacity = new_capacity;
        Ok(())
    }

    /// Appends `n` tokens: `k_rows`, `v_rows` are `[n, num_kv_heads * head_dim]` (K already roped).
    /// Fails (and stores nothing) if they do not fit in the reserved capacity.
    pub fn append(&mut self, k_rows: &[f32], v_rows: &[f32]) -> Result<(), KvError> {
        let row = self.num_kv_heads * self.head_dim;
        for (what, rows) in [("K", k_rows), ("V", v_rows)] {
            if rows.len() % row != 0 {
                return Err(KvError::BadRowLength {
                    what,
                    got: rows.len(),
                    row,
                });
            }
        }
        let n = k_rows.len() / row;
        if v_rows.len() / row != n {
            return Err(KvError::KvRowMismatch {
                k_rows: n,
                v_rows: v_rows.len() / row,
            });
        }
        if self.len + n > self.capacity {
            return Err(KvError::CapacityExceeded {
                rows: n,
                len: self.len,
                capacity: self.capacity,
            });
        }
        let (dtype, d, words) = (self.dtype, self.head_dim, self.row_words);
        let table = crate::dispatch::KernelTable::current();
        let append_head = |(j, head): (usize, &mut HeadStore)| {
            // Within the reserved capacity: no reallocation, only the new rows are touched.
            let start = head.k.len();
            head.k.grow_zeroed(start + n * words);
            head.v.grow_zeroed(start + n * words);
            let new_k = head.k[start..].chunks_exact_mut(words);
            let new_v = head.v[start..].chunks_exact_mut(words);
            for (t, (k_words, v_words)) in new_k.zip(new_v).enumerate() {
                let k = &k_rows[t * row + j * d..][..d];
                let v = &v_rows[t * row + j * d..][..d];
                let k_scale = encode_row(table, dtype, k, k_words);
                let v_scale = encode_row(table, dtype, v, v_words);
                if dtype.has_scales() {
                    head.k_scale.push(k_scale);
                    head.v_scale.push(v_scale);
                }
            }
        };
        // A prefill chunk: one task a head (on the calling thread alone, a chunk's append
        // leaves the other cores idle).
        if n >= PARALLEL_APPEND_ROWS {
            use rayon::prelude::*;
            self.heads.par_iter_mut().enumerate().for_each(append_head);
        } else {
            self.heads.iter_mut().enumerate().for_each(append_head);
        }
        self.len += n;
        Ok(())
    }

    /// Drops the tokens from `new_len` on (keeps the capacity).
    pub fn truncate(&mut self, new_len: usize) {
        if new_len >= self.len {
            return;
        }
        let words = new_len * self.row_words;
        for head in &mut self.heads {
            head.k.truncate(words);
            head.v.truncate(words);
            head.k_scale.truncate(new_len);
            head.v_scale.truncate(new_len);
        }
        self.len = new_len;
    }

    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Read access to KV head `j` (panics if `j >= num_kv_heads`, a programming error).
    pub fn head(&self, j: usize) -> KvHeadView<'_> {
        let head = &self.heads[j];
        KvHeadView {
            dtype: self.dtype,
            head_dim: self.head_dim,
            row_words: self.row_words,
            len: self.len,
            k: &head.k,
            v: &head.v,
            k_scale: &head.k_scale,
            v_scale: &head.v_scale,
        }
    }

    /// KV head `j`'s K as stored, back in f32: `[len, head_dim]` (for references and attention maps).
    pub fn dequantized_k(&self, j: usize) -> Vec<f32> {
        let h = self.head(j);
        dequantize(h.dtype, h.head_dim, h.row_words, h.k, h.k_scale)
    }

    /// KV head `j`'s V as stored, back in f32: `[len, head_dim]`.
    pub fn dequantized_v(&self, j: usize) -> Vec<f32> {
        let h = self.head(j);
        dequantize(h.dtype, h.head_dim, h.row_words, h.v, h.v_scale)
    }
}

/// Appends with fewer rows (a decode step's one token) run on the calling thread.
const PARALLEL_APPEND_ROWS: usize = 16;

/// One stored element back in f32 (before the int8 scale).
fn element(dtype: KvDtype, row: &[u32], e: usize) -> f32 {
    match dtype {
        KvDtype::F32 => f32::from_bits(row[e]),
        KvDtype::Bf16 => {
            let half_word = (row[e / 2] >> (16 * (e % 2))) & 0xffff;
            bf16::from_bits(half_word as u16).to_f32()
        }
        KvDtype::Int8 => (((row[e / 4] >> (8 * (e % 4))) & 0xff) as i32 - 128) as f32,
    }
}

fn dequantize(
    dtype: KvDtype,
    head_dim: usize,
    row_words: usize,
    words: &[u32],
    scales: &[f32],
) -> Vec<f32> {
    let rows = words.len() / row_words;
    let mut out = Vec::with_capacity(rows * head_dim);
    for t in 0..rows {
        let row = &words[t * row_words..][..row_words];
        let scale = if dtype.has_scales() { scales[t] } else { 1.0 };
        out.extend((0..head_dim).map(|e| element(dtype, row, e) * scale));
    }
    out
}
