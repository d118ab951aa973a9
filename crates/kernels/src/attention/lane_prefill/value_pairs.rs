//! The values of one bf16 KV head as `vdpbf16ps` takes them in `P V`: bf16 pairs of two keys,
//! packed once per thread and KV head in a prefill call and shared by the thread's blocks of that
//! head (each block of 32 query rows used to pack every tile of the head again: at depth 32768
//! that was an eighth of the attention's time). An int8 cache's values are packed per tile
//! instead (`block`'s decoded tile), from their stored bytes.
//!
//! Pair `i` holds keys `2i` and `2i + 1` (the even key in the low half), `slots` words in the
//! block's slot order: `[pair][slot]`. Only whole pairs of stored keys are cached; a block whose
//! keys end on an even key packs that last pair itself, with a zero key (so the bits are the
//! generic path's).
//!
//! A thread keeps its buffer between calls: `keys * head_dim * 2` bytes for the longest head it
//! packed (32 MiB at 131072 keys and head_dim 128).

use std::cell::RefCell;
#[cfg(target_arch = "x86_64")]
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(target_arch = "x86_64")]
use crate::attention::kv::KvHeadView;

/// Which values a cache holds: one prefill call's KV head (the cache's contents can change
/// between calls, so a new call never reuses them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ValuesKey {
    call: u64,
    kv_head: usize,
}

static CALLS: AtomicU64 = AtomicU64::new(0);

impl ValuesKey {
    /// A key for each KV head of a new call: `ValuesKey::for_call()(j)`.
    pub(crate) fn for_call() -> impl Fn(usize) -> ValuesKey + Copy + Send + Sync {
        let call = CALLS.fetch_add(1, Ordering::Relaxed);
        move |kv_head| ValuesKey { call, kv_head }
    }
}

/// One thread's packed pairs of its current KV head.
#[derive(Default)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the dot-product kernels are x86-64's
struct PackedValues {
    key: Option<ValuesKey>,
    /// The whole pairs packed so far, `start .. end` (a split's part starts past pair 0),
    /// `[end - start][slots]`.
    start: usize,
    end: usize,
    words: Vec<u32>,
}

thread_local! {
    static PACKED_VALUES: RefCell<PackedValues> = RefCell::new(PackedValues::default());
}

/// Calls `f` with the head's packed pairs `pairs` (`[pairs.len()][slots]`), packing the ones this
/// thread has not packed yet for `key` (from the first one asked for: a thread that goes on
/// along the keys extends what it has, one that starts before it packs again).
/// `2 * pairs.end <= kv.len`, `slots = 2 * kv.row_words`.
///
/// # Safety
/// The CPU has AVX-512 (the packing kernels are compiled for it).
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn with_pairs<R>(
    key: ValuesKey,
    kv: KvHeadView<'_>,
    slots: usize,
    pairs: Range<usize>,
    f: impl FnOnce(&[u32]) -> R,
) -> R {
    assert!(2 * pairs.end <= kv.len);
    PACKED_VALUES.with_borrow_mut(|cache| {
        if cache.key != Some(key) || !(cache.start..=cache.end).contains(&pairs.start) {
            cache.key = Some(key);
            (cache.start, cache.end) = (pairs.start, pairs.start);
        }
        let rw = kv.row_words;
        if cache.end < pairs.end {
            cache.words.resize((pairs.end - cache.start) * slots, 0);
            for i in cache.end..pairs.end {
                let even = &kv.v[2 * i * rw..][..rw];
                let odd = &kv.v[(2 * i + 1) * rw..][..rw];
                let pair = &mut cache.words[(i - cache.start) * slots..][..slots];
                // SAFETY: the caller's contract (AVX-512).
                unsafe { pack_pair(even, Some(odd), pair) };
            }
            cache.end = pairs.end;
        }
        f(&cache.words[(pairs.start - cache.start) * slots..(pairs.end - cache.start) * slots])
    })
}

/// The stored bf16 rows of two keys (`odd` None: a zero key) as one pair row of `pair.len()`
/// slots: slot `w` takes the words' low halves, `row_words + w` the high ones.
///
/// # Safety
/// The CPU has AVX-512 (the packing kernel is compiled for it).
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn pack_pair(even: &[u32], odd: Option<&[u32]>, pair: &mut [u32]) {
    let zero_key;
    let odd = match odd {
        Some(odd) => odd,
        None => {
            zero_key = vec![0; even.len()];
            &zero_key
        }
    };
    let (low, high) = pair.split_at_mut(even.len());
    // SAFETY: the caller's contract (AVX-512).
    unsafe { super::dots_avx512::pack_word_pairs(even, odd, low, high) };
}
