//! A tracked job's id: 32 lowercase hex characters, resque-status's uuid shape
//! (`SecureRandom.hex`), so the same id names a resq-tracked job and a resque-status job
//! (re-exported as `resq::jobs::JobId`); a batch's id has the same shape
//! (`resq::workflows::BatchId`).

use std::fmt;

/// A tracked job's id (32 lowercase hex characters).
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

    /// `s` as an id, when it has an id's shape.
    pub fn parse(s: &str) -> Option<Self> {
        is_id(s).then(|| JobId(s.to_string()))
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
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
                "{s:?} is not a job id (32 lowercase hex characters)"
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
}
