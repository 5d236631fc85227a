//! The failover audit of the production-Redis tests (`tests/faults/redis_sentinel.rs`,
//! `tests/faults/redis_cluster.rs`): 5,000 `Echo` jobs with unique tags (`j<N>`), 2,000 enqueued
//! before the worker starts and 3,000 by a producer (resq's `Client` on the same URL) while it
//! runs; the master is killed once [`KILL_AT`] jobs are done. Then every job is accounted for
//! across the echo list, `<ns>:failed` and the queue:
//!
//! * a job whose enqueue was acknowledged must be found exactly once (echoed or failed, or
//!   still queued; an echo beside a failure is one run whose `RPUSH` landed but whose reply was
//!   lost). One found nowhere is an **acknowledged-but-lost** write: the loss asynchronous
//!   replication allows (the master acknowledged it, died, and the replica never got it). It
//!   is counted and printed, never hidden;
//! * a job whose enqueue failed (the producer saw an error during the failover) is *in doubt*:
//!   it may be found once or not at all;
//! * nothing may be found twice except as a consequence of such a lost write (a reserve the
//!   replica never saw runs that job again).

use super::topology::Node;
use super::{wait_until, WorkerProc};
use redis::Commands;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Jobs in a run.
pub const TOTAL: usize = 5000;
/// Jobs enqueued before the worker starts.
pub const UPFRONT: usize = 2000;
/// The master is killed once this many jobs are processed.
pub const KILL_AT: i64 = 2500;

/// The payload of job `i` (Ruby's bytes).
pub fn payload(i: usize) -> String {
    format!(r#"{{"class":"Echo","args":["j{i}"]}}"#)
}

/// Enqueues jobs `0..UPFRONT` on `con` (a plain connection to the master), as `Resque.push`.
pub fn enqueue_upfront(con: &mut redis::Connection, ns: &str) {
    for chunk in (0..UPFRONT).collect::<Vec<_>>().chunks(500) {
        let mut p = redis::pipe();
        p.sadd(format!("{ns}:queues"), "default").ignore();
        for i in chunk {
            p.rpush(format!("{ns}:queue:default"), payload(*i)).ignore();
        }
        let _: () = p.query(con).expect("enqueue");
    }
}

/// What the producer saw.
#[derive(Default)]
pub struct Produced {
    /// Tags whose enqueue was acknowledged.
    pub acked: Vec<usize>,
    /// Tags whose enqueue returned an error (in doubt).
    pub failed: Vec<usize>,
}

/// Starts the producer thread: jobs `UPFRONT..TOTAL` through resq's client on `url` (with the
/// endpoint settings `env`), about 2,000 a second. An enqueue that fails is recorded as in
/// doubt and not retried (a retry could duplicate it).
pub fn produce(
    url: &str,
    ns: &str,
    env: &'static [(&'static str, &'static str)],
) -> (std::thread::JoinHandle<()>, Arc<Mutex<Produced>>) {
    let out = Arc::new(Mutex::new(Produced::default()));
    let (url, ns, o) = (url.to_string(), ns.to_string(), out.clone());
    let handle = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let lookup = |k: &str| {
                env.iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| v.to_string())
            };
            let options = resq::conn::RedisOptions::from_lookup(lookup).expect("options");
            let endpoint = resq::conn::Endpoint::with_options(&url, &options).expect("endpoint");
            endpoint.check_namespace(&ns).expect("namespace");
            let client = resq::Client::with_connection(
                endpoint.connect().await.expect("producer connects"),
                ns.as_str(),
            );
            for i in UPFRONT..TOTAL {
                match client.push_raw("default", &payload(i)).await {
                    Ok(()) => o.lock().expect("lock").acked.push(i),
                    Err(_) => {
                        o.lock().expect("lock").failed.push(i);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                if i % 10 == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        });
    });
    (handle, out)
}

/// The audit of one run.
#[derive(Debug, Default)]
pub struct Audit {
    /// Tags tried.
    pub enqueued: usize,
    /// Tags whose enqueue was acknowledged.
    pub acked: usize,
    /// Tags whose enqueue failed.
    pub in_doubt: usize,
    /// In-doubt tags found (once).
    pub in_doubt_present: usize,
    /// Echo list length.
    pub echoed: usize,
    /// Failure entries.
    pub failed: usize,
    /// Jobs left in the queue.
    pub queued: usize,
    /// `stat:processed`.
    pub stat_processed: i64,
    /// Acknowledged jobs found nowhere.
    pub acked_lost: usize,
    /// Jobs found more than once.
    pub duplicates: usize,
    /// One line per problem (capped).
    pub problems: Vec<String>,
}

impl Audit {
    /// The numbers, one line.
    pub fn line(&self) -> String {
        format!(
            "enqueued={} acknowledged={} in_doubt={} (present={}) processed={} (echoed={} failed={}) \
             queued={} missing={} acknowledged_but_lost={} duplicates={}",
            self.enqueued,
            self.acked,
            self.in_doubt,
            self.in_doubt_present,
            self.stat_processed,
            self.echoed,
            self.failed,
            self.queued,
            self.acked_lost,
            self.acked_lost,
            self.duplicates
        )
    }

    fn problem(&mut self, p: String) {
        if self.problems.len() < 20 {
            self.problems.push(p);
        }
    }
}

fn tag(v: &serde_json::Value) -> usize {
    v.as_array()
        .and_then(|a| a.first())
        .and_then(|t| t.as_str())
        .and_then(|t| t.strip_prefix('j'))
        .and_then(|n| n.parse().ok())
        .expect("a tagged job")
}

/// Accounts for every job, reading `ns` through `con` (the master now).
pub fn audit(con: &mut redis::Connection, ns: &str, produced: &Produced) -> Audit {
    let mut acked: Vec<usize> = (0..UPFRONT).collect();
    acked.extend(&produced.acked);
    let in_doubt = &produced.failed;
    let echoes: Vec<String> = con
        .lrange(format!("{ns}:compat:echo"), 0, -1)
        .expect("echo");
    let failed: Vec<String> = con.lrange(format!("{ns}:failed"), 0, -1).expect("failed");
    let queued: Vec<String> = con
        .lrange(format!("{ns}:queue:default"), 0, -1)
        .expect("queue");
    let processed: Option<i64> = con.get(format!("{ns}:stat:processed")).expect("stat");
    let mut echo: HashMap<usize, usize> = HashMap::new();
    for e in &echoes {
        *echo
            .entry(tag(&serde_json::from_str(e).expect("echo JSON")))
            .or_default() += 1;
    }
    let mut fail: HashMap<usize, usize> = HashMap::new();
    for f in &failed {
        let v: serde_json::Value = serde_json::from_str(f).expect("failure JSON");
        *fail.entry(tag(&v["payload"]["args"])).or_default() += 1;
    }
    let mut queue: HashMap<usize, usize> = HashMap::new();
    for q in &queued {
        let v: serde_json::Value = serde_json::from_str(q).expect("queued JSON");
        *queue.entry(tag(&v["args"])).or_default() += 1;
    }
    let mut a = Audit {
        enqueued: acked.len() + in_doubt.len(),
        acked: acked.len(),
        in_doubt: in_doubt.len(),
        echoed: echoes.len(),
        failed: failed.len(),
        queued: queued.len(),
        stat_processed: processed.unwrap_or(0),
        ..Audit::default()
    };
    let tags = acked
        .iter()
        .map(|i| (*i, false))
        .chain(in_doubt.iter().map(|i| (*i, true)));
    for (i, doubt) in tags {
        let (e, f, q) = (
            echo.get(&i).copied().unwrap_or(0),
            fail.get(&i).copied().unwrap_or(0),
            queue.get(&i).copied().unwrap_or(0),
        );
        let found = usize::from(e > 0 || f > 0) + q;
        let state = format!("j{i}: echo={e} failed={f} queued={q} in_doubt={doubt}");
        if e > 1 || f > 1 || found > 1 {
            a.duplicates += 1;
            a.problem(format!("found twice: {state}"));
        } else if found == 0 && !doubt {
            a.acked_lost += 1;
            a.problem(format!("acknowledged but lost: {state}"));
        } else if found == 1 && doubt {
            a.in_doubt_present += 1;
        }
    }
    let runs = (0..TOTAL)
        .filter(|i| echo.contains_key(i) || fail.contains_key(i))
        .count() as i64;
    if a.stat_processed != runs {
        a.problem(format!(
            "stat:processed={} but {runs} jobs left an echo or a failure",
            a.stat_processed
        ));
    }
    a
}

/// `<ns>:stat:processed` on `node` (0 when absent); `None` while the node does not answer.
pub fn processed(node: &Node, ns: &str) -> Option<i64> {
    let mut c = node.try_con()?;
    let v: Option<i64> = c.get(format!("{ns}:stat:processed")).ok()?;
    Some(v.unwrap_or(0))
}

/// Waits until `KILL_AT` jobs were processed on `node`, the master about to be killed.
pub fn wait_kill_point(node: &Node, ns: &str) {
    wait_until(120, "2,500 jobs processed before the kill", || {
        processed(node, ns).filter(|p| *p >= KILL_AT)
    });
}

/// Waits for the first job processed on `node`, the promoted replica; returns the time since
/// `killed_at`.
pub fn first_job_after(node: &Node, ns: &str, killed_at: Instant) -> Duration {
    let at_promotion = processed(node, ns).unwrap_or(0);
    wait_until(60, "the first job processed after the promotion", || {
        processed(node, ns)
            .filter(|p| *p > at_promotion)
            .map(|_| killed_at.elapsed())
    })
}

/// Waits until the queue on `node` is empty and none of `ids` holds a job.
pub fn wait_drained(node: &Node, ns: &str, ids: &[String]) {
    wait_until(120, "the queue to drain after the failover", || {
        let mut c = node.try_con()?;
        let left: usize = c.llen(format!("{ns}:queue:default")).ok()?;
        let busy = ids
            .iter()
            .filter(|id| {
                c.exists::<_, bool>(format!("{ns}:worker:{id}"))
                    .unwrap_or(true)
            })
            .count();
        (left == 0 && busy == 0).then_some(())
    });
}

/// Sends QUIT and checks the worker exits cleanly and never panicked; returns its log.
pub fn quit_cleanly(w: &mut WorkerProc) -> String {
    w.signal("QUIT");
    let status = w.wait_exit(30);
    let log = w.stderr();
    assert!(status.success(), "worker exited with {status}:\n{log}");
    assert!(!log.contains("panicked"), "the worker panicked:\n{log}");
    log
}
