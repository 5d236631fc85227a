//! Tracked jobs against a real Redis and the real runtime (issue 14): the record through its
//! life (queued → working → completed, with progress, result and history), failures and
//! retries (and a failure retried from the failure list), delayed jobs, resque-status jobs with
//! resque-status's bytes, cancel before and while running, job keys and tags, expiry, waiting,
//! pruning (and a worker gone without a word), and bad input. Listings, paging and bad records
//! are in `jobs_listing.rs`.

use crate::support;

use redis::AsyncCommands;
use resq::admin::Admin;
use resq::jobs::{Cancelled, JobFilter, JobId, State, Track};
use resq::{Client, Job, JobContext, JobError, JobResult, Registry, RetryPolicy};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::stop;
use support::Keys;

async fn client(ns: &str) -> Client {
    Client::connect(&support::url(), ns).await.unwrap()
}

async fn admin(ns: &str) -> Admin {
    Admin::connect(&support::url(), ns).await.unwrap()
}

/// A resque-status job's record, as stored.
async fn raw_record(ns: &str, id: &JobId) -> Option<String> {
    support::con()
        .await
        .get(Keys::new(ns).resque_status(id.as_str()))
        .await
        .unwrap()
}

/// resq's own record of a job: its hash's fields (empty when there is none).
async fn fields(ns: &str, id: &JobId) -> HashMap<String, String> {
    support::con()
        .await
        .hgetall(Keys::new(ns).job_record(id.as_str()))
        .await
        .unwrap()
}

async fn wait_final(c: &Client, id: &JobId) -> resq::jobs::JobStatus {
    let s = c
        .wait(id, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("a record");
    assert!(s.state.is_final(), "not finished in time: {s:?}");
    s
}

struct Report;

impl Job for Report {
    const CLASS: &'static str = "Report";
    type Args = (u64,);
    async fn perform(&self, (n,): Self::Args, ctx: JobContext) -> JobResult {
        ctx.progress(1, 2, "half").await?;
        ctx.set_result(&json!({"rows": n, "ok": true}))?;
        Ok(())
    }
}

#[tokio::test]
async fn a_tracked_job_is_followed_from_enqueue_to_its_result() {
    let ns = support::namespace("jobs-life");
    let c = client(&ns).await;
    let id = c
        .enqueue_tracked::<Report>((7,), Track::new().tag("nightly").tag("eu"))
        .await
        .unwrap();
    let queued = c.status(&id).await.unwrap().unwrap();
    assert_eq!(queued.state, State::Queued);
    assert_eq!(queued.status, "queued");
    assert_eq!(queued.tags, ["nightly", "eu"]);
    assert_eq!(queued.queue.as_deref(), Some("default"));
    // The payload carries the id in a field every peer ignores.
    let payload: Vec<String> = support::con()
        .await
        .lrange(Keys::new(&ns).queue("default"), 0, -1)
        .await
        .unwrap();
    assert_eq!(
        payload,
        [format!(
            r#"{{"class":"Report","args":[7],"resq_id":"{id}"}}"#
        )]
    );
    let w = support::start(support::builder(&ns, "default").registry(Registry::new().job(Report)))
        .await;
    let done = wait_final(&c, &id).await;
    stop(w).await;
    assert_eq!(done.state, State::Completed);
    assert_eq!(done.status, "completed");
    assert_eq!(done.result, Some(json!({"rows": 7, "ok": true})));
    assert_eq!((done.num, done.total), (Some(1.0), Some(2.0)));
    // The last progress message (resq's own record keeps no resque-status message).
    assert_eq!(done.message.as_deref(), Some("half"), "{done:?}");
    assert!(done.finished_at.is_some() && !done.statused, "{done:?}");
    assert_eq!(done.name.as_deref(), Some("Report"));
    assert_eq!(done.attempts, 1);
    assert!(done.worker.is_some());
    let events: Vec<&str> = done.history.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(events, ["enqueued", "started", "completed"]);
    // Indexes: the finished state's, and the tags.
    let a = admin(&ns).await;
    let counts = a.job_counts().await.unwrap();
    assert!(counts.contains(&(State::Completed, 1)), "{counts:?}");
    assert!(counts.contains(&(State::Queued, 0)), "{counts:?}");
    let tagged = a
        .jobs(
            &JobFilter {
                tag: Some("eu".into()),
                ..Default::default()
            },
            0,
            10,
        )
        .await
        .unwrap();
    assert_eq!(tagged.jobs.len(), 1);
    assert_eq!(tagged.jobs[0].id, id);
    // Finished records expire (24 h by default).
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let ttl: i64 = con.ttl(k.job_record(id.as_str())).await.unwrap();
    assert!((86_000..=86_400).contains(&ttl), "ttl {ttl}");
    let completed: Option<f64> = con
        .zscore(k.job_state("completed"), id.as_str())
        .await
        .unwrap();
    assert!(completed.is_some());
    // resq's own record is a hash under `resq:`: not resque-status's, nor in its list.
    assert_eq!(fields(&ns, &id).await["state"], "completed");
    assert!(raw_record(&ns, &id).await.is_none());
    let listed: Option<f64> = con.zscore(k.resque_statuses(), id.as_str()).await.unwrap();
    assert!(listed.is_none(), "not in _statuses");
}

#[tokio::test]
async fn failures_are_recorded_and_retries_come_back_to_queued() {
    let ns = support::namespace("jobs-retry");
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let registry = Registry::new()
        .handler("Flaky", move |_ctx: JobContext| {
            let r = r.clone();
            async move {
                if r.fetch_add(1, Ordering::SeqCst) == 0 {
                    Err(JobError::msg("boom: <bad> & \"quoted\""))
                } else {
                    Ok(())
                }
            }
        })
        .retry("Flaky", RetryPolicy::delays([Duration::from_secs(1)]))
        .handler("Doomed", |_ctx: JobContext| async {
            Err(JobError::msg("always"))
        });
    let c = client(&ns).await;
    let flaky = c
        .enqueue_class_tracked("default", "Flaky", &[], Track::new())
        .await
        .unwrap();
    let doomed = c
        .enqueue_class_tracked("default", "Doomed", &[], Track::new())
        .await
        .unwrap();
    let w = support::start(
        support::builder(&ns, "default")
            .scheduler(true)
            .scheduler_interval(Duration::from_millis(100))
            .registry(registry),
    )
    .await;
    let failed = wait_final(&c, &doomed).await;
    assert_eq!(failed.state, State::Failed);
    assert_eq!(failed.error.as_deref(), Some("always"));
    assert_eq!(failed.message, None, "no progress was reported");
    let done = wait_final(&c, &flaky).await;
    stop(w).await;
    assert_eq!(done.state, State::Completed);
    assert_eq!(done.attempts, 2);
    let events: Vec<&str> = done.history.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        events,
        [
            "enqueued",
            "started",
            "retrying",
            "moved",
            "started",
            "completed"
        ],
        "{done:?}"
    );
    assert_eq!(done.history[2].fields["error"], "boom: <bad> & \"quoted\"");
}

#[tokio::test]
async fn delayed_jobs_are_scheduled_then_queued() {
    let ns = support::namespace("jobs-delayed");
    let c = client(&ns).await;
    let id = c
        .enqueue_class_tracked(
            "default",
            "Noop",
            &[json!(1)],
            Track::new().delay(Duration::from_secs(1)).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        c.status(&id).await.unwrap().unwrap().state,
        State::Scheduled
    );
    let w = support::start(
        support::builder(&ns, "default")
            .scheduler(true)
            .scheduler_interval(Duration::from_millis(100))
            .registry(Registry::new().handler("Noop", |_ctx: JobContext| async { Ok(()) })),
    )
    .await;
    let done = wait_final(&c, &id).await;
    stop(w).await;
    assert_eq!(done.state, State::Completed);
    let events: Vec<&str> = done.history.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(events, ["scheduled", "moved", "started", "completed"]);
}

/// resque-status's `MyStatusJob`: reports `at(3, 10, "msg")` and completes.
struct MyStatusJob;

impl Job for MyStatusJob {
    const CLASS: &'static str = "MyStatusJob";
    type Args = (Map<String, Value>,);
    async fn perform(&self, (options,): Self::Args, ctx: JobContext) -> JobResult {
        assert_eq!(ctx.options(), Some(&options));
        ctx.progress(3, 10, "msg").await?;
        Ok(())
    }
}

#[tokio::test]
async fn resque_status_jobs_keep_resque_status_bytes() {
    let ns = support::namespace("jobs-status");
    let c = client(&ns).await;
    // Options of fixture 01_create (real resque-status 0.5.0 on Resque 3.0.0).
    let options: Map<String, Value> = serde_json::from_str(
        r#"{"num":10,"label":"ünïcødé ✓","sym":"val","nested":{"a":[1,2.5,null,true]}}"#,
    )
    .unwrap();
    let id = c.create_status::<MyStatusJob>(options).await.unwrap();
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let queued: Vec<String> = con.lrange(k.queue("statused"), 0, -1).await.unwrap();
    assert_eq!(
        queued,
        [format!(
            r#"{{"class":"MyStatusJob","args":["{id}",{{"num":10,"label":"ünïcødé ✓","sym":"val","nested":{{"a":[1,2.5,null,true]}}}}]}}"#
        )]
    );
    let record = raw_record(&ns, &id).await.unwrap();
    let time: i64 = serde_json::from_str::<Value>(&record).unwrap()["time"]
        .as_i64()
        .unwrap();
    let ruby_prefix = format!(
        r#"{{"time":{time},"status":"queued","uuid":"{id}","options":{{"num":10,"label":"ünïcødé ✓","sym":"val","nested":{{"a":[1,2.5,null,true]}}}}"#
    );
    assert!(record.starts_with(&ruby_prefix), "{record}");
    let w = support::start(
        support::builder(&ns, "statused")
            .registry(Registry::new().statused("MyStatusJob").job(MyStatusJob)),
    )
    .await;
    let done = wait_final(&c, &id).await;
    stop(w).await;
    assert_eq!(done.state, State::Completed);
    let record = raw_record(&ns, &id).await.unwrap();
    // resque-status's fields keep their order and bytes; `time` is the creation time.
    let done_prefix = ruby_prefix.replace(r#""status":"queued""#, r#""status":"completed""#);
    assert!(record.starts_with(&done_prefix), "{record}");
    assert!(
        record.contains(r#""name":"MyStatusJob({\"num\"=>10, \"label\"=>\"ünïcødé ✓\", \"sym\"=>\"val\", \"nested\"=>{\"a\"=>[1, 2.5, nil, true]}})""#),
        "{record}"
    );
    assert!(
        record.contains(r#","num":3,"total":10,"message":"Completed at "#),
        "{record}"
    );
    let processed: Option<i64> = con.get(k.stat_processed()).await.unwrap();
    assert_eq!(processed, Some(1));
}

#[tokio::test]
async fn a_cancelled_job_never_runs_and_a_running_one_is_killed() {
    let ns = support::namespace("jobs-cancel");
    let c = client(&ns).await;
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let registry = Registry::new()
        .handler("Never", move |_ctx: JobContext| {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .handler("Long", |ctx: JobContext| async move {
            for i in 0..1000u64 {
                ctx.progress(i, 1000, "working").await?;
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    _ = ctx.cancelled() => return Err(ctx.killed()),
                }
            }
            Ok(())
        });
    let never = c
        .enqueue_class_tracked("default", "Never", &[], Track::new())
        .await
        .unwrap();
    assert_eq!(c.cancel(&never).await.unwrap(), Cancelled::Cancelled);
    assert_eq!(
        c.status(&never).await.unwrap().unwrap().state,
        State::Cancelled
    );
    let long = c
        .enqueue_class_tracked("default", "Long", &[], Track::new())
        .await
        .unwrap();
    let w = support::start(support::builder(&ns, "default").registry(registry)).await;
    support::eventually(10, "the long job working", || async {
        (c.status(&long).await.unwrap().unwrap().state == State::Working).then_some(())
    })
    .await;
    assert_eq!(c.cancel(&long).await.unwrap(), Cancelled::Killing);
    let killed = wait_final(&c, &long).await;
    stop(w).await;
    assert_eq!(killed.state, State::Killed);
    assert_eq!(killed.status, "killed");
    assert!(killed.finished_at.is_some(), "{killed:?}");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "a cancelled job ran");
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    // A killed job succeeded for Resque (resque-status's semantics); the cancelled one was
    // dropped, not processed.
    let processed: Option<i64> = con.get(k.stat_processed()).await.unwrap();
    let failed: Option<i64> = con.get(k.stat_failed()).await.unwrap();
    assert_eq!((processed, failed), (Some(1), None));
    let left: u64 = con.llen(k.queue("default")).await.unwrap();
    assert_eq!(left, 0);
    // A finished job stays as it is; an unknown id is an error.
    assert_eq!(
        c.cancel(&long).await.unwrap(),
        Cancelled::Finished(State::Killed)
    );
    assert!(c.cancel(&JobId::new()).await.is_err());
}

#[tokio::test]
async fn a_job_key_allows_one_live_job() {
    let ns = support::namespace("jobs-key");
    let c = client(&ns).await;
    let first = c
        .enqueue_class_tracked(
            "default",
            "Sync",
            &[json!(1)],
            Track::new().key("account-9"),
        )
        .await
        .unwrap();
    let again = c
        .enqueue_class_tracked(
            "default",
            "Sync",
            &[json!(2)],
            Track::new().key("account-9"),
        )
        .await
        .unwrap();
    assert_eq!(first, again);
    let len: u64 = support::con()
        .await
        .llen(Keys::new(&ns).queue("default"))
        .await
        .unwrap();
    assert_eq!(len, 1, "the second enqueue wrote nothing");
    let w = support::start(
        support::builder(&ns, "default")
            .registry(Registry::new().handler("Sync", |_ctx: JobContext| async { Ok(()) })),
    )
    .await;
    wait_final(&c, &first).await;
    stop(w).await;
    let next = c
        .enqueue_class_tracked(
            "default",
            "Sync",
            &[json!(3)],
            Track::new().key("account-9"),
        )
        .await
        .unwrap();
    assert_ne!(next, first, "a finished job frees its key");
}

/// Every move of a record out of a final state follows one rule (record.lua's Rec.set_state):
/// no longer finished, out of its final index, and its job key its own again unless another
/// job took it — whether the failure list's retry moved it (`failed_retry`) or a copy of its
/// payload was run again (the reserve's start).
#[tokio::test]
async fn a_finished_job_that_runs_again_holds_its_job_key_again() {
    let ns = support::namespace("jobs-key-again");
    let c = client(&ns).await;
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let id = c
        .enqueue_class_tracked("default", "Again", &[], Track::new().key("acct-1"))
        .await
        .unwrap();
    // Its payload's bytes, as a tool that pushes a failed job back whole would push them.
    let payload: String = con.lindex(k.queue("default"), 0).await.unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(AtomicBool::new(false));
    let (r, go) = (runs.clone(), release.clone());
    let registry = Registry::new().handler("Again", move |_ctx: JobContext| {
        let (r, go) = (r.clone(), go.clone());
        async move {
            if r.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(JobError::msg("first run fails"));
            }
            while !go.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(())
        }
    });
    let w = support::start(support::builder(&ns, "default").registry(registry)).await;
    assert_eq!(wait_final(&c, &id).await.state, State::Failed);
    let held: Option<String> = con.get(k.job_key("acct-1")).await.unwrap();
    assert_eq!(held, None, "a failed job frees its key");
    let _: () = con.rpush(k.queue("default"), &payload).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while c.status(&id).await.unwrap().expect("a record").state != State::Working {
        assert!(std::time::Instant::now() < deadline, "never ran again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let failed: Vec<String> = con.zrange(k.job_state("failed"), 0, -1).await.unwrap();
    assert!(
        !failed.contains(&id.to_string()),
        "still listed as failed: {failed:?}"
    );
    let again = c
        .enqueue_class_tracked("default", "Again", &[], Track::new().key("acct-1"))
        .await
        .unwrap();
    assert_eq!(again, id, "the job running again holds its key");
    release.store(true, Ordering::SeqCst);
    assert_eq!(wait_final(&c, &id).await.state, State::Completed);
    stop(w).await;
}

#[tokio::test]
async fn finished_records_expire_and_the_indexes_forget_them() {
    let ns = support::namespace("jobs-ttl");
    let c = client(&ns).await;
    let registry = Registry::new()
        .handler("Quick", |_ctx: JobContext| async { Ok(()) })
        .track_ttl("Quick", Duration::from_secs(1));
    let first = c
        .enqueue_class_tracked("default", "Quick", &[], Track::new().tag("t"))
        .await
        .unwrap();
    // The process's own TTL is 1 s too, so its sweep forgets entries finished a second ago.
    let b = support::builder(&ns, "default").registry(registry);
    let mut cfg = b.current().clone();
    cfg.job_ttl = Duration::from_secs(1);
    let w = support::start(b.config(cfg)).await;
    wait_final(&c, &first).await;
    support::eventually(5, "the record to expire", || async {
        fields(&ns, &first).await.is_empty().then_some(())
    })
    .await;
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let a = admin(&ns).await;
    let by = |state: Option<State>, tag: Option<&str>| JobFilter {
        state,
        tag: tag.map(String::from),
        ..Default::default()
    };
    // Listings pass over an entry whose record expired.
    for f in [
        by(Some(State::Completed), None),
        by(None, Some("t")),
        by(None, None),
    ] {
        let page = a.jobs(&f, 0, 10).await.unwrap();
        assert!(
            page.jobs.is_empty() && page.unreadable.is_empty(),
            "{f:?}: {page:?}"
        );
    }
    // The next finished job sweeps the index of expired ones.
    let second = c
        .enqueue_class_tracked("default", "Quick", &[], Track::new())
        .await
        .unwrap();
    wait_final(&c, &second).await;
    stop(w).await;
    let ids: Vec<String> = con.zrange(k.job_state("completed"), 0, -1).await.unwrap();
    assert_eq!(ids, [second.to_string()]);
    // The expired job's tag entry stays until a purge (a tag index has no expiry).
    let tagged: Vec<String> = con.zrange(k.job_tag("t"), 0, -1).await.unwrap();
    assert_eq!(tagged, [first.to_string()]);
    // Purge forgets the rest on demand, the tag's entry and name with them.
    let purged = a.purge_jobs(None, Duration::ZERO).await.unwrap();
    assert!(purged >= 1);
    assert!(fields(&ns, &second).await.is_empty());
    let ids: Vec<String> = con.zrange(k.job_state("completed"), 0, -1).await.unwrap();
    assert!(ids.is_empty(), "{ids:?}");
    let tagged: Vec<String> = con.zrange(k.job_tag("t"), 0, -1).await.unwrap();
    assert!(tagged.is_empty(), "{tagged:?}");
    let tags: Vec<String> = con.smembers(k.job_tags()).await.unwrap();
    assert!(tags.is_empty(), "{tags:?}");
}

#[tokio::test]
async fn purge_keeps_a_record_that_says_its_job_runs_again() {
    let ns = support::namespace("jobs-purge-live");
    let c = client(&ns).await;
    let registry = Registry::new().handler("Doomed", |_ctx: JobContext| async {
        Err(JobError::msg("always"))
    });
    let again = c
        .enqueue_class_tracked("default", "Doomed", &[], Track::new().tag("t"))
        .await
        .unwrap();
    let gone = c
        .enqueue_class_tracked("default", "Doomed", &[], Track::new())
        .await
        .unwrap();
    let w = support::start(support::builder(&ns, "default").registry(registry)).await;
    assert_eq!(wait_final(&c, &again).await.state, State::Failed);
    assert_eq!(wait_final(&c, &gone).await.state, State::Failed);
    stop(w).await;
    // The failed job runs again, and its record says so while the failed index still lists
    // it (as a record another tool moved would be).
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let _: () = con
        .hset(k.job_record(again.as_str()), "state", "queued")
        .await
        .unwrap();
    assert_eq!(
        c.status(&again).await.unwrap().unwrap().state,
        State::Queued
    );
    let purged = admin(&ns)
        .await
        .purge_jobs(Some(State::Failed), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(purged, 1, "only the job that is still failed");
    assert!(fields(&ns, &gone).await.is_empty());
    // The queued job's record and its tag stay; the failed index, which no longer says where
    // it is, forgets it.
    assert_eq!(fields(&ns, &again).await["state"], "queued");
    let failed: Vec<String> = con.zrange(k.job_state("failed"), 0, -1).await.unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    let ids: Vec<String> = con.zrange(k.job_tag("t"), 0, -1).await.unwrap();
    assert_eq!(ids, [again.to_string()]);
}

#[tokio::test]
async fn the_indexes_follow_records_others_deleted_broke_or_ended() {
    // Four resque-status jobs whose records someone else changes (Ruby's plugin shares them):
    // deleted while queued, overwritten with garbage while queued, deleted while running (as an
    // `expire_in` ends it), and marked killed while running (as Ruby may write). Each job runs
    // once and moves as usual; afterwards no listing says a job is queued or working, and each
    // is listed as its record says.
    let ns = support::namespace("jobs-foreign");
    let c = client(&ns).await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let registry = Registry::new()
        .statused("Quick")
        .statused("Gated")
        .handler("Quick", |_ctx: JobContext| async { Ok(()) })
        .handler("Gated", {
            let (gate, started) = (gate.clone(), started.clone());
            move |_ctx: JobContext| {
                let (gate, started) = (gate.clone(), started.clone());
                async move {
                    started.fetch_add(1, Ordering::SeqCst);
                    gate.acquire().await.expect("gate").forget();
                    Ok(())
                }
            }
        });
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let create = |class: &'static str| {
        let c = c.clone();
        async move {
            c.create_status_class("default", class, Map::new(), Track::new())
                .await
                .unwrap()
        }
    };
    let deleted = create("Quick").await;
    let garbled = create("Quick").await;
    let expired = create("Gated").await;
    let killed = create("Gated").await;
    let _: () = con.del(k.resque_status(deleted.as_str())).await.unwrap();
    let _: () = con
        .set(k.resque_status(garbled.as_str()), "not json {")
        .await
        .unwrap();
    let w = support::start(
        support::builder(&ns, "default")
            .concurrency(4)
            .registry(registry),
    )
    .await;
    support::eventually(10, "the gated jobs to start", || async {
        (started.load(Ordering::SeqCst) == 2).then_some(())
    })
    .await;
    let a = admin(&ns).await;
    let listed = |state: State| {
        let a = a.clone();
        async move {
            let f = JobFilter {
                state: Some(state),
                ..Default::default()
            };
            let p = a.jobs(&f, 0, 50).await.unwrap();
            let ids: Vec<JobId> = p.jobs.into_iter().map(|j| j.id).collect();
            (ids, p.unreadable)
        }
    };
    // Where they are tells it: the two gated ones are working.
    let (working, _) = listed(State::Working).await;
    assert_eq!(working.len(), 2, "{working:?}");
    assert!(working.contains(&expired) && working.contains(&killed));
    let _: () = con.del(k.resque_status(expired.as_str())).await.unwrap();
    let text = raw_record(&ns, &killed).await.unwrap();
    let edited = text.replacen(r#""status":"working""#, r#""status":"killed""#, 1);
    assert_ne!(edited, text);
    let _: () = con
        .set(k.resque_status(killed.as_str()), &edited)
        .await
        .unwrap();
    gate.add_permits(2);
    support::eventually(10, "all four jobs", || async {
        let n: u64 = support::con()
            .await
            .get(k.stat_processed())
            .await
            .unwrap_or(0);
        (n == 4).then_some(())
    })
    .await;
    stop(w).await;
    for state in [State::Queued, State::Working] {
        let (ids, _) = listed(state).await;
        assert!(ids.is_empty(), "{state}: {ids:?}");
    }
    // The deleted ones were made again (at the start, at the end), and completed.
    for id in [&deleted, &expired] {
        assert_eq!(c.status(id).await.unwrap().unwrap().state, State::Completed);
    }
    // The killed one is listed as what its record says; the garbled one is named, not hidden.
    let (ids, unreadable) = listed(State::Killed).await;
    assert_eq!(ids, std::slice::from_ref(&killed));
    assert_eq!(
        unreadable,
        [format!(
            "{} holds \"not json {{\", not a resque-status record (a JSON object)",
            k.resque_status(garbled.as_str())
        )]
    );
    assert_eq!(
        raw_record(&ns, &garbled).await.as_deref(),
        Some("not json {")
    );
}

#[tokio::test]
async fn a_result_that_is_no_json_is_an_error_not_a_broken_record() {
    let ns = support::namespace("jobs-result-json");
    let c = client(&ns).await;
    let registry = Registry::new().handler("Pairs", |ctx: JobContext| async move {
        ctx.set_result(&json!({"kept": true}))?;
        // serde_json cannot write a map whose keys are not strings.
        let pairs: std::collections::HashMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let e = ctx.set_result(&pairs).unwrap_err();
        assert_eq!(e.exception, "Resq::ResultNotJson", "{e:?}");
        Ok(())
    });
    let id = c
        .enqueue_class_tracked("default", "Pairs", &[], Track::new())
        .await
        .unwrap();
    let w = support::start(support::builder(&ns, "default").registry(registry)).await;
    let done = wait_final(&c, &id).await;
    stop(w).await;
    assert_eq!(done.state, State::Completed);
    assert_eq!(done.result, Some(json!({"kept": true})));
    let text = &fields(&ns, &id).await["result"];
    assert_eq!(
        serde_json::from_str::<Value>(text).expect("the result is JSON"),
        json!({"kept": true})
    );
}

#[tokio::test]
async fn wait_keeps_its_timeout_while_redis_stalls_and_outlasts_a_restart() {
    // A private server: this test stalls it and restarts it.
    let server = support::RedisServer::start(&["--appendonly", "yes"]);
    let ns = "jobs-wait-away";
    let c = Client::connect(&server.url(), ns).await.unwrap();
    let id = c
        .enqueue_class_tracked("default", "Nobody", &[], Track::new())
        .await
        .unwrap();
    // Stalled: every command waits 9 s. The wait still ends at its timeout, with the record
    // as it last read it (its first read came before the stall).
    let waiter = {
        let (c, id) = (c.clone(), id.clone());
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let r = c.wait(&id, Duration::from_secs(3)).await;
            (r, started.elapsed())
        })
    };
    support::eventually(10, "the waiter to read the record", || async {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut server.con().await)
            .await
            .unwrap();
        list.lines()
            .any(|l| l.contains("cmd=get") || l.contains("cmd=type"))
            .then_some(())
    })
    .await;
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(9_000)
        .arg("ALL")
        .query_async(&mut server.con().await)
        .await
        .unwrap();
    let (r, took) = waiter.await.unwrap();
    // Ended before the stall did (what follows waits for its end).
    assert!(took < Duration::from_secs(8), "{took:?}");
    assert_eq!(r.unwrap().map(|s| s.state), Some(State::Queued));
    support::eventually(20, "the stall to end", || async {
        let client = redis::Client::open(server.url()).unwrap();
        let mut con = client.get_multiplexed_async_connection().await.ok()?;
        let pong: Option<String> = redis::cmd("PING").query_async(&mut con).await.ok();
        pong.map(|_| ())
    })
    .await;
    // Restarted while a wait is on: it reads again until the job is done.
    let waiter = {
        let (c, id) = (c.clone(), id.clone());
        tokio::spawn(async move { c.wait(&id, Duration::from_secs(30)).await })
    };
    support::eventually(10, "the second waiter to read the record", || async {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut server.con().await)
            .await
            .unwrap();
        (list.lines().count() >= 3).then_some(())
    })
    .await;
    server.stop();
    server.restart();
    let mut con = server.con().await;
    let key = Keys::new(ns).job_record(id.as_str());
    let _: () = con.hset(&key, "state", "completed").await.unwrap();
    let s = waiter.await.unwrap().unwrap().expect("the record");
    assert_eq!(s.state, State::Completed);
}

#[tokio::test]
async fn bad_input_never_loses_a_job_or_stops_the_worker() {
    let ns = support::namespace("jobs-bad");
    let c = client(&ns).await;
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let registry = Registry::new()
        .statused("Stat")
        .handler("Stat", |_ctx: JobContext| async { Ok(()) })
        .handler("Big", |ctx: JobContext| async move {
            ctx.set_result(&"x".repeat(100_000))?;
            Ok(())
        })
        .handler("Plain", |_ctx: JobContext| async { Ok(()) });
    // A record key of the wrong type: the job runs, its record is left alone.
    let wrong = c
        .enqueue_class_tracked("default", "Plain", &[], Track::new())
        .await
        .unwrap();
    let _: () = con.del(k.job_record(wrong.as_str())).await.unwrap();
    let _: () = con.rpush(k.job_record(wrong.as_str()), "x").await.unwrap();
    // A resque-status job whose args[0] is no id: a clear failure entry.
    c.enqueue_to("default", "Stat", &[json!("not-an-id"), json!({})])
        .await
        .unwrap();
    // An oversized result: the job fails with a clear error.
    let big = c
        .enqueue_class_tracked("default", "Big", &[], Track::new())
        .await
        .unwrap();
    // A record holding garbage: the job runs, the record is left alone.
    let garbage = c
        .enqueue_class_tracked("default", "Plain", &[], Track::new())
        .await
        .unwrap();
    let _: () = con.del(k.job_record(garbage.as_str())).await.unwrap();
    let _: () = con
        .set(k.job_record(garbage.as_str()), "{not json")
        .await
        .unwrap();
    c.enqueue_class("Plain", &[json!("after")]).await.unwrap();
    let w = support::start(support::builder(&ns, "default").registry(registry)).await;
    support::eventually(10, "every job to end", || async {
        let p: Option<i64> = support::con().await.get(k.stat_processed()).await.unwrap();
        (p == Some(5)).then_some(())
    })
    .await;
    stop(w).await;
    let failed: Vec<String> = con.lrange(k.failed(), 0, -1).await.unwrap();
    let exceptions: Vec<String> = failed
        .iter()
        .map(|f| {
            serde_json::from_str::<Value>(f).unwrap()["exception"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(exceptions, ["Resq::BadJobId", "Resq::ResultTooLarge"]);
    let t: String = redis::cmd("TYPE")
        .arg(k.job_record(wrong.as_str()))
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(t, "list", "the wrong-type key was left alone");
    let kept: String = con.get(k.job_record(garbage.as_str())).await.unwrap();
    assert_eq!(kept, "{not json");
    let big = c.status(&big).await.unwrap().unwrap();
    assert_eq!(big.state, State::Failed);
    assert!(
        big.error.as_deref().unwrap().contains("RESQ_RESULT_MAX"),
        "{big:?}"
    );
}

#[tokio::test]
async fn a_dead_workers_tracked_job_is_failed_by_pruning() {
    let ns = support::namespace("jobs-prune");
    let c = client(&ns).await;
    let id = c
        .enqueue_class_tracked("default", "Sleep", &[json!(60_000)], Track::new())
        .await
        .unwrap();
    // A worker process that takes it and dies without a word.
    let mut w = support::WorkerProc::start(&support::url(), &ns, 1, &[]);
    support::eventually(10, "the job working", || async {
        (c.status(&id).await.unwrap().unwrap().state == State::Working).then_some(())
    })
    .await;
    w.kill9();
    // The worker took Ruby's pruning lock when it started (for 60 s); as if that ran out:
    let _: () = support::con()
        .await
        .del(Keys::new(&ns).pruning_lock())
        .await
        .unwrap();
    // Pruning (here by resq's own pruner, as any resq process runs it) finds it dead.
    let out = admin(&ns)
        .await
        .prune(Duration::from_secs(300), false)
        .await
        .unwrap();
    assert_eq!(out.pruned.len(), 1, "{out:?}");
    let s = c.status(&id).await.unwrap().unwrap();
    assert_eq!(s.state, State::Failed, "{s:?}");
    assert!(s.error.as_deref().unwrap().contains("died"), "{s:?}");
    let failed: u64 = support::con()
        .await
        .llen(Keys::new(&ns).failed())
        .await
        .unwrap();
    assert_eq!(failed, 1, "and Resque's failure entry, in the same step");
}

#[tokio::test]
async fn after_rubys_prune_the_next_resq_prune_fails_the_record() {
    let ns = support::namespace("jobs-rubyprune");
    let c = client(&ns).await;
    let id = c
        .enqueue_class_tracked("default", "Sleep", &[json!(60_000)], Track::new())
        .await
        .unwrap();
    let mut w = support::WorkerProc::start(&support::url(), &ns, 1, &[]);
    support::eventually(10, "the job working", || async {
        (c.status(&id).await.unwrap().unwrap().state == State::Working).then_some(())
    })
    .await;
    w.kill9();
    // Ruby's prune_dead_workers: unregister_worker (SREM, DEL the record, the failure entry) —
    // it knows nothing of resq's records.
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let slot = w.ids[0].clone();
    let _: () = redis::pipe()
        .srem(k.workers(), &slot)
        .del(k.worker(&slot))
        .del(k.worker_started(&slot))
        .hdel(k.heartbeats(), &slot)
        .query_async(&mut con)
        .await
        .unwrap();
    // The record still says working, and reads failed: its worker is gone. Its id is in the
    // set of running jobs the prune round reads.
    assert_eq!(fields(&ns, &id).await["state"], "working");
    let kind: String = redis::cmd("TYPE")
        .arg(k.runs())
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(kind, "set");
    let indexed: bool = con.sismember(k.runs(), id.as_str()).await.unwrap();
    assert!(indexed);
    let s = c.status(&id).await.unwrap().unwrap();
    assert_eq!(s.state, State::Failed, "{s:?}");
    assert!(s.error.as_deref().unwrap().contains(&slot), "{s:?}");
    let _: () = con.del(k.pruning_lock()).await.unwrap();
    admin(&ns)
        .await
        .prune(Duration::from_secs(300), false)
        .await
        .unwrap();
    let s = c.status(&id).await.unwrap().unwrap();
    assert_eq!(s.state, State::Failed, "{s:?}");
    assert!(s.error.as_deref().unwrap().contains(&slot), "{s:?}");
    assert_eq!(
        fields(&ns, &id).await["state"],
        "failed",
        "ended by the round"
    );
    let left: u64 = con.scard(k.runs()).await.unwrap();
    assert_eq!(left, 0, "the set of running jobs forgets it");
}

/// A run an earlier build started is in its zset of running jobs (`<ns>:resq:running`, by start
/// time), not in the set this build keeps: the prune round moves it to the set and settles it
/// as this build's runs — its worker gone, it ends failed, and neither index keeps it.
#[tokio::test]
async fn a_run_an_earlier_build_indexed_in_its_zset_is_settled_too() {
    let ns = support::namespace("jobs-oldrunning");
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let (id, alive) = (
        "0123456789abcdef0123456789abcdef",
        "fedcba9876543210fedcba9876543210",
    );
    let gone = "oldhost:1:default";
    for (job, worker) in [(id, gone), (alive, "oldhost:2:default")] {
        let _: () = con
            .hset_multiple(
                k.job_record(job),
                &[
                    ("state", "working"),
                    ("class", "Sleep"),
                    ("queue", "default"),
                    ("attempts", "1"),
                    ("worker", worker),
                ],
            )
            .await
            .unwrap();
        let _: () = con.zadd(k.running(), job, 1000).await.unwrap();
    }
    // The second run's worker is registered, with a fresh heartbeat (alive): it is kept.
    let now = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%:z")
        .to_string();
    let _: () = con.sadd(k.workers(), "oldhost:2:default").await.unwrap();
    let _: () = con
        .hset(k.heartbeats(), "oldhost:2:default", &now)
        .await
        .unwrap();
    let _: () = con.del(k.pruning_lock()).await.unwrap();
    admin(&ns)
        .await
        .prune(Duration::from_secs(300), false)
        .await
        .unwrap();
    let s = client(&ns)
        .await
        .status(&JobId::parse(id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.state, State::Failed, "{s:?}");
    assert!(s.error.as_deref().unwrap().contains(gone), "{s:?}");
    let rec: HashMap<String, String> = con.hgetall(k.job_record(id)).await.unwrap();
    assert_eq!(rec["state"], "failed", "ended by the round: {rec:?}");
    let old: u64 = con.zcard(k.running()).await.unwrap();
    assert_eq!(old, 0, "the earlier build's zset is emptied");
    let runs: Vec<String> = con.smembers(k.runs()).await.unwrap();
    assert_eq!(
        runs,
        vec![alive.to_string()],
        "the live run is kept, in the set"
    );
}
