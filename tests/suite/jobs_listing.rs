//! Listing tracked jobs against a real Redis (issue 28): where each state is read from (the
//! queues, the limits' held sets, the delayed set, the workers' records, the final indexes,
//! resque-status's `_statuses`), paging past any depth with a position, and a failure retried
//! from the failure list ending completed. Bad records and gone workers: `jobs_records.rs`.

use crate::support;

use redis::AsyncCommands;
use resq::admin::{Admin, Selector};
use resq::jobs::{JobFilter, JobId, JobPage, JobPosition, State, Track};
use resq::{Client, JobContext, JobError, Registry};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
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
    // Held as resq holds: in the set, and the set in the index of held sets.
    let _: () = redis::pipe()
        .zadd(k.limit_held("lim", None), &member, 99e13)
        .zadd(k.held_sets(), k.limit_held("lim", None), 0)
        .query_async(&mut con)
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
