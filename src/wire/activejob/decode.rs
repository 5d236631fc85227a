//! ActiveJob's serialized arguments → plain JSON a handler takes with serde.
//!
//! Follows `ActiveJob::Arguments.deserialize` (Rails 6.1–8.1) step by step, but produces JSON
//! instead of Ruby objects:
//!
//! | serialized | decoded |
//! |---|---|
//! | `null`, booleans, numbers, strings | unchanged (number text kept) |
//! | arrays | element by element |
//! | hash with `_aj_symbol_keys` / `_aj_ruby2_keywords` / `_aj_hash_with_indifferent_access` | object without the marker |
//! | `{"_aj_globalid": "gid://app/User/1"}` (the only key) | the string `"gid://app/User/1"` |
//! | Symbol | its name |
//! | Time, DateTime, TimeWithZone | the ISO 8601 text as sent (nanoseconds, offset or `Z`) |
//! | Date | `"YYYY-MM-DD"` |
//! | BigDecimal (7.1+) | its decimal text (Rails before 7.1 already sends a plain string) |
//! | Duration | its length in seconds (`value`, integer or float) |
//! | Module / Class | its name |
//! | Range (7.0+) | `{"begin": …, "end": …, "exclude_end": bool}` (ends decoded) |
//! | any other `_aj_serialized` object | kept as-is, and listed in [`Decoded::unknown`] |
//!
//! Like Ruby, the markers are only removed where ActiveJob removes them: a hash keeps a marker
//! whose value is `null`/`false`, and only the first marker of `indifferent → symbol keys →
//! keywords` is taken out.

use super::tags;
use serde::Serialize;
use serde_json::{Map, Value};

/// A serialized object the decoder did not turn into plain JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unknown {
    /// Where it is: `[2]`, `[0].price`, `[1][3]` (relative to the arguments array).
    pub path: String,
    /// Its `_aj_serialized` class name (an app's custom serializer, or a known one with a
    /// malformed body).
    pub serializer: String,
}

/// Decoded arguments.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decoded {
    /// The arguments as plain JSON, positionally.
    pub args: Vec<Value>,
    /// Objects kept as-is because no built-in serializer matches them.
    pub unknown: Vec<Unknown>,
    /// Whether the last argument was Ruby keyword arguments (`_aj_ruby2_keywords`).
    pub keywords: bool,
}

/// Decodes a serialized `arguments` array.
pub(crate) fn decode(arguments: &[Value]) -> Decoded {
    let mut unknown = Vec::new();
    let args = arguments
        .iter()
        .enumerate()
        .map(|(i, v)| value(v, &format!("[{i}]"), &mut unknown))
        .collect();
    let keywords = matches!(
        arguments.last(),
        Some(Value::Object(m)) if is_keywords_hash(m)
    );
    Decoded {
        args,
        unknown,
        keywords,
    }
}

/// Whether `hash` is a keyword-arguments hash that ActiveJob would turn back into keywords.
fn is_keywords_hash(hash: &Map<String, Value>) -> bool {
    if (hash.len() == 1 && hash.contains_key(tags::GLOBALID_KEY))
        || hash.contains_key(tags::OBJECT_SERIALIZER_KEY)
    {
        return false;
    }
    !truthy(hash.get(tags::WITH_INDIFFERENT_ACCESS_KEY))
        && !truthy(hash.get(tags::SYMBOL_KEYS_KEY))
        && truthy(hash.get(tags::RUBY2_KEYWORDS_KEY))
}

/// Ruby truthiness of an optional JSON value (`nil` and `false` are false).
fn truthy(v: Option<&Value>) -> bool {
    !matches!(v, None | Some(Value::Null) | Some(Value::Bool(false)))
}

fn value(v: &Value, path: &str, unknown: &mut Vec<Unknown>) -> Value {
    match v {
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, x)| value(x, &format!("{path}[{i}]"), unknown))
                .collect(),
        ),
        Value::Object(hash) => object(hash, path, unknown),
        other => other.clone(),
    }
}

fn object(hash: &Map<String, Value>, path: &str, unknown: &mut Vec<Unknown>) -> Value {
    if hash.len() == 1 {
        if let Some(gid) = hash.get(tags::GLOBALID_KEY) {
            return gid.clone();
        }
    }
    if let Some(tag) = hash.get(tags::OBJECT_SERIALIZER_KEY) {
        let name = match tag {
            Value::String(s) => s.as_str(),
            _ => "",
        };
        return match serialized(name, hash, path, unknown) {
            Some(v) => v,
            None => {
                unknown.push(Unknown {
                    path: path.to_string(),
                    serializer: name.to_string(),
                });
                Value::Object(hash.clone())
            }
        };
    }
    let mut out: Map<String, Value> = hash
        .iter()
        .map(|(k, v)| (k.clone(), value(v, &format!("{path}.{k}"), unknown)))
        .collect();
    // ActiveJob's deserialize_hash: `if delete(indifferent) … elsif delete(symbol keys) …
    // elsif delete(ruby2 keywords)`; a delete whose value is falsy falls through.
    if !truthy(out.shift_remove(tags::WITH_INDIFFERENT_ACCESS_KEY).as_ref())
        && !truthy(out.shift_remove(tags::SYMBOL_KEYS_KEY).as_ref())
    {
        out.shift_remove(tags::RUBY2_KEYWORDS_KEY);
    }
    Value::Object(out)
}

/// A built-in serializer's object as plain JSON; `None` when the name is not a built-in one
/// or the body does not have its shape.
fn serialized(
    name: &str,
    hash: &Map<String, Value>,
    path: &str,
    unknown: &mut Vec<Unknown>,
) -> Option<Value> {
    let string_value = || match hash.get("value") {
        Some(Value::String(s)) => Some(Value::String(s.clone())),
        _ => None,
    };
    match name {
        tags::SYMBOL
        | tags::TIME
        | tags::DATE_TIME
        | tags::TIME_WITH_ZONE
        | tags::DATE
        | tags::MODULE
        | tags::BIG_DECIMAL => string_value(),
        tags::DURATION => match hash.get("value") {
            Some(n @ Value::Number(_)) => Some(n.clone()),
            _ => None,
        },
        tags::RANGE => {
            let exclude_end = truthy(hash.get("exclude_end"));
            let mut range = Map::new();
            for end in ["begin", "end"] {
                let v = hash.get(end).unwrap_or(&Value::Null);
                range.insert(end.into(), value(v, &format!("{path}.{end}"), unknown));
            }
            range.insert("exclude_end".into(), Value::Bool(exclude_end));
            Some(Value::Object(range))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(v: Value) -> (Value, Vec<Unknown>) {
        let d = decode(&[v]);
        (d.args[0].clone(), d.unknown)
    }

    #[test]
    fn markers_are_removed_as_ruby_removes_them() {
        let (v, _) = one(json!({"a": 1, "_aj_symbol_keys": ["a"]}));
        assert_eq!(v, json!({"a": 1}));
        let (v, _) = one(json!({"a": 1, "_aj_hash_with_indifferent_access": true}));
        assert_eq!(v, json!({"a": 1}));
        // Indifferent wins; the symbol-keys marker then stays, as in Ruby.
        let (v, _) = one(
            json!({"a": 1, "_aj_symbol_keys": ["a"], "_aj_hash_with_indifferent_access": true}),
        );
        assert_eq!(v, json!({"a": 1, "_aj_symbol_keys": ["a"]}));
        // A falsy marker is deleted and the next one is tried.
        let (v, _) = one(
            json!({"a": 1, "_aj_hash_with_indifferent_access": false, "_aj_ruby2_keywords": []}),
        );
        assert_eq!(v, json!({"a": 1}));
        // No marker at all: a plain string-keyed hash.
        let (v, _) = one(json!({"a": {"b": 2}}));
        assert_eq!(v, json!({"a": {"b": 2}}));
    }

    #[test]
    fn keywords_flag_only_for_a_trailing_keywords_hash() {
        let d = decode(&[json!(1), json!({"b": 2, "_aj_ruby2_keywords": ["b"]})]);
        assert!(d.keywords);
        assert_eq!(d.args, vec![json!(1), json!({"b": 2})]);
        assert!(!decode(&[json!({"b": 2, "_aj_symbol_keys": ["b"]})]).keywords);
        assert!(!decode(&[json!({"b": 2, "_aj_ruby2_keywords": ["b"]}), json!(1)]).keywords);
    }

    #[test]
    fn globalid_only_when_alone() {
        let (v, _) = one(json!({"_aj_globalid": "gid://app/User/1"}));
        assert_eq!(v, json!("gid://app/User/1"));
        let (v, _) = one(json!({"_aj_globalid": "gid://app/User/1", "x": 1}));
        assert_eq!(v, json!({"_aj_globalid": "gid://app/User/1", "x": 1}));
    }

    #[test]
    fn serialized_objects() {
        let s = |name: &str, body: Value| {
            let mut m = body.as_object().cloned().unwrap_or_default();
            m.insert(
                "_aj_serialized".into(),
                json!(format!("ActiveJob::Serializers::{name}")),
            );
            one(Value::Object(m))
        };
        assert_eq!(s("SymbolSerializer", json!({"value": "x"})).0, json!("x"));
        assert_eq!(
            s("DurationSerializer", json!({"value": 1.5, "parts": []})).0,
            json!(1.5)
        );
        assert_eq!(
            s("RangeSerializer", json!({"begin": {"_aj_serialized": "ActiveJob::Serializers::SymbolSerializer", "value": "a"}, "end": null, "exclude_end": true})).0,
            json!({"begin": "a", "end": null, "exclude_end": true})
        );
        let (v, unknown) = s("MoneySerializer", json!({"cents": 5}));
        assert_eq!(v["cents"], json!(5));
        assert_eq!(
            unknown,
            vec![Unknown {
                path: "[0]".into(),
                serializer: "ActiveJob::Serializers::MoneySerializer".into()
            }]
        );
        // A known serializer with a malformed body is kept and listed too.
        let (v, unknown) = s("SymbolSerializer", json!({}));
        assert!(v.is_object());
        assert_eq!(unknown.len(), 1);
    }

    #[test]
    fn unknown_paths_point_into_nesting() {
        let d = decode(&[
            json!([1, {"k": {"_aj_serialized": "Custom", "v": 1}, "_aj_symbol_keys": []}]),
        ]);
        assert_eq!(d.unknown[0].path, "[0][1].k");
        assert_eq!(d.args[0][1]["k"]["v"], json!(1));
    }
}
