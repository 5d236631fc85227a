//! The bytes a producer writes: job payloads and resque-scheduler items, with numbers spelled
//! the way the reading peer's JSON library spells them.
//!
//! Ruby decodes every JSON number with a fraction or exponent into a `Float` and writes it back
//! with its own float text, so resq writes floats that come from Rust `f64`s through
//! [`FloatFormat`] (`1e20` becomes `1.0e+20`); number text given otherwise is kept as written,
//! and integers keep their digits (big ones too, as Ruby's `Integer` does). This happens in the serializer (a serde_json `Formatter`): re-parsing the text into a
//! `Number` would not do, as serde_json rewrites exponents (`1.0E20` → `1.0e+20`). That is what makes `Resque::Job.destroy(q, C, *args)` and
//! `Resque.remove_delayed(C, *args)` (byte-exact `LREM`s) match jobs resq enqueued.

use super::number::FloatFormat;
use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};
use serde_json::{Map, Value};
use std::io;

/// serde_json's compact formatter, except that numbers with a fraction or an exponent are
/// rewritten in the target peer's float text (integers keep their digits; `-0` is `0`).
///
/// Only numbers spelled the way serde_json spells an `f64` — a Rust float (`json!(1e20)` is
/// `1e+20`), or JSON text that reads the same — are rewritten; any other spelling was chosen by
/// whoever wrote it (Oj's `10000000000000000.0` read back from Redis, a Java `BigDecimal`'s
/// `12.50`) and is kept byte for byte.
struct FloatText(FloatFormat);

impl Formatter for FloatText {
    fn write_number_str<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        value: &str,
    ) -> io::Result<()> {
        let text = if value.contains(['.', 'e', 'E']) {
            value
                .parse::<f64>()
                .ok()
                .filter(|x| from_rust_f64(value, *x))
                .and_then(|x| self.0.format(x))
        } else if value == "-0" {
            Some("0".to_string())
        } else {
            None
        };
        CompactFormatter.write_number_str(w, text.as_deref().unwrap_or(value))
    }
}

/// Whether `text` is how serde_json writes the `f64` `x` (so it came from a Rust float).
fn from_rust_f64(text: &str, x: f64) -> bool {
    serde_json::Number::from_f64(x).is_some_and(|n| n.to_string() == text)
}

/// Compact JSON of `v` with floats in `format`.
pub(crate) fn to_json<T: Serialize + ?Sized>(v: &T, format: FloatFormat) -> String {
    // Values, maps and strings always serialize (never reached in practice).
    try_to_json(v, format).unwrap_or_default()
}

/// [`to_json`] of a value of the caller's own type, whose `Serialize` may fail (a map with
/// keys that are not strings, an error of its own): the error, never a partial text.
pub(crate) fn try_to_json<T: Serialize + ?Sized>(
    v: &T,
    format: FloatFormat,
) -> Result<String, serde_json::Error> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, FloatText(format));
    v.serialize(&mut ser)?;
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// Ruby's payload shape, then any extra fields.
#[derive(Serialize)]
struct ResqueForm<'a> {
    class: &'a str,
    args: &'a [Value],
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// Ruby Resque's payload `{"class":…,"args":[…]}` with Ruby float text.
pub(crate) fn resque_payload(class: &str, args: &[Value], format: FloatFormat) -> String {
    resque_payload_with(class, args, &Map::new(), format)
}

/// A payload with extra top-level fields after `class` and `args` (resq's unique-job fields).
pub(crate) fn resque_payload_with(
    class: &str,
    args: &[Value],
    extra: &Map<String, Value>,
    format: FloatFormat,
) -> String {
    to_json(&ResqueForm { class, args, extra }, format)
}

/// Jesque's payload `{"class":…,"args":…,"vars":…}` (nulls written out) with Java float text.
pub(crate) fn jesque_payload(
    class: &str,
    args: Option<&[Value]>,
    vars: Option<&Map<String, Value>>,
) -> String {
    #[derive(Serialize)]
    struct JesqueForm<'a> {
        class: &'a str,
        args: Option<&'a [Value]>,
        vars: Option<&'a Map<String, Value>>,
    }
    to_json(&JesqueForm { class, args, vars }, FloatFormat::Java)
}

/// resque-scheduler's delayed item: `{"class":…,"args":[…],"queue":…}`, then any `extra`
/// fields (resq's unique-job fields), in that order.
#[derive(Serialize)]
struct SchedulerItem<'a> {
    class: &'a str,
    args: &'a [Value],
    queue: &'a str,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// The delayed item resque-scheduler's `enqueue_at_with_queue` writes (and
/// `remove_delayed_in_queue` matches byte for byte).
pub(crate) fn scheduler_item(
    queue: &str,
    class: &str,
    args: &[Value],
    extra: &Map<String, Value>,
    format: FloatFormat,
) -> String {
    to_json(
        &SchedulerItem {
            class,
            args,
            queue,
            extra,
        },
        format,
    )
}

#[cfg(test)]
// Fixture values as Ruby wrote them (3.14 is not π; Ruby's literals keep their digits).
#[allow(clippy::approx_constant, clippy::excessive_precision)]
mod tests {
    use super::*;
    use serde_json::{json, Number};

    #[test]
    fn rust_floats_become_ruby_text() {
        let args = [
            json!("string"),
            json!(42),
            json!(-7),
            json!(0),
            json!(3.14),
            json!(1.0),
            json!(1e20),
            json!(1.5e-7),
            Value::Null,
            json!(true),
            json!(false),
        ];
        // Byte for byte the third queue:default entry of fixture 01_enqueue.json.
        assert_eq!(
            resque_payload("SimpleJob", &args, FloatFormat::RubyJsonGem),
            r#"{"class":"SimpleJob","args":["string",42,-7,0,3.14,1.0,1.0e+20,1.5e-07,null,true,false]}"#
        );
    }

    #[test]
    fn oj_and_json_gem_differ_as_in_the_fixtures() {
        let big: Number = "18446744073709551616".parse().unwrap();
        let args = [
            Value::Number(big),
            json!(-0.0),
            json!(0.1 + 0.2),
            json!(123456789.123456789),
            json!(1e16),
        ];
        assert_eq!(
            resque_payload("SimpleJob", &args, FloatFormat::RubyOj),
            r#"{"class":"SimpleJob","args":[18446744073709551616,0.0,0.30000000000000004,123456789.12345679,10000000000000000.0]}"#
        );
        assert_eq!(
            resque_payload("SimpleJob", &args, FloatFormat::RubyJsonGem),
            r#"{"class":"SimpleJob","args":[18446744073709551616,-0.0,0.30000000000000004,123456789.12345679,1.0e+16]}"#
        );
    }

    #[test]
    fn nested_values_and_key_order_kept() {
        let args = [
            json!({"nested": {"list": [1, "two", null, 2.5], "flag": true}, "sym_key": "sym_value", "3": "int key"}),
        ];
        assert_eq!(
            resque_payload("SimpleJob", &args, FloatFormat::RubyOj),
            r#"{"class":"SimpleJob","args":[{"nested":{"list":[1,"two",null,2.5],"flag":true},"sym_key":"sym_value","3":"int key"}]}"#
        );
    }

    #[test]
    fn scheduler_item_order() {
        assert_eq!(
            scheduler_item(
                "default",
                "Jobs::Nested",
                &[json!("unicode ✓"), Value::Null, json!(1.5)],
                &Map::new(),
                FloatFormat::RubyOj
            ),
            r#"{"class":"Jobs::Nested","args":["unicode ✓",null,1.5],"queue":"default"}"#
        );
    }

    #[test]
    fn jesque_numbers_are_java_text() {
        assert_eq!(
            jesque_payload("X", Some(&[json!(1e20), json!(0.5), json!(7)]), None),
            r#"{"class":"X","args":[1.0E20,0.5,7],"vars":null}"#
        );
    }
}
