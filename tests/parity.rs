//! The reference forward pass against the committed oracle logits: Hugging Face transformers for
//! the baseline cases, the independent numpy reference for gated and qk-norm-off ones.

use gattn_model::{LogitsFor, Qwen3Model, WeightFormat};
use gattn_tests::{Fixture, max_abs_diff};

fn check_full_prefill(fixture: &Fixture, format: WeightFormat) {
    let model = Qwen3Model::load(&fixture.dir, format).unwrap();
    let mut cache = model.new_cache(fixture.prompt_ids.len());
    let logits = model
        .forward(&fixture.prompt_ids, &mut cache, LogitsFor::All)
        .unwrap();
    let err = max_abs_diff(&logits, &fixture.expected_logits);
    println!(
        "{} ({}, {}): max abs error {err:.2e}",
        fixture.name,
        fixture.oracle,
        format.name()
    );
    assert!(
        err <= fixture.tolerance,
        "{}: max abs error {err} > {}",
        fixture.name,
        fixture.tolerance
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
    // The checkpoint is bf16: holding it as bf16 changes nothing but the accumulation order.
    check_full_prefill(
        &Fixture::load("baseline_untied_bias_bf16"),
        WeightFormat::Bf16,
    );
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
