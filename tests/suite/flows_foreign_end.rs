//! Issue 34 A: a tracked job whose run someone else ended — Ruby's `prune_dead_workers`
//! unregistered its dead worker, an operator deleted the worker's record, or replaced it with
//! something else — is ended by resq within one prune round, exactly once: its record says
//! failed, its job key is free, its batch counts it (callbacks once), the jobs waiting for it
//! move on, and `resq failed retry` takes the failure entry Ruby wrote. A live worker whose
//! record is deleted under a run still writes the run's real end. And the mixed fleet: real
//! Ruby (compat-tests/ruby/lib/resque_rules.rb, Resque 3.0's pruner) prunes a resq process
//! killed with SIGKILL while tracked jobs, a batch, a waiting job and keyed jobs are in flight.
//! A queued job a worker resq does not see took (a Ruby worker's run, success or failure, or
//! any client's `LPOP`) is ended by the round that looks at it; one held by a limit, one a
//! foreign worker still runs, and one still in its queue are not.

use crate::support;

use redis::AsyncCommands;
use resq::admin::{Admin, Selector};
use resq::jobs::{JobId, State, Track};
use resq::workflows::Batch;
use resq::Client;
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;
use support::Keys;

async fn client(ns: &str) -> Client {
    Client::connect(&support::url(), ns).await.unwrap()
}

async fn admin(ns: &str) -> Admin {
    Admin::connect(&support::url(), ns).await.unwrap()
}

async fn fields(ns: &str, id: &JobId) -> HashMap<String, String> {
    support::con()
        .await
        .hgetall(Keys::new(ns).job_record(id.as_str()))
        .await
        .unwrap()
}

async fn queue(ns: &str, q: &str) -> Vec<String> {
    support::con()
        .await
        .lrange(Keys::new(ns).queue(q), 0, -1)
        .await
        .unwrap()
}

/// The ids of `ids` whose record says working.
async fn working(ns: &str, ids: &[JobId]) -> usize {
    let mut n = 0;
    for id in ids {
        if fields(ns, id).await.get("state").map(String::as_str) == Some("working") {
            n += 1;
        }
    }
    n
}

/// Resque's `unregister_worker` of slot `id` as Ruby's pruner applies it: the failure entry
/// of its job (from its worker record), then the deletions — nothing of resq's own keys.
async fn ruby_unregister(ns: &str, id: &str) {
    let k = Keys::new(ns);
    let mut con = support::con().await;
    let rec: Option<String> = con.get(k.worker(id)).await.unwrap();
    if let Some(text) = rec {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let entry = json!({
            "failed_at": "2026/01/01 00:00:00 UTC", "payload": v["payload"],
            "exception": "Resque::PruneDeadWorkerDirtyExit",
            "error": format!("Worker {id} did not gracefully exit while processing Sleep"),
            "backtrace": [], "worker": id, "queue": v["queue"],
        });
        let _: () = con.rpush(k.failed(), entry.to_string()).await.unwrap();
    }
    let _: () = redis::pipe()
        .srem(k.workers(), id)
        .del(k.worker(id))
        .del(k.worker_started(id))
        .hdel(k.heartbeats(), id)
        .del(k.stat_processed_by(id))
        .del(k.stat_failed_by(id))
        .query_async(&mut con)
        .await
        .unwrap();
}

/// One prune round (`resq prune`), Ruby's lock taken as expired.
async fn prune_round(ns: &str) {
    let _: () = support::con()
        .await
        .del(Keys::new(ns).pruning_lock())
        .await
        .unwrap();
    admin(ns)
        .await
        .prune(Duration::from_secs(300), false)
        .await
        .unwrap();
}

/// The job keys still set in the namespace.
async fn keys_held(ns: &str) -> Vec<String> {
    support::con()
        .await
        .keys(format!("{ns}:resq:jobkey:*"))
        .await
        .unwrap()
}

/// Every kind of foreign end of a run, each with every derived key: its job key, its batch
/// (a batch of its own, whose callbacks go to a queue nobody polls), a job waiting for it.
#[tokio::test]
async fn runs_ended_by_someone_else_are_settled_by_one_prune_round() {
    let ns = support::namespace("foreign-end");
    let c = client(&ns).await;
    let mut w = support::WorkerProc::start(&support::url(), &ns, 3, &[("QUEUES", "slow")]);
    // Each job: a job key, a member of a batch of its own (held open by a member on a queue
    // nobody polls; callbacks to another), and a job waiting for it.
    let mut ids = Vec::new();
    let mut bids = Vec::new();
    for i in 0..3 {
        let (bid, _) = c
            .create_batch(
                Batch::new()
                    .callback_queue("cb")
                    .on_complete("Done", vec![json!(i)])
                    .on_death("Dead", vec![json!(i)])
                    .job("hold", "Noop", vec![]),
            )
            .await
            .unwrap();
        let id = c
            .enqueue_class_tracked(
                "slow",
                "Sleep",
                &[json!(60_000)],
                Track::new().key(format!("k{i}")).in_batch(&bid),
            )
            .await
            .unwrap();
        ids.push(id);
        bids.push(bid);
    }
    let waiters: Vec<JobId> = {
        let mut v = Vec::new();
        for id in &ids {
            v.push(
                c.enqueue_class_tracked("after", "Noop", &[], Track::new().after(id.clone()))
                    .await
                    .unwrap(),
            );
        }
        v
    };
    support::eventually(20, "the three runs working", || async {
        (working(&ns, &ids).await == 3).then_some(())
    })
    .await;
    w.kill9();
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    // Which slot runs which job.
    let mut slot_of = HashMap::new();
    for id in &ids {
        slot_of.insert(id.clone(), fields(&ns, id).await["worker"].clone());
    }
    // 1. Ruby's pruner unregisters the first job's worker (a failure entry, the deletions).
    ruby_unregister(&ns, &slot_of[&ids[0]]).await;
    // 2. An operator removes the second's worker: its record deleted, unregistered.
    let s1 = slot_of[&ids[1]].clone();
    let _: () = redis::pipe()
        .del(k.worker(&s1))
        .srem(k.workers(), &s1)
        .query_async(&mut con)
        .await
        .unwrap();
    // 3. The third's worker record is replaced by something that is not its job.
    let s2 = slot_of[&ids[2]].clone();
    let _: () = redis::pipe()
        .set(k.worker(&s2), "{not json")
        .srem(k.workers(), &s2)
        .query_async(&mut con)
        .await
        .unwrap();
    for id in &ids {
        assert_eq!(
            fields(&ns, id).await["state"],
            "working",
            "before the round"
        );
    }
    prune_round(&ns).await;
    for (id, bid) in ids.iter().zip(&bids) {
        let f = fields(&ns, id).await;
        assert_eq!(f["state"], "failed", "{f:?}");
        assert!(f["error"].contains("is gone"), "{f:?}");
        let ttl: i64 = con.ttl(k.job_record(id.as_str())).await.unwrap();
        assert!(ttl > 0, "a settled record expires");
        let b = admin(&ns).await.batch(bid).await.unwrap().unwrap();
        assert_eq!((b.pending, b.failed), (1, 1), "{b:?}");
    }
    assert!(keys_held(&ns).await.is_empty(), "every job key freed");
    for w in &waiters {
        assert_eq!(
            fields(&ns, w).await["state"],
            "queued",
            "its dependency ended"
        );
    }
    assert_eq!(queue(&ns, "after").await.len(), 3);
    let cb = queue(&ns, "cb").await;
    assert_eq!(cb.len(), 3, "on_death of each batch: {cb:?}");
    // A second round (and a third) settles nothing again.
    prune_round(&ns).await;
    prune_round(&ns).await;
    assert_eq!(queue(&ns, "cb").await.len(), 3);
    assert_eq!(queue(&ns, "after").await.len(), 3);
    let running: u64 = con.scard(k.runs()).await.unwrap();
    assert_eq!(running, 0, "the index of running jobs forgets them");
    // The job key is free: a new job takes it.
    let again = c
        .enqueue_class_tracked("slow", "Sleep", &[json!(1)], Track::new().key("k0"))
        .await
        .unwrap();
    assert_ne!(again, ids[0]);
    // Ruby's failure entry is retried by `resq failed retry`: the job keeps its id.
    let out = admin(&ns)
        .await
        .retry_failures(&Selector::All)
        .await
        .unwrap();
    assert_eq!(out.done, 1, "{out:?}");
    assert_eq!(fields(&ns, &ids[0]).await["state"], "queued");
}

/// Ruby's failure entry retried before any prune round ended the run: the retry ends it first
/// (the same end as the round's: its batch counts it once) and runs it again.
#[tokio::test]
async fn a_failure_ruby_wrote_is_retried_before_the_round() {
    let ns = support::namespace("foreign-retry");
    let c = client(&ns).await;
    let mut w = support::WorkerProc::start(&support::url(), &ns, 1, &[("QUEUES", "slow")]);
    let (bid, members) = c
        .create_batch(
            Batch::new()
                .callback_queue("cb")
                .on_complete("Done", vec![])
                .job("slow", "Sleep", vec![json!(60_000)]),
        )
        .await
        .unwrap();
    let id = members[0].clone();
    support::eventually(20, "the run working", || async {
        (working(&ns, std::slice::from_ref(&id)).await == 1).then_some(())
    })
    .await;
    w.kill9();
    let slot = fields(&ns, &id).await["worker"].clone();
    ruby_unregister(&ns, &slot).await;
    let out = admin(&ns)
        .await
        .retry_failures(&Selector::All)
        .await
        .unwrap();
    assert_eq!(out.done, 1, "{out:?}");
    let f = fields(&ns, &id).await;
    assert_eq!(f["state"], "queued", "{f:?}");
    assert_eq!(queue(&ns, "slow").await.len(), 1);
    let b = admin(&ns).await.batch(&bid).await.unwrap().unwrap();
    assert_eq!(b.pending, 0, "{b:?}");
    prune_round(&ns).await;
    assert_eq!(queue(&ns, "cb").await.len(), 1, "on_complete once");
    assert_eq!(fields(&ns, &id).await["state"], "queued");
}

/// A live worker whose record is deleted (or replaced) under a tracked run still writes the
/// run's real end, and frees its key.
#[tokio::test]
async fn a_live_workers_end_is_written_when_its_record_was_removed() {
    let ns = support::namespace("foreign-live");
    let c = client(&ns).await;
    let _w = support::WorkerProc::start(&support::url(), &ns, 2, &[("QUEUES", "slow")]);
    let a = c
        .enqueue_class_tracked("slow", "Sleep", &[json!(1500)], Track::new().key("live-a"))
        .await
        .unwrap();
    let b = c
        .enqueue_class_tracked("slow", "Sleep", &[json!(1500)], Track::new().key("live-b"))
        .await
        .unwrap();
    let ids = [a.clone(), b.clone()];
    support::eventually(20, "both working", || async {
        (working(&ns, &ids).await == 2).then_some(())
    })
    .await;
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let sa = fields(&ns, &a).await["worker"].clone();
    let sb = fields(&ns, &b).await["worker"].clone();
    let _: () = con.del(k.worker(&sa)).await.unwrap();
    let _: () = con.set(k.worker(&sb), "garbage").await.unwrap();
    for id in &ids {
        let s = c.wait(id, Duration::from_secs(20)).await.unwrap().unwrap();
        assert_eq!(s.state, State::Completed, "{s:?}");
    }
    assert!(keys_held(&ns).await.is_empty());
}

/// The mixed fleet: a resq process is killed with SIGKILL mid-run, real Ruby (Resque 3.0's
/// `prune_dead_workers` as compat-tests/ruby restates it) prunes it, and a live resq process
/// goes on: 0 stranded records, 0 job keys held, every callback once.
#[tokio::test]
async fn mixed_fleet_ruby_prunes_a_killed_resq_process() {
    let ns = support::namespace("foreign-fleet");
    let c = client(&ns).await;
    let k = Keys::new(&ns);
    // The victim polls `slow` only; the survivor polls `fast` and `after`.
    let mut victim = support::WorkerProc::start(&support::url(), &ns, 4, &[("QUEUES", "slow")]);
    let _survivor =
        support::WorkerProc::start(&support::url(), &ns, 2, &[("QUEUES", "fast,after")]);
    let mut batch = Batch::new()
        .callback_queue("cb")
        .on_complete("Done", vec![])
        .on_success("Success", vec![])
        .on_death("Dead", vec![]);
    for _ in 0..2 {
        batch = batch.job("slow", "Sleep", vec![json!(60_000)]);
    }
    for i in 0..6 {
        batch = batch.job("fast", "Sleep", vec![json!(10 * i)]);
    }
    let (bid, members) = c.create_batch(batch).await.unwrap();
    let mut keyed = Vec::new();
    for i in 0..2 {
        keyed.push(
            c.enqueue_class_tracked(
                "slow",
                "Sleep",
                &[json!(60_000)],
                Track::new().key(format!("fleet-{i}")),
            )
            .await
            .unwrap(),
        );
    }
    let mut waiting = Vec::new();
    for dep in [&members[0], &keyed[0]] {
        waiting.push(
            c.enqueue_class_tracked("after", "Noop", &[], Track::new().after(dep.clone()))
                .await
                .unwrap(),
        );
    }
    let slow: Vec<JobId> = members[..2].iter().chain(&keyed).cloned().collect();
    support::eventually(30, "the victim running its four jobs", || async {
        (working(&ns, &slow).await == 4).then_some(())
    })
    .await;
    victim.kill9();
    // As if 300 s had passed since it died: its slots' heartbeats are that old.
    let mut con = support::con().await;
    let old = (chrono::Utc::now() - chrono::Duration::seconds(600))
        .format("%Y-%m-%dT%H:%M:%S%:z")
        .to_string();
    for id in &victim.ids {
        let _: () = con.hset(k.heartbeats(), id, &old).await.unwrap();
    }
    let lib = concat!(env!("CARGO_MANIFEST_DIR"), "/compat-tests/ruby/lib");
    let script = r#"
        require 'redis'; require 'redis-namespace'; require 'resque_rules'
        MultiJson.use(:json_gem)
        r = Redis::Namespace.new(ARGV[1], redis: Redis.new(url: ARGV[0]))
        puts ResqueRules::Pruner.new(r, ['rubyq']).prune!.sort.join(' ')
    "#;
    let out = std::process::Command::new("ruby")
        .args(["-I", lib, "-e", script, &support::url(), &ns])
        .output()
        .expect("ruby (Debian's ruby with ruby-redis) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pruned: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let mut victims = victim.ids.clone();
    victims.sort();
    assert_eq!(pruned, victims, "Ruby pruned the dead process, and only it");
    let failed: u64 = con.llen(k.failed()).await.unwrap();
    assert_eq!(failed, 4, "Ruby's failure entries");
    prune_round(&ns).await;
    // Everything settles: the lost runs failed, the batch ended, the waiting jobs ran.
    let all: Vec<JobId> = members
        .iter()
        .chain(&keyed)
        .chain(&waiting)
        .cloned()
        .collect();
    support::eventually(30, "every record final", || async {
        let mut open = 0;
        for id in &all {
            let s = fields(&ns, id).await["state"].clone();
            if !["completed", "failed", "killed", "cancelled"].contains(&s.as_str()) {
                open += 1;
            }
        }
        (open == 0).then_some(())
    })
    .await;
    for id in &slow {
        assert_eq!(fields(&ns, id).await["state"], "failed");
    }
    for id in &waiting {
        assert_eq!(fields(&ns, id).await["state"], "completed");
    }
    assert!(keys_held(&ns).await.is_empty(), "0 keys held");
    let b = admin(&ns).await.batch(&bid).await.unwrap().unwrap();
    assert_eq!((b.pending, b.failed, b.succeeded), (0, 2, 6), "{b:?}");
    let cb = queue(&ns, "cb").await;
    let classes: Vec<String> = cb
        .iter()
        .map(|p| serde_json::from_str::<serde_json::Value>(p).unwrap()["class"].to_string())
        .collect();
    let mut sorted = classes.clone();
    sorted.sort();
    assert_eq!(sorted, ["\"Dead\"", "\"Done\""], "every callback once");
    prune_round(&ns).await;
    assert_eq!(queue(&ns, "cb").await.len(), 2);
    let running: u64 = con.scard(k.runs()).await.unwrap();
    assert_eq!(running, 0);
}

/// A Ruby worker's run as Resque 3.0 makes it (wire-format §4.1, `reserve`, `working_on`,
/// `done_working`, `Failure::Redis#save`), restated here because the resque gem is not
/// installable: it takes jobs from the head of `queue` until one of class `Hold` (left
/// running: its worker record stays), a job of class `Boom` raising. Returns what it ran.
fn ruby_worker(ns: &str, queue: &str) -> String {
    let script = r##"
        require 'redis'; require 'json'; require 'time'
        r = Redis.new(url: ARGV[0]); ns = ARGV[1]; q = ARGV[2]
        wid = "rubyhost:4242:#{q}"
        r.pipelined { |p| p.sadd("#{ns}:workers", wid); p.set("#{ns}:worker:#{wid}:started", Time.now.to_s) }
        ran = []
        loop do
          raw = r.lpop("#{ns}:queue:#{q}") or break
          job = JSON.parse(raw)
          r.set("#{ns}:worker:#{wid}", JSON.generate({ 'queue' => q, 'run_at' => Time.now.utc.iso8601, 'payload' => job }))
          ran << job['class']
          break if job['class'] == 'Hold'
          if job['class'] == 'Boom'
            r.rpush("#{ns}:failed", JSON.generate({ 'failed_at' => Time.now.utc.strftime('%Y/%m/%d %H:%M:%S %Z'),
              'payload' => job, 'exception' => 'RuntimeError', 'error' => 'boom from Ruby',
              'backtrace' => [], 'worker' => wid, 'queue' => q }))
            r.incrby("#{ns}:stat:failed", 1); r.incrby("#{ns}:stat:failed:#{wid}", 1)
          end
          r.pipelined { |p| p.del("#{ns}:worker:#{wid}"); p.incrby("#{ns}:stat:processed", 1); p.incrby("#{ns}:stat:processed:#{wid}", 1) }
        end
        puts ran.join(' ')
    "##;
    let out = std::process::Command::new("ruby")
        .args(["-e", script, &support::url(), ns, queue])
        .output()
        .expect("ruby (Debian's ruby with ruby-redis) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Issue 34: a queued tracked job taken by a worker resq does not see — a real Ruby worker
/// (success, failure) or any client's raw `LPOP` — is ended by the first prune round after
/// the take, however recently it was enqueued: failed (the failure entry's text, or "outcome unknown"), its job key freed,
/// its batch counting it (callbacks once), the job waiting for it released. A job still in
/// its queue, one a Ruby worker is running, and one held in another queue are left alone.
#[tokio::test]
async fn queued_jobs_a_foreign_worker_took_are_settled_by_a_prune_round() {
    let ns = support::namespace("foreign-take");
    let c = client(&ns).await;
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    // On `rubyq`, in this order: a keyed job (a job waits for it), two members of a batch
    // (one raises in Ruby), a job Ruby is still running when the round comes.
    let keyed = c
        .enqueue_class_tracked("rubyq", "Ok", &[json!(1)], Track::new().key("taken-1"))
        .await
        .unwrap();
    let waiter = c
        .enqueue_class_tracked("after", "Noop", &[], Track::new().after(keyed.clone()))
        .await
        .unwrap();
    let (bid, members) = c
        .create_batch(
            Batch::new()
                .callback_queue("cb")
                .on_complete("Done", vec![])
                .on_death("Dead", vec![])
                .job("rubyq", "Boom", vec![json!(2)])
                .job("rubyq", "Ok", vec![json!(3)]),
        )
        .await
        .unwrap();
    let running = c
        .enqueue_class_tracked("rubyq", "Hold", &[], Track::new().key("taken-2"))
        .await
        .unwrap();
    // Another client pops one job of `rawq` (a Jesque pop, a script, an operator).
    let raw = c
        .enqueue_class_tracked("rawq", "Ok", &[json!(4)], Track::new())
        .await
        .unwrap();
    let stays = c
        .enqueue_class_tracked("rawq", "Ok", &[json!(5)], Track::new().key("stays"))
        .await
        .unwrap();
    let popped: Option<String> = con.lpop(k.queue("rawq"), None).await.unwrap();
    assert!(popped.unwrap().contains(raw.as_str()));
    assert_eq!(ruby_worker(&ns, "rubyq"), "Ok Boom Ok Hold");
    // The very next round ends them, however recently they were enqueued: the bound is one
    // round after the take.
    prune_round(&ns).await;
    let f = fields(&ns, &members[0]).await;
    assert_eq!(f["state"], "failed", "{f:?}");
    assert!(
        f["error"].contains("boom from Ruby"),
        "the failure's text: {f:?}"
    );
    for id in [&keyed, &members[1], &raw] {
        let f = fields(&ns, id).await;
        assert_eq!(f["state"], "failed", "{f:?}");
        assert!(f["error"].contains("outcome is unknown"), "{f:?}");
        let ttl: i64 = con.ttl(k.job_record(id.as_str())).await.unwrap();
        assert!(ttl > 0, "a settled record expires");
    }
    // Left alone: the one Ruby runs, the one still in its queue.
    assert_eq!(fields(&ns, &running).await["state"], "queued");
    assert_eq!(fields(&ns, &stays).await["state"], "queued");
    let mut held = keys_held(&ns).await;
    held.sort();
    assert_eq!(held, [k.job_key("stays"), k.job_key("taken-2")]);
    assert_eq!(fields(&ns, &waiter).await["state"], "queued", "released");
    assert_eq!(queue(&ns, "after").await.len(), 1);
    let b = admin(&ns).await.batch(&bid).await.unwrap().unwrap();
    assert_eq!((b.pending, b.failed), (0, 2), "{b:?}");
    assert_eq!(
        queue(&ns, "cb").await.len(),
        2,
        "on_complete and on_death, once"
    );
    // Later rounds end nothing more; the ended leave the index.
    prune_round(&ns).await;
    assert_eq!(queue(&ns, "cb").await.len(), 2);
    assert_eq!(fields(&ns, &running).await["state"], "queued");
    assert_eq!(fields(&ns, &stays).await["state"], "queued");
    let left: Vec<String> = con.zrange(k.unended(), 0, -1).await.unwrap();
    let mut want = vec![
        running.as_str().to_string(),
        stays.as_str().to_string(),
        waiter.as_str().to_string(),
    ];
    want.sort();
    let mut left = left;
    left.sort();
    assert_eq!(left, want);
    // The Ruby run ends; the round after ends its record too.
    let _: () = con.del(k.worker("rubyhost:4242:rubyq")).await.unwrap();
    prune_round(&ns).await;
    assert_eq!(fields(&ns, &running).await["state"], "failed");
    assert_eq!(keys_held(&ns).await, [k.job_key("stays")]);
}

/// The other places a queued job can be: held by a limit (its payload in the limit's held set,
/// out of its queue) — and a run in progress: a round that looks at them ends neither.
#[tokio::test]
async fn held_and_running_jobs_are_not_taken() {
    let ns = support::namespace("foreign-held");
    let c = client(&ns).await;
    let k = Keys::new(&ns);
    admin(&ns)
        .await
        .set_limit(&resq::limits::Limit::concurrency("one", 1).class("Sleep"))
        .await
        .unwrap();
    let mut ids = Vec::new();
    for i in 0..2 {
        ids.push(
            c.enqueue_class_tracked(
                "lq",
                "Sleep",
                &[json!(60_000)],
                Track::new().key(format!("held-{i}")),
            )
            .await
            .unwrap(),
        );
    }
    let _w = support::WorkerProc::start(&support::url(), &ns, 2, &[("QUEUES", "lq")]);
    let mut con = support::con().await;
    support::eventually(30, "one running, one held", || async {
        let held: u64 = support::con()
            .await
            .zcard(k.limit_held("one", None))
            .await
            .unwrap();
        (working(&ns, &ids).await == 1 && held == 1).then_some(())
    })
    .await;
    assert!(
        queue(&ns, "lq").await.is_empty(),
        "the held job is out of its queue"
    );
    prune_round(&ns).await;
    let mut states: Vec<String> = Vec::new();
    for id in &ids {
        states.push(fields(&ns, id).await["state"].clone());
    }
    states.sort();
    assert_eq!(states, ["queued", "working"]);
    let n: u64 = con.zcard(k.unended()).await.unwrap();
    assert_eq!(n, 2, "both still looked at");
}

/// A tracked scheduled job that another runtime's scheduler moved when due (resque-scheduler
/// and node-resque enqueue a new job of its class and args, without its id) is ended by the
/// round that looks at it; one still in the delayed set past its time (no scheduler running),
/// and one not due yet, are left alone.
#[tokio::test]
async fn a_due_job_another_scheduler_moved_is_settled() {
    let ns = support::namespace("foreign-sched");
    let c = client(&ns).await;
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let soon = chrono::Utc::now() + chrono::Duration::seconds(2);
    let moved = c
        .enqueue_class_tracked(
            "sq",
            "Ok",
            &[json!(1)],
            Track::new().at(soon).key("sched-1"),
        )
        .await
        .unwrap();
    let stays = c
        .enqueue_class_tracked("sq", "Ok", &[json!(2)], Track::new().at(soon))
        .await
        .unwrap();
    let later = c
        .enqueue_class_tracked(
            "sq",
            "Ok",
            &[json!(3)],
            Track::new().at(chrono::Utc::now() + chrono::Duration::hours(1)),
        )
        .await
        .unwrap();
    support::eventually(10, "the two jobs due", || async {
        (chrono::Utc::now().timestamp() > soon.timestamp()).then_some(())
    })
    .await;
    // The foreign scheduler's move of the first item (wire-format §9.3): LPOP the bucket,
    // SREM its timestamps entry, enqueue `{class, args}`.
    let bucket = k.delayed_bucket(soon.timestamp());
    let items: Vec<String> = con.lrange(&bucket, 0, -1).await.unwrap();
    let item = items
        .iter()
        .find(|i| i.contains(moved.as_str()))
        .expect("the item carries its id")
        .clone();
    let _: () = con.lrem(&bucket, 1, &item).await.unwrap();
    let _: () = con
        .srem(k.timestamps(&item), format!("delayed:{}", soon.timestamp()))
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&item).unwrap();
    let job = json!({"class": v["class"], "args": v["args"]}).to_string();
    let _: () = con.rpush(k.queue("sq"), &job).await.unwrap();
    assert_eq!(fields(&ns, &moved).await["state"], "scheduled");
    prune_round(&ns).await;
    let f = fields(&ns, &moved).await;
    assert_eq!(f["state"], "failed", "{f:?}");
    assert!(f["error"].contains("moved by a scheduler"), "{f:?}");
    assert!(keys_held(&ns).await.is_empty(), "its key is free");
    assert_eq!(fields(&ns, &stays).await["state"], "scheduled");
    assert_eq!(fields(&ns, &later).await["state"], "scheduled");
}

/// A queue that is a Jesque zset (Jesque's delayed form of the queue: a Java client moved the
/// jobs there, `delayedEnqueue` of the exact bytes scored by due time in ms, as fixture 05
/// writes) is searched too: a job still in it is kept, one a Jesque worker is running (Jesque's
/// pop moves the member to its in-flight list, and its worker status re-encodes the job) is
/// kept, one a Jesque worker took and finished is ended by the round.
#[tokio::test]
async fn jobs_of_a_jesque_zset_queue_are_looked_for_there() {
    let ns = support::namespace("foreign-zset");
    let c = client(&ns).await;
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            c.enqueue_class_tracked("jq", "Ok", &[json!(i)], Track::new().key(format!("z-{i}")))
                .await
                .unwrap(),
        );
    }
    let raws: Vec<String> = con.lrange(k.queue("jq"), 0, -1).await.unwrap();
    assert_eq!(raws.len(), 3);
    let due = chrono::Utc::now().timestamp_millis() + 3_600_000;
    let _: () = con.del(k.queue("jq")).await.unwrap();
    for raw in &raws {
        let _: () = con.zadd(k.queue("jq"), raw, due).await.unwrap();
    }
    // A Jesque worker (2.x, fixture 31's shapes) is running the second; it took and finished
    // the third (the member left the zset; its in-flight list and status are gone).
    let wid = "vm:4242-0:JAVA_DYNAMIC_QUEUES,jq";
    let _: () = con.zrem(k.queue("jq"), &raws[1]).await.unwrap();
    let _: () = con
        .lpush(format!("{ns}:inflight:{wid}:jq"), &raws[1])
        .await
        .unwrap();
    let _: () = con.sadd(k.workers(), wid).await.unwrap();
    let status = r#"{"queue":"jq","payload":{"class":"Ok","args":[1],"vars":null},"paused":false,"run_at":"2026-11-21T19:27:57.484+0000"}"#;
    let _: () = con.set(k.worker(wid), status).await.unwrap();
    let _: () = con.zrem(k.queue("jq"), &raws[2]).await.unwrap();
    prune_round(&ns).await;
    assert_eq!(
        fields(&ns, &ids[0]).await["state"],
        "queued",
        "still in the zset"
    );
    assert_eq!(
        fields(&ns, &ids[1]).await["state"],
        "queued",
        "Jesque runs it"
    );
    let f = fields(&ns, &ids[2]).await;
    assert_eq!(f["state"], "failed", "{f:?}");
    assert!(f["error"].contains("outcome is unknown"), "{f:?}");
    let mut held = keys_held(&ns).await;
    held.sort();
    assert_eq!(held, [k.job_key("z-0"), k.job_key("z-1")]);
}

/// Ruby's reserve pops a job one command before its worker record names it: a round whose
/// first look lands in that instant does not end the job — its second look, a grace later in
/// the same round, finds the record. Driven step by step: the payload popped by hand, the
/// round started, the record written once the first look has missed the job; then the run
/// ends (the record deleted) and the next round ends the job, once.
#[tokio::test]
async fn a_job_popped_before_its_worker_record_is_written_is_not_ended() {
    let ns = support::namespace("foreign-window");
    let c = client(&ns).await;
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let id = c
        .enqueue_class_tracked("rq", "Ok", &[json!(1)], Track::new().key("win"))
        .await
        .unwrap();
    let wid = "rubyhost:4343:rq";
    let _: () = con.sadd(k.workers(), wid).await.unwrap();
    let raw: Option<String> = con.lpop(k.queue("rq"), None).await.unwrap();
    let raw = raw.expect("the payload");
    let round = tokio::spawn({
        let ns = ns.clone();
        async move { prune_round(&ns).await }
    });
    support::eventually(30, "the round's first look to miss the job", || async {
        let at: Option<f64> = support::con()
            .await
            .zscore(k.missed(), id.as_str())
            .await
            .unwrap();
        at.map(|_| ())
    })
    .await;
    let payload: serde_json::Value = serde_json::from_str(&raw).unwrap();
    let rec = json!({"queue": "rq", "run_at": "2026-01-01T00:00:00Z", "payload": payload});
    let _: () = con.set(k.worker(wid), rec.to_string()).await.unwrap();
    round.await.unwrap();
    assert_eq!(
        fields(&ns, &id).await["state"],
        "queued",
        "the second look found it"
    );
    let at: Option<f64> = con.zscore(k.missed(), id.as_str()).await.unwrap();
    assert_eq!(at, None, "its mark is dropped");
    // The run ends (Ruby's done_working): the next round ends the record, in that round.
    let _: () = con.del(k.worker(wid)).await.unwrap();
    prune_round(&ns).await;
    let f = fields(&ns, &id).await;
    assert_eq!(f["state"], "failed", "{f:?}");
    assert!(keys_held(&ns).await.is_empty(), "its key is free");
}
