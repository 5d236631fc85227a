//! Float text as the peers write it: Ruby's `Float#to_s` (the json gem), Oj's compat mode, and
//! Java's `Double.toString` (Jackson, so Jesque).
//!
//! All three start from the shortest decimal digits that read back as the same `f64` (Ruby's
//! `dtoa` mode 0, Rust's `{:e}`, Java ≥ 19); they differ only in layout:
//!
//! | value | json gem (`Float#to_s`) | Oj (compat) | Java |
//! |---|---|---|---|
//! | `1.0` | `1.0` | `1.0` | `1.0` |
//! | `1e20` | `1.0e+20` | `1.0e+20` | `1.0E20` |
//! | `1e16` | `1.0e+16` | `10000000000000000.0` | `1.0E16` |
//! | `1.5e-7` | `1.5e-07` | `1.5e-07` | `1.5E-7` |
//! | `-0.0` | `-0.0` | `0.0` | `-0.0` |
//! | `0.001` | `0.001` | `0.001` | `0.001` |
//! | `12345678.9` | `12345678.9` | `12345678.9` | `1.23456789E7` |
//!
//! Oj writes a whole number below 2^63 as `%.1f` and `±0.0` as `0.0`, everything else as
//! `Float#to_s`. Checked against Ruby 3.1 (`Float#to_s`, `JSON.generate`, `Oj.dump` compat) on
//! 399,926 floats (random bit patterns, random magnitudes, integers-as-floats, edges). Java before 19 sometimes printed one digit more than the shortest form; resq
//! writes the shortest.

use serde::{Deserialize, Serialize};

/// Which peer's float text to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FloatFormat {
    /// Ruby's json gem (`Float#to_s`): what `Resque.enqueue` writes with MultiJson's default
    /// `json_gem` adapter or the stdlib `JSON`. The default.
    #[default]
    RubyJsonGem,
    /// Ruby's Oj in compat mode: what MultiJson writes when the `oj` gem is installed.
    RubyOj,
    /// Java's `Double.toString`, as Jackson (and so Jesque) writes.
    Java,
}

impl FloatFormat {
    /// The text of `x` in this format; `None` for NaN and infinities (not JSON).
    pub fn format(self, x: f64) -> Option<String> {
        if !x.is_finite() {
            return None;
        }
        Some(match self {
            FloatFormat::RubyJsonGem => ruby_to_s(x),
            FloatFormat::RubyOj => oj_compat(x),
            FloatFormat::Java => java_to_string(x),
        })
    }
}

/// The shortest round-trip digits of `|x|` and its decimal point position: `|x|` =
/// `0.<digits> × 10^decpt` (Ruby's `dtoa` convention). Zero gives `("0", 1)`.
fn digits(x: f64) -> (String, i32) {
    if x == 0.0 {
        return ("0".to_string(), 1);
    }
    // `{:e}` prints the shortest digits that round-trip: `d[.ddd]e<exp>`. When two strings of
    // that length round-trip and `x` lies exactly between them, Rust takes the upper one and
    // dtoa the even one; the correctly rounded string of that length (`{:.Ne}`, ties to even)
    // is dtoa's choice whenever it round-trips.
    let shortest = format!("{:e}", x.abs());
    let len = shortest
        .split('e')
        .next()
        .map_or(1, |m| m.chars().filter(char::is_ascii_digit).count());
    let nearest = format!("{:.*e}", len.saturating_sub(1), x.abs());
    let sci = if nearest.parse::<f64>().ok() == Some(x.abs()) {
        nearest
    } else {
        shortest
    };
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    (digits.to_string(), exp + 1)
}

/// Ruby's `Float#to_s` for a finite `x`.
pub(crate) fn ruby_to_s(x: f64) -> String {
    let (d, decpt) = digits(x);
    let sign = if x.is_sign_negative() { "-" } else { "" };
    let n = d.len() as i32;
    if decpt > 0 && (decpt <= 15 || decpt < n) {
        // Fixed: integer part, then at least one fraction digit, for up to 15 integer digits,
        // or 16 when a fraction digit follows (`1e14.to_s` is `100000000000000.0`, `1e15.to_s`
        // is `1.0e+15`, `4464757046631535.5.to_s` is itself; measured on Ruby 3.1).
        fixed_point(sign, &d, decpt)
    } else if decpt <= 0 && decpt > -4 {
        format!("{sign}0.{}{d}", "0".repeat((-decpt) as usize))
    } else {
        let frac = if n > 1 { &d[1..] } else { "0" };
        format!("{sign}{}.{frac}e{:+03}", &d[..1], decpt - 1)
    }
}

/// Oj's compat-mode float text for a finite `x`.
pub(crate) fn oj_compat(x: f64) -> String {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if x == 0.0 {
        "0.0".to_string()
    } else if x.fract() == 0.0 && (-TWO_63..TWO_63).contains(&x) {
        format!("{x:.1}")
    } else {
        ruby_to_s(x)
    }
}

/// Java's `Double.toString` (shortest digits) for a finite `x`.
pub(crate) fn java_to_string(x: f64) -> String {
    let (d, decpt) = digits(x);
    let sign = if x.is_sign_negative() { "-" } else { "" };
    let n = d.len() as i32;
    let abs = x.abs();
    if abs == 0.0 || (1e-3..1e7).contains(&abs) {
        if decpt > 0 {
            fixed_point(sign, &d, decpt)
        } else {
            format!("{sign}0.{}{d}", "0".repeat((-decpt) as usize))
        }
    } else {
        let frac = if n > 1 { &d[1..] } else { "0" };
        format!("{sign}{}.{frac}E{}", &d[..1], decpt - 1)
    }
}

/// Digits `d` with the decimal point after `decpt` (> 0) of them, at least one fraction digit:
/// `123` at 2 is `12.3`, at 5 is `12300.0`.
fn fixed_point(sign: &str, d: &str, decpt: i32) -> String {
    let n = d.len() as i32;
    if n > decpt {
        format!("{sign}{}.{}", &d[..decpt as usize], &d[decpt as usize..])
    } else {
        format!("{sign}{d}{}.0", "0".repeat((decpt - n) as usize))
    }
}

#[cfg(test)]
// Fixture values as Ruby wrote them (3.14 is not π; Ruby's literals keep their digits).
#[allow(clippy::approx_constant, clippy::excessive_precision)]
mod tests {
    use super::*;

    #[test]
    fn ruby_float_to_s_matches_fixture_01() {
        // Values and texts from fixtures 01_enqueue*.json (real Ruby).
        let cases = [
            (3.14, "3.14"),
            (1.0, "1.0"),
            (1e20, "1.0e+20"),
            (1.5e-7, "1.5e-07"),
            (-0.0, "-0.0"),
            (0.1 + 0.2, "0.30000000000000004"),
            (123456789.123456789, "123456789.12345679"),
            (1e16, "1.0e+16"),
            (2.5, "2.5"),
            (1700000000.5, "1700000000.5"),
        ];
        for (x, want) in cases {
            assert_eq!(ruby_to_s(x), want, "{x:?}");
        }
    }

    #[test]
    fn ruby_layout_edges() {
        assert_eq!(ruby_to_s(1e15), "1.0e+15");
        assert_eq!(ruby_to_s(1e14), "100000000000000.0");
        assert_eq!(ruby_to_s(123456789012345.6), "123456789012345.6");
        assert_eq!(ruby_to_s(4464757046631535.5), "4464757046631535.5");
        assert_eq!(ruby_to_s(1234567890123456.0), "1.234567890123456e+15");
        assert_eq!(ruby_to_s(12345678901234568.0), "1.2345678901234568e+16");
        assert_eq!(
            ruby_to_s(f64::from_bits(0x428921eacf52ff40)),
            "3454183008863.9062"
        );
        assert_eq!(ruby_to_s(0.0001), "0.0001");
        assert_eq!(ruby_to_s(0.00001), "1.0e-05");
        assert_eq!(ruby_to_s(-1.25e-300), "-1.25e-300");
        assert_eq!(ruby_to_s(f64::MAX), "1.7976931348623157e+308");
        assert_eq!(ruby_to_s(5e-324), "5.0e-324");
        assert_eq!(ruby_to_s(100.0), "100.0");
        assert_eq!(ruby_to_s(0.0), "0.0");
    }

    #[test]
    fn oj_differs_only_where_fixture_shows() {
        assert_eq!(oj_compat(-0.0), "0.0");
        assert_eq!(oj_compat(1e16), "10000000000000000.0");
        assert_eq!(oj_compat(1e20), "1.0e+20");
        assert_eq!(oj_compat(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(oj_compat(1.5e-7), "1.5e-07");
        assert_eq!(
            oj_compat(-9.223372036854775808e18),
            "-9223372036854775808.0"
        );
    }

    #[test]
    fn java_double_to_string() {
        assert_eq!(java_to_string(1.0), "1.0");
        assert_eq!(java_to_string(1e20), "1.0E20");
        assert_eq!(java_to_string(1.5e-7), "1.5E-7");
        assert_eq!(java_to_string(-0.0), "-0.0");
        assert_eq!(java_to_string(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(java_to_string(123456789.123456789), "1.2345678912345679E8");
        assert_eq!(java_to_string(1234567.0), "1234567.0");
        assert_eq!(java_to_string(1e7), "1.0E7");
        assert_eq!(java_to_string(0.001), "0.001");
        assert_eq!(java_to_string(0.0001), "1.0E-4");
    }

    #[test]
    fn non_finite_is_not_json() {
        assert_eq!(FloatFormat::RubyJsonGem.format(f64::NAN), None);
        assert_eq!(FloatFormat::Java.format(f64::INFINITY), None);
    }
}
