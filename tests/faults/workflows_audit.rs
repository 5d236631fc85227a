//! The workflows audit: every batch callback fires exactly once and every waiting job is
//! released exactly once, with worker processes `kill -9`ed and Redis crashed and restarted
//! while the jobs run (`src/scripts/workflow.lua`).
//!
//! A private redis-server that keeps every acknowledged write across a crash (`appendonly yes`,
//! `appendfsync always`, its own data dir). Through `resq::Client`: 20 batches of 100 members
//! (`Sleep`, `Fail`, and `WfFlaky` whose first run fails and is retried at once), seven nested
//! ones (two children in each of three batches, a grandchild in one child), jobs that wait for
//! others (150 fan-ins over 1–4 jobs anywhere, some naming one twice; 30 chains of 3–6; each
//! `if_dep_failed` policy; some of them members of a batch themselves) and 10 parent jobs with
//! children (queued, waiting, in a batch, and a grandchild) that are cancelled midway: about
//! 2,600 tracked jobs. Four `compat_worker` processes of six slots work queue `wf`; at moments
//! drawn from a seeded generator (fractions of the jobs ended) a process is `kill -9`ed, the
//! parents are cancelled, redis-server is `kill -9`ed and started again on its data, a second
//! process is `kill -9`ed, and redis-server crashes again. Each killed process is replaced; the
//! replacement prunes it at start (resq's dead-local rule: ids of this host whose pid is gone),
//! which ends its running jobs through the same `Rec.finish` as any ending: failed, or — the
//! at-least-once run — put back in their queue to run again. (`RESQ_PRUNE_AFTER` cannot be
//! shortened — 300 s is its minimum, Ruby's — so the test deletes Ruby's prune lock before each
//! replacement starts, as `tests/faults/fault_kill.rs` does.)
//!
//! The callbacks (`WfCallback`, which counts each of its runs in `<ns>:audit:cb:<batch>:<kind>`)
//! go to queue `wfcb`, which no worker polls while the faults happen: what the audit counts
//! first is what the library fired — the copies of each callback in that queue — and only then
//! does a worker run them, and each must have run exactly once. (Running them during the faults
//! would mix Resque's at-most-once for a plain job killed mid-run into the count.)
//!
//! Then, for every batch: the callbacks that should have fired (complete always; success iff
//! every member completed, child batches included; death iff one failed for good) fired exactly
//! once and ran exactly once, the others never; `pending == 0`, `unsucceeded` and `failed` equal
//! what the members' final records say, `total` and the member set are what was created. For
//! every job: final, in exactly the index of its state, run as often as its class and its runs
//! put back say (a second release or a second copy would show as another attempt); a waiting
//! job ran, failed or was cancelled as its policy and its dependencies' final states say; a
//! cancelled job never ran; a job that failed running has exactly one failure entry. Nothing is
//! left in a queue, a worker record, `resq:jobs:waiting`, `resq:waiters:*` or a batch's staging
//! lists. The seed is printed (`RESQ_AUDIT_SEED=<n>` replays its choices; the moments the faults
//! land on depend on timing all the same).

use crate::support;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Commands;
use resq::jobs::{Cancelled, IfDepFailed, JobId, Track};
use resq::workflows::{Batch, BatchId};
use resq::Client;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};
use support::Keys;
use support::{wait_until, RedisServer, WorkerProc};

/// The members' queue.
const Q: &str = "wf";
/// The callbacks' queue.
const CBQ: &str = "wfcb";
const KINDS: [&str; 3] = ["complete", "success", "death"];
const FINAL: [&str; 4] = ["completed", "failed", "killed", "cancelled"];
/// What pruning writes as the error of a job whose worker died (src/worker/prune.rs).
const PRUNED: &str = "died while running it";
/// Worker processes and slots each.
const PROCS: usize = 4;
const SLOTS: usize = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// `Sleep [ms]`: succeeds.
    Sleep,
    /// `Fail ["boom"]`: fails, no retry.
    Fail,
    /// `WfFlaky [tag]`: fails its first run, retried at once (3 retries), then succeeds.
    Flaky,
}

/// A tracked job the test created.
struct Job {
    id: String,
    class: Class,
    /// The jobs it waits for.
    deps: Vec<String>,
    policy: IfDepFailed,
    /// For a child or grandchild: the parent job that is cancelled.
    root: Option<String>,
}

struct PlannedBatch {
    id: BatchId,
    parent: Option<usize>,
    /// Member job ids.
    members: Vec<String>,
    /// Child batches (indexes).
    children: Vec<usize>,
}

#[derive(Default)]
struct Plan {
    jobs: Vec<Job>,
    batches: Vec<PlannedBatch>,
    /// The parent jobs that are cancelled midway.
    parents: Vec<String>,
    /// Mixed top-level batches jobs may join.
    joinable: Vec<usize>,
    /// Jobs a waiting job may wait for.
    pool: Vec<String>,
    flaky: usize,
}

impl Plan {
    fn class_args(&mut self, class: Class, rng: &mut StdRng) -> (&'static str, Vec<Value>) {
        match class {
            Class::Sleep => ("Sleep", vec![json!(rng.random_range(5..=60))]),
            Class::Fail => ("Fail", vec![json!("boom")]),
            Class::Flaky => {
                self.flaky += 1;
                ("WfFlaky", vec![json!(format!("f{}", self.flaky))])
            }
        }
    }

    fn member_class(rng: &mut StdRng, clean: bool) -> Class {
        match rng.random_range(0..100) {
            0..=3 if !clean => Class::Fail,
            0..=9 => Class::Flaky,
            _ => Class::Sleep,
        }
    }

    /// Creates a batch of `size` members (only ones that succeed when `clean`), a child of
    /// `parent`; its callbacks go to `wfcb`.
    async fn batch(
        &mut self,
        c: &Client,
        rng: &mut StdRng,
        parent: Option<usize>,
        size: usize,
        clean: bool,
    ) -> usize {
        let idx = self.batches.len();
        let mut b = Batch::new()
            .description(format!("audit {idx}"))
            .callback_queue(CBQ)
            .on_complete("WfCallback", vec![json!("complete")])
            .on_success("WfCallback", vec![json!("success")])
            .on_death("WfCallback", vec![json!("death")]);
        if let Some(p) = parent {
            b = b.parent(self.batches[p].id.clone());
        }
        let mut classes = Vec::new();
        for _ in 0..size {
            let class = Self::member_class(rng, clean);
            let (name, args) = self.class_args(class, rng);
            b = b.job(Q, name, args);
            classes.push(class);
        }
        let (bid, ids) = c.create_batch(b).await.unwrap();
        for (id, class) in ids.iter().zip(classes) {
            self.jobs.push(Job {
                id: id.to_string(),
                class,
                deps: Vec::new(),
                policy: IfDepFailed::Run,
                root: None,
            });
            self.pool.push(id.to_string());
        }
        self.batches.push(PlannedBatch {
            id: bid,
            parent,
            members: ids.iter().map(JobId::to_string).collect(),
            children: Vec::new(),
        });
        if let Some(p) = parent {
            self.batches[p].children.push(idx);
        }
        idx
    }

    /// Enqueues one tracked job as `spec` says.
    async fn job(&mut self, c: &Client, rng: &mut StdRng, spec: Spec) -> String {
        let (name, args) = self.class_args(spec.class, rng);
        let mut track = Track::new().if_dep_failed(spec.policy);
        for d in &spec.deps {
            track = track.after(JobId::parse(d).unwrap());
        }
        if spec.twice {
            // Its first dependency named again (it counts once).
            track = track.after(JobId::parse(&spec.deps[0]).unwrap());
        }
        if let Some(b) = spec.batch {
            track = track.in_batch(&self.batches[b].id);
        }
        if let Some((p, _)) = &spec.parent {
            track = track.parent(JobId::parse(p).unwrap());
        }
        let id = c
            .enqueue_class_tracked(Q, name, &args, track)
            .await
            .unwrap()
            .to_string();
        if let Some(b) = spec.batch {
            self.batches[b].members.push(id.clone());
        }
        self.jobs.push(Job {
            id: id.clone(),
            class: spec.class,
            deps: spec.deps,
            policy: spec.policy,
            root: spec.parent.map(|(_, root)| root),
        });
        id
    }

    fn policy(rng: &mut StdRng) -> IfDepFailed {
        [IfDepFailed::Run, IfDepFailed::Fail, IfDepFailed::Cancel][rng.random_range(0..3)]
    }

    fn dep_class(rng: &mut StdRng) -> Class {
        match rng.random_range(0..100) {
            0..=14 => Class::Fail,
            15..=24 => Class::Flaky,
            _ => Class::Sleep,
        }
    }

    fn some_batch(&self, rng: &mut StdRng, one_in: u32) -> Option<usize> {
        (rng.random_range(0..one_in) == 0)
            .then(|| self.joinable[rng.random_range(0..self.joinable.len())])
    }
}

/// A tracked job to enqueue (a `Sleep` of no workflow by default).
struct Spec {
    class: Class,
    /// The batch it joins.
    batch: Option<usize>,
    /// The jobs it waits for, and what one that did not complete means.
    deps: Vec<String>,
    policy: IfDepFailed,
    /// Its parent job, and the root of its family (the parent that is cancelled).
    parent: Option<(String, String)>,
    /// Whether its first dependency is named twice.
    twice: bool,
}

impl Default for Spec {
    fn default() -> Spec {
        Spec {
            class: Class::Sleep,
            batch: None,
            deps: Vec::new(),
            policy: IfDepFailed::Run,
            parent: None,
            twice: false,
        }
    }
}

/// Creates everything (before any worker starts).
async fn create(c: &Client, rng: &mut StdRng) -> Plan {
    let mut plan = Plan::default();
    // Parents first in the queue: short ones end before they are cancelled, long ones run.
    for i in 0..10 {
        // One long parent outlasts the cancel however slow the machine (it still only holds
        // one slot); the other long ones end around it.
        let ms = match i {
            1 => 20_000,
            _ if i % 2 == 0 => 20,
            _ => rng.random_range(2000..=4000),
        };
        let id = c
            .enqueue_class_tracked(Q, "Sleep", &[json!(ms)], Track::new())
            .await
            .unwrap()
            .to_string();
        plan.jobs.push(Job {
            id: id.clone(),
            class: Class::Sleep,
            deps: Vec::new(),
            policy: IfDepFailed::Run,
            root: None,
        });
        plan.parents.push(id);
    }
    // 20 top-level batches of 100, 8 of them with no member that fails by itself.
    for i in 0..20 {
        let clean = i % 5 < 2;
        let b = plan.batch(c, rng, None, 100, clean).await;
        if !clean {
            plan.joinable.push(b);
        }
    }
    // Nested: three parents of two children each (one clean, one mixed); a grandchild.
    for p in [0, 5, 12] {
        let clean = plan.batch(c, rng, Some(p), 40, true).await;
        plan.batch(c, rng, Some(p), 40, false).await;
        if p == 0 {
            plan.batch(c, rng, Some(clean), 30, true).await;
        }
    }
    // Children of the parent jobs: queued, waiting for a member, in a batch, and a grandchild.
    for p in plan.parents.clone() {
        let root = Some((p.clone(), p.clone()));
        let child = |parent: &Option<(String, String)>| Spec {
            parent: parent.clone(),
            ..Spec::default()
        };
        let a = plan.job(c, rng, child(&root)).await;
        let deps = vec![plan.pool[rng.random_range(0..plan.pool.len())].clone()];
        let policy = Plan::policy(rng);
        let b = plan
            .job(
                c,
                rng,
                Spec {
                    deps,
                    policy,
                    ..child(&root)
                },
            )
            .await;
        let batch = plan.some_batch(rng, 1);
        let cc = plan
            .job(
                c,
                rng,
                Spec {
                    batch,
                    ..child(&root)
                },
            )
            .await;
        let g = plan.job(c, rng, child(&Some((a.clone(), p.clone())))).await;
        plan.pool.extend([a, b, cc, g]);
    }
    // Fan-ins over 1–4 jobs anywhere (members, children, other waiting jobs).
    for _ in 0..150 {
        let n = rng.random_range(1..=4);
        let mut deps: Vec<String> = Vec::new();
        while deps.len() < n {
            let d = plan.pool[rng.random_range(0..plan.pool.len())].clone();
            if !deps.contains(&d) {
                deps.push(d);
            }
        }
        let spec = Spec {
            class: Plan::dep_class(rng),
            policy: Plan::policy(rng),
            batch: plan.some_batch(rng, 3),
            twice: rng.random_range(0..10) == 0,
            deps,
            parent: None,
        };
        let id = plan.job(c, rng, spec).await;
        plan.pool.push(id);
    }
    // Chains of 3–6, each link after the one before.
    for _ in 0..30 {
        let mut prev = plan.pool[rng.random_range(0..plan.pool.len())].clone();
        for _ in 0..rng.random_range(3..=6) {
            let spec = Spec {
                class: Plan::dep_class(rng),
                policy: Plan::policy(rng),
                batch: plan.some_batch(rng, 4),
                deps: vec![prev],
                ..Spec::default()
            };
            prev = plan.job(c, rng, spec).await;
            plan.pool.push(prev.clone());
        }
    }
    plan
}

/// A connection that comes back after Redis restarts: `None` while it does not answer.
struct Con {
    url: String,
    con: Option<redis::Connection>,
}

impl Con {
    fn new(url: &str) -> Con {
        Con {
            url: url.to_string(),
            con: None,
        }
    }

    fn run<T>(
        &mut self,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Option<T> {
        if self.con.is_none() {
            self.con = redis::Client::open(self.url.as_str())
                .ok()?
                .get_connection_with_timeout(Duration::from_secs(2))
                .ok();
        }
        match f(self.con.as_mut()?) {
            Ok(v) => Some(v),
            Err(_) => {
                self.con = None;
                None
            }
        }
    }

    /// The connection, for reads that must answer (the audit).
    fn get(&mut self) -> &mut redis::Connection {
        wait_until(10, "Redis to answer", || {
            self.run(|c| redis::cmd("PING").query::<String>(c))
        });
        self.con.as_mut().unwrap()
    }
}

/// Tracked jobs in a final state's index, all states together.
fn ended(con: &mut Con, keys: &Keys) -> Option<usize> {
    con.run(|c| {
        let mut p = redis::pipe();
        for s in FINAL {
            p.zcard(keys.job_state(s));
        }
        let n: Vec<usize> = p.query(c)?;
        Ok(n.iter().sum())
    })
}

/// How many of `ids` hold a job (a worker record).
fn busy(con: &mut Con, keys: &Keys, ids: &[String]) -> Option<usize> {
    con.run(|c| {
        let mut p = redis::pipe();
        for id in ids {
            p.exists(keys.worker(id));
        }
        let n: Vec<usize> = p.query(c)?;
        Ok(n.iter().sum())
    })
}

#[derive(Clone, Copy, Debug)]
enum Event {
    Kill,
    Cancel,
    RestartRedis,
}

/// What happened during the run.
#[derive(Default)]
struct Faults {
    kills: usize,
    busy_at_kill: usize,
    restarts: usize,
    /// What each parent's cancel answered.
    cancelled: HashMap<String, Cancelled>,
    /// Why the run did not drain (then the audit says which jobs did not end).
    undrained: Option<String>,
    /// Slots running a job when Redis crashed (each time).
    busy_at_crash: usize,
}

/// The members' workers: queue `wf`, and at-least-once when asked (their pruning then puts a
/// killed slot's job back at the head of its queue instead of failing it).
fn worker_env(at_least_once: bool) -> Vec<(&'static str, &'static str)> {
    vec![
        ("QUEUES", Q),
        ("INTERVAL", "0.2"),
        ("RESQ_AT_LEAST_ONCE", if at_least_once { "1" } else { "0" }),
    ]
}

/// Kills one of `procs` (drawn by `rng`), starts a replacement that prunes it, and waits until
/// its ids are gone.
fn kill_one(
    url: &str,
    ns: &str,
    con: &mut Con,
    procs: &mut Vec<WorkerProc>,
    rng: &mut StdRng,
    faults: &mut Faults,
    env: &[(&str, &str)],
) {
    let keys = Keys::new(ns);
    let mut victim = procs.remove(rng.random_range(0..procs.len()));
    let dead = victim.ids.clone();
    faults.busy_at_kill += busy(con, &keys, &dead).unwrap_or(0);
    victim.kill9();
    faults.kills += 1;
    // Ruby's prune lock (60 s) would make the replacement skip its prune at start.
    con.get()
        .del::<_, ()>(format!("{ns}:pruning_dead_workers_in_progress"))
        .unwrap();
    procs.push(WorkerProc::start(url, ns, SLOTS, env));
    wait_until(20, "the killed process's slots to be pruned", || {
        let alive: Vec<bool> = con.run(|c| {
            let mut p = redis::pipe();
            for id in &dead {
                p.sismember(keys.workers(), id);
            }
            p.query(c)
        })?;
        alive.iter().all(|a| !a).then_some(())
    });
}

/// What a run works with: the server it crashes, the client that cancels.
struct Rig<'a> {
    server: &'a RedisServer,
    rt: &'a tokio::runtime::Runtime,
    client: &'a Client,
    ns: &'a str,
}

/// The run: workers, the faults at their moments, until every job ended and every slot idles.
fn run(rig: &Rig, plan: &Plan, rng: &mut StdRng, con: &mut Con, at_least_once: bool) -> Faults {
    let Rig {
        server,
        rt,
        client,
        ns,
    } = *rig;
    let url = server.url();
    let env = worker_env(at_least_once);
    let keys = Keys::new(ns);
    let n = plan.jobs.len();
    let mut events: Vec<(f64, Event)> = vec![
        (rng.random_range(0.10..0.25), Event::Kill),
        (rng.random_range(0.20..0.35), Event::Cancel),
        (rng.random_range(0.40..0.50), Event::RestartRedis),
        (rng.random_range(0.55..0.70), Event::Kill),
        (rng.random_range(0.75..0.85), Event::RestartRedis),
    ];
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut faults = Faults::default();
    let mut procs: Vec<WorkerProc> = (0..PROCS)
        .map(|_| WorkerProc::start(&url, ns, SLOTS, &env))
        .collect();
    for (at, event) in events {
        let threshold = (at * n as f64) as usize;
        wait_until(
            60,
            &format!("{threshold} of {n} jobs ended ({event:?})"),
            || (ended(con, &keys)? >= threshold).then_some(()),
        );
        match event {
            Event::Kill => kill_one(&url, ns, con, &mut procs, rng, &mut faults, &env),
            Event::Cancel => {
                for p in &plan.parents {
                    let r = rt
                        .block_on(client.cancel(&JobId::parse(p).unwrap()))
                        .unwrap();
                    faults.cancelled.insert(p.clone(), r);
                }
            }
            Event::RestartRedis => {
                let before = ended(con, &keys).expect("Redis answers before the crash");
                let ids: Vec<String> = procs.iter().flat_map(|p| p.ids.clone()).collect();
                faults.busy_at_crash += busy(con, &keys, &ids).unwrap_or(0);
                server.kill9();
                server.restart();
                faults.restarts += 1;
                let after = wait_until(10, "Redis to answer after its restart", || {
                    ended(con, &keys)
                });
                assert!(
                    after >= before,
                    "Redis lost acknowledged writes in its crash: {before} jobs had ended, {after} after the restart"
                );
            }
        }
    }
    let ids: Vec<String> = procs.iter().flat_map(|p| p.ids.clone()).collect();
    // Drained: every job ended, the queue empty, every slot idle. A job that never ends (one
    // left waiting, or lost) is the audit's to name: past the deadline the run stops as it is.
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let state = (
            ended(con, &keys),
            con.run(|c| c.llen::<_, usize>(keys.queue(Q))),
            busy(con, &keys, &ids),
        );
        if let (Some(e), Some(0), Some(0)) = state {
            if e >= n {
                break;
            }
        }
        if Instant::now() > deadline {
            faults.undrained = Some(format!(
                "not drained after 45 s: (ended, queued, busy slots) = {state:?} of {n} jobs"
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for mut p in procs {
        p.signal("QUIT");
        let status = p.wait_exit(20);
        assert!(
            status.success(),
            "a worker exited with {status}:\n{}",
            p.stderr()
        );
        assert!(
            !p.stderr().contains("panicked"),
            "a worker panicked:\n{}",
            p.stderr()
        );
    }
    faults
}

/// The copies of each callback in `wfcb` (what the library fired): (batch, kind) → copies.
fn fired(con: &mut redis::Connection, keys: &Keys) -> HashMap<(String, String), usize> {
    let items: Vec<String> = con.lrange(keys.queue(CBQ), 0, -1).unwrap();
    let mut out = HashMap::new();
    for i in items {
        let v: Value = serde_json::from_str(&i).unwrap();
        assert_eq!(v["class"], "WfCallback", "{i}");
        let kind = v["args"][0].as_str().unwrap().to_string();
        let batch = v["resq_batch"].as_str().unwrap().to_string();
        *out.entry((batch, kind)).or_default() += 1;
    }
    out
}

/// Runs the callbacks with one worker that nothing disturbs; returns (batch, kind) → runs.
fn run_callbacks(
    url: &str,
    ns: &str,
    plan: &Plan,
    con: &mut redis::Connection,
) -> HashMap<(String, String), i64> {
    let keys = Keys::new(ns);
    let mut w = WorkerProc::start(url, ns, 4, &[("QUEUES", CBQ), ("INTERVAL", "0.2")]);
    let ids = w.ids.clone();
    wait_until(30, "the callbacks to run", || {
        let left: usize = con.llen(keys.queue(CBQ)).ok()?;
        let busy: usize = ids
            .iter()
            .map(|id| con.exists::<_, usize>(keys.worker(id)).unwrap_or(1))
            .sum();
        (left == 0 && busy == 0).then_some(())
    });
    w.signal("QUIT");
    assert!(w.wait_exit(20).success(), "{}", w.stderr());
    let mut out = HashMap::new();
    for b in &plan.batches {
        for k in KINDS {
            let n: Option<i64> = con
                .get(format!("{}audit:cb:{}:{k}", keys.prefix(), b.id))
                .unwrap();
            out.insert((b.id.to_string(), k.to_string()), n.unwrap_or(0));
        }
    }
    out
}

/// A job's record fields.
type Record = HashMap<String, String>;

/// Every planned job's record, and which final indexes list it.
fn records(
    con: &mut redis::Connection,
    keys: &Keys,
    plan: &Plan,
) -> HashMap<String, (Record, Vec<&'static str>)> {
    let mut out = HashMap::new();
    for chunk in plan.jobs.chunks(500) {
        let mut p = redis::pipe();
        for j in chunk {
            p.hgetall(keys.job_record(&j.id));
            for s in FINAL {
                p.zscore(keys.job_state(s), &j.id);
            }
        }
        let replies: Vec<redis::Value> = p.query(con).unwrap();
        for (j, r) in chunk.iter().zip(replies.chunks(1 + FINAL.len())) {
            let rec: Record = redis::from_redis_value(r[0].clone()).unwrap();
            let listed = FINAL
                .iter()
                .zip(&r[1..])
                .filter(|(_, v)| !matches!(v, redis::Value::Nil))
                .map(|(s, _)| *s)
                .collect();
            out.insert(j.id.clone(), (rec, listed));
        }
    }
    out
}

/// The audit's numbers and what went wrong.
#[derive(Default)]
struct Audit {
    problems: Vec<String>,
    by_state: BTreeMap<String, usize>,
    pruned: usize,
    requeued: usize,
    waiting_ran: usize,
    waiting_failed: usize,
    waiting_cancelled: usize,
    children_cancelled: usize,
    callbacks_expected: usize,
    callbacks_fired: usize,
    callbacks_ran: usize,
    doubled: usize,
    lost: usize,
    by_kind: BTreeMap<&'static str, usize>,
    leftovers: usize,
}

impl Audit {
    fn problem(&mut self, p: String) {
        if self.problems.len() < 40 {
            self.problems.push(p);
        }
    }
}

fn field<'a>(r: &'a Record, f: &str) -> &'a str {
    r.get(f).map_or("", String::as_str)
}

/// Checks job `j` against its record (and its dependencies').
fn audit_job(
    a: &mut Audit,
    j: &Job,
    recs: &HashMap<String, (Record, Vec<&'static str>)>,
    failures: &HashMap<String, usize>,
    faults: &Faults,
    at_least_once: bool,
) {
    let (r, listed) = &recs[&j.id];
    let state = field(r, "state");
    let attempts: u64 = field(r, "attempts").parse().unwrap_or(0);
    let error = field(r, "error");
    let what = format!(
        "{} {:?} state={state} attempts={attempts} error={error:?}",
        j.id, j.class
    );
    *a.by_state.entry(state.to_string()).or_default() += 1;
    if !FINAL.contains(&state) {
        a.problem(format!("not final: {what}"));
        return;
    }
    if listed.as_slice() != [state] {
        a.problem(format!("listed in {listed:?}: {what}"));
    }
    let pruned = state == "failed" && error.contains(PRUNED);
    a.pruned += usize::from(pruned);
    // Runs a kill interrupted and pruning put back (at-least-once), as its history says.
    let requeues = r
        .iter()
        .filter(|(k, v)| k.starts_with('a') && k.ends_with(".end") && v.starts_with("requeued"))
        .count() as u64;
    a.requeued += usize::from(requeues > 0);
    if (at_least_once && pruned) || (!at_least_once && requeues > 0) {
        a.problem(format!(
            "pruned {pruned}, put back {requeues} times: {what}"
        ));
    }
    // Each run is an attempt: one, plus one per run put back, plus WfFlaky's retries. One more
    // (a second release, a copy left in a queue) shows here.
    let first = 1 + requeues;
    let most = first + if j.class == Class::Flaky { 3 } else { 0 };
    // Asked to stop while it ran, it may end killed (Sleep does not look, so it rarely does).
    let stoppable = j.root.is_some() || faults.cancelled.contains_key(&j.id);
    // It ran (its own handler or pruning ended it), as its class allows.
    let ran = |a: &mut Audit| {
        let ok = (first..=most).contains(&attempts)
            && match j.class {
                Class::Sleep => state == "completed" || pruned || (stoppable && state == "killed"),
                Class::Fail => state == "failed" && (error == "boom" || pruned),
                Class::Flaky => state == "completed" || state == "failed",
            };
        if !ok {
            a.problem(format!("did not run as it should have: {what}"));
        }
    };
    if state == "cancelled" && (attempts != 0 || field(r, "cancelled_at").is_empty()) {
        a.problem(format!(
            "cancelled, yet it ran or has no cancelled_at: {what}"
        ));
    }
    // Cancelled with its root parent (queued or waiting then): it never ran.
    let root_cancelled = j.root.as_ref().is_some_and(|p| {
        matches!(
            faults.cancelled.get(p),
            Some(Cancelled::Cancelled | Cancelled::Killing)
        )
    });
    if matches!(faults.cancelled.get(&j.id), Some(Cancelled::Cancelled)) {
        if state != "cancelled" {
            a.problem(format!("cancelled before it started, yet: {what}"));
        }
    } else if root_cancelled && state == "cancelled" {
        a.children_cancelled += 1;
    } else if !j.deps.is_empty() {
        let bad: Vec<&String> = j
            .deps
            .iter()
            .filter(|d| field(&recs[*d].0, "state") != "completed")
            .collect();
        let dep_failed = field(r, "dep_failed");
        if bad.is_empty() {
            if !dep_failed.is_empty() || field(r, "released_at").is_empty() {
                a.problem(format!(
                    "every dependency completed, but dep_failed={dep_failed:?} released_at={:?}: {what}",
                    field(r, "released_at")
                ));
            }
            ran(a);
            a.waiting_ran += 1;
        } else {
            if !bad.iter().any(|d| d.as_str() == dep_failed) {
                a.problem(format!(
                    "dep_failed={dep_failed:?} is none of the dependencies that did not complete {bad:?}: {what}"
                ));
            }
            match j.policy {
                IfDepFailed::Run => {
                    ran(a);
                    a.waiting_ran += 1;
                }
                IfDepFailed::Fail => {
                    let why = format!("dependency {dep_failed} did not complete");
                    if state != "failed" || attempts != 0 || error != why {
                        a.problem(format!(
                            "should have failed without running ({why}): {what}"
                        ));
                    }
                    a.waiting_failed += 1;
                }
                IfDepFailed::Cancel => {
                    if state != "cancelled" || attempts != 0 {
                        a.problem(format!(
                            "should have been cancelled without running: {what}"
                        ));
                    }
                    a.waiting_cancelled += 1;
                }
            }
        }
    } else {
        ran(a);
    }
    // A job that failed running has one failure entry; any other none.
    let entries = failures.get(&j.id).copied().unwrap_or(0);
    let failed_running = state == "failed" && attempts > 0;
    if entries != usize::from(failed_running) {
        a.problem(format!("{entries} failure entries: {what}"));
    }
}

/// Checks every batch, children before parents (a child batch is a member of its parent: it
/// succeeded or died as its own members say).
fn audit_batches(
    a: &mut Audit,
    con: &mut redis::Connection,
    keys: &Keys,
    plan: &Plan,
    recs: &HashMap<String, (Record, Vec<&'static str>)>,
    fired: &HashMap<(String, String), usize>,
    ran: &HashMap<(String, String), i64>,
) {
    let mut outcome: HashMap<usize, (bool, bool)> = HashMap::new();
    for (i, b) in plan.batches.iter().enumerate().rev() {
        let bid = b.id.to_string();
        let h: HashMap<String, String> = con.hgetall(keys.batch(&bid)).unwrap();
        let set: HashSet<String> = con.smembers(keys.batch_jobs(&bid)).unwrap();
        let mut expect_set: HashSet<String> = b.members.iter().cloned().collect();
        expect_set.extend(
            b.children
                .iter()
                .map(|c| format!("@{}", plan.batches[*c].id)),
        );
        if set != expect_set {
            a.problem(format!(
                "batch {bid}: its member set is not what was created"
            ));
        }
        let states: Vec<&str> = b
            .members
            .iter()
            .map(|m| field(&recs[m].0, "state"))
            .collect();
        let mut unsucceeded = states.iter().filter(|s| **s != "completed").count();
        let mut dead = states
            .iter()
            .filter(|s| ["failed", "killed", "cancelled"].contains(s))
            .count();
        for c in &b.children {
            let (succeeded, died) = outcome[c];
            unsucceeded += usize::from(!succeeded);
            dead += usize::from(died);
        }
        let total = b.members.len() + b.children.len();
        let num = |f: &str| h.get(f).and_then(|v| v.parse::<i64>().ok());
        let counts = (
            num("total"),
            num("pending"),
            num("unsucceeded"),
            num("failed"),
        );
        let want = (
            Some(total as i64),
            Some(0),
            Some(unsucceeded as i64),
            Some(dead as i64),
        );
        if counts != want {
            a.problem(format!("batch {bid}: (total, pending, unsucceeded, failed) = {counts:?}, its members say {want:?}"));
        }
        let expect = [true, unsucceeded == 0, dead > 0];
        for (k, should) in KINDS.iter().zip(expect) {
            let key = (bid.clone(), k.to_string());
            let f = fired.get(&key).copied().unwrap_or(0);
            let r = ran.get(&key).copied().unwrap_or(0);
            let at = h.contains_key(&format!("{k}_at"));
            a.callbacks_expected += usize::from(should);
            a.callbacks_fired += f;
            a.callbacks_ran += r as usize;
            if should {
                *a.by_kind.entry(k).or_default() += 1;
            }
            let want = usize::from(should);
            if f > want || r > want as i64 {
                a.doubled += 1;
            }
            if f < want || r < want as i64 {
                a.lost += 1;
            }
            if f != want || r != want as i64 || at != should {
                a.problem(format!(
                    "batch {bid} {k}: should fire {want}, fired {f}, ran {r}, {k}_at set: {at}"
                ));
            }
        }
        outcome.insert(i, (unsucceeded == 0, dead > 0));
        if b.parent.is_some() != h.contains_key("parent") {
            a.problem(format!("batch {bid}: its parent field"));
        }
    }
}

/// The default: a killed slot's job fails when it is pruned (it counts dead in its batch).
#[test]
fn every_callback_fires_once_and_every_waiting_job_is_released_once_through_kill_9_and_a_redis_crash(
) {
    audit(false);
}

/// At-least-once: a killed slot's job goes back to its queue and runs again; the run that ends
/// it is the one its batch counts.
#[test]
fn the_same_holds_at_least_once_where_killed_jobs_run_again() {
    audit(true);
}

/// One audit at a time: each runs five worker processes, and the machine may have two cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn audit(at_least_once: bool) {
    support::topology::require("redis-server", "redis-server");
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let t0 = Instant::now();
    let name = if at_least_once {
        "workflows-at-least-once"
    } else {
        "workflows"
    };
    let seed: u64 = std::env::var("RESQ_AUDIT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    support::audit::report(&format!(
        "{name} audit: seed {seed} (RESQ_AUDIT_SEED={seed} replays it)"
    ));
    let mut rng = StdRng::seed_from_u64(seed);
    let server = RedisServer::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let url = server.url();
    let ns = support::namespace("wf-audit");
    let keys = Keys::new(&ns);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(Client::connect(&url, &ns)).unwrap();
    let plan = rt.block_on(create(&client, &mut rng));
    let created = t0.elapsed();
    let mut con = Con::new(&url);
    let rig = Rig {
        server: &server,
        rt: &rt,
        client: &client,
        ns: &ns,
    };
    let faults = run(&rig, &plan, &mut rng, &mut con, at_least_once);
    let ran_for = t0.elapsed() - created;

    let c = con.get();
    let fired = fired(c, &keys);
    let ran = run_callbacks(&url, &ns, &plan, c);
    let recs = records(c, &keys, &plan);
    let mut failures: HashMap<String, usize> = HashMap::new();
    let entries: Vec<String> = c.lrange(format!("{ns}:failed"), 0, -1).unwrap();
    let mut a = Audit::default();
    if let Some(why) = &faults.undrained {
        a.problem(why.clone());
    }
    for e in &entries {
        let v: Value = serde_json::from_str(e).unwrap();
        match v["payload"]["resq_id"].as_str() {
            Some(id) => *failures.entry(id.to_string()).or_default() += 1,
            None => a.problem(format!("a failure entry of no tracked job: {e}")),
        }
    }
    for j in &plan.jobs {
        audit_job(&mut a, j, &recs, &failures, &faults, at_least_once);
    }
    audit_batches(&mut a, c, &keys, &plan, &recs, &fired, &ran);
    let cb_log: usize = c.llen(format!("{ns}:audit:cb")).unwrap();
    if cb_log != a.callbacks_ran {
        a.problem(format!(
            "{cb_log} callback runs logged, {} counted",
            a.callbacks_ran
        ));
    }
    // Nothing left anywhere.
    let mut left: Vec<String> = Vec::new();
    for q in [Q, CBQ] {
        let n: usize = c.llen(keys.queue(q)).unwrap();
        if n > 0 {
            left.push(format!("{n} in queue {q}"));
        }
    }
    let waiting: usize = c.zcard(keys.job_state("waiting")).unwrap();
    if waiting > 0 {
        left.push(format!("{waiting} in resq:jobs:waiting"));
    }
    for pattern in [
        "resq:waiters:*",
        "resq:batch:*:staged:*",
        "resq:batch:*:queues",
        "worker:*",
    ] {
        let found: Vec<String> = c.keys(format!("{}{pattern}", keys.prefix())).unwrap();
        if !found.is_empty() {
            left.push(format!("{} keys {pattern} ({})", found.len(), found[0]));
        }
    }
    a.leftovers = left.len();
    for l in left {
        a.problem(format!("left behind: {l}"));
    }
    support::audit::assert_no_ghosts(c, &ns);

    let elapsed = t0.elapsed();
    support::audit::report(&format!(
        "AUDIT {name}: seed={seed} jobs={} batches={} (nested={}) callbacks expected={} fired={} ran={} {:?} doubled={} lost={} states={:?} pruned={} requeued={} waiting: ran={} failed={} cancelled={} children_cancelled={} kills={} busy_at_kill={} redis_restarts={} busy_at_crash={} leftovers={} problems={} created_in={:.1}s ran_in={:.1}s total={:.1}s",
        plan.jobs.len(),
        plan.batches.len(),
        plan.batches.iter().filter(|b| b.parent.is_some()).count(),
        a.callbacks_expected,
        a.callbacks_fired,
        a.callbacks_ran,
        a.by_kind,
        a.doubled,
        a.lost,
        a.by_state,
        a.pruned,
        a.requeued,
        a.waiting_ran,
        a.waiting_failed,
        a.waiting_cancelled,
        a.children_cancelled,
        faults.kills,
        faults.busy_at_kill,
        faults.restarts,
        faults.busy_at_crash,
        a.leftovers,
        a.problems.len(),
        created.as_secs_f64(),
        ran_for.as_secs_f64(),
        elapsed.as_secs_f64(),
    ));
    assert!(
        a.problems.is_empty(),
        "seed {seed}:\n{}",
        a.problems.join("\n")
    );
    assert_eq!((a.doubled, a.lost), (0, 0));
    // The run proved something: kills hit running jobs, every path was taken.
    let hit = if at_least_once { a.requeued } else { a.pruned };
    assert!(hit > 0, "no kill hit a running job (seed {seed})");
    for k in KINDS {
        assert!(
            a.by_kind.get(k).copied().unwrap_or(0) > 0,
            "no batch expected {k} (seed {seed})"
        );
    }
    assert!(a.waiting_ran > 0 && a.waiting_failed > 0 && a.waiting_cancelled > 0);
    // A parent still running or queued at its cancel takes its unstarted children with it.
    let live_at_cancel = faults
        .cancelled
        .values()
        .any(|c| !matches!(c, Cancelled::Finished(_)));
    assert!(
        live_at_cancel,
        "every parent had ended before its cancel (seed {seed})"
    );
    assert!(
        a.children_cancelled > 0,
        "no child was cancelled with its parent (seed {seed})"
    );
    // (Kept when the audit fails: `redis-server --dir <it> --appendonly yes` shows what was left.)
    let _ = std::fs::remove_dir_all(&server.dir);
}
