//! Decoding a token allocates no activation buffer: the forward pass writes into the scratch
//! its cache owns and the logits buffer the caller reuses. Counted with a global allocator that
//! records every allocation at least as large as one hidden-state row.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use gattn_model::init::{Preset, write_random_checkpoint};
use gattn_model::{GateMode, KvDtype, LogitsFor, Qwen3Model, WeightFormat};
use gattn_tensor::DType;

struct CountingAllocator;

static COUNTING: AtomicBool = AtomicBool::new(false);
static THRESHOLD: AtomicUsize = AtomicUsize::new(usize::MAX);
static LARGE_ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) && layout.size() >= THRESHOLD.load(Ordering::Relaxed) {
            LARGE_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Allocations of at least `threshold` bytes made by `f` (on any thread).
fn large_allocations_in(threshold: usize, f: impl FnOnce()) -> usize {
    THRESHOLD.store(threshold, Ordering::Relaxed);
    LARGE_ALLOCATIONS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    f();
    COUNTING.store(false, Ordering::Relaxed);
    LARGE_ALLOCATIONS.load(Ordering::Relaxed)
}

#[test]
fn decoding_a_token_allocates_no_activation_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let config = Preset::Small.config(GateMode::Elementwise);
    write_random_checkpoint(dir.path(), &config, DType::BF16, 3).unwrap();
    // One hidden row in f32: every activation buffer (hidden, q/k/v, MLP, logits) is at least
    // this large, the kernels' bookkeeping (job lists, partial softmax rows) smaller.
    let row_bytes = config.hidden_size * 4;
    // Run inside a pool: calls from outside one go through rayon's injector queue, which itself
    // allocates a block now and then.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    pool.install(|| check_decode_allocations(dir.path(), row_bytes));
}

fn check_decode_allocations(dir: &std::path::Path, row_bytes: usize) {
    for format in [WeightFormat::F32, WeightFormat::Bf16, WeightFormat::Int8] {
        let mut model = Qwen3Model::load(dir, format).unwrap();
        // The claim is the fast path's (f32 weights load on the reference backend).
        model.backend = gattn_model::Backend::Fast;
        // The KV cache grows in chunks of 4096 tokens: this run stays inside the first one.
        model.kv_dtype = KvDtype::Bf16;
        let mut cache = model.new_cache(64);
        let mut logits = Vec::new();
        model
            .forward_into(&[1, 2, 3, 4], &mut cache, LogitsFor::Last, &mut logits)
            .unwrap();
        // The first decode step sizes the one-token buffers (the prefill sized them for 4).
        model
            .forward_into(&[5], &mut cache, LogitsFor::Last, &mut logits)
            .unwrap();
        let large = large_allocations_in(row_bytes, || {
            for token in 6..10 {
                model
                    .forward_into(&[token], &mut cache, LogitsFor::Last, &mut logits)
                    .unwrap();
            }
        });
        assert_eq!(
            large, 0,
            "{format:?}: allocations of >= {row_bytes} bytes while decoding"
        );
        // The counter sees allocations: a fresh cache's first step allocates its buffers.
        let mut fresh = model.new_cache(64);
        let first = large_allocations_in(row_bytes, || {
            model
                .forward_into(&[1], &mut fresh, LogitsFor::Last, &mut logits)
                .unwrap();
        });
        assert!(
            first > 0,
            "{format:?}: the counting allocator counted nothing"
        );
    }
}
