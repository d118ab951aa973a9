//! config.json under mutation: fields of a valid fixture config replaced by values of the wrong
//! type, out of range or at the size limits, removed, or the text cut short. Never a panic, and
//! every error names config.json and the field at fault (the user must know what to fix), and
//! every accepted config satisfies the documented constraints.

#[path = "../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod fuzz_checks;

use fuzz_checks::CONFIG_FIELDS;
use gattn_tests::fixtures_dir;
use proptest::prelude::*;
use serde_json::{Value, json};

/// The numeric fields, for the sweep of edge values.
const NUMERIC_FIELDS: [&str; 10] = [
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "rms_norm_eps",
    "rope_theta",
    "max_position_embeddings",
];

fn base_config() -> serde_json::Map<String, Value> {
    let path = fixtures_dir().join("baseline_yarn").join("config.json");
    match serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap() {
        Value::Object(object) => object,
        _ => panic!("fixture config is an object"),
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (0u32..64, -2i64..3).prop_map(|(k, d)| json!(((1i128 << k) as i64).wrapping_add(d))),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z_]{0,10}".prop_map(Value::from),
        proptest::collection::vec(any::<i32>(), 0..4).prop_map(|v| json!(v)),
        ("(default|linear|yarn|dynamic)", any::<f64>(), any::<u32>()).prop_map(|(t, f, o)| json!(
            {"rope_type": t, "factor": f, "original_max_position_embeddings": o}
        )),
    ]
}

/// The fuzz target's check (`fuzz/src/lib.rs`): accepted configs satisfy the documented
/// constraints and hold the file's values; refusals name config.json and the field.
fn check(text: &str) {
    fuzz_checks::check_config(text);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn mutated_fields_never_panic(
        edits in proptest::collection::vec((0..CONFIG_FIELDS.len(), proptest::option::of(json_value())), 1..5)
    ) {
        let mut config = base_config();
        for (key, value) in edits {
            match value {
                Some(value) => { config.insert(CONFIG_FIELDS[key].to_string(), value); }
                None => { config.remove(CONFIG_FIELDS[key]); }
            }
        }
        check(&serde_json::to_string(&Value::Object(config)).unwrap());
    }

    #[test]
    fn truncated_or_edited_text_never_panics(cut in any::<usize>(), insert in "[\\[\\]{}\",:0-9a-z ]{0,4}") {
        let text = serde_json::to_string_pretty(&Value::Object(base_config())).unwrap();
        let mut at = cut % (text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        check(&format!("{}{}", &text[..at], insert));
    }
}

/// Every size at its 2^31 limit: what the loader derives from them must not overflow.
#[test]
fn sizes_at_the_limit_do_not_overflow() {
    let mut config = base_config();
    for key in [
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "head_dim",
    ] {
        config.insert(key.to_string(), json!(1u64 << 31));
    }
    config.insert("num_key_value_heads".into(), json!(1));
    config.insert("elementwise_attn_output_gate".into(), json!(true));
    check(&serde_json::to_string(&Value::Object(config)).unwrap());
}

/// Found by the invariant check: an eps above 0 in f64 but 0 as the f32 the norm uses.
#[test]
fn an_eps_that_is_zero_as_f32_is_refused_naming_the_field() {
    let mut config = base_config();
    config.insert("rms_norm_eps".into(), json!(9.15811169990279e-309));
    let text = serde_json::to_string(&Value::Object(config)).unwrap();
    let err = gattn_model::Qwen3Config::from_json_str(std::path::Path::new("d/config.json"), &text)
        .unwrap_err();
    assert!(
        matches!(&err, gattn_model::ModelError::Config { field, .. } if field == "rms_norm_eps"),
        "{err}"
    );
    check(&text);
}

/// Found by the fuzz smoke in CI: yarn without a factor takes max_position_embeddings /
/// original_max_position_embeddings, which was accepted below 1 (a context shrunk, not
/// extended); refused, naming the factor.
#[test]
fn a_derived_yarn_factor_below_one_is_refused_naming_the_field() {
    let mut config = base_config();
    config.insert("max_position_embeddings".into(), json!(64));
    config.insert(
        "rope_scaling".into(),
        json!({"rope_type": "yarn", "original_max_position_embeddings": 65}),
    );
    let text = serde_json::to_string(&Value::Object(config)).unwrap();
    let err = gattn_model::Qwen3Config::from_json_str(std::path::Path::new("d/config.json"), &text)
        .unwrap_err();
    assert!(
        matches!(&err, gattn_model::ModelError::Config { field, .. } if field.ends_with("factor")),
        "{err}"
    );
    check(&text);
}

/// Every numeric field at its edges, one at a time (random edits reach few of these): each is
/// accepted within the documented constraints or refused naming the field.
#[test]
fn every_numeric_field_at_its_edges() {
    let edges = [
        json!(0),
        json!(1),
        json!(2),
        json!(3),
        json!(63),
        json!(64),
        json!(65),
        json!(1u64 << 31),
        json!((1u64 << 31) + 1),
        json!(-1),
        json!(0.5),
        json!(1e-300),
        json!(1e300),
    ];
    for key in &NUMERIC_FIELDS {
        for value in &edges {
            let mut config = base_config();
            config.insert(key.to_string(), value.clone());
            check(&serde_json::to_string(&Value::Object(config)).unwrap());
        }
    }
}
