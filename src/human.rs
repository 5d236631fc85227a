//! Human-readable durations, ages and one-line truncations, shared by the CLI and the web
//! dashboard so both show the same text for the same value.

/// Seconds as a short duration: `850ms`, `42s`, `5m12s`, `2h03m`, `3d04h`.
pub(crate) fn duration(secs: f64) -> String {
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

/// An interval in milliseconds as the CLI takes it: `1s`, `1m`, `250ms`, `90s`.
pub(crate) fn interval(ms: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
    ];
    for (n, unit) in UNITS {
        if ms >= n && ms.is_multiple_of(n) {
            return format!("{}{unit}", ms / n);
        }
    }
    format!("{ms}ms")
}

/// An optional age: the duration, or `unknown`. An age a little below zero (under a second:
/// the writer's clock a hair ahead of Redis's, as with a record written this millisecond) is
/// shown as `0ms`; a larger negative age is a real clock difference and stays `in …`.
pub(crate) fn age(secs: Option<f64>) -> String {
    secs.map(|s| if (-1.0..0.0).contains(&s) { 0.0 } else { s })
        .map(duration)
        .unwrap_or_else(|| "unknown".into())
}

/// Cuts `s` to its first line and at most `max` characters (with `…`).
pub(crate) fn short(s: &str, max: usize) -> String {
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
}
