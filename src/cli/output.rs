//! How the CLI prints: aligned tables for people, JSON with `--json` for programs, and short
//! human durations.

use crate::error::Result;
use comfy_table::{presets, ContentArrangement, Table};
use serde::Serialize;

/// A borderless table with a header row, columns aligned (kubectl-style).
pub fn table<I, R>(header: &[&str], rows: I) -> String
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
pub fn json<T: Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Seconds as a short duration: `850ms`, `42s`, `5m12s`, `2h03m`, `3d04h`.
pub fn duration(secs: f64) -> String {
    if secs < 0.0 {
        return format!("in {}", duration(-secs));
    }
    if secs < 1.0 {
        return format!("{}ms", (secs * 1000.0).round() as u64);
    }
    let s = secs.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86400, (s % 86400) / 3600),
    }
}

/// An optional age: the duration, or `unknown`. An age a little below zero (under a second:
/// the writer's clock a hair ahead of Redis's, as with a record written this millisecond) is
/// shown as `0ms`; a larger negative age is a real clock difference and stays `in …`.
pub fn age(secs: Option<f64>) -> String {
    secs.map(|s| if (-1.0..0.0).contains(&s) { 0.0 } else { s })
        .map(duration)
        .unwrap_or_else(|| "unknown".into())
}

/// Cuts `s` to its first line and at most `max` characters (with `…`).
pub fn short(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() <= max && !s.contains('\n') {
        return line.to_string();
    }
    let cut: String = line.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration(0.25), "250ms");
        assert_eq!(duration(42.0), "42s");
        assert_eq!(duration(312.0), "5m12s");
        assert_eq!(duration(7380.0), "2h03m");
        assert_eq!(duration(273600.0), "3d04h");
        assert_eq!(duration(-5.0), "in 5s");
        assert_eq!(age(None), "unknown");
        assert_eq!(age(Some(-0.001)), "0ms");
        assert_eq!(age(Some(-5.0)), "in 5s");
    }

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
