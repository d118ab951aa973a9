//! Decoding a token allocates nothing: after the first decode step on a cache, a step (the
//! forward pass into the caller's logits buffer, then sampling) makes no heap allocation at all,
//! on any thread (the rayon workers and the spinning team included). Counted with a global
//! allocator that counts every allocation while a flag is up.
//!
//! Every decode configuration: int8 and bf16 weights, bf16 and int8 KV, headwise and
//! elementwise gates, 1 and 2 threads; the cache grows past 2048 keys during the counted steps,
//! where decode splits the sequence into parts at 2 threads (2 KV heads: `decode_parts` = 2).
//! The steps run inside a pool: a call from outside one goes through rayon's injector queue,
//! which allocates a block of its own every 63 calls.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use gattn_kernels::attention::decode_parts;
use gattn_model::init::{Preset, write_random_checkpoint};
use gattn_model::{
    Backend, GateMode, KvDtype, LogitsFor, Qwen3Model, Sampler, SamplingParams, WeightFormat,
};
use gattn_tensor::DType;

struct CountingAllocator;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
/// The sizes of the first few counted allocations, for the failure message.
static FIRST_SIZES: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

fn count(layout: Layout) {
    if COUNTING.load(Ordering::Relaxed) {
        let seen = ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        if let Some(slot) = FIRST_SIZES.get(seen) {
            slot.store(layout.size(), Ordering::Relaxed);
        }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The allocations (and the sizes of the first few) made by `f`, on any thread.
fn allocations_in(f: impl FnOnce()) -> (usize, Vec<usize>) {
    ALLOCATIONS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    f();
    COUNTING.store(false, Ordering::Relaxed);
    let count = ALLOCATIONS.load(Ordering::Relaxed);
    let sizes = FIRST_SIZES[..count.min(FIRST_SIZES.len())]
        .iter()
        .map(|s| s.load(Ordering::Relaxed))
        .collect();
    (count, sizes)
}

/// Prompt tokens: the counted steps then cross 2048 keys, where 2 threads split decode in two.
const PROMPT: usize = 2044;
const COUNTED_STEPS: usize = 8;

#[test]
fn decoding_a_token_allocates_nothing() {
    for gate in [GateMode::Headwise, GateMode::Elementwise] {
        let dir = tempfile::tempdir().unwrap();
        let config = Preset::Tiny.config(gate);
        write_random_checkpoint(dir.path(), &config, DType::BF16, 3).unwrap();
        let kv_heads = config.num_key_value_heads;
        assert_eq!(decode_parts(kv_heads, PROMPT + 1, 2), 1);
        assert_eq!(decode_parts(kv_heads, PROMPT + COUNTED_STEPS, 2), 2);
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for format in [WeightFormat::Int8, WeightFormat::Bf16] {
                for kv in [KvDtype::Bf16, KvDtype::Int8] {
                    let what = format!("{gate:?} gate, {threads} threads, {format:?}, {kv:?} KV");
                    pool.install(|| check_decode_allocations(dir.path(), format, kv, &what));
                }
            }
        }
    }
}

fn check_decode_allocations(dir: &std::path::Path, format: WeightFormat, kv: KvDtype, what: &str) {
    let mut model = Qwen3Model::load(dir, format).unwrap();
    assert_eq!(model.backend, Backend::Fast, "{what}");
    model.kv_dtype = kv;
    let mut cache = model.new_cache(PROMPT + 2 * COUNTED_STEPS);
    let mut logits = Vec::new();
    let prompt: Vec<u32> = (0..PROMPT as u32).map(|t| t % 500 + 1).collect();
    model
        .forward_into(&prompt, &mut cache, LogitsFor::Last, &mut logits)
        .unwrap();
    let mut sampler = Sampler::new(SamplingParams {
        temperature: 0.8,
        top_k: 40,
        top_p: 0.95,
        seed: 1,
    });
    // The first decode step sizes the one-token buffers (the prefill sized them for a chunk).
    let mut token = sampler.sample(&logits);
    model
        .forward_into(&[token], &mut cache, LogitsFor::Last, &mut logits)
        .unwrap();
    token = sampler.sample(&logits);
    let (count, sizes) = allocations_in(|| {
        for _ in 0..COUNTED_STEPS {
            model
                .forward_into(&[token], &mut cache, LogitsFor::Last, &mut logits)
                .unwrap();
            token = sampler.sample(&logits);
        }
    });
    assert_eq!(
        count, 0,
        "{what}: {count} allocations while decoding (the first of {sizes:?} bytes)"
    );
    assert!(cache.len() > 2048, "{what}: the split decode ran");
    // The counter sees allocations: a fresh cache's first step allocates its buffers.
    let mut fresh = model.new_cache(8);
    let (first, _) = allocations_in(|| {
        model
            .forward_into(&[1], &mut fresh, LogitsFor::Last, &mut logits)
            .unwrap();
    });
    assert!(first > 0, "{what}: the counting allocator counted nothing");
}
