//! Queries against an int8 K cache: each query row is rounded to int8 with one scale (as the
//! activations of the int8 matmul are, and as llama.cpp rounds queries for its quantized caches),
//! so a score is an integer dot product of two byte rows times two scales.
//!
//! Every SIMD level uses the same rounded queries and the same score, `(integer dot) * (q_scale *
//! k_scale)`, so the result does not depend on the level: the generic tile sums the integer
//! products in f32 (exact while `127 * 128 * head_dim < 2^24`, head dims up to 1032; Qwen3's are
//! 128), and on AVX512-VNNI [`scores_vnni`] takes 64 bytes of a key per `vpdpbusd` instead of
//! decoding every byte to f32 first (at long contexts that decode is most of the attention's
//! time).

use std::borrow::Cow;

use super::kv::{KvDtype, KvHeadView};
use super::kv_encode::quantize_int8;
use crate::dispatch::KernelTable;

/// Query rows rounded to int8, in the natural element order of the stored K bytes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Int8Queries {
    /// Bytes per row: the K row's bytes rounded up to a whole 64-byte register, zero past them.
    row_bytes: usize,
    /// `[rows, row_bytes]`, each an `i8` (as its bits).
    bytes: Vec<u8>,
    /// Per row: the scale (`max |q| / 127`).
    scales: Vec<f32>,
    /// Per row: `128 * sum(q_i8)`, the part of `sum(q_i8 * k_u8)` that the +128 bias of the
    /// stored bytes adds.
    bias_corrections: Vec<i32>,
}

impl Int8Queries {
    /// Rounds `rows` query vectors (`rows[r]` starts at `q[offsets[r]]`, `head_dim` values, each
    /// times `factor`) for keys of `row_words` words.
    pub(crate) fn new(
        q: &[f32],
        offsets: impl ExactSizeIterator<Item = usize>,
        head_dim: usize,
        row_words: usize,
        factor: f32,
    ) -> Int8Queries {
        let mut queries = Int8Queries::default();
        queries.fill(q, offsets, head_dim, row_words, factor);
        queries
    }

    /// [`Int8Queries::new`] in place, reusing this value's buffers (a decode allocates nothing).
    pub(crate) fn fill(
        &mut self,
        q: &[f32],
        offsets: impl ExactSizeIterator<Item = usize>,
        head_dim: usize,
        row_words: usize,
        factor: f32,
    ) {
        let row_bytes = self.reset(offsets.len(), row_words);
        let queries = self;
        for (r, offset) in offsets.enumerate() {
            let x = &q[offset..][..head_dim];
            let max_abs = x.iter().fold(0.0f32, |m, v| m.max((v * factor).abs()));
            let scale = max_abs / 127.0;
            let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            let out = &mut queries.bytes[r * row_bytes..][..head_dim];
            let mut sum = 0i32;
            for (byte, &v) in out.iter_mut().zip(x) {
                // The K cache's own rounding (ties to even, clamped to +-127).
                let rounded = quantize_int8(v * factor, inverse);
                sum += rounded;
                *byte = rounded as i8 as u8;
            }
            queries.scales.push(scale);
            queries.bias_corrections.push(128 * sum);
        }
    }

    /// [`Int8Queries::fill`] with the rounding on `table`'s int8 K row encoder: the same rule
    /// (scale `max |x| / 127` of `x = q * factor`, [`quantize_int8`]) and so the same bytes, but
    /// on the vector units (the plain loop of `fill` was a quarter of a 512-token prefill's
    /// attention). For prefill's many rows; a decode step rounds one position's.
    pub(crate) fn fill_with(
        &mut self,
        table: &KernelTable,
        q: &[f32],
        offsets: impl ExactSizeIterator<Item = usize>,
        head_dim: usize,
        row_words: usize,
        factor: f32,
    ) {
        let row_bytes = self.reset(offsets.len(), row_words);
        let mut scaled = vec![0.0f32; head_dim];
        let mut stored = vec![0u32; row_words];
        for (r, offset) in offsets.enumerate() {
            for (x, &v) in scaled.iter_mut().zip(&q[offset..][..head_dim]) {
                *x = v * factor;
            }
            let scale = table.encode_kv_row(KvDtype::Int8, &scaled, &mut stored);
            // The stored bytes carry the cache's +128 bias (a zero past head_dim is 128).
            let out = &mut self.bytes[r * row_bytes..][..row_words * 4];
            for (quad, &word) in out.chunks_exact_mut(4).zip(&stored) {
                quad.copy_from_slice(&(word ^ 0x8080_8080).to_le_bytes());
            }
            let sum: i32 = out.iter().map(|&byte| byte as i8 as i32).sum();
            self.scales.push(scale);
            self.bias_corrections.push(128 * sum);
        }
    }

    /// Empties the buffers for `rows` rows of keys of `row_words` words (zero bytes); returns
    /// the bytes a row.
    fn reset(&mut self, rows: usize, row_words: usize) -> usize {
        self.row_bytes = (row_words * 4).next_multiple_of(64);
        self.bytes.clear();
        self.bytes.resize(rows * self.row_bytes, 0);
        self.scales.clear();
        self.bias_corrections.clear();
        self.row_bytes
    }

    /// Row `r`'s integers as f32 (`q_i8`, without the scale), `head_dim` values, for the f32
    /// kernels.
    pub(crate) fn integer_row(&self, r: usize, out: &mut [f32]) {
        for (v, &byte) in out.iter_mut().zip(&self.bytes[r * self.row_bytes..]) {
            *v = byte as i8 as f32;
        }
    }

    /// Row `r` back in f32 (`q_i8 * scale`), `head_dim` values, for the references.
    pub(crate) fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let scale = self.scales[r];
        for (v, &byte) in out.iter_mut().zip(&self.bytes[r * self.row_bytes..]) {
            *v = byte as i8 as f32 * scale;
        }
    }

    pub(crate) fn row(&self, r: usize) -> &[u8] {
        &self.bytes[r * self.row_bytes..][..self.row_bytes]
    }

    pub(crate) fn scale(&self, r: usize) -> f32 {
        self.scales[r]
    }

    pub(crate) fn bias_correction(&self, r: usize) -> i32 {
        self.bias_corrections[r]
    }
}

/// A prefill work item's query rows (`offsets` into `q`) as its kernel takes them against
/// `head`'s keys: for an int8 cache, times the softmax scale `1 / sqrt(head_dim)` and rounded to
/// int8 on `table`'s K row encoder, once per item; `None` for the other caches.
pub(crate) fn prefill_queries(
    table: &KernelTable,
    q: &[f32],
    offsets: impl ExactSizeIterator<Item = usize>,
    head: &KvHeadView<'_>,
) -> Option<Int8Queries> {
    (head.dtype == KvDtype::Int8).then(|| {
        let factor = 1.0 / (head.head_dim as f32).sqrt();
        let mut rounded = Int8Queries::default();
        rounded.fill_with(table, q, offsets, head.head_dim, head.row_words, factor);
        rounded
    })
}

/// The queries `q` (`[rows, head_dim]`) as attention over a `dtype` cache uses them, for the
/// references (tests, the model's oracle path, attention maps): against int8 K each head's
/// `head_dim` values (times the softmax scale `1/sqrt(head_dim)`, as the kernel rounds them)
/// rounded to int8 with one scale, back in f32; against the other dtypes, `q` as given.
pub fn queries_as_used(dtype: KvDtype, q: &[f32], head_dim: usize) -> Cow<'_, [f32]> {
    if dtype != KvDtype::Int8 {
        return Cow::Borrowed(q);
    }
    assert!(head_dim > 0 && q.len().is_multiple_of(head_dim));
    let factor = 1.0 / (head_dim as f32).sqrt();
    let heads = q.len() / head_dim;
    let offsets = (0..heads).map(|h| h * head_dim);
    let rounded = Int8Queries::new(q, offsets, head_dim, head_dim.div_ceil(4), factor);
    let mut out = vec![0.0; q.len()];
    for (h, head) in out.chunks_exact_mut(head_dim).enumerate() {
        rounded.dequantize_row(h, head);
        head.iter_mut().for_each(|v| *v /= factor);
    }
    Cow::Owned(out)
}

/// `sum(q_i8 * k_u8)` over one stored K row (the definition [`scores_vnni`] is checked against).
#[cfg(test)]
pub(crate) fn raw_dot_reference(q_row: &[u8], k_row: &[u32]) -> i32 {
    k_row
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .zip(q_row)
        .map(|(k, &q)| k as i32 * q as i8 as i32)
        .sum()
}

/// An integer score loop (kernel table entry): [`scores_vnni_rows`]'s signature.
///
/// # Safety
/// As [`scores_vnni`], with `rows` in place of `R`.
pub(crate) type Int8ScoresFn = unsafe fn(
    queries: &Int8Queries,
    first_row: usize,
    rows: usize,
    kv: super::kv::KvHeadView<'_>,
    k0: usize,
    ntok: usize,
    p: &mut [f32],
    p_stride: usize,
);

/// [`scores_vnni`] for `rows` (1, 2 or 4: the tile's register blocks) query rows.
///
/// # Safety
/// As [`scores_vnni`].
#[cfg(target_arch = "x86_64")]
#[allow(
    clippy::too_many_arguments,
    reason = "a kernel-table score loop: the tile state it reads, passed in registers"
)]
pub(crate) unsafe fn scores_vnni_rows(
    queries: &Int8Queries,
    first_row: usize,
    rows: usize,
    kv: super::kv::KvHeadView<'_>,
    k0: usize,
    ntok: usize,
    p: &mut [f32],
    p_stride: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        match rows {
            4 => scores_vnni::<4>(queries, first_row, kv, k0, ntok, p, p_stride),
            2 => scores_vnni::<2>(queries, first_row, kv, k0, ntok, p, p_stride),
            1 => scores_vnni::<1>(queries, first_row, kv, k0, ntok, p, p_stride),
            _ => panic!("{rows} query rows: the tile blocks rows by 4, 2 and 1"),
        }
    }
}

/// Scores of query rows `first_row .. first_row + R` against keys `k0 .. k0 + ntok`:
/// `p[row * p_stride + t] = (sum(q_i8 * k_u8) - bias_correction) * q_scale * k_scale[k0 + t]`.
///
/// One `vpdpbusd` multiplies 64 key bytes (unsigned, as stored) by 64 query bytes (signed) and
/// adds them into 16 lanes; the f32 path decodes each byte to f32 (shift, mask, or, subtract)
/// before its FMA. Keys go 16 at a time: their lane vectors fold into one vector of 16 sums per
/// row ([`fold_4_keys`], then [`fold_quads`]), so the scaling and the store are vector ops too,
/// where summing each key's lanes on its own took a horizontal reduction and scalar ops per key
/// and row.
///
/// # Safety
/// AVX512-F/BW and VNNI must be present; `k0 + ntok <= kv.len`; the rows exist in `queries`;
/// `p` holds `(first_row + R) * p_stride` values and `ntok <= p_stride`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[allow(
    clippy::too_many_arguments,
    reason = "a kernel-table score loop: the tile state it reads, passed in registers"
)]
pub(crate) unsafe fn scores_vnni<const R: usize>(
    queries: &Int8Queries,
    first_row: usize,
    kv: super::kv::KvHeadView<'_>,
    k0: usize,
    ntok: usize,
    p: &mut [f32],
    p_stride: usize,
) {
    // Rows of a constant number of whole registers (head dims 128 and 64) get a copy of the loop
    // in which each key's loads and products unroll (see `scores_rows` for what it saved).
    // SAFETY: passed on from the caller.
    unsafe {
        match (
            kv.row_words / WORDS_PER_REGISTER,
            kv.row_words % WORDS_PER_REGISTER,
        ) {
            (2, 0) => scores_rows::<R, 2>(queries, first_row, kv, k0, ntok, p, p_stride),
            (1, 0) => scores_rows::<R, 1>(queries, first_row, kv, k0, ntok, p, p_stride),
            _ => scores_rows::<R, 0>(queries, first_row, kv, k0, ntok, p, p_stride),
        }
    }
}

/// Words (4 key bytes each) in one 512-bit register.
const WORDS_PER_REGISTER: usize = 16;

/// [`scores_vnni`] for rows of `NB` whole registers, or of any width if `NB == 0`.
///
/// Per key the work is two loads and two `vpdpbusd` a row (head dim 128), so the bookkeeping
/// around them counts: the row registers are constants when `NB > 0`.
///
/// # Safety
/// As [`scores_vnni`], and `kv.row_words == 16 * NB` if `NB > 0`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[allow(
    clippy::too_many_arguments,
    clippy::needless_range_loop,
    reason = "a kernel-table score loop: the tile state it reads, passed in registers; small register arrays"
)] // small register arrays
unsafe fn scores_rows<const R: usize, const NB: usize>(
    queries: &Int8Queries,
    first_row: usize,
    kv: super::kv::KvHeadView<'_>,
    k0: usize,
    ntok: usize,
    p: &mut [f32],
    p_stride: usize,
) {
    use core::arch::x86_64::*;
    let rw = kv.row_words;
    let (full, tail) = if NB > 0 {
        (NB, 0)
    } else {
        (rw / WORDS_PER_REGISTER, rw % WORDS_PER_REGISTER)
    };
    assert!(full * WORDS_PER_REGISTER + tail == rw);
    assert!(k0 + ntok <= kv.len && kv.k.len() >= kv.len * rw);
    let q: [*const u8; R] = core::array::from_fn(|r| queries.row(first_row + r).as_ptr());
    let q_scale: [f32; R] = core::array::from_fn(|r| queries.scale(first_row + r));
    let correction: [i32; R] = core::array::from_fn(|r| queries.bias_correction(first_row + r));
    let mut t = 0;
    while t + 16 <= ntok {
        // Level by level, so no more than 4 raw vectors per row are live at once.
        let mut quads = [[_mm512_setzero_si512(); 4]; R];
        for quad in 0..4 {
            let mut raw = [[_mm512_setzero_si512(); 4]; R];
            for (i, key) in (k0 + t + 4 * quad..).take(4).enumerate() {
                // SAFETY: key < kv.len (asserted above); q points at rows of `queries`.
                let dots = unsafe { dot_key(&q, kv.k.as_ptr().add(key * rw), full, tail) };
                for r in 0..R {
                    raw[r][i] = dots[r];
                }
            }
            for r in 0..R {
                quads[r][quad] = fold_4_keys(raw[r]);
            }
        }
        // SAFETY: 16 scales of cached keys.
        let k_scale = unsafe { _mm512_loadu_ps(kv.k_scale[k0 + t..][..16].as_ptr()) };
        for r in 0..R {
            let sums = _mm512_sub_epi32(fold_quads(quads[r]), _mm512_set1_epi32(correction[r]));
            let scale = _mm512_mul_ps(k_scale, _mm512_set1_ps(q_scale[r]));
            let scores = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), scale);
            let dst = &mut p[(first_row + r) * p_stride + t..][..16];
            // SAFETY: dst holds 16 floats.
            unsafe { _mm512_storeu_ps(dst.as_mut_ptr(), scores) };
        }
        t += 16;
    }
    for key in k0 + t..k0 + ntok {
        // SAFETY: key < kv.len (asserted above); q points at rows of `queries`.
        let dots = unsafe { dot_key(&q, kv.k.as_ptr().add(key * rw), full, tail) };
        for r in 0..R {
            let raw = _mm512_reduce_add_epi32(dots[r]) - correction[r];
            p[(first_row + r) * p_stride + key - k0] = raw as f32 * (q_scale[r] * kv.k_scale[key]);
        }
    }
}

/// The 16 lanes of `sum(q_i8 * k_u8)` of the K row at `k_row` (`full` whole registers of words,
/// then `tail` words) for the query rows starting at `q[r]` (their sum is the raw dot product).
///
/// # Safety
/// AVX512-F/BW and VNNI must be present; `k_row` points at `16 * full + tail` words; each `q[r]`
/// points at a query row of `Int8Queries` (`row_bytes >= 4 * row_words` bytes, a multiple of 64).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn dot_key<const R: usize>(
    q: &[*const u8; R],
    k_row: *const u32,
    full: usize,
    tail: usize,
) -> [core::arch::x86_64::__m512i; R] {
    use core::arch::x86_64::*;
    let mut acc = [_mm512_setzero_si512(); R];
    // SAFETY: the K row holds the full registers and then the masked tail; each query row holds
    // row_bytes >= 4 * (16 * full + tail) bytes, a multiple of 64.
    unsafe {
        for b in 0..full {
            let k = _mm512_loadu_si512(k_row.add(WORDS_PER_REGISTER * b).cast());
            for r in 0..R {
                let qv = _mm512_loadu_si512(q[r].add(64 * b).cast());
                acc[r] = _mm512_dpbusd_epi32(acc[r], k, qv);
            }
        }
        if tail != 0 {
            let tail_mask: __mmask16 = (1u16 << tail) - 1;
            let k =
                _mm512_maskz_loadu_epi32(tail_mask, k_row.add(WORDS_PER_REGISTER * full).cast());
            for r in 0..R {
                let qv = _mm512_loadu_si512(q[r].add(64 * full).cast());
                acc[r] = _mm512_dpbusd_epi32(acc[r], k, qv);
            }
        }
    }
    acc
}

/// Four keys' lane vectors `[a, b, c, d]` -> one vector whose 128-bit chunk `c` holds partial sums
/// of (a, b, c, d) in its four lanes (the other chunks hold the other partial sums).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn fold_4_keys(v: [core::arch::x86_64::__m512i; 4]) -> core::arch::x86_64::__m512i {
    use core::arch::x86_64::*;
    // Lanes 4c..4c+3 of a pair: (a0 a1 a2 a3) and (b0 b1 b2 b3) -> (a0+a2, b0+b2, a1+a3, b1+b3).
    let ab = _mm512_add_epi32(
        _mm512_unpacklo_epi32(v[0], v[1]),
        _mm512_unpackhi_epi32(v[0], v[1]),
    );
    let cd = _mm512_add_epi32(
        _mm512_unpacklo_epi32(v[2], v[3]),
        _mm512_unpackhi_epi32(v[2], v[3]),
    );
    // (a, b, a, b) and (c, d, c, d) -> (a, b, c, d) per chunk.
    _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd))
}

/// Four [`fold_4_keys`] results (keys 0-3, 4-7, 8-11, 12-15) -> the 16 keys' sums, in key order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn fold_quads(v: [core::arch::x86_64::__m512i; 4]) -> core::arch::x86_64::__m512i {
    use core::arch::x86_64::*;
    // Chunks (x0 x1 x2 x3), (y0 y1 y2 y3) -> (x0 x2 y0 y2) + (x1 x3 y1 y3).
    let pair = |x, y| {
        _mm512_add_epi32(
            _mm512_shuffle_i32x4::<0b10_00_10_00>(x, y),
            _mm512_shuffle_i32x4::<0b11_01_11_01>(x, y),
        )
    };
    // (k0-3 twice, k4-7 twice) and (k8-11 twice, k12-15 twice), each half a sum -> key order.
    pair(pair(v[0], v[1]), pair(v[2], v[3]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::kv::{KvDtype, KvLayer};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// The VNNI scores equal the integer definition times the scales (up to the f32 rounding
        /// of that product), for head dims that leave a tail of words, and any row count; 128
        /// and 64 (whole registers) take their own copy of the loop, so they are drawn often.
        #[test]
        fn vnni_scores_equal_the_integer_dot_products(
            head_dim in prop_oneof![1usize..200, Just(128usize), Just(64usize), 61usize..=64],
            keys in 1usize..40,
            seed in 0u32..1000,
        ) {
            if !(crate::SimdLevel::Avx512.is_supported() && crate::dispatch::cpu_features().avx512_vnni) {
                return Ok(());
            }
            let value = |i: usize| (((i as u32).wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 100.0 - 10.0;
            let rows_k: Vec<f32> = (0..keys * head_dim).map(value).collect();
            let rows_v: Vec<f32> = rows_k.iter().map(|x| -x).collect();
            let mut layer = KvLayer::new(KvDtype::Int8, 1, head_dim).unwrap();
            layer.reserve(keys).unwrap();
            layer.append(&rows_k, &rows_v).unwrap();
            let kv = layer.head(0);
            let q: Vec<f32> = (0..3 * head_dim).map(|i| value(i + 7777)).collect();
            let queries = Int8Queries::new(&q, (0..3).map(|r| r * head_dim), head_dim, kv.row_words, 0.3);
            let mut p = vec![0.0f32; 3 * keys];
            // SAFETY: VNNI checked above; sizes as the contract asks.
            unsafe {
                scores_vnni::<2>(&queries, 0, kv, 0, keys, &mut p, keys);
                scores_vnni::<1>(&queries, 2, kv, 0, keys, &mut p, keys);
            }
            for r in 0..3 {
                for t in 0..keys {
                    let k_row = &kv.k[t * kv.row_words..][..kv.row_words];
                    let raw = raw_dot_reference(queries.row(r), k_row) - queries.bias_correction(r);
                    let want = raw as f32 * (queries.scale(r) * kv.k_scale[t]);
                    prop_assert_eq!(p[r * keys + t], want, "row {} key {}", r, t);
                }
            }
        }
    }

    proptest! {
        /// The vectorized rounding gives `fill`'s bytes, scales and bias corrections at every
        /// level, on head dims that are not multiples of a word or a register, through NaN, zero
        /// rows and values past 127 steps.
        #[test]
        fn fill_with_the_row_encoder_gives_fill_s_rows(
            head_dim in 1usize..=140,
            rows in 1usize..6,
            seed in 0u32..1000,
            special in 0usize..4,
        ) {
            let mut q: Vec<f32> = (0..rows * head_dim)
                .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 4001) as f32 / 100.0 - 20.0)
                .collect();
            let at = seed as usize % q.len();
            match special {
                0 => q[at] = f32::NAN,
                1 => q[..head_dim].fill(0.0),
                2 => q[at] = 1e30,
                _ => {}
            }
            let row_words = head_dim.div_ceil(4);
            let offsets = || (0..rows).map(|r| r * head_dim);
            let plain = Int8Queries::new(&q, offsets(), head_dim, row_words, 0.3);
            for level in crate::SimdLevel::all_supported() {
                let table = KernelTable::for_level(level).expect("supported");
                let mut fast = Int8Queries::default();
                fast.fill_with(table, &q, offsets(), head_dim, row_words, 0.3);
                prop_assert_eq!(&fast.bytes, &plain.bytes, "{:?}", level);
                let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                prop_assert_eq!(bits(&fast.scales), bits(&plain.scales), "{:?}", level);
                prop_assert_eq!(&fast.bias_corrections, &plain.bias_corrections, "{:?}", level);
            }
        }
    }

    #[test]
    fn rounded_queries_stay_within_half_a_step() {
        let q: Vec<f32> = (0..70).map(|i| (i as f32 - 33.0) / 7.0).collect();
        let queries = Int8Queries::new(&q, [0usize].into_iter(), 70, 18, 0.5);
        let mut back = vec![0.0; 70];
        queries.dequantize_row(0, &mut back);
        let step = queries.scale(0);
        assert!(step > 0.0);
        for (x, y) in q.iter().zip(&back) {
            assert!((x * 0.5 - y).abs() <= 0.5 * step * 1.0001, "{x} -> {y}");
        }
        let zero = Int8Queries::new(&[0.0; 8], [0usize].into_iter(), 8, 2, 1.0);
        assert_eq!((zero.scale(0), zero.bias_correction(0)), (0.0, 0));
    }
}
