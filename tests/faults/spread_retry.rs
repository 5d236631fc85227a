//! Retry policies on a namespace spread over a real 3-master cluster (no hash tag,
//! docs/cluster.md): a failure a policy covers leaves a retry entry in its slot's outbox with
//! the job's removal, and the outbox's mover writes resque-retry's keys and files the job again
//! (its queue, or the delayed set) in single-slot commands; the last attempt goes to
//! `<ns>:failed` as resque-retry's give-up.
//!
//! * Failing jobs on queues on every master (retried at once, and after 1 s through the
//!   delayed set) run the policy's number of times and end in `<ns>:failed` with the entries the
//!   same run leaves on a hash-tagged namespace (one slot, `complete.lua`), "(gave up after 3
//!   attempts)" included; a job that fails once and then succeeds is retried once; no counter
//!   or `failure-<key>` is left (a give-up and a success delete them).
//! * While a retry waits, its keys — the counter, `failure-<key>`, the delayed bucket's item,
//!   the reverse index — hold what the tagged namespace's hold.
//!
//! (The crash window between an entry's apply and its outbox's trim, and the pruner's and the
//! sweep's moves of a dead slot's retry entries: `src/worker/spread_tests.rs`.)

use crate::support;

use super::spread_common::{queue_per_master, quit_cleanly, require_tools};
use redis::Commands;
use serde_json::Value;
use std::collections::BTreeMap;
use support::topology::{self, Cluster};
use support::{wait_until, WorkerProc};

/// A list read on its owner.
fn list(cluster: &Cluster, key: &str) -> Vec<String> {
    cluster
        .owner(key)
        .expect("owner")
        .con()
        .lrange(key, 0, -1)
        .expect("LRANGE")
}

/// A string read on its owner.
fn get(cluster: &Cluster, key: &str) -> Option<String> {
    cluster
        .owner(key)
        .expect("owner")
        .con()
        .get(key)
        .expect("GET")
}

/// Every key of `ns` on the cluster (without `<ns>:`) whose name starts with one of `starts`.
fn keys_of(cluster: &Cluster, ns: &str, starts: &[&str]) -> Vec<String> {
    let prefix = format!("{ns}:");
    let mut out = Vec::new();
    for n in &cluster.nodes {
        let found: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query(&mut n.con())
            .expect("KEYS");
        out.extend(
            found
                .into_iter()
                .map(|k| k[prefix.len()..].to_string())
                .filter(|k| starts.iter().any(|s| k.starts_with(s))),
        );
    }
    out.sort();
    out
}

/// A failure entry without what differs between two runs (its time, the worker's id).
fn entry(text: &str) -> Value {
    let mut v: Value = serde_json::from_str(text).expect("failure entry JSON");
    let o = v.as_object_mut().expect("an object");
    assert!(o.remove("failed_at").is_some(), "{text}");
    assert!(o.remove("worker").is_some(), "{text}");
    v
}

/// A worker of `ns` on `queues` with the retry handlers (and the scheduler when `scheduler`).
fn worker(url: &str, ns: &str, queues: &[String], scheduler: bool) -> WorkerProc {
    let joined = queues.join(",");
    let spread = !ns.contains('{');
    let mut env = vec![
        ("CONCURRENCY", "1"),
        ("QUEUES", joined.as_str()),
        ("COMPAT_RETRY", "1"),
        ("INTERVAL", "0.1"),
    ];
    if scheduler {
        env.push(("RESQ_SCHEDULER", "1"));
        env.push(("RESQ_SCHEDULER_INTERVAL", "0.2"));
    }
    WorkerProc::start(url, ns, if spread { queues.len() } else { 1 }, &env)
}

fn quit(cluster: &Cluster, ns: &str, w: &mut WorkerProc) {
    if ns.contains('{') {
        w.signal("QUIT");
        let status = w.wait_exit(30);
        assert!(status.success(), "{status}:\n{}", w.stderr());
    } else {
        quit_cleanly(cluster, ns, w);
    }
    let log = w.stderr();
    assert!(!log.contains("CROSSSLOT"), "{log}");
}

/// Runs RetryNow and RetryLater on every queue of `queues` under `ns` until all are given up;
/// the failed list's entries (sorted, normalised) and the stat:failed count.
fn run_to_give_up(cluster: &Cluster, url: &str, ns: &str, queues: &[String]) -> Vec<Value> {
    let client_rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = client_rt
        .block_on(resq::Client::connect(url, ns))
        .expect("connect");
    client_rt.block_on(async {
        for q in queues {
            for class in ["RetryNow", "RetryLater"] {
                client
                    .enqueue_to(q, class, &[serde_json::json!(format!("boom {q}"))])
                    .await
                    .expect("enqueue");
            }
            // Fails once, then succeeds: the success deletes resque-retry's keys.
            client
                .enqueue_to(q, "WfFlaky", &[serde_json::json!(q)])
                .await
                .expect("enqueue");
        }
    });
    let mut w = worker(url, ns, queues, true);
    let failed_key = format!("{ns}:failed");
    let failed = wait_until(120, "every job given up", || {
        let f = list(cluster, &failed_key);
        (f.len() >= 2 * queues.len()).then_some(f)
    });
    // Three runs each (the first and two retries) and WfFlaky's first: counted in stat:failed
    // (flushed by the spread worker every 200 ms).
    let stat = format!("{ns}:stat:failed");
    let want = (7 * queues.len()).to_string();
    wait_until(30, "stat:failed counts every run", || {
        (get(cluster, &stat).as_deref() == Some(want.as_str())).then_some(())
    });
    for q in queues {
        let runs = format!("{ns}:audit:flaky:{q}");
        wait_until(30, "WfFlaky retried", || {
            (get(cluster, &runs).as_deref() == Some("2")).then_some(())
        });
    }
    quit(cluster, ns, &mut w);
    assert_eq!(list(cluster, &failed_key).len(), 2 * queues.len());
    assert_eq!(
        keys_of(
            cluster,
            ns,
            &["resque-retry", "failure-", "delayed:", "timestamps:"]
        ),
        Vec::<String>::new(),
        "resque-retry's keys and the delayed set left"
    );
    for q in queues {
        assert!(list(cluster, &format!("{ns}:queue:{q}")).is_empty());
    }
    let mut out: Vec<Value> = failed.iter().map(|f| entry(f)).collect();
    out.sort_by_key(|v| v.to_string());
    out
}

#[test]
fn failing_jobs_on_every_master_are_retried_then_given_up_as_on_a_tagged_namespace() {
    require_tools();
    let root = topology::temp_dir("spread-retry-run");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(1);
    let ns = support::namespace("spread-retry-run");
    let queues: Vec<String> = queue_per_master(&cluster, &ns)
        .into_iter()
        .map(|(q, _)| q)
        .collect();
    let spread = run_to_give_up(&cluster, &url, &ns, &queues);
    let tagged_ns = format!("{{{ns}-tagged}}");
    let tagged = run_to_give_up(&cluster, &url, &tagged_ns, &queues);
    for e in &spread {
        let error = e["error"].as_str().expect("error");
        assert!(
            error.starts_with("boom ") && error.ends_with(" (gave up after 3 attempts)"),
            "{e}"
        );
    }
    assert_eq!(
        spread, tagged,
        "the failed entries differ from a tagged run's"
    );
}

/// The keys a waiting retry leaves (`RetryHold`: one retry after 300 s), without `<ns>:`, with
/// their values: the counter, `failure-<key>` (normalised), the bucket's items and the reverse
/// index's members (their due second replaced by `T`), and their TTLs' bounds.
fn waiting(cluster: &Cluster, url: &str, ns: &str, queues: &[String]) -> BTreeMap<String, String> {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt
        .block_on(resq::Client::connect(url, ns))
        .expect("connect");
    rt.block_on(async {
        for q in queues {
            client
                .enqueue_to(q, "RetryHold", &[serde_json::json!(format!("hold {q}"))])
                .await
                .expect("enqueue");
        }
    });
    let mut w = worker(url, ns, queues, false);
    let prefix = format!("{ns}:");
    let starts = ["resque-retry", "failure-", "delayed:", "timestamps:"];
    wait_until(60, "every retry filed", || {
        let k = keys_of(cluster, ns, &starts);
        // A counter, a failure key and a reverse index per job, one bucket or more.
        (k.len() > 3 * queues.len()).then_some(())
    });
    // (The schedule zset is written last.)
    let schedule = format!("{ns}:delayed_queue_schedule");
    wait_until(30, "the schedule written", || {
        let n: usize = cluster
            .owner(&schedule)
            .expect("owner")
            .con()
            .zcard(&schedule)
            .expect("ZCARD");
        (n > 0).then_some(())
    });
    quit(cluster, ns, &mut w);
    let mut out = BTreeMap::new();
    for k in keys_of(cluster, ns, &starts) {
        let full = format!("{prefix}{k}");
        let mut con = cluster.owner(&full).expect("owner").con();
        let ttl: i64 = con.ttl(&full).expect("TTL");
        if k.starts_with("resque-retry") {
            assert!((600_000..=605_100).contains(&ttl), "{k} TTL {ttl}");
            out.insert(k, get(cluster, &full).expect("counter"));
        } else if k.starts_with("failure-") {
            assert!((500..=600).contains(&ttl), "{k} TTL {ttl}");
            out.insert(k, entry(&get(cluster, &full).expect("failure")).to_string());
        } else if k.starts_with("delayed:") {
            let mut items = list(cluster, &full);
            items.sort();
            for i in items {
                out.insert(format!("delayed:T {i}"), String::new());
            }
        } else {
            let members: Vec<String> = con.smembers(&full).expect("SMEMBERS");
            assert_eq!(members.len(), 1, "{k}: {members:?}");
            assert!(members[0].starts_with("delayed:"), "{members:?}");
            out.insert(k, "delayed:T".into());
        }
    }
    out
}

#[test]
fn a_waiting_retry_leaves_the_keys_and_bytes_a_tagged_namespace_gets() {
    require_tools();
    let root = topology::temp_dir("spread-retry-wait");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let ns = support::namespace("spread-retry-wait");
    let queues: Vec<String> = queue_per_master(&cluster, &ns)
        .into_iter()
        .map(|(q, _)| q)
        .collect();
    let spread = waiting(&cluster, &url, &ns, &queues);
    let tagged_ns = format!("{{{ns}-tagged}}");
    let tagged = waiting(&cluster, &url, &tagged_ns, &queues);
    assert_eq!(spread.len(), 4 * queues.len(), "{spread:#?}");
    let counters: Vec<&String> = spread
        .iter()
        .filter(|(k, _)| k.starts_with("resque-retry"))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(counters, vec!["0"; queues.len()]);
    assert_eq!(spread, tagged);
    // Each in the slot its own name hashes to: not all in one.
    let node = &cluster.nodes[0];
    let slots: std::collections::BTreeSet<i64> = spread
        .keys()
        .filter(|k| !k.starts_with("delayed:T"))
        .map(|k| {
            redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(format!("{ns}:{k}"))
                .query(&mut node.con())
                .expect("KEYSLOT")
        })
        .collect();
    assert!(slots.len() > 2, "{slots:?}");
}

/// A tracked job under a retry policy (`RetryNow`: two retries at once) on a spread namespace:
/// its record, in its queue's slot, counts every attempt and ends failed after the last, with
/// the state, attempts and error a hash-tagged namespace's record ends with.
#[test]
fn a_tracked_job_under_a_retry_policy_ends_as_on_a_tagged_namespace() {
    use resq::jobs::{State, Track};
    require_tools();
    let root = topology::temp_dir("spread-retry-tracked");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(1);
    let ns = support::namespace("spread-retry-tracked");
    let queues: Vec<String> = queue_per_master(&cluster, &ns)
        .into_iter()
        .map(|(q, _)| q)
        .collect();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut ends = Vec::new();
    for ns in [ns.clone(), format!("{{{ns}-tagged}}")] {
        let client = rt
            .block_on(resq::Client::connect(&url, &ns))
            .expect("connect");
        let id = rt
            .block_on(client.enqueue_class_tracked(
                &queues[1],
                "RetryNow",
                &[serde_json::json!("boom")],
                Track::new(),
            ))
            .expect("a tracked enqueue");
        let mut w = worker(&url, &ns, &queues, false);
        let s = wait_until(60, &format!("{id} failed"), || {
            let s = rt.block_on(client.status(&id)).expect("status")?;
            (s.state == State::Failed).then_some(s)
        });
        quit(&cluster, &ns, &mut w);
        ends.push((s.state, s.attempts, s.error));
    }
    assert_eq!(ends[0].1, 3, "{ends:?}");
    assert_eq!(ends[0], ends[1], "spread, then tagged");
}
