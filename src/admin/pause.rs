//! `<ns>:pause-all-workers`: Ruby's switch that stops every worker taking new jobs.
//!
//! Workers treat the value as set when, trimmed and lower-cased, it is `true` (Ruby's rule);
//! `pause` writes `true`, `resume` deletes the key.

use super::Admin;
use crate::error::Result;
use redis::AsyncCommands;

impl Admin {
    /// Sets `<ns>:pause-all-workers` to `true`.
    pub async fn pause(&self) -> Result<()> {
        let mut con = self.con();
        let _: () = con.set(self.keys().pause_all_workers(), "true").await?;
        Ok(())
    }

    /// Deletes `<ns>:pause-all-workers`.
    pub async fn resume(&self) -> Result<()> {
        let mut con = self.con();
        let _: () = con.del(self.keys().pause_all_workers()).await?;
        Ok(())
    }

    /// Whether workers see the pause switch set.
    pub async fn is_paused(&self) -> Result<bool> {
        let mut con = self.con();
        let v: Option<Vec<u8>> = con.get(self.keys().pause_all_workers()).await?;
        Ok(v.is_some_and(|b| is_true(&b)))
    }
}

/// Ruby's test: the value, stripped and lower-cased, is `true`.
pub(crate) fn is_true(value: &[u8]) -> bool {
    String::from_utf8_lossy(value)
        .trim()
        .eq_ignore_ascii_case("true")
}

#[cfg(test)]
mod tests {
    #[test]
    fn ruby_truthiness() {
        assert!(super::is_true(b" TRUE\n"));
        assert!(!super::is_true(b"1"));
        assert!(!super::is_true(b"yes"));
    }
}
