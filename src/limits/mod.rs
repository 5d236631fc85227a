//! Flow control across the fleet: concurrency limits (with weights and priorities), rate limits
//! and time windows, per queue, per class or per key computed from the job — decided inside
//! the reserve script, atomic and crash-safe (docs/limits.md) — and per-queue pause.
//!
//! ```
//! use resq::limits::Limit;
//! use resq::Registry;
//! use std::time::Duration;
//!
//! let registry = Registry::new()
//!     // At most 5 jobs of the payments queue at once across the fleet; a Refund counts twice.
//!     .limit(Limit::concurrency("payments", 5).queue("payments").weight("Refund", 2))
//!     // At most 10 calls a second per customer.
//!     .limit(Limit::rate("stripe", 10, Duration::from_secs(1)).queue("stripe").key("stripe-{args.0}"));
//! # let _ = registry;
//! ```
//!
//! Limits declared in code are written to Redis when a worker starts
//! (`<ns>:resq:limits`); `resq limits set` stores an override (`<ns>:resq:limits:set`) that
//! wins until `resq limits clear`, so operators change limits fleet-wide without a restart.
//! Workers read both whenever either changes.
//!
//! Modules: `store` (the stored definitions and what the scripts get), `cache` (a worker's
//! copy and its release timer), `report` (capacity, use, held jobs per limit).

pub(crate) mod cache;
pub(crate) mod report;
pub(crate) mod spread;
pub(crate) mod store;

pub use report::{LimitReport, PartitionReport};

use crate::error::{Error, Result};
use chrono::{NaiveTime, Weekday};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// What a limit bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Kind {
    /// At most `limit` units of running jobs at once (a job's weight is its units).
    Concurrency {
        /// The capacity.
        limit: u32,
    },
    /// At most `limit` starts per `interval_ms`.
    Rate {
        /// Starts allowed per interval.
        limit: u32,
        /// The interval, in milliseconds.
        interval_ms: u64,
        /// A sliding window (the last `interval_ms` at any moment) instead of fixed ones.
        #[serde(default)]
        sliding: bool,
    },
    /// Starts only inside the given times (in `tz`, an IANA zone).
    Window {
        /// When jobs may start.
        windows: Vec<TimeWindow>,
        /// The zone the times are in (`UTC` by default).
        #[serde(default = "utc")]
        tz: String,
    },
}

impl Kind {
    /// Its name, as stored and shown: `concurrency`, `rate` or `window`.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Concurrency { .. } => "concurrency",
            Kind::Rate { .. } => "rate",
            Kind::Window { .. } => "window",
        }
    }
}

fn utc() -> String {
    "UTC".into()
}

/// A time of day range on some days of the week (`from` < `to`; `to` may be `24:00`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeWindow {
    /// Days it applies to (`mon` … `sun`; empty: every day).
    #[serde(default)]
    pub days: Vec<String>,
    /// Start, `HH:MM`.
    pub from: String,
    /// End, `HH:MM` (`24:00` for midnight).
    pub to: String,
}

/// One limit (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    /// Its name (letters, digits, `_`, `-`, `.`).
    pub name: String,
    /// What it bounds.
    #[serde(flatten)]
    pub kind: Kind,
    /// Only jobs of this queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Only jobs of this class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// A partition per value of this template (`stripe-{args.0}`; `{class}`, `{queue}`,
    /// `{args.N}`, `{args.N.field}`): one limit of the same size per partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Units a job of a class takes (default 1): hipq's throttle factor.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub weights: BTreeMap<String, u32>,
    /// Priority of a class among the jobs held by this limit (0–99, higher first; default
    /// 0); only matters while the limit is full.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub priority: BTreeMap<String, u8>,
}

impl Limit {
    fn new(name: &str, kind: Kind) -> Self {
        Limit {
            name: name.to_string(),
            kind,
            queue: None,
            class: None,
            key: None,
            weights: BTreeMap::new(),
            priority: BTreeMap::new(),
        }
    }

    /// Whether `other` holds the same jobs where this one holds them (same kind, queue, class,
    /// key, weights and priorities: only its numbers differ). A change that is not is applied
    /// to the jobs held already by putting them back in their queues (limits_rejudge.lua).
    pub(crate) fn holds_alike(&self, other: &Limit) -> bool {
        std::mem::discriminant(&self.kind) == std::mem::discriminant(&other.kind)
            && self.queue == other.queue
            && self.class == other.class
            && self.key == other.key
            && self.weights == other.weights
            && self.priority == other.priority
    }

    /// At most `limit` units running at once.
    pub fn concurrency(name: &str, limit: u32) -> Self {
        Self::new(name, Kind::Concurrency { limit })
    }

    /// At most `limit` starts per `per` (fixed windows; see [`Limit::sliding`]).
    pub fn rate(name: &str, limit: u32, per: Duration) -> Self {
        Self::new(
            name,
            Kind::Rate {
                limit,
                interval_ms: u64::try_from(per.as_millis()).unwrap_or(u64::MAX),
                sliding: false,
            },
        )
    }

    /// Starts only inside `windows`, in zone `tz`.
    pub fn window(name: &str, windows: Vec<TimeWindow>, tz: &str) -> Self {
        Self::new(
            name,
            Kind::Window {
                windows,
                tz: tz.to_string(),
            },
        )
    }

    /// A rate limit over a sliding window instead of fixed ones.
    pub fn sliding(mut self) -> Self {
        if let Kind::Rate { sliding, .. } = &mut self.kind {
            *sliding = true;
        }
        self
    }

    /// Only jobs of `queue`.
    pub fn queue(mut self, queue: &str) -> Self {
        self.queue = Some(queue.to_string());
        self
    }

    /// Only jobs of `class`.
    pub fn class(mut self, class: &str) -> Self {
        self.class = Some(class.to_string());
        self
    }

    /// One limit per value of `template`.
    pub fn key(mut self, template: &str) -> Self {
        self.key = Some(template.to_string());
        self
    }

    /// Jobs of `class` take `units` of a concurrency limit.
    pub fn weight(mut self, class: &str, units: u32) -> Self {
        self.weights.insert(class.to_string(), units);
        self
    }

    /// Jobs of `class` held by this limit go before lower priorities (0–99).
    pub fn priority(mut self, class: &str, priority: u8) -> Self {
        self.priority.insert(class.to_string(), priority);
        self
    }

    /// Checks the definition: a usable name, a positive limit and interval, weights of at
    /// least 1 and at most the limit, priorities up to 99, no empty queue, class or key, a key
    /// template whose fields are `class`, `queue` or `args.…`, windows that parse, a known
    /// zone.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Error::Rejected(format!("limit {:?}: {m}", self.name));
        if self.name.is_empty()
            || self.name.len() > 100
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(bad(
                "a name is 1 to 100 letters, digits, '_', '-' or '.'".into()
            ));
        }
        match &self.kind {
            Kind::Concurrency { limit } | Kind::Rate { limit, .. } if *limit == 0 => {
                return Err(bad("the limit must be at least 1".into()))
            }
            Kind::Rate { interval_ms: 0, .. } => {
                return Err(bad("the interval must be at least 1 ms".into()))
            }
            Kind::Window { windows, tz } => {
                tz.parse::<chrono_tz::Tz>()
                    .map_err(|_| bad(format!("{tz:?} is not an IANA zone")))?;
                if windows.is_empty() {
                    return Err(bad("a time-window limit needs at least one window".into()));
                }
                for w in windows {
                    parse_window(w).map_err(bad)?;
                }
            }
            _ => {}
        }
        if let Some((c, _)) = self.weights.iter().find(|(_, w)| **w == 0) {
            return Err(bad(format!("the weight of {c} must be at least 1")));
        }
        if let Kind::Concurrency { limit } | Kind::Rate { limit, .. } = self.kind {
            if let Some((c, w)) = self.weights.iter().find(|(_, w)| **w > limit) {
                return Err(bad(format!(
                    "a {c} job weighs {w}, more than the limit of {limit}: it could never start"
                )));
            }
        }
        for (what, v) in [
            ("queue", &self.queue),
            ("class", &self.class),
            ("key", &self.key),
        ] {
            if v.as_deref().is_some_and(str::is_empty) {
                return Err(bad(format!(
                    "an empty {what} names nothing (leave it out instead)"
                )));
            }
        }
        if let Some((c, p)) = self.priority.iter().find(|(_, p)| **p > 99) {
            return Err(bad(format!("the priority of {c} is {p}, above 99")));
        }
        if let Some(t) = &self.key {
            let mut rest = t.as_str();
            while let Some(i) = rest.find('{') {
                let Some(j) = rest[i..].find('}') else {
                    return Err(bad(format!("key {t:?}: an unclosed '{{'")));
                };
                let field = &rest[i + 1..i + j];
                let ok = field == "class"
                    || field == "queue"
                    || field.strip_prefix("args.").is_some_and(|p| {
                        p.split('.')
                            .next()
                            .is_some_and(|n| n.parse::<u32>().is_ok())
                    });
                if !ok {
                    return Err(bad(format!(
                        "key {t:?}: {{{field}}} is not class, queue or args.N[.field]"
                    )));
                }
                rest = &rest[i + j + 1..];
            }
        }
        if self.queue.is_none() && self.class.is_none() && self.key.is_none() {
            return Err(bad(
                "name a queue, a class or a key: a limit over every job of the namespace is \
                 almost never what is meant"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The capacity a report shows (the concurrency or rate limit; none for a window).
    pub fn capacity(&self) -> Option<u32> {
        match self.kind {
            Kind::Concurrency { limit } | Kind::Rate { limit, .. } => Some(limit),
            Kind::Window { .. } => None,
        }
    }
}

/// The parsed days, start and end (minutes of the day) of a window.
pub(crate) fn parse_window(
    w: &TimeWindow,
) -> std::result::Result<(Vec<Weekday>, u32, u32), String> {
    let days = w
        .days
        .iter()
        .map(|d| {
            d.parse::<Weekday>()
                .map_err(|_| format!("{d:?} is not a day (mon … sun)"))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let minutes = |s: &str| -> std::result::Result<u32, String> {
        if s == "24:00" {
            return Ok(24 * 60);
        }
        NaiveTime::parse_from_str(s, "%H:%M")
            .map(|t| chrono::Timelike::hour(&t) * 60 + chrono::Timelike::minute(&t))
            .map_err(|_| format!("{s:?} is not a time of day (HH:MM)"))
    };
    let (from, to) = (minutes(&w.from)?, minutes(&w.to)?);
    if from >= to {
        return Err(format!("window {}–{} ends before it starts", w.from, w.to));
    }
    Ok((days, from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_definitions_are_refused_with_the_reason() {
        assert!(Limit::concurrency("ok-1", 5).class("A").validate().is_ok());
        for (l, why) in [
            (Limit::concurrency("", 5).class("A"), "name"),
            (Limit::concurrency("a b", 5).class("A"), "name"),
            (Limit::concurrency("x", 0).class("A"), "at least 1"),
            (Limit::concurrency("x", 1), "name a queue"),
            (Limit::concurrency("x", 1).key("k-{args}"), "args.N"),
            (Limit::concurrency("x", 1).key("k-{args.0"), "unclosed"),
            (
                Limit::concurrency("x", 1).class("A").weight("A", 0),
                "weight",
            ),
            (
                Limit::concurrency("x", 2).class("A").weight("A", 3),
                "could never start",
            ),
            (Limit::concurrency("x", 1).key(""), "empty key"),
            (Limit::concurrency("x", 1).queue(""), "empty queue"),
            (
                Limit::concurrency("x", 1).class("").queue("q"),
                "empty class",
            ),
            (Limit::rate("x", 1, Duration::ZERO).class("A"), "interval"),
            (
                Limit::window(
                    "x",
                    vec![TimeWindow {
                        days: vec![],
                        from: "18:00".into(),
                        to: "09:00".into(),
                    }],
                    "UTC",
                )
                .class("A"),
                "ends before",
            ),
            (
                Limit::window(
                    "x",
                    vec![TimeWindow {
                        days: vec![],
                        from: "09:00".into(),
                        to: "17:00".into(),
                    }],
                    "Mars/Base",
                )
                .class("A"),
                "zone",
            ),
        ] {
            let e = l.validate().unwrap_err().to_string();
            assert!(e.contains(why), "{e} (wanted {why})");
        }
    }

    #[test]
    fn definitions_round_trip_as_json() {
        let l = Limit::rate("stripe", 10, Duration::from_secs(1))
            .sliding()
            .queue("stripe")
            .key("stripe-{args.0}")
            .priority("Urgent", 10);
        let j = serde_json::to_string(&l).unwrap();
        assert!(j.contains(r#""kind":"rate""#), "{j}");
        let back: Limit = serde_json::from_str(&j).unwrap();
        assert_eq!(back, l);
    }
}
