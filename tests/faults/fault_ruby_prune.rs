//! Fault suite 6e: a Ruby-shaped startup prune — Resque 3.0.0's `prune_dead_workers`, restated
//! here from wire notes §3.3 (lock, `Worker.all`, `ps`-based known pids, loop 1 on expired
//! heartbeats with `Time.parse`, loop 2 same-host pid check, `unregister_worker`) — run against
//! live resq slots, idle and busy, removes none of them, and raises on nothing resq wrote.
//! Planted dead Ruby-style entries prove the pruner is not a no-op.

use crate::support;

use redis::Commands;
use std::collections::{BTreeMap, BTreeSet};
use support::{wait_until, WorkerProc};

/// What Ruby's pruner would do, or the exception it would raise (which aborts a Ruby worker's
/// startup: wire notes §3.3 step 7).
#[derive(Debug, Default)]
struct RubyPrune {
    removed: Vec<String>,
    errors: Vec<String>,
}

/// `Worker.find(id)`: `host, pid, queues_raw = id.split(':')` (no limit: the queue list is
/// the third field only), `queues_raw.split(',')` (NoMethodError when there is no third field),
/// `Worker.new(*queues)` (NoQueueError when empty, the pruning process having no QUEUES env).
fn ruby_find(id: &str) -> Result<(String, String, Vec<String>), String> {
    // Ruby's String#split drops trailing empty fields.
    let mut parts: Vec<&str> = id.split(':').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    let (Some(host), Some(pid)) = (parts.first(), parts.get(1)) else {
        return Err(format!("NoMethodError on {id:?}"));
    };
    let Some(queues_raw) = parts.get(2) else {
        return Err(format!(
            "NoMethodError: undefined method `split' for nil ({id:?})"
        ));
    };
    let mut queues: Vec<String> = queues_raw.split(',').map(str::to_string).collect();
    while queues.last().is_some_and(|q| q.is_empty()) {
        queues.pop();
    }
    if queues.is_empty() {
        return Err(format!("NoQueueError on {id:?}"));
    }
    Ok((host.to_string(), pid.to_string(), queues))
}

/// `Time.parse` of what Ruby and resq write as heartbeats (ISO-8601 with an offset); anything
/// else is treated as a parse failure (Ruby may read more shapes, never fewer of these).
fn ruby_time_parse(s: &str) -> Result<i64, String> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp())
        .map_err(|_| format!("ArgumentError: Time.parse({s:?})"))
}

/// `linux_worker_pids`: `ps -A -o pid,command`, lines matching `resque:work`,
/// `resque:\sStarting` or `resque-[0-9]`, minus `resque-web`; first column.
fn known_pids() -> BTreeSet<String> {
    let out = std::process::Command::new("ps")
        .args(["-A", "-o", "pid,command"])
        .output()
        .expect("ps");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            let starting = l.find("resque:").is_some_and(|i| {
                let rest = &l[i + 7..];
                rest.chars().next().is_some_and(char::is_whitespace)
                    && rest[1..].starts_with("Starting")
            });
            let versioned = l.match_indices("resque-").any(|(i, _)| {
                l[i + 7..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit())
            });
            (l.contains("resque:work") || starting || versioned) && !l.contains("resque-web")
        })
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// `unregister_worker(exception)` on `id`: the failure (if a job is recorded) and the
/// pipeline of deletions.
fn ruby_unregister(
    con: &mut redis::Connection,
    ns: &str,
    id: &str,
    exception: &str,
    error: &str,
) -> Result<(), String> {
    let rec: Option<String> = con.get(format!("{ns}:worker:{id}")).expect("get");
    if let Some(text) = rec {
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("JSON::ParserError on {id}: {e}"))?;
        let obj = v
            .as_object()
            .ok_or(format!("NoMethodError: record of {id} is not a Hash"))?;
        if !obj.is_empty() {
            let payload = &v["payload"];
            if !payload.is_object() {
                return Err(format!("NoMethodError: payload of {id} is {payload}"));
            }
            let entry = serde_json::json!({
                "failed_at": "2026/01/01 00:00:00 UTC", "payload": payload, "exception": exception,
                "error": error, "backtrace": [], "worker": id, "queue": v["queue"],
            });
            let _: () = con
                .rpush(format!("{ns}:failed"), entry.to_string())
                .expect("rpush");
        }
    }
    let _: () = redis::pipe()
        .srem(format!("{ns}:workers"), id)
        .del(format!("{ns}:worker:{id}"))
        .del(format!("{ns}:worker:{id}:started"))
        .hdel(format!("{ns}:workers:heartbeat"), id)
        .del(format!("{ns}:stat:processed:{id}"))
        .del(format!("{ns}:stat:failed:{id}"))
        .query(con)
        .expect("unregister");
    Ok(())
}

/// `prune_dead_workers` of a Ruby worker with `QUEUES=pruner_queues` on host `hostname`.
fn ruby_prune(
    con: &mut redis::Connection,
    ns: &str,
    pruner_queues: &[&str],
    hostname: &str,
) -> RubyPrune {
    let mut out = RubyPrune::default();
    let lock = format!("{ns}:pruning_dead_workers_in_progress");
    let _: () = con.del(&lock).expect("del");
    let got: Option<String> = redis::cmd("SET")
        .arg(&lock)
        .arg(format!("{hostname}:99999:{}", pruner_queues.join(",")))
        .arg("EX")
        .arg(60)
        .arg("NX")
        .query(con)
        .expect("lock");
    assert!(got.is_some());
    let ids: Vec<String> = con.smembers(format!("{ns}:workers")).expect("smembers");
    let mut all = Vec::new();
    for id in &ids {
        match ruby_find(id) {
            Ok(w) => all.push((id.clone(), w)),
            Err(e) => {
                out.errors.push(e);
                return out;
            }
        }
    }
    let known = known_pids();
    let beats: BTreeMap<String, String> = con
        .hgetall(format!("{ns}:workers:heartbeat"))
        .expect("hgetall");
    let (now, _): (i64, i64) = redis::cmd("TIME").query(con).expect("time");
    let mut expired = BTreeSet::new();
    for (id, hb) in &beats {
        match ruby_time_parse(hb) {
            Ok(t) if now - t > 300 => {
                expired.insert(id.clone());
            }
            Ok(_) => {}
            Err(e) => {
                out.errors.push(e);
                return out;
            }
        }
    }
    for id in &expired {
        if let Err(e) = ruby_find(id) {
            out.errors.push(e);
            return out;
        }
        let rec: Option<String> = con.get(format!("{ns}:worker:{id}")).expect("get");
        let class = rec
            .and_then(|r| serde_json::from_str::<serde_json::Value>(&r).ok())
            .and_then(|v| v["payload"]["class"].as_str().map(str::to_string))
            .unwrap_or_else(|| "<Unknown Job>".into());
        let error = format!("Worker {id} did not gracefully exit while processing {class}");
        if let Err(e) = ruby_unregister(con, ns, id, "Resque::PruneDeadWorkerDirtyExit", &error) {
            out.errors.push(e);
            return out;
        }
        out.removed.push(id.clone());
    }
    let mine: BTreeSet<&str> = pruner_queues.iter().copied().collect();
    for (id, (host, pid, queues)) in &all {
        if expired.contains(id) {
            continue;
        }
        let theirs: BTreeSet<&str> = queues.iter().map(String::as_str).collect();
        if !(mine.contains("*") || theirs == mine) {
            continue;
        }
        if host != hostname || known.contains(pid) {
            continue;
        }
        if let Err(e) = ruby_unregister(
            con,
            ns,
            id,
            "Resque::DirtyExit",
            "Job still being processed",
        ) {
            out.errors.push(e);
            return out;
        }
        out.removed.push(id.clone());
    }
    out
}

#[test]
fn a_ruby_startup_prune_removes_no_live_resq_slot() {
    let url = support::url();
    let ns = support::namespace("ruby-prune");
    let mut con = redis::Client::open(url.as_str())
        .expect("url")
        .get_connection()
        .expect("connect");
    let host = hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string());
    let mut a = WorkerProc::start(&url, &ns, 3, &[("QUEUES", "default")]);
    let mut b = WorkerProc::start(&url, &ns, 2, &[("QUEUES", "default,other")]);
    // Make some slots busy: four long jobs across the five slots.
    let _: () = con
        .sadd(format!("{ns}:queues"), &["default", "other"])
        .expect("sadd");
    for _ in 0..4 {
        let _: () = con
            .rpush(
                format!("{ns}:queue:default"),
                r#"{"class":"Sleep","args":[3000]}"#,
            )
            .expect("push");
    }
    let resq_ids: Vec<String> = a.ids.iter().chain(b.ids.iter()).cloned().collect();
    let busy = wait_until(10, "four slots busy", || {
        let n = resq_ids
            .iter()
            .filter(|id| {
                con.exists::<_, bool>(format!("{ns}:worker:{id}"))
                    .unwrap_or(false)
            })
            .count();
        (n == 4).then_some(n)
    });
    // Dead entries Ruby must remove: a dead same-host Ruby worker and an expired foreign one.
    let dead_local = format!("{host}:4194301:default");
    let expired_foreign = "otherhost:12:default".to_string();
    let (now, _): (i64, i64) = redis::cmd("TIME").query(&mut con).expect("time");
    let old = resq::time::heartbeat(chrono::DateTime::from_timestamp(now - 400, 0).unwrap());
    let _: () = con
        .sadd(format!("{ns}:workers"), &[&dead_local, &expired_foreign])
        .expect("sadd");
    let _: () = con
        .hset(format!("{ns}:workers:heartbeat"), &expired_foreign, old)
        .expect("hset");

    for pruner_queues in [&["*"][..], &["default"][..], &["default", "other"][..]] {
        let r = ruby_prune(&mut con, &ns, pruner_queues, &host);
        assert!(
            r.errors.is_empty(),
            "Ruby's prune would raise: {:?}",
            r.errors
        );
        for id in &resq_ids {
            assert!(
                !r.removed.contains(id),
                "QUEUES={pruner_queues:?} removed live slot {id}"
            );
        }
        support::audit::report(&format!(
            "RUBY PRUNE QUEUES={pruner_queues:?}: removed {:?}",
            r.removed
        ));
    }
    let members: BTreeSet<String> = con.smembers(format!("{ns}:workers")).expect("smembers");
    for id in &resq_ids {
        assert!(members.contains(id), "{id} is gone");
    }
    assert!(!members.contains(&dead_local) && !members.contains(&expired_foreign));
    let still_busy = resq_ids
        .iter()
        .filter(|id| {
            con.exists::<_, bool>(format!("{ns}:worker:{id}"))
                .unwrap_or(false)
        })
        .count();
    assert_eq!(still_busy, busy, "a busy slot's record was touched");
    let failed: usize = con.llen(format!("{ns}:failed")).expect("llen");
    assert_eq!(failed, 0, "a failure was written for a live slot's job");
    // The slots were not disturbed: their jobs finish and they stop cleanly.
    wait_until(20, "the long jobs to finish", || {
        (con.get::<_, Option<i64>>(format!("{ns}:stat:processed"))
            .ok()??
            == 4)
            .then_some(())
    });
    for w in [&mut a, &mut b] {
        w.signal("QUIT");
        assert!(w.wait_exit(10).success());
    }
    support::audit::assert_no_ghosts(&mut con, &ns);
}
