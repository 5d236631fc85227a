//! `resq jobs`, `resq jobs purge` and `resq job show|wait|cancel` (issue 14, operator side):
//! the real `resq` binary against the test binary's own `redis-server`, with jobs enqueued
//! through `resq::Client` and run by an in-process worker. Every command, human and `--json`;
//! going on with `--from`; `job wait`'s exit codes; cancelling queued and running jobs;
//! purging; bad ids. Records that are no records and listings past 20,000 entries:
//! `cli_jobs_records.rs`.

use crate::support;

use redis::AsyncCommands;
use resq::jobs::{JobId, State, Track};
use resq::{Client, JobContext, JobError, Registry};
use serde_json::{json, Value};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::cli::{cmd, json_of, resq, stderr, stdout};
use support::Keys;

fn code(o: &Output) -> i32 {
    o.status.code().expect("an exit code")
}

/// Runs `resq`, which must succeed; its standard output.
async fn ok(ns: &str, args: &[&str]) -> String {
    stdout(&support::cli::ok(ns, args).await)
}

async fn client(ns: &str) -> Client {
    Client::connect(&support::url(), ns).await.expect("client")
}

/// Handlers: `Report` (progress and a result), `Doomed` (fails), `Never` (counts its runs),
/// `Long` (runs until cancelled, reporting progress).
fn registry(never_ran: Arc<AtomicUsize>) -> Registry {
    Registry::new()
        .handler("Report", |ctx: JobContext| async move {
            let n: u64 = ctx.arg(0)?;
            ctx.progress(1, 2, "half way").await?;
            ctx.set_result(&json!({"rows": n, "note": "<b>&</b>"}))?;
            Ok(())
        })
        .handler("Doomed", |_ctx: JobContext| async {
            Err(JobError::msg("always <fails>"))
        })
        .handler("Never", move |_ctx: JobContext| {
            let r = never_ran.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .handler("Long", |ctx: JobContext| async move {
            for i in 0..1200u64 {
                ctx.progress(i, 1200, "working").await?;
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    _ = ctx.cancelled() => return Err(ctx.killed()),
                }
            }
            Ok(())
        })
}

async fn wait_final(c: &Client, id: &JobId) -> resq::jobs::JobStatus {
    let s = c
        .wait(id, Duration::from_secs(15))
        .await
        .expect("wait")
        .expect("a record");
    assert!(s.state.is_final(), "not finished in time: {s:?}");
    s
}

/// A namespace with one job of each kind: completed (tagged), failed, queued (on a queue no
/// worker reads) and cancelled.
struct Seeded {
    ns: String,
    completed: JobId,
    failed: JobId,
    queued: JobId,
    cancelled: JobId,
}

async fn seed(prefix: &str) -> Seeded {
    let ns = support::namespace(prefix);
    let c = client(&ns).await;
    let completed = c
        .enqueue_class_tracked(
            "default",
            "Report",
            &[json!(7)],
            Track::new().tag("nightly").tag("eu"),
        )
        .await
        .unwrap();
    let failed = c
        .enqueue_class_tracked("default", "Doomed", &[], Track::new())
        .await
        .unwrap();
    let cancelled = c
        .enqueue_class_tracked("default", "Never", &[], Track::new())
        .await
        .unwrap();
    c.cancel(&cancelled).await.unwrap();
    let never = Arc::new(AtomicUsize::new(0));
    let w =
        support::start(support::builder(&ns, "default").registry(registry(never.clone()))).await;
    wait_final(&c, &completed).await;
    wait_final(&c, &failed).await;
    support::stop(w).await;
    assert_eq!(never.load(Ordering::SeqCst), 0, "a cancelled job ran");
    let queued = c
        .enqueue_class_tracked("later", "Report", &[json!(1)], Track::new())
        .await
        .unwrap();
    Seeded {
        ns,
        completed,
        failed,
        queued,
        cancelled,
    }
}

/// The ids listed in `jobs` output (lines starting with an id).
fn listed(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| JobId::parse(w).is_some())
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn jobs_lists_with_counts_filters_and_json() {
    let s = seed("cjlist").await;
    let ns = s.ns.as_str();
    let out = ok(ns, &["jobs"]).await;
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("jobs: 1 queued · 0 scheduled · 0 waiting · 0 working · 1 completed · 1 failed · 0 killed · 1 cancelled"),
        "{out}"
    );
    let header = lines.next().unwrap_or_default();
    for col in [
        "ID", "STATE", "CLASS", "QUEUE", "PROGRESS", "ATTEMPTS", "AGE", "FINISHED", "MESSAGE",
    ] {
        assert!(header.contains(col), "{header}");
    }
    // Every job once, in the listing's order: where jobs are (the queued one), then the
    // finished states.
    let want: Vec<String> = [&s.queued, &s.completed, &s.failed, &s.cancelled]
        .iter()
        .map(|i| i.to_string())
        .collect();
    assert_eq!(listed(&out), want, "{out}");
    let row = |id: &JobId| {
        out.lines()
            .find(|l| l.starts_with(id.as_str()))
            .unwrap_or_else(|| panic!("{id} not listed:\n{out}"))
            .to_string()
    };
    let done = row(&s.completed);
    for want in ["completed", "Report", "default", "100%", "half way"] {
        assert!(done.contains(want), "{want:?} not in {done:?}");
    }
    let failed = row(&s.failed);
    assert!(
        failed.contains("failed") && failed.contains("always <fails>"),
        "{failed}"
    );
    assert!(row(&s.cancelled).contains("cancelled"));
    assert!(row(&s.queued).contains("later"));
    assert!(out.contains("\n(4 shown; the end)"), "{out}");

    // Each filter narrows the list.
    for (args, want) in [
        (&["--state", "completed"][..], &s.completed),
        (&["--tag", "eu"], &s.completed),
        (&["--queue", "later"], &s.queued),
        (&["--class", "Doomed"], &s.failed),
        (&["--state", "cancelled", "--class", "Never"], &s.cancelled),
    ] {
        let mut a = vec!["jobs"];
        a.extend_from_slice(args);
        let out = ok(ns, &a).await;
        assert_eq!(listed(&out), [want.to_string()], "{args:?}: {out}");
    }
    let none = ok(ns, &["jobs", "--state", "working"]).await;
    assert!(listed(&none).is_empty(), "{none}");
    // Paging: --limit and --offset over matches, then on from where a page ended.
    let page = ok(ns, &["jobs", "--limit", "2", "--offset", "1"]).await;
    let all = listed(&out);
    assert_eq!(listed(&page), all[1..3], "{page}");
    let from = page
        .split("next: --from ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or_else(|| panic!("no next: {page}"))
        .to_string();
    let rest = ok(ns, &["jobs", "--limit", "2", "--from", &from]).await;
    assert_eq!(listed(&rest), all[3..], "{rest}");
    assert!(rest.contains("(1 shown; the end)"), "{rest}");
    let v = json_of(ns, &["jobs", "--limit", "2", "--offset", "1"]).await;
    assert_eq!(v["next"], from.as_str(), "{v}");

    // --json: the page.
    let v = json_of(ns, &["jobs"]).await;
    assert_eq!(v["total"], Value::Null, "{v}");
    assert_eq!(v["next"], Value::Null, "{v}");
    assert_eq!(v["truncated"], false);
    assert_eq!(v["unreadable"], json!([]));
    let one = json_of(ns, &["jobs", "--state", "completed"]).await;
    assert_eq!(one["total"], 1, "{one}");
    let jobs = v["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 4);
    assert_eq!(
        jobs[0]["id"],
        all[0].as_str(),
        "the same order as the table"
    );
    let done = jobs
        .iter()
        .find(|j| j["id"] == s.completed.as_str())
        .expect("completed job");
    assert_eq!(done["state"], "completed");
    assert_eq!(done["result"], json!({"rows": 7, "note": "<b>&</b>"}));
    assert_eq!(done["tags"], json!(["nightly", "eu"]));
    let v = json_of(ns, &["jobs", "--state", "failed"]).await;
    assert_eq!(v["jobs"][0]["error"], "always <fails>", "{v}");

    // A bad state is refused by name.
    let out = resq(ns, &["jobs", "--state", "lost"]).await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--state"), "{}", stderr(&out));
}

#[tokio::test]
async fn a_closed_pipe_ends_the_listing_quietly() {
    // `resq jobs | head -1`: the reader is gone when resq writes.
    let s = seed("cjpipe").await;
    let mut c = cmd(&s.ns, &["jobs"]);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = tokio::task::spawn_blocking(move || {
        let mut child = c.spawn().expect("spawn");
        // Gone before resq's first line, which comes after it has asked Redis.
        drop(child.stdout.take());
        child.wait_with_output().expect("wait")
    })
    .await
    .unwrap();
    assert_eq!(code(&out), 141, "{}", stderr(&out));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

#[tokio::test]
async fn job_show_prints_the_whole_record() {
    let s = seed("cjshow").await;
    let ns = s.ns.as_str();
    let out = ok(ns, &["job", "show", s.completed.as_str()]).await;
    let field = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} line:\n{out}"))
            .split_at(13)
            .1
            .to_string()
    };
    assert_eq!(field("id"), s.completed.as_str());
    assert_eq!(field("state"), "completed");
    assert_eq!(field("status"), "completed (resque-status)");
    // A job tracked through the client (not statused) is named by its class; its message is
    // its last progress message.
    assert_eq!(field("name"), "Report");
    assert_eq!(field("message"), "half way");
    assert_eq!(field("progress"), "100% (1 of 2)");
    assert_eq!(field("class"), "Report");
    assert_eq!(field("queue"), "default");
    assert!(field("worker").contains(":"), "{out}");
    assert_eq!(field("attempts"), "1");
    assert_eq!(field("tags"), "nightly, eu");
    assert_eq!(field("job key"), "-");
    assert_eq!(
        field("record"),
        format!(
            "{} (resq's own record, a hash)",
            Keys::new(ns).job_record(s.completed.as_str())
        )
    );
    assert_eq!(field("stop asked"), "-");
    assert_eq!(field("due"), "-");
    for t in ["created", "enqueued", "started", "finished"] {
        assert!(field(t).ends_with(" ago)"), "{t}: {out}");
    }
    assert!(
        out.contains("result       {\n               \"rows\": 7,\n"),
        "{out}"
    );
    assert!(out.contains("\"note\": \"<b>&</b>\""), "{out}");
    let history: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "history")
        .skip(1)
        .collect();
    assert_eq!(history.len(), 3, "{out}");
    for (line, event) in history.iter().zip(["enqueued", "started", "completed"]) {
        assert!(line.contains(" UTC  ") && line.contains(event), "{line}");
    }
    assert!(history[1].contains("worker="), "{out}");

    let failed = ok(ns, &["job", "show", s.failed.as_str()]).await;
    assert!(failed.contains("error        always <fails>"), "{failed}");
    // A resque-status job: its record is resque-status's.
    let st = client(ns)
        .await
        .create_status_class("statused", "Stat", serde_json::Map::new(), Track::new())
        .await
        .unwrap();
    let shown = ok(ns, &["job", "show", st.as_str()]).await;
    assert!(
        shown.contains(&format!(
            "record       {} (resque-status's record, a JSON text)",
            Keys::new(ns).resque_status(st.as_str())
        )),
        "{shown}"
    );
    assert!(shown.contains("state        queued\n"), "{shown}");
    // --json: the JobStatus.
    let v = json_of(ns, &["job", "show", s.completed.as_str()]).await;
    assert_eq!(v["id"], s.completed.as_str());
    assert_eq!(v["state"], "completed");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["pct_complete"], 100.0);
    assert_eq!(v["attempts"], 1);
    assert_eq!(v["result"]["rows"], 7);
    let events: Vec<&str> = v["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["enqueued", "started", "completed"]);
    assert!(v["history"][0]["at"].is_string(), "{v}");

    // Unknown and malformed ids.
    let unknown = JobId::new();
    let out = resq(ns, &["job", "show", unknown.as_str()]).await;
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains(&format!("no tracked job {unknown}")),
        "{}",
        stderr(&out)
    );
    for bad in ["nope", "BA69034B39C05D28A5403AC10E276E79", ""] {
        let out = resq(ns, &["job", "show", bad]).await;
        assert_eq!(code(&out), 1, "{bad:?}");
        assert!(
            stderr(&out).contains(&format!(
                "error: ID: {bad:?} is not a job id (32 lowercase hex characters)"
            )),
            "{bad:?}: {}",
            stderr(&out)
        );
    }
}

#[tokio::test]
async fn job_wait_exit_codes_say_how_the_job_ended() {
    let s = seed("cjwait").await;
    let ns = s.ns.as_str();
    let out = resq(ns, &["job", "wait", s.completed.as_str()]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "completed\nresult: {\"rows\":7,\"note\":\"<b>&</b>\"}\n"
    );
    let out = resq(ns, &["job", "wait", s.failed.as_str()]).await;
    assert_eq!(code(&out), 1);
    assert_eq!(stdout(&out), "failed: always <fails>\n");
    let out = resq(ns, &["job", "wait", s.cancelled.as_str()]).await;
    assert_eq!(code(&out), 1);
    assert!(
        stdout(&out).starts_with("cancelled at 20") && stdout(&out).ends_with(" UTC\n"),
        "{}",
        stdout(&out)
    );
    // Not finished by the timeout.
    let out = resq(ns, &["job", "wait", s.queued.as_str(), "--timeout", "0.2"]).await;
    assert_eq!(code(&out), 2);
    assert_eq!(stdout(&out), "still queued after 200ms (not finished)\n");
    let out = resq(
        ns,
        &["--json", "job", "wait", s.queued.as_str(), "--timeout", "0"],
    )
    .await;
    assert_eq!(code(&out), 2);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["state"], "queued");
    // No such job.
    let out = resq(ns, &["job", "wait", JobId::new().as_str()]).await;
    assert_eq!(code(&out), 3);
    assert!(stderr(&out).contains("no tracked job"), "{}", stderr(&out));
    // Could not wait: a malformed id or timeout, or Redis unreachable.
    let out = resq(ns, &["job", "wait", "xyz"]).await;
    assert_eq!(code(&out), 4);
    assert!(stderr(&out).contains("error: ID: \"xyz\" is not a job id"));
    for t in ["soon", "-1", "31d"] {
        let flag = format!("--timeout={t}");
        let out = resq(ns, &["job", "wait", s.queued.as_str(), &flag]).await;
        assert_eq!(code(&out), 4, "{t}");
        assert!(stderr(&out).contains("--timeout"), "{t}: {}", stderr(&out));
    }
    // Also when the value is its own argument: a value, not an unknown option (which clap
    // would end with 2, "not finished").
    let out = resq(ns, &["job", "wait", s.queued.as_str(), "--timeout", "-1"]).await;
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    let mut c = Command::new(support::resq_bin());
    c.args([
        "--url",
        &format!("redis://127.0.0.1:{}", support::free_port()),
    ])
    .args(["--namespace", ns, "job", "wait", s.queued.as_str()])
    .env_remove("REDIS_URL")
    .env_remove("RESQUE_NAMESPACE");
    let out = tokio::task::spawn_blocking(move || c.output().unwrap())
        .await
        .unwrap();
    assert_eq!(code(&out), 4, "{}", stderr(&out));

    // A real wait: the job finishes while `resq job wait` waits.
    let mut waiting = cmd(
        ns,
        &[
            "--json",
            "job",
            "wait",
            s.queued.as_str(),
            "--timeout",
            "30",
        ],
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawn");
    let c = client(ns).await;
    // The waiter is up (its connection is registered) before the job can run.
    support::eventually(10, "the waiter to connect", || async {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut support::con().await)
            .await
            .ok()?;
        list.contains("flags=t").then_some(())
    })
    .await;
    assert!(
        matches!(waiting.try_wait(), Ok(None)),
        "the waiter ended before the job ran"
    );
    let w = support::start(
        support::builder(ns, "later").registry(registry(Arc::new(AtomicUsize::new(0)))),
    )
    .await;
    let out = tokio::task::spawn_blocking(move || waiting.wait_with_output().unwrap())
        .await
        .unwrap();
    support::stop(w).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["state"], "completed");
    assert_eq!(v["result"]["rows"], 1);
    assert_eq!(
        c.status(&s.queued).await.unwrap().unwrap().state,
        State::Completed
    );
}

#[tokio::test]
async fn job_cancel_stops_queued_and_running_jobs() {
    let ns = support::namespace("cjcancel");
    let ns = ns.as_str();
    let c = client(ns).await;
    let queued = c
        .enqueue_class_tracked("default", "Never", &[], Track::new())
        .await
        .unwrap();
    let out = ok(ns, &["job", "cancel", queued.as_str()]).await;
    assert_eq!(
        out,
        format!("cancelled {queued}: it had not started and will never run\n")
    );
    assert_eq!(
        c.status(&queued).await.unwrap().unwrap().state,
        State::Cancelled
    );
    let long = c
        .enqueue_class_tracked("default", "Long", &[], Track::new())
        .await
        .unwrap();
    let never = Arc::new(AtomicUsize::new(0));
    let w = support::start(support::builder(ns, "default").registry(registry(never.clone()))).await;
    support::eventually(10, "the long job working", || async {
        (c.status(&long).await.ok()??.state == State::Working).then_some(())
    })
    .await;
    let v = json_of(ns, &["job", "cancel", long.as_str()]).await;
    assert_eq!(
        v,
        json!({
            "id": long.as_str(), "outcome": "stopping", "state": "working",
            "settling": {"ends": 0, "jobs": 0}
        })
    );
    let killed = wait_final(&c, &long).await;
    support::stop(w).await;
    assert_eq!(killed.state, State::Killed);
    assert_eq!(never.load(Ordering::SeqCst), 0, "the cancelled job ran");
    // Both are finished now: nothing changes.
    let out = ok(ns, &["job", "cancel", long.as_str()]).await;
    assert_eq!(
        out,
        format!("{long} had already finished (killed); nothing changed\n")
    );
    let v = json_of(ns, &["job", "cancel", queued.as_str()]).await;
    assert_eq!(
        v,
        json!({
            "id": queued.as_str(), "outcome": "finished", "state": "cancelled",
            "settling": {"ends": 0, "jobs": 0}
        })
    );
    // A running job asked to stop through the CLI reads as such in `jobs`.
    let listing = ok(ns, &["jobs", "--state", "killed"]).await;
    assert_eq!(listed(&listing), [long.to_string()]);
    // Unknown and malformed ids are errors.
    let out = resq(ns, &["job", "cancel", JobId::new().as_str()]).await;
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("no tracked job"), "{}", stderr(&out));
    let out = resq(ns, &["job", "cancel", "12345"]).await;
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("ID: \"12345\" is not a job id"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn jobs_purge_deletes_finished_records() {
    let s = seed("cjpurge").await;
    let ns = s.ns.as_str();
    let k = Keys::new(ns);
    let mut con = support::con().await;
    // Only finished states.
    for st in ["queued", "working", "scheduled", "retrying"] {
        let out = resq(ns, &["jobs", "purge", "--state", st]).await;
        assert_eq!(code(&out), 1, "{st}");
        assert!(
            stderr(&out).contains(&format!(
                "error: --state: only finished jobs can be purged (completed, failed, killed, cancelled); {st} jobs have not finished"
            )),
            "{st}: {}",
            stderr(&out)
        );
    }
    let out = resq(ns, &["jobs", "purge", "--older-than", "a while"]).await;
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("--older-than: \"a while\" is not a duration"));
    // Nothing finished an hour ago.
    assert_eq!(
        ok(ns, &["jobs", "purge", "--older-than", "1h"]).await,
        "purged 0 jobs\n"
    );
    assert_eq!(
        ok(ns, &["jobs", "purge", "--state", "failed"]).await,
        "purged 1 job\n"
    );
    let gone: bool = con.exists(k.job_record(s.failed.as_str())).await.unwrap();
    assert!(!gone);
    let kept: bool = con
        .exists(k.job_record(s.completed.as_str()))
        .await
        .unwrap();
    assert!(kept);
    // The rest of the finished ones (completed, cancelled); the queued one stays.
    let v = json_of(ns, &["jobs", "purge", "--older-than", "0s"]).await;
    assert_eq!(v, json!({"purged": 2}));
    let left = json_of(ns, &["jobs"]).await;
    assert_eq!(left["jobs"].as_array().map(Vec::len), Some(1), "{left}");
    assert_eq!(left["jobs"][0]["id"], s.queued.as_str());
    let out = ok(ns, &["jobs"]).await;
    assert!(out.starts_with("jobs: 1 queued · 0 scheduled"), "{out}");
}

/// Every move of a record goes through record.lua's one writer of the state (Rec.set_state):
/// what `resq job show` reads after each move, and the indexes that follow the state — a
/// waiting job listed as waiting until cancelled, a cancelled job in the cancelled index with
/// its job key free.
#[tokio::test]
async fn each_move_reads_right_in_job_show_with_its_indexes() {
    let ns = &support::namespace("cli-jobs-moves");
    let c = client(ns).await;
    let k = Keys::new(ns);
    let mut con = support::con().await;
    let first = c
        .enqueue_class_tracked("idle", "A", &[], Track::new().key("acct-7"))
        .await
        .unwrap();
    let then = c
        .enqueue_class_tracked("idle", "B", &[], Track::new().after(first.clone()))
        .await
        .unwrap();
    let state = |v: Value| v["state"].as_str().unwrap_or("").to_string();
    assert_eq!(
        state(json_of(ns, &["job", "show", first.as_str()]).await),
        "queued"
    );
    assert_eq!(
        state(json_of(ns, &["job", "show", then.as_str()]).await),
        "waiting"
    );
    let waiting: Vec<String> = con.zrange(k.job_state("waiting"), 0, -1).await.unwrap();
    assert_eq!(waiting, [then.to_string()]);
    let held: Option<String> = con.get(k.job_key("acct-7")).await.unwrap();
    assert_eq!(held.as_deref(), Some(first.as_str()));

    // The waiting job cancelled: out of the waiting index, into the cancelled one.
    ok(ns, &["job", "cancel", then.as_str()]).await;
    assert_eq!(
        state(json_of(ns, &["job", "show", then.as_str()]).await),
        "cancelled"
    );
    let waiting: Vec<String> = con.zrange(k.job_state("waiting"), 0, -1).await.unwrap();
    assert!(waiting.is_empty(), "{waiting:?}");
    // The queued one cancelled: its job key free, both in the cancelled index.
    ok(ns, &["job", "cancel", first.as_str()]).await;
    assert_eq!(
        state(json_of(ns, &["job", "show", first.as_str()]).await),
        "cancelled"
    );
    let held: Option<String> = con.get(k.job_key("acct-7")).await.unwrap();
    assert_eq!(held, None);
    let mut cancelled: Vec<String> = con.zrange(k.job_state("cancelled"), 0, -1).await.unwrap();
    cancelled.sort();
    let mut both = vec![first.to_string(), then.to_string()];
    both.sort();
    assert_eq!(cancelled, both);
    let running: Vec<String> = con.smembers(k.runs()).await.unwrap();
    assert!(running.is_empty(), "{running:?}");
}
