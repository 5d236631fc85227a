//! What a limit is doing: capacity, units in use, held jobs and the oldest one's age, per
//! partition — for `resq limits`, `resq top`, the metrics and the dashboard.

use super::{Kind, Limit};
use crate::admin::Admin;
use crate::error::Result;
use serde::Serialize;
use std::collections::BTreeMap;

/// One partition of a limit (the limit itself when it is not partitioned).
#[derive(Debug, Clone, Serialize)]
pub struct PartitionReport {
    /// The partition (`None`: the unpartitioned limit).
    pub partition: Option<String>,
    /// Units in use (concurrency) or starts in the current window (rate).
    pub in_use: u64,
    /// Jobs held.
    pub held: u64,
    /// Age of the oldest held job, in seconds.
    pub oldest_held_secs: Option<f64>,
}

/// A limit and what it is doing.
#[derive(Debug, Clone, Serialize)]
pub struct LimitReport {
    /// The definition in force.
    pub limit: Limit,
    /// Whether an operator's override (`resq limits set`) is in force.
    pub overridden: bool,
    /// Its partitions with something running or held (at most 1,000), by name.
    pub partitions: Vec<PartitionReport>,
    /// Whether every partition was looked at (a report reads 20,000 partitions at most, over
    /// all limits: empty ones count).
    pub partitions_complete: bool,
    /// Whether a time-window limit is open now.
    pub open: Option<bool>,
    /// Workers of other runtimes (Ruby, Jesque, node-resque) polling a queue this limit covers:
    /// they do not honour it.
    pub foreign_workers: Vec<String>,
}

/// Partitions reported per limit at most.
const MAX_PARTS: usize = 1000;

/// Partitions a report reads at most, over all limits (`SSCAN`, 1,000 at a time).
const PARTS_BUDGET: usize = 20_000;

impl Admin {
    /// Every limit in force with its use.
    pub async fn limit_reports(&self) -> Result<Vec<LimitReport>> {
        self.limit_reports_within(PARTS_BUDGET).await
    }

    /// [`Admin::limit_reports`] reading about `budget` partitions at most, over all limits
    /// (three commands each).
    pub(crate) async fn limit_reports_within(&self, budget: usize) -> Result<Vec<LimitReport>> {
        let keys = self.keys().clone();
        let mut con = self.con();
        // The definitions, which of them are overrides, and the workers: one round trip.
        type Read = (
            BTreeMap<String, String>,
            BTreeMap<String, String>,
            Vec<Vec<u8>>,
        );
        let (declared, set, workers): Read = redis::pipe()
            .hgetall(keys.limits_declared())
            .hgetall(keys.limits_set())
            .smembers(keys.workers())
            .query_async(&mut con)
            .await?;
        let workers = crate::admin::names::decode(&keys.workers(), workers);
        let overridden: Vec<String> = set.keys().cloned().collect();
        let (limits, _) = super::store::merge(declared, set);
        let now = chrono::Utc::now();
        let ms = now.timestamp_millis();
        let mut out = Vec::new();
        let mut left = budget.max(1);
        for l in limits {
            // The unpartitioned keys and every partition, whatever the limit's key is now: a
            // job held before a live change of its scope is listed under the limit holding it
            // until it is judged again (a set of another type reads as no partition).
            let mut parts: Vec<Option<String>> = vec![None];
            let mut partitions_complete = true;
            {
                let key = keys.limit_parts(&l.name);
                let mut raw: Vec<Vec<u8>> = Vec::new();
                let mut cursor = 0u64;
                loop {
                    if left == 0 {
                        partitions_complete = false;
                        break;
                    }
                    let Ok((next, mut got)) = redis::cmd("SSCAN")
                        .arg(&key)
                        .arg(cursor)
                        .arg("COUNT")
                        .arg(left.min(1_000))
                        .query_async::<(u64, Vec<Vec<u8>>)>(&mut con)
                        .await
                    else {
                        break; // a set of another type reads as no partition
                    };
                    left = left.saturating_sub(got.len().max(1));
                    raw.append(&mut got);
                    cursor = next;
                    if cursor == 0 {
                        break;
                    }
                }
                let mut names = crate::admin::names::decode(&key, raw);
                names.sort();
                names.dedup();
                // Every partition read is looked at (its use and held jobs), whatever the
                // limit's key is now: those with something running or held are reported, up
                // to MAX_PARTS.
                parts.extend(names.into_iter().map(Some));
            }
            // Every partition's use and held jobs in one round trip (three replies each; a key
            // of the wrong type reads as nothing).
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for p in &parts {
                let (name, part) = (l.name.as_str(), p.as_deref());
                match &l.kind {
                    // On a spread namespace, the holders' shares (spread.rs).
                    Kind::Concurrency { .. } if keys.is_spread() => {
                        pipe.hvals(keys.limit_shares(name));
                    }
                    Kind::Concurrency { .. } => {
                        pipe.hget(keys.limit_holders(name, part), "__units");
                    }
                    Kind::Rate {
                        interval_ms,
                        sliding,
                        ..
                    } => {
                        let iv = i64::try_from(*interval_ms).unwrap_or(i64::MAX).max(1);
                        if *sliding {
                            pipe.zcount(
                                keys.limit_rate(name, part),
                                format!("({}", ms.saturating_sub(iv)),
                                "+inf",
                            );
                        } else {
                            pipe.get(keys.limit_rate_window(name, part, ms / iv));
                        }
                    }
                    // Nothing in use: a placeholder keeps three replies per partition.
                    Kind::Window { .. } => {
                        pipe.cmd("ECHO").arg(0);
                    }
                }
                let held = keys.limit_held(name, part);
                pipe.zcard(&held).zrange_withscores(&held, 0, 0);
            }
            let replies: Vec<redis::Value> = if parts.is_empty() {
                Vec::new()
            } else {
                pipe.query_async(&mut con).await?
            };
            let mut reports = Vec::new();
            for (p, r) in parts.into_iter().zip(replies.chunks(3)) {
                let in_use = match l.kind {
                    Kind::Window { .. } => 0,
                    Kind::Concurrency { .. } if keys.is_spread() => r
                        .first()
                        .and_then(read::<Vec<u64>>)
                        .map_or(0, |v| v.iter().sum()),
                    _ => r
                        .first()
                        .and_then(read::<Option<u64>>)
                        .flatten()
                        .unwrap_or(0),
                };
                let held = r.get(1).and_then(read::<u64>).unwrap_or(0);
                let oldest_held_secs = (held > 0).then(|| {
                    let score = r
                        .get(2)
                        .and_then(read::<Vec<(String, f64)>>)
                        .and_then(|v| v.into_iter().next())
                        .map_or(0.0, |(_, s)| s);
                    // The score is (99 - priority) × 1e13 + the time it was held (ms).
                    let at = score % 1e13;
                    ((ms as f64 - at) / 1000.0).max(0.0)
                });
                // The limit's own row (unless it is keyed); a partition, or the unpartitioned
                // keys of a keyed limit, while something runs or is held there.
                if ((p.is_none() && l.key.is_none()) || in_use > 0 || held > 0)
                    && reports.len() < MAX_PARTS
                {
                    reports.push(PartitionReport {
                        partition: p,
                        in_use,
                        held,
                        oldest_held_secs,
                    });
                }
            }
            let open = matches!(l.kind, Kind::Window { .. })
                .then(|| super::store::window_state(&l, now).0);
            let foreign_workers = foreign(&l, &workers).into_iter().cloned().collect();
            out.push(LimitReport {
                overridden: overridden.contains(&l.name),
                limit: l,
                partitions: reports,
                partitions_complete,
                open,
                foreign_workers,
            });
        }
        Ok(out)
    }
}

/// One pipeline reply as `T` (`None` for an error reply or another shape).
fn read<T: redis::FromRedisValue>(v: &redis::Value) -> Option<T> {
    redis::from_redis_value(v.clone()).ok()
}

/// The workers of other runtimes (ids without resq's `~resq` host mark) among `workers` that
/// poll a queue limit `l` covers: they take its jobs without honouring it.
pub(crate) fn foreign<'a>(l: &Limit, workers: &'a [String]) -> Vec<&'a String> {
    workers
        .iter()
        .filter(|w| !crate::identity::is_resq_host(w.split(':').next().unwrap_or("")))
        .filter(|w| covers(l, w))
        .collect()
}

/// Whether worker id `w` (`host:pid:queue,queue`) polls a queue limit `l` covers (a limit on a
/// class covers every queue: its jobs may be anywhere). A queue of the list may be a pattern,
/// as Resque 2's workers read it (`File.fnmatch?`: `*`, `limi*`, `high_[ab]`).
fn covers(l: &Limit, w: &str) -> bool {
    let queues = w.splitn(3, ':').nth(2).unwrap_or("");
    match &l.queue {
        None => true,
        Some(q) => queues
            .split(',')
            .any(|x| x == q || crate::queues::fnmatch(x, q)),
    }
}

impl Limit {
    /// What it applies to, as text: `queue=q class=C key=t` (the parts it has).
    pub fn scope(&self) -> String {
        let l = self;
        let parts: Vec<String> = [("queue", &l.queue), ("class", &l.class), ("key", &l.key)]
            .into_iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
            .collect();
        parts.join(" ")
    }

    /// Its setting, as text: `5`, `50 per 1s sliding`, `mon,tue 09:00-17:00 Europe/Paris`,
    /// followed by weights and priorities when it has any.
    pub fn setting(&self) -> String {
        let l = self;
        let mut s = match &l.kind {
            Kind::Concurrency { limit } => limit.to_string(),
            Kind::Rate {
                limit,
                interval_ms,
                sliding,
            } => format!(
                "{limit} per {}{}",
                crate::human::interval(*interval_ms),
                if *sliding { " sliding" } else { "" }
            ),
            Kind::Window { windows, tz } => {
                let ws: Vec<String> = windows
                    .iter()
                    .map(|w| {
                        if w.days.is_empty() {
                            format!("{}-{}", w.from, w.to)
                        } else {
                            format!("{} {}-{}", w.days.join(","), w.from, w.to)
                        }
                    })
                    .collect();
                format!("{} {tz}", ws.join("; "))
            }
        };
        let pairs = |m: Vec<(&String, String)>| {
            m.into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        if !l.weights.is_empty() {
            let w = pairs(l.weights.iter().map(|(k, v)| (k, v.to_string())).collect());
            s.push_str(&format!(" weight {w}"));
        }
        if !l.priority.is_empty() {
            let p = pairs(l.priority.iter().map(|(k, v)| (k, v.to_string())).collect());
            s.push_str(&format!(" priority {p}"));
        }
        s
    }
}

impl LimitReport {
    /// The kind's name: `concurrency`, `rate` or `window`.
    pub fn kind_name(&self) -> &'static str {
        self.limit.kind.name()
    }

    /// What it applies to, as text (see [`Limit::scope`]).
    pub fn scope(&self) -> String {
        self.limit.scope()
    }

    /// Its setting, as text (see [`Limit::setting`]).
    pub fn setting(&self) -> String {
        self.limit.setting()
    }

    /// Its capacity as shown: the number, or `-` for a window.
    pub fn capacity_text(&self) -> String {
        self.limit
            .capacity()
            .map_or_else(|| "-".into(), |c| c.to_string())
    }

    /// `open` or `closed` (see [`LimitReport::is_open`]).
    pub fn state(&self) -> &'static str {
        if self.is_open() {
            "open"
        } else {
            "closed"
        }
    }

    /// Units in use (concurrency) or starts in the current window (rate), over every
    /// partition reported.
    pub fn in_use(&self) -> u64 {
        self.partitions.iter().map(|p| p.in_use).sum()
    }

    /// Jobs held, over every partition reported.
    pub fn held(&self) -> u64 {
        self.partitions.iter().map(|p| p.held).sum()
    }

    /// Age of the oldest held job over every partition reported, in seconds.
    pub fn oldest_held_secs(&self) -> Option<f64> {
        self.partitions
            .iter()
            .filter_map(|p| p.oldest_held_secs)
            .reduce(f64::max)
    }

    /// Whether it admits a job now: a window limit when it is open; a concurrency or rate
    /// limit (unpartitioned) while it has room. A partitioned limit admits per partition, so
    /// it counts as open.
    pub fn is_open(&self) -> bool {
        if let Some(open) = self.open {
            return open;
        }
        if self.limit.key.is_some() {
            return true;
        }
        match self.limit.capacity() {
            Some(c) => self.in_use() < u64::from(c),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn report(limit: Limit, parts: &[(u64, u64, Option<f64>)]) -> LimitReport {
        LimitReport {
            limit,
            overridden: false,
            partitions_complete: true,
            partitions: parts
                .iter()
                .map(|&(in_use, held, oldest_held_secs)| PartitionReport {
                    partition: None,
                    in_use,
                    held,
                    oldest_held_secs,
                })
                .collect(),
            open: None,
            foreign_workers: Vec::new(),
        }
    }

    #[test]
    fn reports_describe_their_limit() {
        let r = report(
            Limit::concurrency("pay", 5)
                .class("Charge")
                .weight("Refund", 2)
                .priority("Urgent", 50),
            &[(5, 2, Some(3.0)), (0, 1, Some(9.5))],
        );
        assert_eq!(r.kind_name(), "concurrency");
        assert_eq!(r.scope(), "class=Charge");
        assert_eq!(r.setting(), "5 weight Refund=2 priority Urgent=50");
        assert_eq!((r.in_use(), r.held()), (5, 3));
        assert_eq!(r.oldest_held_secs(), Some(9.5));
        assert!(!r.is_open());
        let r = report(
            Limit::rate("api", 50, Duration::from_secs(60))
                .sliding()
                .queue("api")
                .key("{args.0}"),
            &[],
        );
        assert_eq!(r.setting(), "50 per 1m sliding");
        assert_eq!(r.scope(), "queue=api key={args.0}");
        assert_eq!(r.oldest_held_secs(), None);
        assert_eq!(crate::human::interval(250), "250ms");
        assert_eq!(crate::human::interval(1500), "1500ms");
        assert_eq!(crate::human::interval(7_200_000), "2h");
    }

    #[test]
    fn foreign_workers_are_found_by_their_queue_patterns_too() {
        let l = Limit::concurrency("q", 1).queue("limited");
        let workers: Vec<String> = [
            "ruby:1:limited",
            "ruby:2:limi*",
            "ruby:3:*",
            "ruby:4:other,lim?ted",
            "ruby:5:other",
            "ruby:6:limits",
            "h~resq:7-0:limited",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let found: Vec<&String> = foreign(&l, &workers);
        assert_eq!(
            found,
            [
                "ruby:1:limited",
                "ruby:2:limi*",
                "ruby:3:*",
                "ruby:4:other,lim?ted"
            ]
        );
    }
}
