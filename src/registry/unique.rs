//! Unique jobs, as the worker sees them: the mark a unique enqueue puts in the payload, so the
//! worker that finishes (or finally fails) the job can release its lock.
//!
//! A unique job's payload is `{"class":…,"args":[…],"resq_unique":{"key":…,"id":…}}`; the lock
//! `<ns>:resq:unique:<key>` holds `id` until the job ends or the lock's TTL runs out. Only resq
//! workers release it: a Ruby or Java worker runs such a job fine (the field is ignored) but
//! leaves the lock to expire.

use crate::wire::Payload;
use serde_json::{json, Value};

/// The payload field that carries the mark.
pub(crate) const FIELD: &str = "resq_unique";

/// A unique job's key and the id its lock holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UniqueMark {
    /// The unique key the producer chose.
    pub key: String,
    /// This enqueue's id (the lock's value).
    pub id: String,
}

impl UniqueMark {
    /// The mark of `payload`, if it is a unique job.
    pub(crate) fn from_payload(payload: &Payload) -> Option<Self> {
        Self::from_value(payload.object().get(FIELD)?)
    }

    /// Reads `{"key":…,"id":…}`.
    pub(crate) fn from_value(v: &Value) -> Option<Self> {
        Some(UniqueMark {
            key: v.get("key")?.as_str()?.to_string(),
            id: v.get("id")?.as_str()?.to_string(),
        })
    }

    /// `{"key":…,"id":…}`.
    pub(crate) fn to_value(&self) -> Value {
        json!({"key": self.key, "id": self.id})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_mark_back() {
        let p = Payload::parse(
            br#"{"class":"A","args":[1],"resq_unique":{"key":"report:7","id":"ab12"}}"#,
        )
        .unwrap();
        assert_eq!(
            UniqueMark::from_payload(&p),
            Some(UniqueMark {
                key: "report:7".into(),
                id: "ab12".into()
            })
        );
        let plain = Payload::parse(br#"{"class":"A","args":[1]}"#).unwrap();
        assert_eq!(UniqueMark::from_payload(&plain), None);
    }
}
