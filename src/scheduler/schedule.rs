//! A recurring schedule in resque-scheduler's stored format (`<ns>:persistent_schedules`,
//! name → JSON config), e.g.
//! `{"class":"NightlyReport","queue":"reports","args":[7],"cron":"0 3 * * *","description":"…"}`.
//!
//! * `cron`: 5 fields (minute precision) or 6 (seconds first, as rufus-scheduler reads it),
//!   optionally followed by an IANA zone name (`"0 3 * * * America/New_York"`); without one the
//!   scheduler's default zone applies (UTC unless configured). Evaluated by `croner` in that zone,
//!   so daylight-saving changes follow the zone's wall clock.
//! * `every`: a rufus duration (`"30s"`, `"1h30m"`, `"2d"`, a plain number of seconds), or
//!   `["30s", {"first_in": "120s"}]`. The first fire is one period (or `first_in`) after the
//!   schedule is first seen; later fires keep that phase.
//! * `class` (defaults to the name), `queue` (required by resq, see [`super::job`]), `args`,
//!   `description`, `custom_job_class`, `rails_env`/`env` (fires only where the scheduler's env is
//!   in that comma/space list).

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use serde_json::{Map, Value};
use std::time::Duration;

/// When a schedule fires.
#[derive(Debug, Clone)]
pub(crate) enum When {
    /// A cron expression in a zone.
    Cron {
        /// The expression as written (zone name included).
        text: String,
        /// Parsed.
        cron: Box<Cron>,
        /// The zone it is evaluated in.
        tz: Tz,
    },
    /// A fixed period.
    Every {
        /// As written.
        text: String,
        /// The period.
        period: Duration,
        /// Delay of the first fire (default: one period).
        first_in: Option<Duration>,
    },
}

/// One recurring schedule.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    /// Its name (the hash field).
    pub name: String,
    /// The config as stored (`class` filled in from the name when missing).
    pub config: Map<String, Value>,
    /// When it fires.
    pub when: When,
}

impl Schedule {
    /// Reads a stored config; `default_tz` applies to cron expressions without a zone.
    pub(crate) fn from_config(
        name: &str,
        config: &Map<String, Value>,
        default_tz: Tz,
    ) -> Result<Self, String> {
        let mut config = config.clone();
        if !config.contains_key("class") {
            config.insert("class".into(), Value::String(name.to_string()));
        }
        let cron = config.get("cron").filter(|v| !is_blank(v));
        let every = config.get("every").filter(|v| !is_blank(v));
        let when = match (cron, every) {
            (Some(Value::String(c)), _) => parse_cron(c, default_tz)?,
            (Some(_), _) => return Err("cron must be a string".into()),
            (None, Some(e)) => parse_every(e)?,
            (None, None) => return Err("no cron / every found".into()),
        };
        Ok(Schedule {
            name: name.to_string(),
            config,
            when,
        })
    }

    /// Whether the schedule fires under scheduler env `env` (resque-scheduler's
    /// `env_matches?`: a schedule with `rails_env`/`env` fires only where that list names the
    /// scheduler's env).
    pub(crate) fn runs_in(&self, env: Option<&str>) -> bool {
        let wanted = self
            .config
            .get("rails_env")
            .or_else(|| self.config.get("env"))
            .and_then(Value::as_str);
        match wanted {
            None => true,
            Some(list) => env.is_some_and(|e| {
                list.split(|c: char| c == ',' || c.is_whitespace())
                    .any(|x| x == e)
            }),
        }
    }

    /// A short digest of when the schedule fires: a changed spec restarts its token.
    pub(crate) fn digest(&self) -> String {
        let spec = match &self.when {
            When::Cron { text, tz, .. } => format!("cron {text} {tz}"),
            When::Every { text, .. } => format!("every {text}"),
        };
        let hex = sha1_smol::Sha1::from(spec.as_bytes()).digest().to_string();
        hex[..12].to_string()
    }

    /// The first due time (epoch s) for a schedule first seen at `now`: the next cron
    /// occurrence after now, or now + `first_in` (default one period).
    pub(crate) fn first_due(&self, now: DateTime<Utc>) -> Option<i64> {
        match &self.when {
            When::Cron { .. } => self.next_after(now),
            When::Every {
                period, first_in, ..
            } => {
                let d = first_in.unwrap_or(*period);
                Some(now.timestamp().saturating_add(secs(d)))
            }
        }
    }

    /// The next due time after `now` for a schedule last due at `due` (epoch s): every missed
    /// occurrence is skipped, so one fire covers them all.
    pub(crate) fn due_after(&self, due: i64, now: DateTime<Utc>) -> Option<i64> {
        match &self.when {
            When::Cron { .. } => self.next_after(now),
            When::Every { period, .. } => {
                let p = secs(*period).max(1);
                let now_s = now.timestamp();
                if due > now_s {
                    return Some(due);
                }
                let k = (now_s - due) / p + 1;
                Some(due.saturating_add(k.saturating_mul(p)))
            }
        }
    }

    fn next_after(&self, now: DateTime<Utc>) -> Option<i64> {
        match &self.when {
            When::Cron { cron, tz, .. } => cron
                .find_next_occurrence(&now.with_timezone(tz), false)
                .ok()
                .map(|t| t.timestamp()),
            When::Every { period, .. } => Some(now.timestamp().saturating_add(secs(*period))),
        }
    }

    /// Human text of when it fires (`cron 0 3 * * * (UTC)`, `every 1h`).
    #[cfg(any(feature = "web", feature = "cli"))]
    pub(crate) fn describe_when(&self) -> String {
        match &self.when {
            When::Cron { text, tz, .. } => format!("cron {text} ({tz})"),
            When::Every { text, .. } => format!("every {text}"),
        }
    }
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

fn is_blank(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Parses a cron string with an optional trailing zone name.
pub(crate) fn parse_cron(text: &str, default_tz: Tz) -> Result<When, String> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    let (expr, tz) = match fields.last().and_then(|f| f.parse::<Tz>().ok()) {
        Some(tz) if fields.len() > 1 => (fields[..fields.len() - 1].join(" "), tz),
        _ => (fields.join(" "), default_tz),
    };
    let n = expr.split_whitespace().count();
    if !(5..=6).contains(&n) && !expr.starts_with('@') {
        return Err(format!(
            "cron {text:?} must have 5 or 6 fields (6: seconds first), then an optional zone"
        ));
    }
    let cron = croner::parser::CronParser::builder()
        .build()
        .parse(&expr)
        .map_err(|e| format!("cron {text:?}: {e}"))?;
    Ok(When::Cron {
        text: text.to_string(),
        cron: Box::new(cron),
        tz,
    })
}

/// Parses an `every` value: a duration string, or `[duration, {"first_in": duration}]`.
pub(crate) fn parse_every(v: &Value) -> Result<When, String> {
    let (text, opts) = match v {
        Value::String(s) => (s.clone(), None),
        Value::Number(n) => (n.to_string(), None),
        Value::Array(a) => match a.first() {
            Some(Value::String(s)) => (s.clone(), a.get(1).and_then(Value::as_object)),
            _ => return Err("every must start with a duration".into()),
        },
        _ => return Err("every must be a duration".into()),
    };
    let period = parse_duration(&text)?;
    if period.is_zero() {
        return Err(format!("every {text:?} is not a positive period"));
    }
    let first_in = match opts.and_then(|o| o.get("first_in")) {
        None => None,
        Some(Value::String(s)) => Some(parse_duration(s)?),
        Some(Value::Number(n)) => Some(parse_duration(&n.to_string())?),
        Some(_) => return Err("first_in must be a duration".into()),
    };
    Ok(When::Every {
        text,
        period,
        first_in,
    })
}

/// rufus-scheduler's duration text: `1h30m`, `2d`, `1w`, `45s`, `500ms`, `1.5h`, `1M` (30 days),
/// `1y` (365 days), or a plain number of seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    let bad = || format!("{text:?} is not a duration (e.g. 30s, 1h30m, 2d)");
    if s.is_empty() {
        return Err(bad());
    }
    if let Ok(n) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(n).map_err(|_| bad());
    }
    let mut total = 0.0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let n: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            "w" => 604_800.0,
            "M" => 2_592_000.0,
            "y" => 31_536_000.0,
            _ => return Err(bad()),
        };
        total += n * unit;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

/// `t` (epoch s) as a UTC time, for display.
#[cfg(any(test, feature = "web", feature = "cli"))]
pub(crate) fn at(t: i64) -> Option<DateTime<Utc>> {
    chrono::TimeZone::timestamp_opt(&Utc, t, 0).single()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sched(v: Value) -> Schedule {
        Schedule::from_config("nightly", v.as_object().unwrap(), Tz::UTC).unwrap()
    }

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn cron_in_a_zone() {
        let s = sched(json!({"queue":"q","cron":"0 3 * * * America/New_York"}));
        // 03:00 in New York is 08:00 UTC in winter.
        let due = s.first_due(t("2026-11-21T12:00:00Z")).unwrap();
        assert_eq!(at(due).unwrap(), t("2026-11-22T08:00:00Z"));
        assert_eq!(s.config["class"], json!("nightly"));
    }

    #[test]
    fn cron_with_seconds_and_default_zone() {
        let s = sched(json!({"queue":"q","cron":"*/10 * * * * *"}));
        let due = s.first_due(t("2026-11-21T12:00:03Z")).unwrap();
        assert_eq!(at(due).unwrap(), t("2026-11-21T12:00:10Z"));
    }

    #[test]
    fn missed_occurrences_collapse_into_one() {
        let s = sched(json!({"queue":"q","cron":"0 * * * *"}));
        let last = t("2026-11-21T01:00:00Z").timestamp();
        let next = s.due_after(last, t("2026-11-21T12:30:00Z")).unwrap();
        assert_eq!(at(next).unwrap(), t("2026-11-21T13:00:00Z"));
        let e = sched(json!({"queue":"q","every":["1h", {"first_in": "10m"}]}));
        let first = e.first_due(t("2026-11-21T12:00:00Z")).unwrap();
        assert_eq!(at(first).unwrap(), t("2026-11-21T12:10:00Z"));
        // Down from 12:10 to 17:45: one fire, then the same phase (18:10).
        let next = e.due_after(first, t("2026-11-21T17:45:00Z")).unwrap();
        assert_eq!(at(next).unwrap(), t("2026-11-21T18:10:00Z"));
    }

    #[test]
    fn env_filter_and_errors() {
        let s = sched(json!({"queue":"q","every":"1m","rails_env":"production, staging"}));
        assert!(s.runs_in(Some("staging")));
        assert!(!s.runs_in(Some("test")));
        assert!(!s.runs_in(None));
        let bad = json!({"queue":"q","cron":"61 * * * *"});
        assert!(Schedule::from_config("x", bad.as_object().unwrap(), Tz::UTC).is_err());
        let none = json!({"queue":"q"});
        assert!(Schedule::from_config("x", none.as_object().unwrap(), Tz::UTC).is_err());
    }
}
