//! What a limit is doing: capacity, units in use, held jobs and the oldest one's age, per
//! partition — for `resq limits`, `resq top`, the metrics and the dashboard.

use super::{Kind, Limit};
use crate::admin::Admin;
use crate::error::Result;
use serde::Serialize;

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
    /// Its partitions with something running or held (at most 1,000).
    pub partitions: Vec<PartitionReport>,
    /// Whether a time-window limit is open now.
    pub open: Option<bool>,
    /// Workers of other runtimes (Ruby, Jesque, node-resque) polling a queue this limit covers:
    /// they do not honour it.
    pub foreign_workers: Vec<String>,
}

/// Partitions reported per limit at most.
const MAX_PARTS: usize = 1000;

impl Admin {
    /// Every limit in force with its use.
    pub async fn limit_reports(&self) -> Result<Vec<LimitReport>> {
        let limits = self.limits().await?;
        let keys = self.keys().clone();
        let mut con = self.con();
        let overridden: Vec<String> = redis::cmd("HKEYS")
            .arg(keys.limits_set())
            .query_async(&mut con)
            .await?;
        let workers: Vec<String> = redis::cmd("SMEMBERS")
            .arg(keys.workers())
            .query_async(&mut con)
            .await?;
        let now = chrono::Utc::now();
        let mut out = Vec::new();
        for l in limits {
            let mut parts: Vec<Option<String>> = vec![None];
            if l.key.is_some() {
                let names: Vec<String> = redis::cmd("SMEMBERS")
                    .arg(keys.limit_parts(&l.name))
                    .query_async(&mut con)
                    .await?;
                parts = names.into_iter().take(MAX_PARTS).map(Some).collect();
            }
            let mut reports = Vec::new();
            for p in parts {
                let base = keys.limit_base(&l.name, p.as_deref());
                let in_use = match &l.kind {
                    Kind::Concurrency { .. } => {
                        let v: Option<u64> = redis::cmd("HGET")
                            .arg(format!("{base}:holders"))
                            .arg("__units")
                            .query_async(&mut con)
                            .await
                            .unwrap_or(None);
                        v.unwrap_or(0)
                    }
                    Kind::Rate {
                        interval_ms,
                        sliding,
                        ..
                    } => {
                        let iv = (*interval_ms).max(1) as i64;
                        let ms = now.timestamp_millis();
                        if *sliding {
                            redis::cmd("ZCOUNT")
                                .arg(format!("{base}:rate"))
                                .arg(format!("({}", ms - iv))
                                .arg("+inf")
                                .query_async(&mut con)
                                .await
                                .unwrap_or(0)
                        } else {
                            let v: Option<u64> = redis::cmd("GET")
                                .arg(format!("{base}:rate:{}", ms / iv))
                                .query_async(&mut con)
                                .await
                                .unwrap_or(None);
                            v.unwrap_or(0)
                        }
                    }
                    Kind::Window { .. } => 0,
                };
                let held: u64 = redis::cmd("ZCARD")
                    .arg(format!("{base}:held"))
                    .query_async(&mut con)
                    .await
                    .unwrap_or(0);
                let oldest_held_secs = if held > 0 {
                    let (_, score): (String, f64) = redis::cmd("ZRANGE")
                        .arg(format!("{base}:held"))
                        .arg(0)
                        .arg(0)
                        .arg("WITHSCORES")
                        .query_async::<Vec<(String, f64)>>(&mut con)
                        .await
                        .ok()
                        .and_then(|v| v.into_iter().next())
                        .unwrap_or_default();
                    // The score is (99 - priority) × 1e13 + the time it was held (ms).
                    let at = score % 1e13;
                    Some(((now.timestamp_millis() as f64 - at) / 1000.0).max(0.0))
                } else {
                    None
                };
                if p.is_none() || in_use > 0 || held > 0 {
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
                open,
                foreign_workers,
            });
        }
        Ok(out)
    }
}

/// The workers of other runtimes (ids without resq's `~resq` host mark) among `workers` that
/// poll a queue limit `l` covers: they take its jobs without honouring it.
pub(crate) fn foreign<'a>(l: &Limit, workers: &'a [String]) -> Vec<&'a String> {
    workers
        .iter()
        .filter(|w| !w.contains("~resq:"))
        .filter(|w| covers(l, w))
        .collect()
}

/// Whether worker id `w` (`host:pid:queue,queue`) polls a queue limit `l` covers (a limit on a
/// class covers every queue: its jobs may be anywhere).
fn covers(l: &Limit, w: &str) -> bool {
    let queues = w.splitn(3, ':').nth(2).unwrap_or("");
    match &l.queue {
        None => true,
        Some(q) => queues.split(',').any(|x| x == q || x == "*"),
    }
}
