//! Listing tracked jobs against a real Redis (issue 28): where each state is read from (the
//! queues, the limits' held sets, the delayed set, the workers' records, the final indexes,
//! resque-status's `_statuses`), paging past any depth with a position, records of every bad
//! shape never blinding a listing, a show, a wait or a cancel, a working record whose worker is
//! gone reading failed, and a failure retried from the failure list ending completed.

mod support;

use redis::AsyncCommands;
use resq::admin::{Admin, Selector};
use resq::jobs::{JobFilter, JobId, JobPage, JobPosition, State, Track};
use resq::{Client, JobContext, JobError, Keys, Registry};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
async fn each_state_is_read_where_its_jobs_are() {
    let ns = support::namespace("jl-where");
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    // Queued in two queues (and one cancelled still in its queue), one held by a limit, two
    // in the delayed set (scheduled, retrying), one retry due now back in its queue, one on a
    // worker, a resque-status job in a queue, and untracked jobs everywhere.
    let (qa, qb, held, sched, retry, retry_now, working, cancelled, statused) = (
        new_id(),
        new_id(),
        new_id(),
        new_id(),
        new_id(),
        new_id(),
        new_id(),
        new_id(),
        new_id(),
    );
    for (id, st, q) in [
        (&qa, "queued", "a"),
        (&qb, "queued", "b"),
        (&held, "queued", "lim"),
        (&sched, "scheduled", "a"),
        (&retry, "retrying", "a"),
        (&retry_now, "retrying", "b"),
        (&working, "working", "a"),
        (&cancelled, "cancelled", "a"),
    ] {
        record(&ns, id, &[("state", st), ("class", "Job"), ("queue", q)]).await;
    }
    let plain = r#"{"class":"Plain","args":[]}"#.to_string();
    let status = format!(r#"{{"class":"Stat","args":["{statused}",{{}}]}}"#);
    let _: () = con
        .set(
            k.resque_status(&statused),
            format!(r#"{{"time":1,"status":"queued","uuid":"{statused}"}}"#),
        )
        .await
        .unwrap();
    let _: () = con
        .rpush(
            k.queue("a"),
            &[
                plain.clone(),
                payload("Job", &qa),
                payload("Job", &cancelled),
            ],
        )
        .await
        .unwrap();
    let _: () = con
        .rpush(
            k.queue("b"),
            &[
                payload("Job", &qb),
                plain.clone(),
                status.clone(),
                payload("Job", &retry_now),
            ],
        )
        .await
        .unwrap();
    let _: () = con.sadd(k.queues(), &["a", "b"]).await.unwrap();
    let _: () = con
        .hset(
            k.limits_declared(),
            "lim",
            r#"{"name":"lim","kind":"concurrency","limit":1}"#,
        )
        .await
        .unwrap();
    let member = format!("1\tlim\t1\tlim\t{}", payload("Job", &held));
    let _: () = con
        .zadd(k.limit_held("lim", None), &member, 99e13)
        .await
        .unwrap();
    let item = |id: &str| format!(r#"{{"class":"Job","args":[1],"queue":"a","resq_id":"{id}"}}"#);
    for (ts, it) in [
        (1_900_000_000i64, item(&sched)),
        (1_900_000_100, item(&retry)),
    ] {
        let _: () = con.rpush(k.delayed_bucket(ts), &it).await.unwrap();
        let _: () = con.zadd(k.delayed_schedule(), ts, ts).await.unwrap();
    }
    let _: () = con
        .rpush(k.delayed_bucket(1_900_000_000), &plain)
        .await
        .unwrap();
    let worker = "host~resq:1-0:a";
    let _: () = con.sadd(k.workers(), worker).await.unwrap();
    // A Ruby worker runs a job of resq's: its record still says queued; where it is says working.
    let (ruby, on_ruby) = ("ruby-host:77:a", new_id());
    record(
        &ns,
        &on_ruby,
        &[("state", "queued"), ("class", "Job"), ("queue", "a")],
    )
    .await;
    let _: () = con.sadd(k.workers(), ruby).await.unwrap();
    let _: () = con
        .set(
            k.worker(ruby),
            format!(
                r#"{{"queue":"a","run_at":"2026-11-27T10:00:00Z","payload":{}}}"#,
                payload("Job", &on_ruby)
            ),
        )
        .await
        .unwrap();
    let _: () = con
        .set(
            k.worker(worker),
            format!(
                r#"{{"queue":"a","run_at":"2026-11-27T10:00:00Z","payload":{}}}"#,
                payload("Job", &working)
            ),
        )
        .await
        .unwrap();
    record(&ns, &working, &[("worker", worker)]).await;
    let _: () = con
        .zadd(k.job_state("cancelled"), &cancelled, 1)
        .await
        .unwrap();
    let _: () = con.zadd(k.resque_statuses(), &statused, 1).await.unwrap();

    let a = admin(&ns).await;
    let list = |f: JobFilter| {
        let a = a.clone();
        async move { a.jobs(&f, 0, 50).await.unwrap() }
    };
    // Queues by name, each newest first; then the held sets.
    let q = list(state(State::Queued)).await;
    assert_eq!(
        ids(&q),
        [qa.clone(), statused.clone(), qb.clone(), held.clone()]
    );
    assert!(q.jobs.iter().all(|j| j.state == State::Queued));
    assert_eq!(q.jobs[1].queue.as_deref(), Some("b"), "where it is");
    assert!(q.jobs[1].statused && q.jobs[1].class.as_deref() == Some("Stat"));
    assert_eq!(ids(&list(state(State::Scheduled)).await), [sched.as_str()]);
    assert_eq!(
        ids(&list(state(State::Retrying)).await),
        [retry.clone(), retry_now.clone()]
    );
    let w = list(state(State::Working)).await;
    assert_eq!(ids(&w), [working.clone(), on_ruby.clone()]);
    assert_eq!(w.jobs[0].worker.as_deref(), Some(worker));
    assert!(w.jobs.iter().all(|j| j.state == State::Working), "{w:?}");
    assert_eq!(
        ids(&list(state(State::Cancelled)).await),
        [cancelled.as_str()]
    );
    let by_queue = list(JobFilter {
        state: Some(State::Queued),
        queue: Some("b".into()),
        ..Default::default()
    })
    .await;
    assert_eq!(ids(&by_queue), [statused.clone(), qb.clone()]);
    // No filter: resq's own where they are — working, queued (queues, held), the delayed set —
    // and in the indexes, then resque-status's records as `_statuses` lists them; every job
    // once, in pages of two that go on across the sources.
    let want = [
        &working, &on_ruby, &qa, &retry_now, &qb, &held, &sched, &retry, &cancelled, &statused,
    ];
    let all = list(JobFilter::default()).await;
    assert_eq!(ids(&all), want.map(|s| s.to_string()));
    assert!(all.next.is_none() && all.total.is_none());
    let mut seen = Vec::new();
    let mut page = a.jobs(&JobFilter::default(), 0, 2).await.unwrap();
    loop {
        seen.extend(ids(&page));
        let Some(next) = page.next.clone() else { break };
        let text = next.to_string();
        let back: JobPosition = text.parse().unwrap();
        page = a.jobs_from(&JobFilter::default(), &back, 2).await.unwrap();
    }
    assert_eq!(seen, want.map(|s| s.to_string()));
    // A position is the listing's own.
    let err = a
        .jobs_from(&state(State::Failed), &"workers".parse().unwrap(), 2)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not one of this listing's"),
        "{err}"
    );
}

/// Seeds `n` completed records of resq's own in the completed index, the newest last
/// (scores 1..=n); the oldest has class `Rare`. Returns the ids, newest first.
async fn seed_completed(ns: &str, n: usize) -> Vec<String> {
    let k = Keys::new(ns);
    let mut con = support::con().await;
    let ids: Vec<String> = (0..n).map(|_| new_id()).collect();
    for (c, chunk) in ids.chunks(2500).enumerate() {
        let mut p = redis::pipe();
        for (i, id) in chunk.iter().enumerate() {
            let at = c * 2500 + i;
            let class = if at == 0 { "Rare" } else { "Bulk" };
            p.hset_multiple(
                k.job_record(id),
                &[("state", "completed"), ("class", class), ("queue", "bulk")],
            )
            .ignore()
            .zadd(k.job_state("completed"), id, at + 1)
            .ignore();
        }
        let () = p.query_async(&mut con).await.unwrap();
    }
    ids.into_iter().rev().collect()
}

#[tokio::test]
async fn pages_go_on_past_twenty_thousand_entries() {
    let ns = support::namespace("jl-deep");
    let newest_first = seed_completed(&ns, 25_000).await;
    let a = admin(&ns).await;
    let completed = state(State::Completed);
    // Page by page to the end, with entries added on top meanwhile: every job once, in order.
    let mut seen: Vec<String> = Vec::new();
    let mut page = a.jobs(&completed, 0, 4000).await.unwrap();
    assert_eq!(page.total, Some(25_000));
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let mut added = 0;
    loop {
        assert!(!page.truncated);
        seen.extend(ids(&page));
        let Some(next) = page.next.clone() else { break };
        if added < 3 {
            let late = new_id();
            record(&ns, &late, &[("state", "completed")]).await;
            let _: () = con
                .zadd(k.job_state("completed"), &late, 1_000_000 + added)
                .await
                .unwrap();
            added += 1;
        }
        page = a.jobs_from(&completed, &next, 4000).await.unwrap();
    }
    let differ = seen.iter().zip(&newest_first).position(|(a, b)| a != b);
    assert!(
        seen.len() == newest_first.len() && differ.is_none(),
        "{} seen of {}; first difference at {differ:?}",
        seen.len(),
        newest_first.len()
    );
    // A filter that matches only the oldest: the first call stops at its budget and says
    // where to go on; the next finds it.
    let rare = JobFilter {
        state: Some(State::Completed),
        class: Some("Rare".into()),
        ..Default::default()
    };
    let first = a.jobs(&rare, 0, 10).await.unwrap();
    assert!(first.truncated && first.jobs.is_empty(), "{first:?}");
    let next = first.next.clone().expect("a position");
    let second = a.jobs_from(&rare, &next, 10).await.unwrap();
    assert_eq!(ids(&second), [newest_first[24_999].clone()]);
    assert!(second.next.is_none() && !second.truncated);
    // An offset past the budget: the page says where it stopped, and the listing goes on.
    let deep = a.jobs(&completed, 20_500, 10).await.unwrap();
    assert!(deep.truncated && deep.jobs.is_empty());
    let on = a
        .jobs_from(&completed, &deep.next.clone().unwrap(), 10)
        .await
        .unwrap();
    // (3 entries were added on top since: the 20,000 looked at end 3 earlier.)
    assert_eq!(ids(&on), newest_first[19_997..20_007]);
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

#[tokio::test]
async fn a_failure_retried_from_the_failure_list_runs_with_its_id_and_completes() {
    let ns = support::namespace("jl-retry");
    let c = client(&ns).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let registry = Registry::new().handler("Once", {
        let (runs, seen) = (runs.clone(), seen.clone());
        move |ctx: JobContext| {
            let (runs, seen) = (runs.clone(), seen.clone());
            async move {
                seen.lock()
                    .unwrap()
                    .push(ctx.job_id().map(|i| i.to_string()));
                if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                    Err(JobError::msg("first time"))
                } else {
                    Ok(())
                }
            }
        }
    });
    let id = c
        .enqueue_class_tracked("default", "Once", &[], Track::new().tag("r"))
        .await
        .unwrap();
    let w = support::start(support::builder(&ns, "default").registry(registry)).await;
    let failed = c.wait(&id, Duration::from_secs(10)).await.unwrap().unwrap();
    assert_eq!(failed.state, State::Failed);
    let a = admin(&ns).await;
    assert_eq!(
        ids(&a.jobs(&state(State::Failed), 0, 10).await.unwrap()),
        [id.to_string()]
    );
    let out = a.retry_failures(&Selector::All).await.unwrap();
    assert_eq!(out.done, 1, "{out:?}");
    let done = support::eventually(10, "the retried job to complete", || async {
        let s = c.status(&id).await.ok()??;
        (s.state == State::Completed).then_some(s)
    })
    .await;
    support::stop(w).await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(
        *seen.lock().unwrap(),
        [Some(id.to_string()), Some(id.to_string())],
        "both runs had its id"
    );
    assert_eq!(done.attempts, 2);
    let events: Vec<&str> = done.history.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        events,
        ["enqueued", "started", "failed", "started", "completed"]
    );
    // Listed once, where it ended.
    assert!(a
        .jobs(&state(State::Failed), 0, 10)
        .await
        .unwrap()
        .jobs
        .is_empty());
    assert_eq!(
        ids(&a.jobs(&state(State::Completed), 0, 10).await.unwrap()),
        [id.to_string()]
    );
}
