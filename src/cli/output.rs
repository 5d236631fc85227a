//! How the CLI prints: aligned tables for people, JSON with `--json` for programs; short
//! human durations come from [`crate::human`], shared with the dashboard.

use crate::error::Result;
use comfy_table::{presets, ContentArrangement, Table};
use serde::Serialize;

pub(crate) use crate::human::{age, duration, short};

/// A borderless table with a header row, columns aligned (kubectl-style).
pub(crate) fn table<I, R>(header: &[&str], rows: I) -> String
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    let mut t = Table::new();
    t.load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().map(|h| h.to_string()));
    for r in rows {
        t.add_row(r.into_iter().collect::<Vec<String>>());
    }
    // comfy-table pads every column with one space on each side; trim the line ends.
    t.to_string()
        .lines()
        .map(|l| l.trim_end().strip_prefix(' ').unwrap_or(l.trim_end()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints `value` as pretty JSON.
pub(crate) fn json<T: Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_without_borders() {
        let t = table(
            &["A", "LONGER"],
            vec![vec!["x".to_string(), "1".to_string()]],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("A "), "{t}");
        assert_eq!(lines[0].find("LONGER"), lines[1].find('1'), "{t}");
    }

    #[test]
    fn short_cuts_lines() {
        assert_eq!(short("abc\ndef", 10), "abc…");
        assert_eq!(short("abcdef", 4), "abc…");
        assert_eq!(short("ab", 4), "ab");
    }
}
