//! Every time format resq writes or reads, in one place.
//!
//! Written (all UTC, section 12 of the wire notes): `run_at` in Jesque's millisecond shape
//! (the one format both Ruby and Jesque can read), `:started` as Ruby's `Time#to_s`, heartbeats
//! as Ruby's `Time#iso8601`, `failed_at`/`retried_at` as Ruby's `%Y/%m/%d %H:%M:%S %Z`;
//! ActiveJob's `enqueued_at`/`scheduled_at` and time arguments as `iso8601` / `iso8601(9)`.
//! Read: every shape a Ruby, Jesque, node-resque or goworker peer writes.

use chrono::{DateTime, Datelike, FixedOffset, NaiveDateTime, TimeZone, Timelike, Utc};

/// `2026-11-21T19:15:33.678+0000` — a worker record's `run_at`.
pub fn run_at(t: DateTime<Utc>) -> String {
    // Written field by field: made on every step call, and a format string is parsed each time
    // it is used (the same text as `%Y-%m-%dT%H:%M:%S%.3f+0000`; a test compares them).
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}+0000",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.timestamp_subsec_millis().min(999)
    )
}

/// `2026-11-21 19:15:33 +0000` — `worker:<id>:started`, as Ruby's `Time#to_s` in UTC.
pub fn started(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S +0000").to_string()
}

/// `2026-11-21T19:15:33+00:00` — a heartbeat, as Ruby's `Time#iso8601` in UTC.
pub fn heartbeat(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S+00:00").to_string()
}

/// `2026/11/21 19:15:46 UTC` — a failure's `failed_at` and `retried_at`.
pub fn failed_at(t: DateTime<Utc>) -> String {
    // Field by field, as `run_at` (the same text as `%Y/%m/%d %H:%M:%S UTC`).
    format!(
        "{:04}/{:02}/{:02} {:02}:{:02}:{:02} UTC",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// `2026-11-21T19:15:33Z` — ActiveJob's `enqueued_at` before Rails 7.1 (`Time.now.utc.iso8601`).
pub fn iso8601_utc(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `2026-11-21T19:15:33.123456789Z` — ActiveJob's `enqueued_at`/`scheduled_at` from Rails 7.1,
/// and a UTC `Time` argument (`Time#iso8601(9)`).
pub fn iso8601_nanos_utc(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string()
}

/// `2026-11-21T20:15:33.123456789+01:00` — ActiveJob's `Time`/`DateTime`/`TimeWithZone`
/// arguments with an offset (`iso8601(9)`; a zero offset is written `+00:00`).
pub fn iso8601_nanos(t: DateTime<FixedOffset>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.9f%:z").to_string()
}

/// `2026-11-21` — ActiveJob's `Date` argument (`Date#iso8601`).
pub fn iso8601_date(d: chrono::NaiveDate) -> String {
    d.format("%Y-%m-%d").to_string()
}

/// A Redis `TIME` reply (seconds, microseconds) as a UTC time.
pub fn from_redis_time(secs: i64, micros: i64) -> Option<DateTime<Utc>> {
    Utc.timestamp_opt(secs, u32::try_from(micros.clamp(0, 999_999) * 1000).ok()?)
        .single()
}

/// Parses any time text a Resque-family peer writes: Ruby (`…Z`, `… +0000`, `…+00:00`,
/// `YYYY/MM/DD … UTC`), Jesque (`….SSS+0000`), node-resque (epoch seconds, JS
/// `Date#toString`), goworker (RFC 3339 nano, Go `Time.String`). Returns `None` when nothing
/// matches.
pub fn parse_any(text: &str) -> Option<DateTime<Utc>> {
    let s = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        let n: i64 = s.parse().ok()?;
        // Epoch seconds (node-resque) or milliseconds (Jesque scores).
        return if n > 100_000_000_000 {
            Utc.timestamp_millis_opt(n).single()
        } else {
            Utc.timestamp_opt(n, 0).single()
        };
    }
    const WITH_OFFSET: &[&str] = &[
        "%Y-%m-%dT%H:%M:%S%.f%z",
        "%Y-%m-%d %H:%M:%S %z",
        "%Y-%m-%d %H:%M:%S%.f %z",
        "%Y/%m/%d %H:%M:%S %z",
    ];
    for f in WITH_OFFSET {
        if let Ok(t) = DateTime::<FixedOffset>::parse_from_str(s, f) {
            return Some(t.with_timezone(&Utc));
        }
    }
    // Go's `Time.String` may carry a monotonic suffix and a zone name: keep the first three
    // fields (`date time offset`).
    let fields: Vec<&str> = s.split_whitespace().collect();
    if fields.len() >= 3 {
        let head = fields[..3].join(" ");
        if let Ok(t) = DateTime::<FixedOffset>::parse_from_str(&head, "%Y-%m-%d %H:%M:%S%.f %z") {
            return Some(t.with_timezone(&Utc));
        }
        // `2026/11/21 19:15:46 UTC` (zone names other than UTC/GMT are read as UTC).
        let naive = fields[..2].join(" ");
        for f in ["%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S"] {
            if let Ok(t) = NaiveDateTime::parse_from_str(&naive, f) {
                return Some(t.and_utc());
            }
        }
    }
    // JS `Date#toString`: `Sat Nov 21 2026 19:15:33 GMT+0000 (Coordinated Universal Time)`.
    if fields.len() >= 6 && fields[5].starts_with("GMT") {
        let text = format!(
            "{} {} {} {} {}",
            fields[1],
            fields[2],
            fields[3],
            fields[4],
            &fields[5][3..]
        );
        if let Ok(t) = DateTime::<FixedOffset>::parse_from_str(&text, "%b %d %Y %H:%M:%S %z") {
            return Some(t.with_timezone(&Utc));
        }
    }
    for f in ["%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
            return Some(t.and_utc());
        }
    }
    None
}

/// Now plus `delay`, or an error naming the delay when that is past the last time chrono
/// can represent (a caller's huge delay must not panic a producer).
pub fn after_now(delay: std::time::Duration) -> crate::error::Result<DateTime<Utc>> {
    chrono::Duration::from_std(delay)
        .ok()
        .and_then(|d| Utc::now().checked_add_signed(d))
        .ok_or_else(|| crate::error::Error::Config {
            var: "delay",
            message: format!("{delay:?} is too far in the future"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 21, 19, 15, 33).unwrap()
            + chrono::Duration::milliseconds(678)
    }

    #[test]
    fn written_formats() {
        assert_eq!(run_at(t()), "2026-11-21T19:15:33.678+0000");
        assert_eq!(started(t()), "2026-11-21 19:15:33 +0000");
        assert_eq!(heartbeat(t()), "2026-11-21T19:15:33+00:00");
        assert_eq!(failed_at(t()), "2026/11/21 19:15:33 UTC");
        assert_eq!(iso8601_utc(t()), "2026-11-21T19:15:33Z");
        assert_eq!(iso8601_nanos_utc(t()), "2026-11-21T19:15:33.678000000Z");
        let plus_one = FixedOffset::east_opt(3600).unwrap();
        assert_eq!(
            iso8601_nanos(t().with_timezone(&plus_one)),
            "2026-11-21T20:15:33.678000000+01:00"
        );
        assert_eq!(iso8601_date(t().date_naive()), "2026-11-21");
    }

    #[test]
    fn hand_written_formats_match_their_format_strings() {
        for ms in [
            0_i64,
            7,
            999,
            1_795_288_533_001,
            1_795_288_533_999,
            4_102_444_799_500,
        ] {
            let t = Utc.timestamp_millis_opt(ms).unwrap();
            assert_eq!(
                run_at(t),
                t.format("%Y-%m-%dT%H:%M:%S%.3f+0000").to_string()
            );
            assert_eq!(failed_at(t), t.format("%Y/%m/%d %H:%M:%S UTC").to_string());
        }
    }

    #[test]
    fn reads_every_peer_format() {
        let want = Utc.with_ymd_and_hms(2026, 11, 21, 19, 15, 33).unwrap();
        for s in [
            "2026-11-21T19:15:33Z",
            "2026-11-21T19:15:33.000+0000",
            "2026-11-21 19:15:33 +0000",
            "2026-11-21T14:15:33-05:00",
            "2026/11/21 19:15:33 UTC",
            "2026/11/21 19:15:33",
            "1795288533",
            "Sat Nov 21 2026 19:15:33 GMT+0000 (Coordinated Universal Time)",
            "2026-11-21T19:15:33.000000000Z",
            "2026-11-21 19:15:33.000000000 +0000 UTC m=+1.2",
        ] {
            let got = parse_any(s).unwrap_or_else(|| panic!("{s} did not parse"));
            assert_eq!(got.timestamp(), want.timestamp(), "{s}");
        }
        assert!(parse_any("yesterday").is_none());
    }
}
