//! A job payload: what producers push onto `<ns>:queue:<q>`.
//!
//! Readers accept every peer's shape: Ruby's `{"class","args"}`, Jesque's `{"class","args","vars"}`,
//! node-resque's `{"class","queue","args"}`, keys in any order, whitespace, `args` missing or null,
//! extra fields. The raw bytes are kept so the payload can be moved between keys unchanged.
//! Writers produce Ruby's exact bytes (`{"class":…,"args":[…]}`, compact) or Jesque's.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Why a payload cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// Not UTF-8.
    #[error("payload is not valid UTF-8")]
    Utf8,
    /// Not JSON, or JSON nested too deep.
    #[error("payload is not valid JSON: {0}")]
    Json(String),
    /// JSON but not an object.
    #[error("payload is not a JSON object")]
    NotObject,
    /// No `class`, or not a non-empty string.
    #[error("payload has no class")]
    NoClass,
    /// `args` is present but neither an array nor null.
    #[error("payload args must be an array or null, got {0}")]
    ArgsNotArray(&'static str),
}

/// A decoded job payload, with its raw bytes.
///
/// Holds the payload once as text (the exact bytes, kept a second time only when they have
/// whitespace around the JSON value) and once decoded: a large payload costs about twice its
/// size in memory, not several times.
#[derive(Debug, Clone)]
pub struct Payload {
    /// The payload as one JSON value (surrounding whitespace trimmed).
    raw: Box<RawValue>,
    /// The exact text as it was in Redis, when it differs from `raw` (surrounding whitespace).
    padded: Option<String>,
    /// The class name the job is dispatched by.
    class: String,
    /// The whole payload object (extra fields, Jesque `vars`, key order kept; `args` inside).
    object: Map<String, Value>,
}

impl Payload {
    /// Decodes raw payload bytes, checking what every worker requires.
    pub fn parse(bytes: &[u8]) -> Result<Self, PayloadError> {
        let text = std::str::from_utf8(bytes).map_err(|_| PayloadError::Utf8)?;
        Self::from_text(text)
    }

    /// Decodes payload bytes it takes ownership of (no copy of a large payload's text).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, PayloadError> {
        let text = String::from_utf8(bytes).map_err(|_| PayloadError::Utf8)?;
        Self::from_string(text)
    }

    /// Decodes payload text, keeping it exactly (whitespace around the value included).
    pub fn from_text(text: &str) -> Result<Self, PayloadError> {
        Self::from_string(text.to_string())
    }

    /// [`Payload::from_text`] for text it takes ownership of.
    pub fn from_string(text: String) -> Result<Self, PayloadError> {
        let trimmed = text.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
        let padded = (trimmed.len() != text.len()).then(|| text.clone());
        let raw = RawValue::from_string(text).map_err(|e| PayloadError::Json(e.to_string()))?;
        let mut p = Self::from_raw(raw)?;
        p.padded = padded;
        Ok(p)
    }

    /// Decodes a payload already known to be one JSON value.
    pub fn from_raw(raw: Box<RawValue>) -> Result<Self, PayloadError> {
        let value: Value =
            serde_json::from_str(raw.get()).map_err(|e| PayloadError::Json(e.to_string()))?;
        let Value::Object(object) = value else {
            return Err(PayloadError::NotObject);
        };
        let class = match object.get("class") {
            Some(Value::String(c)) if !c.is_empty() => c.clone(),
            _ => return Err(PayloadError::NoClass),
        };
        match object.get("args") {
            None | Some(Value::Null) | Some(Value::Array(_)) => {}
            Some(other) => return Err(PayloadError::ArgsNotArray(type_name(other))),
        }
        Ok(Payload {
            raw,
            padded: None,
            class,
            object,
        })
    }

    /// The class name.
    pub fn class(&self) -> &str {
        &self.class
    }

    /// Positional arguments (`[]` when missing or null).
    pub fn args(&self) -> &[Value] {
        match self.object.get("args") {
            Some(Value::Array(a)) => a,
            _ => &[],
        }
    }

    /// Jesque's named arguments, when present and not null.
    pub fn vars(&self) -> Option<&Map<String, Value>> {
        self.object.get("vars").and_then(Value::as_object)
    }

    /// The whole decoded object.
    pub fn object(&self) -> &Map<String, Value> {
        &self.object
    }

    /// The payload as one JSON value (surrounding whitespace trimmed).
    pub fn raw(&self) -> &RawValue {
        &self.raw
    }

    /// The payload's exact text, byte for byte as reserved.
    pub fn text(&self) -> &str {
        self.padded.as_deref().unwrap_or(self.raw.get())
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Ruby Resque's payload: exactly `{"class":…,"args":[…]}`, compact.
#[derive(Serialize)]
struct ResqueForm<'a> {
    class: &'a str,
    args: &'a [Value],
}

/// Encodes a job the way Ruby's `Resque.enqueue` does, so `Job.destroy` matches it by bytes.
pub(crate) fn encode_resque(class: &str, args: &[Value]) -> String {
    // Serializing borrowed strings and `Value`s into a String cannot fail.
    serde_json::to_string(&ResqueForm { class, args }).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts_every_peer_shape() {
        for raw in [
            r#"{"class":"A","args":[1]}"#,
            r#"{"args":[1],"class":"A"}"#,
            r#"{ "class" : "A" , "args" : [ 1 ] }"#,
            r#"{"class":"A","args":[1],"vars":null}"#,
            r#"{"class":"A","queue":"q","args":[1]}"#,
        ] {
            let p = Payload::parse(raw.as_bytes()).unwrap();
            assert_eq!(p.class(), "A");
            assert_eq!(p.args(), &[json!(1)]);
            assert_eq!(p.raw().get(), raw);
        }
        let p = Payload::parse(br#"{"class":"A"}"#).unwrap();
        assert!(p.args().is_empty());
        let p = Payload::parse(br#"{"class":"A","args":null,"vars":{"x":1}}"#).unwrap();
        assert_eq!(p.vars().unwrap()["x"], json!(1));
    }

    #[test]
    fn rejects_what_cannot_run() {
        assert_eq!(Payload::parse(b"\xff").unwrap_err(), PayloadError::Utf8);
        assert!(matches!(
            Payload::parse(b"{").unwrap_err(),
            PayloadError::Json(_)
        ));
        assert_eq!(Payload::parse(b"[1]").unwrap_err(), PayloadError::NotObject);
        assert_eq!(
            Payload::parse(br#"{"args":[]}"#).unwrap_err(),
            PayloadError::NoClass
        );
        assert_eq!(
            Payload::parse(br#"{"class":""}"#).unwrap_err(),
            PayloadError::NoClass
        );
        assert_eq!(
            Payload::parse(br#"{"class":"A","args":{"a":1}}"#).unwrap_err(),
            PayloadError::ArgsNotArray("an object")
        );
    }

    #[test]
    fn numbers_keep_their_text() {
        let p =
            Payload::parse(br#"{"class":"A","args":[1.0e+20,18446744073709551616,1.0]}"#).unwrap();
        assert_eq!(
            serde_json::to_string(p.args()).unwrap(),
            "[1.0e+20,18446744073709551616,1.0]"
        );
    }

    #[test]
    fn writes_the_ruby_form() {
        assert_eq!(
            encode_resque("Jobs::X", &[json!("a/b"), json!({"k":"é"})]),
            r#"{"class":"Jobs::X","args":["a/b",{"k":"é"}]}"#
        );
    }
}
