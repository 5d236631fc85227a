//! Redis `INFO`, split into its sections, for the dashboard's Stats page.

use super::Admin;
use crate::error::Result;

/// One `# Section` of `INFO`: its name and `field:value` lines in order.
pub(crate) type InfoSection = (String, Vec<(String, String)>);

impl Admin {
    /// `INFO` of the server the shared connection talks to.
    pub async fn redis_info(&self) -> Result<Vec<InfoSection>> {
        let mut con = self.con();
        let text: String = redis::cmd("INFO").query_async(&mut con).await?;
        Ok(parse_info(&text))
    }
}

/// Parses `INFO` text: `# Name` starts a section, `field:value` lines fill it, anything else
/// is skipped.
pub(crate) fn parse_info(text: &str) -> Vec<InfoSection> {
    let mut out: Vec<InfoSection> = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('#') {
            out.push((name.trim().to_string(), Vec::new()));
        } else if let Some((k, v)) = line.split_once(':') {
            if out.is_empty() {
                out.push((String::new(), Vec::new()));
            }
            if let Some((_, fields)) = out.last_mut() {
                fields.push((k.to_string(), v.to_string()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn sections_and_fields() {
        let s = super::parse_info(
            "# Server\r\nredis_version:7.0.15\r\n\r\n# Keyspace\r\ndb0:keys=3,expires=0\r\n",
        );
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].0, "Server");
        assert_eq!(s[0].1[0], ("redis_version".into(), "7.0.15".into()));
        assert_eq!(s[1].1[0].1, "keys=3,expires=0");
    }
}
