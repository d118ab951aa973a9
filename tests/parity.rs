//! The reference forward pass against the committed oracle logits: Hugging Face transformers for
//! the baseline cases, the independent numpy reference for gated and qk-norm-off ones.

use gattn_model::{Backend, KvDtype, LogitsFor, Qwen3Model, WeightFormat};
use gattn_tests::{Fixture, max_abs_diff};

/// Tolerance for bf16 weights against `tight`: where the AVX512-BF16 kernels run, they
/// round the activations of every matmul to bf16 (relative error 2^-8, the same
/// rounding a bf16 KV cache applies to K and V, allowed 3e-2 below); measured up to 3.3e-2 on
/// these fixtures (logits max ~5), so 5e-2. Elsewhere only the accumulation order differs.
fn bf16_weights_tolerance(tight: f32) -> f32 {
    if gattn_kernels::KernelTable::current().bf16_rounds_activations() {
        5e-2
    } else {
        tight
    }
}

fn check_full_prefill(fixture: &Fixture, format: WeightFormat) {
    for path in [Backend::Reference, Backend::Fast] {
        check_full_prefill_with(fixture, format, path, KvDtype::F32, fixture.tolerance);
    }
}

fn check_full_prefill_with(
    fixture: &Fixture,
    format: WeightFormat,
    path: Backend,
    kv: KvDtype,
    tolerance: f32,
) {
    let mut model = Qwen3Model::load(&fixture.dir, format).unwrap();
    model.backend = path;
    model.kv_dtype = kv;
    let mut cache = model.new_cache(fixture.prompt_ids.len());
    let logits = model
        .forward(&fixture.prompt_ids, &mut cache, LogitsFor::All)
        .unwrap();
    let err = max_abs_diff(&logits, &fixture.expected_logits);
    println!(
        "{} ({}, {}, {path:?} attention, {} KV): max abs error {err:.2e}",
        fixture.name,
        fixture.oracle,
        format.name(),
        kv.name()
    );
    assert!(
        err <= tolerance,
        "{} {path:?} {kv:?}: max abs error {err} > {tolerance}",
        fixture.name
    );
}

#[test]
fn every_fixture_matches_its_oracle_in_f32() {
    let names = Fixture::all_names();
    assert!(names.len() >= 11, "fixtures missing: {names:?}");
    for name in names {
        check_full_prefill(&Fixture::load(&name), WeightFormat::F32);
    }
}

#[test]
fn bf16_weights_used_in_place_match_too() {
    // The checkpoint is bf16: holding it as bf16 changes nothing but the accumulation order
    // (and, with AVX512-BF16, the activations' rounding: see `bf16_weights_tolerance`).
    let fixture = Fixture::load("baseline_untied_bias_bf16");
    for path in [Backend::Reference, Backend::Fast] {
        let tolerance = bf16_weights_tolerance(fixture.tolerance);
        check_full_prefill_with(&fixture, WeightFormat::Bf16, path, KvDtype::F32, tolerance);
    }
}

/// Prefill of the first part, then one token at a time: the same logits as one full prefill.
#[test]
fn prefill_then_decode_equals_full_prefill() {
    for name in [
        "baseline_gqa_tied_f32",
        "headwise_gqa",
        "elementwise_gqa",
        "baseline_yarn",
    ] {
        let fixture = Fixture::load(name);
        let model = Qwen3Model::load(&fixture.dir, WeightFormat::F32).unwrap();
        let vocab = model.config.vocab_size;
        let ids = &fixture.prompt_ids;
        let split = ids.len() / 2;
        let mut cache = model.new_cache(ids.len());
        let mut logits = model
            .forward(&ids[..split], &mut cache, LogitsFor::All)
            .unwrap();
        for &token in &ids[split..] {
            logits.extend(
                model
                    .forward(&[token], &mut cache, LogitsFor::Last)
                    .unwrap(),
            );
        }
        assert_eq!(logits.len(), ids.len() * vocab);
        let err = max_abs_diff(&logits, &fixture.expected_logits);
        assert!(
            err <= fixture.tolerance,
            "{name}: prefill+decode error {err}"
        );
    }
}

#[test]
fn last_logits_equal_the_last_row_of_all() {
    let fixture = Fixture::load("elementwise_mha");
    let model = Qwen3Model::load(&fixture.dir, WeightFormat::F32).unwrap();
    let n = fixture.prompt_ids.len();
    let all = model
        .forward(&fixture.prompt_ids, &mut model.new_cache(n), LogitsFor::All)
        .unwrap();
    let last = model
        .forward(
            &fixture.prompt_ids,
            &mut model.new_cache(n),
            LogitsFor::Last,
        )
        .unwrap();
    assert_eq!(&all[(n - 1) * model.config.vocab_size..], &last[..]);
}

/// bf16 and int8 KV caches round K and V: the logits (max ~5 here) move by at most 3e-2 (bf16) and
/// 0.15 (int8, one scale per token and head), measured 1.6e-2 and 7.9e-2.
#[test]
fn bf16_and_int8_kv_caches_stay_close_to_the_oracle() {
    for name in ["baseline_gqa_tied_f32", "headwise_gqa", "elementwise_mha"] {
        let fixture = Fixture::load(name);
        check_full_prefill_with(
            &fixture,
            WeightFormat::F32,
            Backend::Fast,
            KvDtype::Bf16,
            3e-2,
        );
        check_full_prefill_with(
            &fixture,
            WeightFormat::F32,
            Backend::Fast,
            KvDtype::Int8,
            0.15,
        );
    }
}

/// Decode through the fused kernel with each KV format equals the reference attention over the
/// same (rounded) cache.
#[test]
fn fused_decode_equals_reference_decode_for_every_kv_format() {
    let fixture = Fixture::load("elementwise_gqa");
    for kv in [KvDtype::F32, KvDtype::Bf16, KvDtype::Int8] {
        let run = |path| {
            let mut model = Qwen3Model::load(&fixture.dir, WeightFormat::F32).unwrap();
            model.backend = path;
            model.kv_dtype = kv;
            let mut cache = model.new_cache(fixture.prompt_ids.len());
            let mut logits = Vec::new();
            for &token in &fixture.prompt_ids {
                logits.extend(
                    model
                        .forward(&[token], &mut cache, LogitsFor::Last)
                        .unwrap(),
                );
            }
            logits
        };
        let err = max_abs_diff(&run(Backend::Fast), &run(Backend::Reference));
        assert!(err < 1e-4, "{kv:?}: fused vs reference decode {err}");
    }
}

/// int8 weights (blocks of 64) and activations against the oracle, logits max ~5: these
/// fixtures have k = 64 or 96, so a block is a whole row and its scale follows the row's largest
/// weight. Measured 0.171 / 0.065 / 0.135 here (0.133 / 0.069 / 0.114 with blocks of 32).
const INT8_WEIGHTS_TOLERANCE: f32 = 0.25;

/// bf16 weights through the SIMD kernels equal the reference (the checkpoint is bf16, so only the
/// accumulation order differs); int8 weights stay within the error their block scales imply.
#[test]
fn simd_weight_formats_stay_close_to_the_oracle() {
    let bf16 = Fixture::load("headwise_mha"); // a bf16 checkpoint
    check_full_prefill_with(
        &bf16,
        WeightFormat::Bf16,
        Backend::Fast,
        KvDtype::F32,
        bf16_weights_tolerance(1e-4),
    );
    for name in [
        "baseline_gqa_tied_f32",
        "elementwise_gqa",
        "baseline_untied_bias_bf16",
    ] {
        let fixture = Fixture::load(name);
        check_full_prefill_with(
            &fixture,
            WeightFormat::Int8,
            Backend::Fast,
            KvDtype::F32,
            INT8_WEIGHTS_TOLERANCE,
        );
    }
}

/// The attention-sink share streamed by the fused kernel equals the one read off the reference
/// path's materialized attention maps, layer by layer.
#[test]
fn streamed_sink_share_equals_the_share_in_the_attention_maps() {
    for name in ["baseline_gqa_tied_f32", "headwise_gqa", "elementwise_gqa"] {
        let fixture = Fixture::load(name);
        let mut model = Qwen3Model::load(&fixture.dir, WeightFormat::F32).unwrap();
        let n = fixture.prompt_ids.len();
        // Maps from the reference backend, statistics from the fast one, both over an f32 cache.
        assert_eq!(model.backend, Backend::Reference);
        let mut maps = Vec::new();
        model
            .forward_with_maps(
                &fixture.prompt_ids,
                &mut model.new_cache(n),
                LogitsFor::Last,
                Some(&mut maps),
            )
            .unwrap();
        let mut stats = vec![gattn_model::LayerStats::default(); model.layers.len()];
        model.backend = Backend::Fast;
        model
            .forward_with_stats(
                &fixture.prompt_ids,
                &mut model.new_cache(n),
                LogitsFor::Last,
                &mut stats,
            )
            .unwrap();
        for (layer, (map, stat)) in maps.iter().zip(&stats).enumerate() {
            // map: [n, heads, n]; the share on key 0, averaged over query rows and heads.
            let rows: Vec<f32> = map.chunks_exact(n).map(|row| row[0]).collect();
            let from_maps = rows.iter().map(|&p| p as f64).sum::<f64>() / rows.len() as f64;
            let streamed = stat.attention.sink_share().unwrap();
            assert!(
                (from_maps - streamed).abs() < 1e-5,
                "{name} layer {layer}: {from_maps} vs {streamed}"
            );
        }
    }
}

/// A prompt run in chunks of 1, 3 or 5 tokens gives the logits of one chunk, with every weight
/// format (each chunk attends to the cache the earlier ones filled).
#[test]
fn chunked_prefill_equals_one_chunk() {
    for name in ["baseline_gqa_tied_f32", "headwise_gqa", "elementwise_gqa"] {
        let fixture = Fixture::load(name);
        let n = fixture.prompt_ids.len();
        for format in [WeightFormat::F32, WeightFormat::Bf16, WeightFormat::Int8] {
            let mut model = Qwen3Model::load(&fixture.dir, format).unwrap();
            model.kv_dtype = KvDtype::F32;
            model.prefill_chunk = n;
            let whole = model
                .forward(&fixture.prompt_ids, &mut model.new_cache(n), LogitsFor::All)
                .unwrap();
            for chunk in [1, 3, 5] {
                model.prefill_chunk = chunk;
                let mut cache = model.new_cache(n);
                let chunked = model
                    .forward(&fixture.prompt_ids, &mut cache, LogitsFor::All)
                    .unwrap();
                let err = max_abs_diff(&chunked, &whole);
                // int8 activations are quantized per token, so chunking changes nothing there
                // either; only the accumulation order of the kernels may differ. bf16: one-token
                // chunks take the mat-vec (f32 activations), the rest may round them to bf16;
                // so do int8 mat-mats on AMX bf16 tiles (`GATTN_AMX_INT8=bf16`), where one-token
                // chunks quantize them to int8: then the two differ by the activations' int8
                // rounding, which the int8 weights' tolerance against the oracle covers.
                let table = gattn_kernels::KernelTable::current();
                let tolerance = match format {
                    WeightFormat::Bf16 => bf16_weights_tolerance(1e-4),
                    WeightFormat::Int8 if table.int8_matmat_rounds_activations_to_bf16() => {
                        INT8_WEIGHTS_TOLERANCE
                    }
                    _ => 1e-4,
                };
                assert!(err <= tolerance, "{name} {format:?} chunk {chunk}: {err}");
                assert_eq!(cache.len(), n);
            }
        }
    }
}

/// `prefill` stops after the chunk where its callback says so, with those tokens cached, and
/// a later call continues from there to the same logits.
#[test]
fn prefill_stops_between_chunks_and_resumes() {
    let fixture = Fixture::load("elementwise_gqa");
    let mut model = Qwen3Model::load(&fixture.dir, WeightFormat::F32).unwrap();
    model.prefill_chunk = 4;
    let ids = &fixture.prompt_ids;
    assert!(
        ids.len() > 8,
        "the fixture's prompt is long enough to split"
    );
    let mut cache = model.new_cache(ids.len());
    let mut logits = Vec::new();
    let mut seen = Vec::new();
    let end = model
        .prefill(ids, &mut cache, LogitsFor::Last, &mut logits, |done| {
            seen.push(done);
            done < 8
        })
        .unwrap();
    assert_eq!(end, gattn_model::PrefillEnd::Stopped { tokens_done: 8 });
    assert_eq!(seen, [4, 8]);
    assert_eq!(cache.len(), 8);
    model
        .forward_into(&ids[8..], &mut cache, LogitsFor::Last, &mut logits)
        .unwrap();
    let vocab = model.config.vocab_size;
    let expected = &fixture.expected_logits[(ids.len() - 1) * vocab..];
    assert!(max_abs_diff(&logits, expected) <= fixture.tolerance);
}

/// Attention maps come from the reference backend only, statistics from the fast one: asked of
/// the other, the call is refused, naming the backend, before the cache is touched.
#[test]
fn a_probe_asked_of_the_wrong_backend_is_refused_before_running() {
    let fixture = Fixture::load("headwise_gqa");
    let mut model = Qwen3Model::load(&fixture.dir, WeightFormat::F32).unwrap();
    let ids = &fixture.prompt_ids;
    model.backend = Backend::Fast;
    let mut cache = model.new_cache(ids.len());
    let mut maps = Vec::new();
    let err = model
        .forward_with_maps(ids, &mut cache, LogitsFor::Last, Some(&mut maps))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("attention maps") && err.contains("reference"),
        "{err}"
    );
    assert_eq!(cache.len(), 0);
    model.backend = Backend::Reference;
    let mut stats = vec![gattn_model::LayerStats::default(); model.layers.len()];
    let err = model
        .forward_with_stats(ids, &mut cache, LogitsFor::Last, &mut stats)
        .unwrap_err()
        .to_string();
    assert!(err.contains("statistics") && err.contains("fast"), "{err}");
    assert_eq!(cache.len(), 0);
}
