//! A tracked job's id: 32 lowercase hex characters, resque-status's uuid shape
//! (`SecureRandom.hex`), so the same id names a resq-tracked job and a resque-status job
//! (re-exported as `resq::jobs::JobId`); a batch's id has the same shape
//! (`resq::workflows::BatchId`). On a spread Redis Cluster namespace a tracked job's id is
//! followed by its queue's slot tag, `<32 hex>{<tag>}` (docs/cluster.md), so its record
//! `<ns>:resq:job:<id>` hashes to its queue's slot.

use std::fmt;

/// A tracked job's id (32 lowercase hex characters; on a spread cluster namespace followed by
/// its queue's slot tag, `{<tag>}`: [`JobId::slot_tag`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct JobId(String);

impl JobId {
    /// A fresh random id.
    pub fn new() -> Self {
        use rand::Rng;
        let bytes: [u8; 16] = rand::rng().random();
        JobId(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// `s` as an id, when it has an id's shape (32 lowercase hex, optionally followed by a
    /// slot tag `{<tag>}` of one to four characters `0-9a-z`).
    pub fn parse(s: &str) -> Option<Self> {
        (is_id(s) || slot_tag_of(s).is_some()).then(|| JobId(s.to_string()))
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The slot tag the id carries (`<32 hex>{<tag>}`, a spread namespace's), if any.
    pub fn slot_tag(&self) -> Option<&str> {
        slot_tag_of(&self.0)
    }

    /// The same id with slot tag `tag` (replacing any it had): a spread namespace's id for a
    /// job whose queue's slot has that tag.
    pub(crate) fn with_slot_tag(&self, tag: &str) -> Self {
        JobId(format!("{}{{{tag}}}", &self.0[..32]))
    }
}

/// The tag of `s` when it is `<32 hex>{<tag>}` with a tag of one to four characters `0-9a-z`.
fn slot_tag_of(s: &str) -> Option<&str> {
    let (hex, rest) = (s.get(..32)?, s.get(32..)?);
    let tag = rest.strip_prefix('{')?.strip_suffix('}')?;
    (is_id(hex)
        && (1..=4).contains(&tag.len())
        && tag.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'z')))
    .then_some(tag)
}

impl Default for JobId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for JobId {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        JobId::parse(s).ok_or_else(|| {
            crate::Error::Rejected(format!(
                "{s:?} is not a job id (32 lowercase hex characters, then on a spread cluster \
             namespace its slot tag: {{<tag>}})"
            ))
        })
    }
}

impl AsRef<str> for JobId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A batch's id (32 lowercase hex characters, as a job's).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct BatchId(String);

impl BatchId {
    /// A fresh random id.
    pub fn new() -> Self {
        BatchId(JobId::new().0)
    }

    /// `s` as an id, when it has an id's shape.
    pub fn parse(s: &str) -> Option<Self> {
        is_id(s).then(|| BatchId(s.to_string()))
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for BatchId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for BatchId {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        BatchId::parse(s).ok_or_else(|| {
            crate::Error::Rejected(format!(
                "{s:?} is not a batch id (32 lowercase hex characters)"
            ))
        })
    }
}

/// Whether `s` has an id's shape.
pub(crate) fn is_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_resque_status_shape() {
        let id = JobId::new();
        assert!(is_id(id.as_str()), "{id}");
        assert_ne!(id, JobId::new());
        assert!(JobId::parse("ba69034b39c05d28a5403ac10e276e79").is_some());
        for bad in [
            "",
            "BA69034B39C05D28A5403AC10E276E79",
            "ba69034b",
            "zz69034b39c05d28a5403ac10e276e79",
        ] {
            assert!(JobId::parse(bad).is_none(), "{bad}");
            assert!(bad.parse::<JobId>().is_err());
        }
    }

    #[test]
    fn spread_ids_carry_their_slot_tag() {
        let id = JobId::new();
        assert_eq!(id.slot_tag(), None);
        let t = id.with_slot_tag("3f");
        assert_eq!(t.as_str(), format!("{id}{{3f}}"));
        assert_eq!(t.slot_tag(), Some("3f"));
        assert_eq!(t.with_slot_tag("zz9").slot_tag(), Some("zz9"));
        assert_eq!(JobId::parse(t.as_str()), Some(t.clone()));
        for bad in [
            "ba69034b39c05d28a5403ac10e276e79{}",
            "ba69034b39c05d28a5403ac10e276e79{abcde}",
            "ba69034b39c05d28a5403ac10e276e79{A}",
            "ba69034b39c05d28a5403ac10e276e79{3f",
            "ba69034b39c05d28a5403ac10e276e7{3f}",
        ] {
            assert!(JobId::parse(bad).is_none(), "{bad}");
        }
        assert!(BatchId::parse(t.as_str()).is_none());
    }
}
