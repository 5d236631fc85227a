//! Migration coverage: which job classes reach each queue of a live namespace, and which of
//! them a binary has no handler for — "can resq take this queue yet?" (`resq coverage`,
//! docs/migration.md).
//!
//! Everything is read within a [`Budget`], so a report costs the same on a huge namespace:
//! the members of `<ns>:queues` (SSCAN), the head of each queue (a Resque list, or a Jesque
//! delayed/recurring zset), the newest failure entries, resque-scheduler's earliest delayed
//! items, the stored recurring schedules, and a SCAN of the namespace for the keys of Ruby
//! plugins resq does not reproduce. The report says how much it read. A payload counts under
//! the handler the worker would run it with ([`Registry::entry_for`]): its class, or for a
//! Rails ActiveJob wrapper with no handler of its own, its `job_class`.

use crate::admin::{Admin, DelayedSource};
use crate::error::Result;
use crate::keys::FOREIGN_PLUGIN_KEYS;
use crate::registry::Registry;
use crate::wire::activejob::job_class_of;
use crate::wire::Payload;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// How much one report may read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// Jobs read from the head of each queue at most (and failures, delayed items in all).
    pub per_queue: usize,
    /// Queue names read from `<ns>:queues` at most.
    pub queues: usize,
    /// Keyspace entries the SCAN for plugin keys may visit at most (in calls of 1000; 0: no
    /// SCAN).
    pub scan_keys: usize,
}

/// Where a class was seen.
#[derive(Serialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Source {
    /// In the queue itself.
    Queued,
    /// In `<ns>:failed`, with this queue.
    Failed,
    /// In resque-scheduler's delayed items, for this queue.
    Delayed,
    /// In a stored recurring schedule, for this queue.
    Recurring,
}

/// One class seen on a queue.
#[derive(Serialize, Debug)]
pub(crate) struct ClassSeen {
    /// The class a handler is registered under to run it.
    pub class: String,
    /// Whether it arrived inside Rails' ActiveJob wrapper.
    pub activejob: bool,
    /// Jobs of it read (queued, failed, delayed items; a schedule counts once).
    pub jobs: u64,
    /// Where it was seen.
    pub seen_in: Vec<Source>,
    /// Whether this binary has a handler for it.
    pub handled: bool,
}

/// One queue's report.
#[derive(Serialize, Debug)]
pub(crate) struct QueueCoverage {
    /// The queue's name.
    pub queue: String,
    /// The key's type: `list`, `zset` (Jesque's delayed queue), `none`, or another.
    pub kind: String,
    /// Jobs in the queue.
    pub size: u64,
    /// Of which read.
    pub read: u64,
    /// Classes seen, by name.
    pub classes: Vec<ClassSeen>,
    /// Payloads read that name no class (not JSON, not an object, no `class`).
    pub unreadable: u64,
    /// Whether every class seen has a handler and every payload read could be read.
    pub ready: bool,
}

/// Keys of a Ruby plugin resq does not reproduce.
#[derive(Serialize, Debug)]
pub(crate) struct PluginSeen {
    /// The plugin.
    pub plugin: &'static str,
    /// Its keys' prefix after the namespace.
    pub prefix: &'static str,
    /// Keys of it seen by the SCAN.
    pub keys: u64,
    /// One of them.
    pub example: String,
    /// What to use in resq instead.
    pub instead: &'static str,
}

/// How much a report read.
#[derive(Serialize, Debug, Default)]
pub(crate) struct Read {
    /// Queue names read, and whether that is all of `<ns>:queues`.
    pub queue_names: u64,
    /// Whether `queue_names` is every name.
    pub queue_names_complete: bool,
    /// Queued jobs read, over all queues.
    pub jobs: u64,
    /// Failure entries read (the newest), of `failures_total`.
    pub failures: u64,
    /// Entries in `<ns>:failed`.
    pub failures_total: u64,
    /// resque-scheduler delayed items read (the earliest).
    pub delayed: u64,
    /// Stored recurring schedules read (all).
    pub schedules: u64,
    /// The namespace's keys the plugin SCAN saw.
    pub keys_scanned: u64,
    /// Whether the SCAN finished.
    pub scan_complete: bool,
}

/// The whole report.
#[derive(Serialize, Debug)]
pub(crate) struct Coverage {
    /// Per queue, by name.
    pub queues: Vec<QueueCoverage>,
    /// Plugin keys found.
    pub plugins: Vec<PluginSeen>,
    /// How much was read.
    pub read: Read,
}

/// What is gathered for one queue while reading.
#[derive(Default)]
struct Tally {
    kind: String,
    size: u64,
    read: u64,
    unreadable: u64,
    classes: BTreeMap<String, (bool, u64, Vec<Source>, bool)>,
}

impl Tally {
    /// Counts one payload seen in `source`.
    fn add(&mut self, registry: &Registry, bytes: &[u8], source: Source) {
        let Ok(p) = Payload::parse(bytes) else {
            self.unreadable += 1;
            return;
        };
        let (class, activejob) = match job_class_of(&p) {
            Some(inner) if registry.get(p.class()).is_none() => (inner.to_string(), true),
            _ => (p.class().to_string(), false),
        };
        let handled = registry.entry_for(&p).is_some();
        let e = self
            .classes
            .entry(class)
            .or_insert((activejob, 0, Vec::new(), handled));
        e.1 += 1;
        if !e.2.contains(&source) {
            e.2.push(source);
            e.2.sort();
        }
    }

    fn finish(self, queue: String) -> QueueCoverage {
        let classes: Vec<ClassSeen> = self
            .classes
            .into_iter()
            .map(|(class, (activejob, jobs, seen_in, handled))| ClassSeen {
                class,
                activejob,
                jobs,
                seen_in,
                handled,
            })
            .collect();
        let ready = self.unreadable == 0 && classes.iter().all(|c| c.handled);
        QueueCoverage {
            queue,
            kind: if self.kind.is_empty() {
                "none".into()
            } else {
                self.kind
            },
            size: self.size,
            read: self.read,
            classes,
            unreadable: self.unreadable,
            ready,
        }
    }
}

/// Reads the namespace `admin` is on and reports it against `registry`'s handlers; `only`,
/// when not empty, names the queues to report (no read of `<ns>:queues`).
pub(crate) async fn report(
    admin: &Admin,
    registry: &Registry,
    only: &[String],
    budget: Budget,
) -> Result<Coverage> {
    let mut read = Read::default();
    // The keyspace first: plugin keys, and queues `<ns>:queues` does not name (Jesque's
    // `recurringEnqueue` writes its zset queue and `:frequency` hash without adding the name).
    let (plugins, unlisted, keys_scanned, scan_complete) = scan(admin, budget.scan_keys).await?;
    read.keys_scanned = keys_scanned;
    read.scan_complete = scan_complete;
    let names = if only.is_empty() {
        let (mut names, complete) = queue_names(admin, budget.queues).await?;
        read.queue_names_complete = complete;
        for q in unlisted {
            if !names.contains(&q) {
                names.push(q);
            }
        }
        names.sort();
        names
    } else {
        read.queue_names_complete = true;
        only.to_vec()
    };
    read.queue_names = names.len() as u64;
    let wanted = |q: &str| only.is_empty() || only.iter().any(|o| o == q);
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    queued(admin, registry, &names, budget.per_queue, &mut tallies).await?;
    read.jobs = tallies.values().map(|t| t.read).sum();

    // The newest failures, each under the queue it failed on.
    let mut con = admin.con();
    let failed_key = admin.keys().failed();
    let (total, entries): (u64, Vec<Vec<u8>>) = redis::pipe()
        .llen(&failed_key)
        .lrange(&failed_key, -(budget.per_queue.max(1) as isize), -1)
        .query_async(&mut con)
        .await?;
    read.failures_total = total;
    read.failures = entries.len() as u64;
    for bytes in &entries {
        let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
            continue;
        };
        let queue = v.get("queue").and_then(Value::as_str).unwrap_or("?");
        if !wanted(queue) {
            continue;
        }
        let payload = v.get("payload").map(Value::to_string).unwrap_or_default();
        tallies.entry(queue.to_string()).or_default().add(
            registry,
            payload.as_bytes(),
            Source::Failed,
        );
    }

    // resque-scheduler's earliest delayed items (Jesque's delayed zsets are queues above).
    for item in admin.delayed(budget.per_queue).await? {
        if item.source != DelayedSource::Scheduler {
            continue;
        }
        read.delayed += 1;
        let queue = item.queue.as_deref().unwrap_or("?");
        if wanted(queue) {
            tallies.entry(queue.to_string()).or_default().add(
                registry,
                item.raw.as_bytes(),
                Source::Delayed,
            );
        }
    }

    // Stored recurring schedules: a schedule without `queue` goes to its class's own queue,
    // which only the Ruby class knows.
    for s in admin.schedules().await? {
        read.schedules += 1;
        let Ok(config) = s.config else { continue };
        let queue = config
            .get("queue")
            .and_then(Value::as_str)
            .unwrap_or("(the class's own queue)");
        if !wanted(queue) {
            continue;
        }
        let class = config.get("class").cloned().unwrap_or(Value::Null);
        let args = match config.get("args") {
            Some(Value::Array(a)) => Value::Array(a.clone()),
            Some(Value::Null) | None => json!([]),
            Some(one) => json!([one]),
        };
        let payload = json!({"class": class, "args": args}).to_string();
        tallies.entry(queue.to_string()).or_default().add(
            registry,
            payload.as_bytes(),
            Source::Recurring,
        );
    }

    Ok(Coverage {
        queues: tallies.into_iter().map(|(q, t)| t.finish(q)).collect(),
        plugins,
        read,
    })
}

/// Up to `max` members of `<ns>:queues`, sorted, and whether that is every member.
async fn queue_names(admin: &Admin, max: usize) -> Result<(Vec<String>, bool)> {
    let mut con = admin.con();
    let mut cursor: u64 = 0;
    let mut names = Vec::new();
    loop {
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SSCAN")
            .arg(admin.keys().queues())
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut con)
            .await?;
        names.extend(
            batch
                .into_iter()
                .map(|b| String::from_utf8_lossy(&b).into_owned()),
        );
        cursor = next;
        if cursor == 0 || names.len() >= max {
            break;
        }
    }
    names.sort();
    names.dedup();
    let complete = cursor == 0 && names.len() <= max;
    names.truncate(max);
    Ok((names, complete))
}

/// The head of each queue in `names`, at most `per_queue` jobs each.
async fn queued(
    admin: &Admin,
    registry: &Registry,
    names: &[String],
    per_queue: usize,
    tallies: &mut BTreeMap<String, Tally>,
) -> Result<()> {
    let mut con = admin.con();
    for chunk in names.chunks(200) {
        let mut p = redis::pipe();
        for n in chunk {
            p.cmd("TYPE").arg(admin.keys().queue(n));
        }
        let types: Vec<String> = p.query_async(&mut con).await?;
        let mut p = redis::pipe();
        for (n, t) in chunk.iter().zip(&types) {
            let key = admin.keys().queue(n);
            let last = per_queue.saturating_sub(1);
            match t.as_str() {
                "list" => p.llen(&key).lrange(&key, 0, last as isize),
                "zset" => p.zcard(&key).zrange(&key, 0, last as isize),
                _ => continue,
            };
        }
        let mut replies: Vec<(u64, Vec<Vec<u8>>)> =
            if types.iter().any(|t| t == "list" || t == "zset") {
                let flat: Vec<redis::Value> = p.query_async(&mut con).await?;
                let mut out = Vec::new();
                for pair in flat.chunks(2) {
                    let size: u64 = redis::from_redis_value(pair[0].clone()).unwrap_or(0);
                    let jobs: Vec<Vec<u8>> = pair
                        .get(1)
                        .and_then(|v| redis::from_redis_value(v.clone()).ok())
                        .unwrap_or_default();
                    out.push((size, jobs));
                }
                out
            } else {
                Vec::new()
            }
            .into_iter()
            .rev()
            .collect();
        for (n, t) in chunk.iter().zip(&types) {
            let tally = tallies.entry(n.clone()).or_default();
            tally.kind = t.clone();
            if t != "list" && t != "zset" {
                continue;
            }
            let Some((size, jobs)) = replies.pop() else {
                continue;
            };
            tally.size = size;
            tally.read = jobs.len() as u64;
            for bytes in &jobs {
                tally.add(registry, bytes, Source::Queued);
            }
        }
    }
    Ok(())
}

/// What a SCAN of the namespace's keys in at most `max / 1000` calls (COUNT 1000 each; none
/// when `max` is 0) finds: keys of the plugins in [`FOREIGN_PLUGIN_KEYS`], and the Jesque
/// queues known only by their `<ns>:queue:<q>:frequency` hash; with the number of the
/// namespace's keys seen and whether the SCAN finished.
async fn scan(admin: &Admin, max: usize) -> Result<(Vec<PluginSeen>, Vec<String>, u64, bool)> {
    let prefix = admin.keys().prefix().to_string();
    let pattern = format!("{}*", glob_escape(&prefix));
    let mut con = admin.con();
    let mut found: BTreeMap<usize, (u64, String)> = BTreeMap::new();
    let mut queues = Vec::new();
    let (mut cursor, mut visited) = (0u64, 0u64);
    // Each SCAN call visits about COUNT (1000) slots of the keyspace.
    let mut calls = max.div_ceil(1000);
    if calls == 0 {
        return Ok((Vec::new(), Vec::new(), 0, false));
    }
    loop {
        calls -= 1;
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut con)
            .await?;
        for key in batch {
            visited += 1;
            let rest = &key[prefix.len().min(key.len())..];
            if let Some(q) = rest
                .strip_prefix(b"queue:")
                .and_then(|q| q.strip_suffix(b":frequency"))
            {
                if let Ok(q) = std::str::from_utf8(q) {
                    queues.push(q.to_string());
                }
            }
            if let Some(i) = FOREIGN_PLUGIN_KEYS
                .iter()
                .position(|(_, p, _)| rest.starts_with(p.as_bytes()))
            {
                let e = found
                    .entry(i)
                    .or_insert_with(|| (0, String::from_utf8_lossy(&key).into_owned()));
                e.0 += 1;
            }
        }
        cursor = next;
        if cursor == 0 || calls == 0 {
            break;
        }
    }
    let plugins = found
        .into_iter()
        .map(|(i, (keys, example))| {
            let (plugin, prefix, instead) = FOREIGN_PLUGIN_KEYS[i];
            PluginSeen {
                plugin,
                prefix,
                keys,
                example,
                instead,
            }
        })
        .collect();
    Ok((plugins, queues, visited, cursor == 0))
}

/// `text` with Redis glob characters escaped, for a SCAN pattern.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
