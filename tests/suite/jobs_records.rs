//! Tracked jobs' records against a real Redis (issue 28): records of every bad shape (a key
//! of another type, a text that is no JSON object, fields with no UTF-8, JSON null, the wrong
//! types, no state) never blind a listing, a show, a wait or a cancel — they name the key and
//! go on; a record saying working whose worker is gone reads failed, for show, wait and
//! listings, and a wait ends when the worker leaves.

use crate::support;

use redis::AsyncCommands;
use resq::admin::Admin;
use resq::jobs::{JobFilter, JobId, JobPage, State};
use resq::Client;
use std::time::{Duration, Instant};
use support::Keys;

async fn admin(ns: &str) -> Admin {
    Admin::connect(&support::url(), ns).await.unwrap()
}

async fn client(ns: &str) -> Client {
    Client::connect(&support::url(), ns).await.unwrap()
}

fn state(s: State) -> JobFilter {
    JobFilter {
        state: Some(s),
        ..Default::default()
    }
}

fn ids(p: &JobPage) -> Vec<String> {
    p.jobs.iter().map(|j| j.id.to_string()).collect()
}

/// A fresh id's text.
fn new_id() -> String {
    JobId::new().to_string()
}

/// Writes resq's own record of `id` (its hash fields).
async fn record(ns: &str, id: &str, fields: &[(&str, &str)]) {
    let _: () = support::con()
        .await
        .hset_multiple(Keys::new(ns).job_record(id), fields)
        .await
        .unwrap();
}

/// A payload of resq's own tracked job.
fn payload(class: &str, id: &str) -> String {
    format!(r#"{{"class":"{class}","args":[1],"resq_id":"{id}"}}"#)
}

#[tokio::test]
async fn records_of_every_bad_shape_never_blind_a_listing_show_wait_or_cancel() {
    let ns = support::namespace("jl-bad");
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let good = new_id();
    record(
        &ns,
        &good,
        &[("state", "failed"), ("class", "Good"), ("error", "x")],
    )
    .await;
    // resq's own: a list, a string, a state that is no UTF-8, a hash with no state, JSON null
    // and wrong types in its fields, a field name that is no UTF-8.
    let (list, text, bad_state, no_state, nulls, wrong) =
        (new_id(), new_id(), new_id(), new_id(), new_id(), new_id());
    let _: () = con.rpush(k.job_record(&list), "x").await.unwrap();
    let _: () = con.set(k.job_record(&text), "{garbage").await.unwrap();
    let _: () = con
        .hset(k.job_record(&bad_state), "state", b"\xff\xfe".as_slice())
        .await
        .unwrap();
    record(&ns, &no_state, &[("class", "X")]).await;
    record(
        &ns,
        &nulls,
        &[
            ("state", "failed"),
            ("result", "null"),
            ("p.num", "null"),
            ("p.message", "null"),
            ("attempts", "null"),
        ],
    )
    .await;
    record(
        &ns,
        &wrong,
        &[
            ("state", "failed"),
            ("attempts", "many"),
            ("enqueued_at", "yesterday"),
            ("p.total", "[1]"),
            ("a1.end", "x"),
        ],
    )
    .await;
    let _: () = con
        .hset(
            k.job_record(&wrong),
            b"\xffname".as_slice(),
            b"\xff".as_slice(),
        )
        .await
        .unwrap();
    // resque-status's: no JSON, JSON null, a status of null, wrong types, bytes that are no
    // UTF-8, a key of another type.
    let (s_text, s_null, s_status, s_types, s_bytes, s_hash) =
        (new_id(), new_id(), new_id(), new_id(), new_id(), new_id());
    let _: () = con
        .set(k.resque_status(&s_text), "{not json")
        .await
        .unwrap();
    let _: () = con.set(k.resque_status(&s_null), "null").await.unwrap();
    let _: () = con
        .set(k.resque_status(&s_status), r#"{"status":null}"#)
        .await
        .unwrap();
    let _: () = con
        .set(
            k.resque_status(&s_types),
            r#"{"status":"failed","num":"x","time":"soon","name":5}"#,
        )
        .await
        .unwrap();
    let _: () = con
        .set(
            k.resque_status(&s_bytes),
            b"{\"status\":\"failed\",\"message\":\"\xff\"}".as_slice(),
        )
        .await
        .unwrap();
    let _: () = con.hset(k.resque_status(&s_hash), "a", "b").await.unwrap();
    for (i, id) in [&good, &list, &text, &bad_state, &no_state, &nulls, &wrong]
        .into_iter()
        .enumerate()
    {
        let _: () = con.zadd(k.job_state("failed"), id, i + 1).await.unwrap();
        let _: () = con.zadd(k.job_tag("t"), id, i + 1).await.unwrap();
    }
    for (i, id) in [&s_text, &s_null, &s_status, &s_types, &s_bytes, &s_hash]
        .into_iter()
        .enumerate()
    {
        let _: () = con.zadd(k.resque_statuses(), id, i + 1).await.unwrap();
    }
    // A queued job whose record is a string, and one whose record has no state.
    let _: () = con
        .rpush(
            k.queue("q"),
            &[payload("A", &text), payload("A", &no_state)],
        )
        .await
        .unwrap();
    let _: () = con.sadd(k.queues(), "q").await.unwrap();

    let a = admin(&ns).await;
    let failed = a.jobs(&state(State::Failed), 0, 50).await.unwrap();
    assert_eq!(
        ids(&failed),
        [
            wrong.clone(),
            nulls.clone(),
            good.clone(),
            s_bytes.clone(),
            s_types.clone()
        ]
    );
    let w = &failed.jobs[0];
    let mut bad: Vec<&str> = w.unreadable.iter().map(|b| b.field.as_str()).collect();
    bad.sort();
    assert_eq!(bad, ["a1.end", "attempts", "enqueued_at", "p.total"]);
    let n = &failed.jobs[1];
    assert_eq!((n.num, n.message.as_deref(), n.attempts), (None, None, 0));
    assert_eq!(n.unreadable.len(), 1, "{n:?}");
    let named = failed.unreadable.join("\n");
    for key in [
        k.job_record(&list),
        k.job_record(&text),
        k.job_record(&bad_state),
        k.job_record(&no_state),
        k.resque_status(&s_text),
        k.resque_status(&s_null),
        k.resque_status(&s_status),
        k.resque_status(&s_hash),
    ] {
        assert!(named.contains(&key), "{key} not named:\n{named}");
    }
    assert!(named.contains("holds a list, not a record"), "{named}");
    assert!(
        named.contains("holds a hash, not a resque-status record"),
        "{named}"
    );
    // Every other listing goes on too.
    for f in [
        JobFilter::default(),
        JobFilter {
            tag: Some("t".into()),
            ..Default::default()
        },
        state(State::Queued),
        state(State::Killed),
    ] {
        let p = a.jobs(&f, 0, 50).await.unwrap();
        assert!(!p.unreadable.is_empty(), "{f:?}: {p:?}");
    }
    let queued = a.jobs(&state(State::Queued), 0, 50).await.unwrap();
    assert_eq!(ids(&queued), [no_state.as_str()], "listed where it is");

    // One job: its key named; a record it can read, read as far as it goes.
    let c = client(&ns).await;
    for (id, key) in [
        (&list, k.job_record(&list)),
        (&text, k.job_record(&text)),
        (&s_text, k.resque_status(&s_text)),
        (&s_null, k.resque_status(&s_null)),
        (&s_hash, k.resque_status(&s_hash)),
    ] {
        let id: JobId = id.parse().unwrap();
        let e = a.job(&id).await.unwrap_err().to_string();
        assert!(e.contains(&key), "{e}");
        let e = c
            .wait(&id, Duration::from_millis(100))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(&key), "{e}");
        let e = c.cancel(&id).await.unwrap_err().to_string();
        assert!(e.contains(&key), "{e}");
    }
    let id: JobId = bad_state.parse().unwrap();
    let s = a.job(&id).await.unwrap().unwrap();
    assert!(!s.state_readable());
    let s = c
        .wait(&id, Duration::from_millis(100))
        .await
        .unwrap()
        .unwrap();
    assert!(!s.state.is_final());
    // A record whose state cannot be read has not finished: cancel goes on.
    assert_eq!(
        c.cancel(&id).await.unwrap(),
        resq::jobs::Cancelled::Cancelled
    );
    let id: JobId = nulls.parse().unwrap();
    assert_eq!(
        c.wait(&id, Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap()
            .state,
        State::Failed
    );
}

#[tokio::test]
async fn a_working_record_whose_worker_is_gone_reads_failed() {
    let ns = support::namespace("jl-gone");
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let (gone, here, held) = (new_id(), new_id(), new_id());
    let (w_gone, w_here) = ("h~resq:9-0:q", "h~resq:9-1:q");
    for (id, w) in [(&gone, w_gone), (&here, w_here), (&held, "h~resq:9-2:q")] {
        record(
            &ns,
            id,
            &[("state", "working"), ("worker", w), ("tags", "t")],
        )
        .await;
        let _: () = con.zadd(k.job_tag("t"), id, 1).await.unwrap();
    }
    let _: () = con.sadd(k.workers(), w_here).await.unwrap();
    // Not registered, but its worker record still holds the job: there.
    let _: () = con
        .set(
            k.worker("h~resq:9-2:q"),
            format!(
                r#"{{"queue":"q","run_at":"x","payload":{}}}"#,
                payload("A", &held)
            ),
        )
        .await
        .unwrap();
    let a = admin(&ns).await;
    let c = client(&ns).await;
    let gone_id: JobId = gone.parse().unwrap();
    let s = a.job(&gone_id).await.unwrap().unwrap();
    assert_eq!((s.state, s.status.as_str()), (State::Failed, "failed"));
    assert!(s.error.as_deref().unwrap().contains(w_gone), "{s:?}");
    let done = c
        .wait(&gone_id, Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.state, State::Failed);
    // Nobody runs it: a cancel leaves it as it reads.
    assert_eq!(
        c.cancel(&gone_id).await.unwrap(),
        resq::jobs::Cancelled::Finished(State::Failed)
    );
    for id in [&here, &held] {
        let s = a.job(&id.parse().unwrap()).await.unwrap().unwrap();
        assert_eq!(s.state, State::Working, "{id}");
    }
    let tagged = a
        .jobs(
            &JobFilter {
                tag: Some("t".into()),
                state: Some(State::Failed),
                ..Default::default()
            },
            0,
            10,
        )
        .await
        .unwrap();
    assert_eq!(ids(&tagged), [gone.as_str()]);
    // A wait on a job whose worker leaves (as Ruby's pruner unregisters it) ends then, told by
    // Redis, not at its timeout.
    let here_id: JobId = here.parse().unwrap();
    let waiter = {
        let c = c.clone();
        let id = here_id.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            (c.wait(&id, Duration::from_secs(20)).await, t.elapsed())
        })
    };
    support::eventually(10, "the waiter to watch", || async {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut support::con().await)
            .await
            .ok()?;
        list.contains("flags=t").then_some(())
    })
    .await;
    let _: () = con.srem(k.workers(), w_here).await.unwrap();
    let (r, took) = waiter.await.unwrap();
    assert_eq!(r.unwrap().unwrap().state, State::Failed);
    assert!(took < Duration::from_secs(10), "{took:?}");
    // The record itself still says working.
    let st: String = con.hget(k.job_record(&here), "state").await.unwrap();
    assert_eq!(st, "working");
}

/// What the build before the hash records (41dbe29) wrote for a job enqueued with tracking and
/// not yet run: its record in resque-status's JSON under `<ns>:status:<id>` (with a `resq`
/// member), the id in `_statuses` and the payload with `resq_id` (bytes as that build's
/// `Client::enqueue_class_tracked` wrote them, times aside).
async fn earlier_build_job(ns: &str, id: &str, arg: &str) {
    let k = Keys::new(ns);
    let mut con = support::con().await;
    let record = format!(
        r#"{{"time":1795813641,"status":"queued","uuid":"{id}","options":{{}},"resq":{{"state":"queued","queue":"default","class":"Echo","attempts":0,"enqueued_at":1795813641749,"history":[{{"event":"enqueued","at":1795813641749}}]}}}}"#
    );
    let _: () = con.set(k.resque_status(id), record).await.unwrap();
    let _: () = con.zadd(k.resque_statuses(), id, 1795813641).await.unwrap();
    let _: () = con.sadd(k.queues(), "default").await.unwrap();
    let _: () = con
        .rpush(
            k.queue("default"),
            format!(r#"{{"class":"Echo","args":["{arg}"],"resq_id":"{id}"}}"#),
        )
        .await
        .unwrap();
}

/// A rolling upgrade: jobs an earlier build enqueued with tracking (its records in
/// resque-status's JSON) run under this build and their records follow them there — one ends
/// completed (`wait` returns), one cancelled before it ran never runs.
#[tokio::test]
async fn jobs_an_earlier_build_tracked_run_and_end_in_their_records() {
    let ns = support::namespace("jl-upgrade");
    let (run, cancelled) = (new_id(), new_id());
    earlier_build_job(&ns, &run, "runs").await;
    earlier_build_job(&ns, &cancelled, "cancelled").await;
    let c = client(&ns).await;
    let cancelled_id: JobId = cancelled.parse().unwrap();
    c.cancel(&cancelled_id).await.unwrap();
    let ran = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let r = ran.clone();
    let registry = resq::Registry::new().handler("Echo", move |ctx: resq::JobContext| {
        let r = r.clone();
        async move {
            r.lock().unwrap().push(ctx.arg::<String>(0)?);
            Ok(())
        }
    });
    let w = support::start(support::builder(&ns, "default").registry(registry)).await;
    let run_id: JobId = run.parse().unwrap();
    let done = c
        .wait(&run_id, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the earlier build's job ended");
    assert_eq!(done.state, State::Completed, "{done:?}");
    support::eventually(10, "the queue emptied", || async {
        let n: u64 = support::con()
            .await
            .llen(Keys::new(&ns).queue("default"))
            .await
            .unwrap();
        (n == 0).then_some(())
    })
    .await;
    support::stop(w).await;
    assert_eq!(
        *ran.lock().unwrap(),
        ["runs"],
        "the cancelled job never ran"
    );
    let a = admin(&ns).await;
    let s = a.job(&cancelled_id).await.unwrap().unwrap();
    assert_eq!(s.state, State::Killed, "{s:?}");
}

/// A registry whose `Once` fails its first run and succeeds after, and whose `Echo` succeeds.
fn once_registry() -> resq::Registry {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    resq::Registry::new()
        .handler("Echo", |_ctx: resq::JobContext| async move { Ok(()) })
        .handler("Once", move |_ctx: resq::JobContext| {
            let runs = runs.clone();
            async move {
                if runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                    Err(resq::JobError::msg("first time"))
                } else {
                    Ok(())
                }
            }
        })
}

/// An attempt count too large for Lua's number text (from 10^14) still moves with its job:
/// the record ends completed with the next count in digits. (It was written `1e+15`, the
/// worker could not read its start, and the record said working for good.)
#[tokio::test]
async fn a_huge_attempt_count_still_ends_with_its_job() {
    let ns = support::namespace("jl-attempts");
    let k = Keys::new(&ns);
    let c = client(&ns).await;
    let id = c
        .enqueue_class_tracked("default", "Echo", &[], resq::jobs::Track::new())
        .await
        .unwrap();
    let _: () = support::con()
        .await
        .hset(k.job_record(id.as_str()), "attempts", "99999999999999")
        .await
        .unwrap();
    let w = support::start(support::builder(&ns, "default").registry(once_registry())).await;
    let s = c.wait(&id, Duration::from_secs(10)).await.unwrap().unwrap();
    support::stop(w).await;
    assert_eq!(s.state, State::Completed, "{s:?}");
    let n: String = support::con()
        .await
        .hget(k.job_record(id.as_str()), "attempts")
        .await
        .unwrap();
    assert_eq!(n, "100000000000000");
}

/// A record whose state cannot be read ends a wait at once (no change would end it), and a
/// record without its state is cancelled as a job that has not started.
#[tokio::test]
async fn a_record_without_a_readable_state_ends_a_wait_and_can_be_cancelled() {
    let ns = support::namespace("jl-nostate");
    let k = Keys::new(&ns);
    let c = client(&ns).await;
    let (a, b) = (
        c.enqueue_class_tracked("idle", "Echo", &[], resq::jobs::Track::new())
            .await
            .unwrap(),
        c.enqueue_class_tracked("idle", "Echo", &[], resq::jobs::Track::new())
            .await
            .unwrap(),
    );
    let mut con = support::con().await;
    let _: () = con
        .hset(k.job_record(a.as_str()), "state", "zzz")
        .await
        .unwrap();
    let _: () = con.hdel(k.job_record(b.as_str()), "state").await.unwrap();
    let started = Instant::now();
    let s = c.wait(&a, Duration::from_secs(10)).await.unwrap().unwrap();
    assert!(!s.state_readable(), "{s:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        c.cancel(&b).await.unwrap(),
        resq::jobs::Cancelled::Cancelled
    );
    let st: String = con.hget(k.job_record(b.as_str()), "state").await.unwrap();
    assert_eq!(st, "cancelled");
}

/// `jobs purge` goes on past a tag index of another type (warned, naming it): the records
/// behind it are purged. (One such index refused every batch it was in, and nothing behind it
/// was ever purged.)
#[tokio::test]
async fn purge_goes_on_past_a_tag_index_of_another_type() {
    let ns = support::namespace("jl-purgetag");
    let k = Keys::new(&ns);
    let c = client(&ns).await;
    let (a, b) = (
        c.enqueue_class_tracked("default", "Echo", &[], resq::jobs::Track::new().tag("t1"))
            .await
            .unwrap(),
        c.enqueue_class_tracked("default", "Echo", &[], resq::jobs::Track::new().tag("t2"))
            .await
            .unwrap(),
    );
    let w = support::start(support::builder(&ns, "default").registry(once_registry())).await;
    for id in [&a, &b] {
        let s = c.wait(id, Duration::from_secs(10)).await.unwrap().unwrap();
        assert_eq!(s.state, State::Completed);
    }
    support::stop(w).await;
    let mut con = support::con().await;
    let _: () = con.del(k.job_tag("t2")).await.unwrap();
    let _: () = con.set(k.job_tag("t2"), "x").await.unwrap();
    let n = admin(&ns)
        .await
        .purge_jobs(None, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(n, 2);
    for id in [&a, &b] {
        let gone: bool = con.exists(k.job_record(id.as_str())).await.unwrap();
        assert!(!gone, "{id} purged");
    }
}

/// A failure entry retried twice runs its tracked job once: the second retry finds the record
/// queued again and is refused. The retried job has its job key back.
#[tokio::test]
async fn a_failure_retried_twice_runs_its_tracked_job_once_with_its_key() {
    let ns = support::namespace("jl-retry2");
    let k = Keys::new(&ns);
    let c = client(&ns).await;
    let id = c
        .enqueue_class_tracked("default", "Once", &[], resq::jobs::Track::new().key("k1"))
        .await
        .unwrap();
    let w = support::start(support::builder(&ns, "default").registry(once_registry())).await;
    let s = c.wait(&id, Duration::from_secs(10)).await.unwrap().unwrap();
    assert_eq!(s.state, State::Failed);
    support::stop(w).await;
    let a = admin(&ns).await;
    let sel = resq::admin::Selector::Index(0);
    assert_eq!(a.retry_failures(&sel).await.unwrap().done, 1);
    let again = a.retry_failures(&sel).await.unwrap();
    assert_eq!(again.done, 0, "{again:?}");
    assert!(again.skipped[0].contains("not retried"), "{again:?}");
    let mut con = support::con().await;
    let queued: usize = con.llen(k.queue("default")).await.unwrap();
    assert_eq!(queued, 1, "one copy queued");
    let key: Option<String> = con.get(k.job_key("k1")).await.unwrap();
    assert_eq!(
        key.as_deref(),
        Some(id.as_str()),
        "its job key is its again"
    );
}
