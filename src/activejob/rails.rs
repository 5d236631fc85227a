//! Which Rails a job is written for: the serialized shape changed in 7.0 and 7.1 (and not
//! since, up to 8.1).

use std::fmt;
use std::str::FromStr;

/// The Rails (ActiveJob) version the consuming Ruby workers run.
///
/// | | 6.1 | 7.0 | 7.1 and later |
/// |---|---|---|---|
/// | `enqueued_at` | `iso8601` (seconds) | same | `iso8601(9)` |
/// | `scheduled_at` key | absent | absent | `iso8601(9)` or `null` |
/// | Range argument | not deserializable | `RangeSerializer` | same |
/// | BigDecimal argument | plain string (comes back as a String) | same | `BigDecimalSerializer` |
/// | TimeWithZone `time_zone` key | absent | absent | tzinfo name |
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rails {
    /// Rails 6.1 (Debian 12's `ruby-activejob`).
    V6_1,
    /// Rails 7.0.
    V7_0,
    /// Rails 7.1, 7.2, 8.0 and 8.1 (identical job format).
    V7_1,
}

impl Rails {
    /// The version as written in messages (`"6.1"`, `"7.0"`, `"7.1+"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Rails::V6_1 => "6.1",
            Rails::V7_0 => "7.0",
            Rails::V7_1 => "7.1+",
        }
    }
}

impl fmt::Display for Rails {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A version string that names no supported Rails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported Rails version {0:?}: use 6.1, 7.0, 7.1, 7.2, 8.0 or 8.1")]
pub struct UnknownRails(pub String);

impl FromStr for Rails {
    type Err = UnknownRails;

    /// Parses `6.1`, `7.0`, `7.1`, `7.2`, `8.0`, `8.1` (a patch part such as `6.1.7` is ignored).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.trim().split('.');
        let major = parts.next().and_then(|p| p.parse::<u32>().ok());
        let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
        match (major, minor) {
            (Some(6), Some(1)) => Ok(Rails::V6_1),
            (Some(7), Some(0)) => Ok(Rails::V7_0),
            (Some(7), Some(_)) | (Some(8), Some(_)) => Ok(Rails::V7_1),
            _ => Err(UnknownRails(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions() {
        assert_eq!("6.1".parse(), Ok(Rails::V6_1));
        assert_eq!("6.1.7.10".parse(), Ok(Rails::V6_1));
        assert_eq!("7.0".parse(), Ok(Rails::V7_0));
        assert_eq!("7.2".parse(), Ok(Rails::V7_1));
        assert_eq!("8.1.2".parse(), Ok(Rails::V7_1));
        assert!("6.0".parse::<Rails>().is_err());
        assert!("x".parse::<Rails>().is_err());
    }
}
