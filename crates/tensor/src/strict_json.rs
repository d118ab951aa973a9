//! JSON parsed strictly: an object that names a key twice is an error, not "the last one wins"
//! (serde_json's `Value` keeps the last; Python's `json` does too, other readers the first), so
//! that no two readers of one config or header can read it two ways.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parses `text` as JSON, refusing any object with a duplicate key (named in the message).
pub fn parse_strict(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<StrictValue>(text).map(|v| v.0)
}

/// Parses `text` as a JSON object (see [`parse_strict`]); the error says what the top level was.
pub fn parse_strict_object(text: &str) -> Result<Map<String, Value>, String> {
    match parse_strict(text) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err("the top level is not an object".into()),
        Err(e) => Err(e.to_string()),
    }
}

struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        StrictValue::deserialize(d).map(|v| v.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let StrictValue(value) = map.next_value()?;
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "the key `{key}` appears twice in one object"
                )));
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicate_key_is_refused_at_any_depth() {
        assert!(parse_strict(r#"{"a": 1, "b": {"c": [1, {"d": 2}]}}"#).is_ok());
        let e = parse_strict(r#"{"a": 1, "a": 2}"#).unwrap_err();
        assert!(e.to_string().contains("`a` appears twice"), "{e}");
        let e = parse_strict(r#"{"x": [{"d": 1, "d": 1}]}"#).unwrap_err();
        assert!(e.to_string().contains("`d` appears twice"), "{e}");
    }

    #[test]
    fn values_parse_as_serde_json_parses_them() {
        let text = r#"{"i": -3, "u": 18446744073709551615, "f": 1.5e-3, "s": "\u00e9", "n": null, "b": true}"#;
        let strict = parse_strict(text).unwrap();
        let plain: Value = serde_json::from_str(text).unwrap();
        assert_eq!(strict, plain);
        assert_eq!(
            parse_strict_object("[1]").unwrap_err(),
            "the top level is not an object"
        );
    }
}
