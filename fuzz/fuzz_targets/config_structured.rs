//! A valid fixture config.json with a few fields replaced, removed or added: every value of every
//! field the parser reads (top level, `rope_scaling`, `rope_parameters`) is reached quickly,
//! which byte-level mutation of the JSON text rarely manages.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};

const BASES: [&str; 5] = [
    include_str!("../../tests/fixtures/baseline_gqa_tied_f32/config.json"),
    include_str!("../../tests/fixtures/baseline_yarn/config.json"),
    include_str!("../../tests/fixtures/baseline_linear_rope/config.json"),
    include_str!("../../tests/fixtures/headwise_gqa/config.json"),
    include_str!("../../tests/fixtures/elementwise_mha/config.json"),
];

const ROPE_KEYS: [&str; 11] = [
    "rope_type",
    "type",
    "factor",
    "original_max_position_embeddings",
    "attention_factor",
    "beta_fast",
    "beta_slow",
    "mscale",
    "mscale_all_dim",
    "truncate",
    "rope_theta",
];
const STRINGS: [&str; 12] = [
    "qwen3", "llama", "silu", "gelu", "default", "linear", "yarn", "dynamic", "longrope",
    "sliding_attention", "full_attention", "",
];

#[derive(Debug, Arbitrary)]
struct Input {
    base: u8,
    edits: Vec<Edit>,
}

#[derive(Debug, Arbitrary)]
struct Edit {
    place: Place,
    key: Key,
    /// `None` removes the key.
    value: Option<Json>,
}

#[derive(Debug, Arbitrary)]
enum Place {
    Top,
    RopeScaling,
    RopeParameters,
}

#[derive(Debug, Arbitrary)]
enum Key {
    Known(u8),
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum Json {
    Null,
    Bool(bool),
    Small(u8),
    /// 2^k + delta: the edges of the size limits.
    PowerOfTwo(u8, i8),
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Text(u8),
    AnyText(String),
    Numbers(Vec<i16>),
    Texts(Vec<u8>),
    RopeObject(u8, f64, u16),
}

impl Json {
    fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => json!(b),
            Json::Small(n) => json!(n),
            Json::PowerOfTwo(k, delta) => {
                let power = 1i128 << (k % 64);
                let n = power + i128::from(*delta);
                match u64::try_from(n) {
                    Ok(n) => json!(n),
                    Err(_) => json!(n as i64),
                }
            }
            Json::Unsigned(n) => json!(n),
            Json::Signed(n) => json!(n),
            // NaN and inf have no JSON form: serde_json writes them as null.
            Json::Float(f) => json!(f),
            Json::Text(i) => json!(STRINGS[usize::from(*i) % STRINGS.len()]),
            Json::AnyText(s) => json!(s),
            Json::Numbers(list) => json!(list),
            Json::Texts(list) => Value::Array(
                list.iter()
                    .map(|i| json!(STRINGS[usize::from(*i) % STRINGS.len()]))
                    .collect(),
            ),
            Json::RopeObject(kind, factor, original) => json!({
                "rope_type": STRINGS[usize::from(*kind) % STRINGS.len()],
                "factor": factor,
                "original_max_position_embeddings": original,
            }),
        }
    }
}

fuzz_target!(|input: Input| {
    let base = BASES[usize::from(input.base) % BASES.len()];
    let Ok(Value::Object(mut config)) = serde_json::from_str::<Value>(base) else {
        panic!("fixture configs are JSON objects");
    };
    for edit in input.edits.iter().take(8) {
        apply(&mut config, edit);
    }
    let text = serde_json::to_string(&Value::Object(config)).expect("a map serializes");
    gattn_fuzz::check_config(&text);
});

fn apply(config: &mut Map<String, Value>, edit: &Edit) {
    let (object, keys): (&mut Map<String, Value>, &[&str]) = match edit.place {
        Place::Top => (config, &gattn_fuzz::CONFIG_FIELDS),
        Place::RopeScaling | Place::RopeParameters => {
            let field = match edit.place {
                Place::RopeScaling => "rope_scaling",
                _ => "rope_parameters",
            };
            let slot = config.entry(field).or_insert_with(|| json!({}));
            if !slot.is_object() {
                *slot = json!({});
            }
            (slot.as_object_mut().expect("just made an object"), &ROPE_KEYS)
        }
    };
    let key = match &edit.key {
        Key::Known(i) => keys[usize::from(*i) % keys.len()].to_string(),
        Key::Other(s) => s.clone(),
    };
    match &edit.value {
        Some(value) => {
            object.insert(key, value.to_value());
        }
        None => {
            object.remove(&key);
        }
    }
}
