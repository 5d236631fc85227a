//! The operator's view from the command line (issue 34, E): the real `resq` binary against the
//! test binary's own `redis-server`. `resq jobs --state queued` pages through a limit's held
//! set without skipping a job released meanwhile; `resq job show` shows a job's workflow;
//! `resq batch show` names every stuck member of a large batch; `resq batch create` refuses
//! bad callback specs, empty names and unknown parents, and its staged data expires and can be
//! discarded; `resq enqueue --file` names a non-UTF-8 line and enqueues in bounded chunks.

use crate::support;

use redis::AsyncCommands;
use resq::jobs::JobId;
use std::collections::BTreeSet;
use std::process::Output;
use support::cli::{json_of, ok, resq, stderr, stdout};
use support::Keys;

/// The tests that load the server most (batches of 20,000 and 100,500 members, files of
/// 400,000 lines) take turns, so the others' connections are not starved on a busy machine.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn code(o: &Output) -> i32 {
    o.status.code().expect("an exit code")
}

/// A file holding `bytes`, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(bytes: &[u8]) -> TempFile {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("resq-test-ops-{}-{n}", std::process::id()));
        std::fs::write(&p, bytes).expect("write file");
        TempFile(p)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn payload(id: &str) -> String {
    format!(r#"{{"class":"Job","args":[1],"resq_id":"{id}"}}"#)
}

/// Paging the queued jobs through a limit's held set: a job released (taken out of the set)
/// between two pages shifts the set, and a page that went on by rank skipped the job that
/// moved into the place already read. The position names the entry, so none is skipped.
#[tokio::test]
async fn paging_held_jobs_skips_none_released_meanwhile() {
    let ns = support::namespace("ops-held");
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let _: () = con
        .hset(
            k.limits_declared(),
            "lim",
            r#"{"name":"lim","kind":"concurrency","limit":1}"#,
        )
        .await
        .unwrap();
    let mut ids = Vec::new();
    let mut members = Vec::new();
    for i in 0..10 {
        let id = JobId::new().to_string();
        let _: () = con
            .hset_multiple(
                k.job_record(&id),
                &[("state", "queued"), ("class", "Job"), ("queue", "q")],
            )
            .await
            .unwrap();
        let member = format!("tok.{i:06}\tq\t1\tlim\t{}", payload(&id));
        // Two share a score (one millisecond): ties are ordered by their bytes.
        let score = 99e13 + 1_795_000_000_000.0 + if i == 5 { 4.0 } else { i as f64 };
        // Held as resq holds: in the set, and the set in the index of held sets.
        let _: () = redis::pipe()
            .zadd(k.limit_held("lim", None), &member, score)
            .zadd(k.held_sets(), k.limit_held("lim", None), 0)
            .query_async(&mut con)
            .await
            .unwrap();
        ids.push(id);
        members.push(member);
    }
    let mut seen: Vec<String> = Vec::new();
    let mut from: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = vec!["jobs", "--state", "queued", "--limit", "3"];
        if let Some(f) = &from {
            args.extend(["--from", f.as_str()]);
        }
        let page = json_of(&ns, &args).await;
        for j in page["jobs"].as_array().unwrap() {
            seen.push(j["id"].as_str().unwrap().to_string());
        }
        pages += 1;
        if pages == 1 {
            // The first page's jobs are released meanwhile: the set shifts by three.
            for m in &members[..3] {
                let _: () = con.zrem(k.limit_held("lim", None), m).await.unwrap();
            }
        }
        match page["next"].as_str() {
            Some(n) => from = Some(n.to_string()),
            None => break,
        }
        assert!(pages < 20, "no end: {seen:?}");
    }
    let want: BTreeSet<&String> = ids.iter().collect();
    let got: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(got, want, "every held job listed once: {seen:?}");
    assert_eq!(seen.len(), ids.len(), "none twice: {seen:?}");
}

/// `resq job show` (text and `--json`) shows a job's workflow: each job it waits for with its
/// state (ended or not), how many are left, its policy, batch and parent; and a waiting job
/// whose dependencies all ended without releasing it is called stranded.
#[tokio::test]
async fn job_show_shows_the_workflow() {
    let ns = support::namespace("ops-show");
    let k = Keys::new(&ns);
    let id_of = |o: &Output| stdout(o).trim().to_string();
    let a = id_of(&ok(&ns, &["enqueue", "--track", "A"]).await);
    let b = id_of(&ok(&ns, &["enqueue", "--track", "B"]).await);
    let p = id_of(&ok(&ns, &["enqueue", "--track", "P"]).await);
    let f = TempFile::new(b"{\"class\":\"M\",\"args\":[]}\n");
    let bid = id_of(&ok(&ns, &["batch", "create", "--jobs-file", f.path()]).await);
    let mut con = support::con().await;
    // A has ended (by hand, as another runtime would): it counts as ended.
    let _: () = con
        .hset(k.job_record(&a), "state", "completed")
        .await
        .unwrap();
    let c = id_of(
        &ok(
            &ns,
            &[
                "enqueue",
                "--track",
                "--after",
                &a,
                "--after",
                &b,
                "--if-dep-failed",
                "cancel",
                "--parent",
                &p,
                "--batch",
                &bid,
                "C",
            ],
        )
        .await,
    );
    let text = stdout(&ok(&ns, &["job", "show", &c]).await);
    assert!(text.contains("waits for    2 jobs, 1 not ended"), "{text}");
    assert!(text.contains(&format!("{a}  completed (ended)")), "{text}");
    assert!(text.contains(&format!("{b}  queued (not ended)")), "{text}");
    assert!(
        text.contains("policy       if one did not complete: cancel"),
        "{text}"
    );
    assert!(
        text.contains(&format!("batch        {bid} (running)")),
        "{text}"
    );
    assert!(
        text.contains(&format!("parent       {p} (queued)")),
        "{text}"
    );
    assert!(!text.contains("STRANDED"), "{text}");
    let text = stdout(&ok(&ns, &["job", "show", &p]).await);
    assert!(text.contains("children     1"), "{text}");
    let text = stdout(&ok(&ns, &["job", "show", &b]).await);
    assert!(text.contains("waiters      1 job(s) wait for it"), "{text}");

    let v = json_of(&ns, &["job", "show", &c]).await;
    let wf = &v["workflow"];
    assert_eq!(v["state"], "waiting", "{v}");
    assert_eq!(wf["deps_total"], 2, "{v}");
    assert_eq!(wf["deps_unended"], 1, "{v}");
    assert_eq!(wf["deps"][0]["id"], a.as_str(), "{v}");
    assert_eq!(wf["deps"][0]["ended"], true, "{v}");
    assert_eq!(wf["deps"][1]["state"], "queued", "{v}");
    assert_eq!(wf["deps"][1]["ended"], false, "{v}");
    assert_eq!(wf["if_dep_failed"], "cancel", "{v}");
    assert_eq!(wf["batch"], bid.as_str(), "{v}");
    assert_eq!(wf["parent"], p.as_str(), "{v}");

    // B ends where resq does not see it: C is left waiting, and says so.
    let _: () = con.hset(k.job_record(&b), "state", "failed").await.unwrap();
    let text = stdout(&ok(&ns, &["job", "show", &c]).await);
    assert!(text.contains("waits for    2 jobs, 0 not ended"), "{text}");
    assert!(text.contains("STRANDED"), "{text}");
}

/// `resq batch create` refuses a callback spec that is not `CLASS` or `CLASS:JSON_ARRAY`, an
/// empty queue, and a parent that is no batch — naming the bad part, creating nothing; and
/// `resq enqueue --parent` refuses an id that is no tracked job.
#[tokio::test]
async fn bad_cli_inputs_are_refused_naming_the_bad_part() {
    let ns = support::namespace("ops-refuse");
    let f = TempFile::new(b"{\"class\":\"M\",\"args\":[],\"queue\":\"q\"}\n");
    for (flag, spec, says) in [
        ("--on-success", r#"Notify["done",7]"#, "args go after a ':'"),
        ("--on-complete", "Notify:::[1]", "empty part"),
        ("--on-death", "Notify::", "empty part"),
        ("--on-success", "Notify:", "nothing after ':'"),
        ("--on-success", "", "no class name"),
    ] {
        let o = resq(
            &ns,
            &["batch", "create", "--jobs-file", f.path(), flag, spec],
        )
        .await;
        assert_eq!(code(&o), 1, "{spec}: {}", stdout(&o));
        let e = stderr(&o);
        assert!(e.contains(flag) && e.contains(says), "{spec}: {e}");
        assert!(e.contains("CLASS:JSON_ARRAY"), "{spec}: {e}");
    }
    let o = resq(
        &ns,
        &["batch", "create", "--jobs-file", f.path(), "--queue", ""],
    )
    .await;
    assert_eq!(code(&o), 1, "{}", stdout(&o));
    assert!(stderr(&o).contains("--queue"), "{}", stderr(&o));
    let unknown = "0123456789abcdef0123456789abcdef";
    let o = resq(
        &ns,
        &[
            "batch",
            "create",
            "--jobs-file",
            f.path(),
            "--parent",
            unknown,
        ],
    )
    .await;
    assert_eq!(code(&o), 1);
    assert!(
        stderr(&o).contains("--parent") && stderr(&o).contains(unknown),
        "{}",
        stderr(&o)
    );
    let o = resq(&ns, &["enqueue", "--track", "--parent", unknown, "A"]).await;
    assert_eq!(code(&o), 1, "{}", stdout(&o));
    assert!(
        stderr(&o).contains("--parent") && stderr(&o).contains("not a tracked job"),
        "{}",
        stderr(&o)
    );
    // Nothing was written.
    let mut con = support::con().await;
    let keys: Vec<String> = con.keys(format!("{ns}:*")).await.unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

/// `resq batch show` of a batch of 20,000 members reads every member (it says how many it
/// read) and names every stuck one: one whose payload is no longer in its queue (a foreign
/// worker took it), and one whose record says working for a worker that is no longer
/// registered. A sample of 10,000 missed them in most reports.
#[tokio::test]
async fn batch_show_names_every_stuck_member_of_a_large_batch() {
    let _turn = HEAVY.lock().await;
    let ns = support::namespace("ops-stuck");
    let k = Keys::new(&ns);
    let n = 20_000;
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "{{\"class\":\"M\",\"args\":[{i}],\"queue\":\"big\"}}\n"
        ));
    }
    let f = TempFile::new(text.as_bytes());
    let v = json_of(&ns, &["batch", "create", "--jobs-file", f.path()]).await;
    let bid = v["id"].as_str().unwrap().to_string();
    let jobs: Vec<String> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j.as_str().unwrap().to_string())
        .collect();
    assert_eq!(jobs.len(), n);
    let mut con = support::con().await;
    // One taken out of its queue (as a foreign worker's pop), one working for a dead worker.
    let (taken, orphan) = (&jobs[12_345], &jobs[17_001]);
    let items: Vec<String> = con.lrange(k.queue("big"), 0, -1).await.unwrap();
    for it in &items {
        if it.contains(taken.as_str()) || it.contains(orphan.as_str()) {
            let _: () = con.lrem(k.queue("big"), 1, it).await.unwrap();
        }
    }
    let _: () = con
        .hset_multiple(
            k.job_record(orphan),
            &[("state", "working"), ("worker", "gone-host:1:big")],
        )
        .await
        .unwrap();
    // A working member whose worker is registered is not stuck.
    let alive = &jobs[3];
    let _: () = con.sadd(k.workers(), "live-host~resq:2:big").await.unwrap();
    let _: () = con
        .hset_multiple(
            k.job_record(alive),
            &[("state", "working"), ("worker", "live-host~resq:2:big")],
        )
        .await
        .unwrap();
    for _ in 0..3 {
        let r = json_of(&ns, &["batch", "show", &bid]).await;
        assert_eq!(r["members_total"], n, "{}", r["members_total"]);
        assert_eq!(r["members_read"], n, "{}", r["members_read"]);
        assert_eq!(r["sampled"], false);
        assert_eq!(r["gone"], serde_json::json!([taken]), "{}", r["gone"]);
        assert_eq!(
            r["orphaned"],
            serde_json::json!([orphan]),
            "{}",
            r["orphaned"]
        );
        assert_eq!(r["stuck"], true);
    }
    let text = stdout(&ok(&ns, &["batch", "show", &bid]).await);
    assert!(
        text.contains(&format!("read         {n} of {n} members")),
        "{text}"
    );
    assert!(text.contains(&format!("    {taken}")), "{text}");
    assert!(text.contains(&format!("    {orphan}")), "{text}");
    assert!(!text.contains(&format!("    {alive}")), "{text}");
}

/// A line that is not UTF-8 is refused with its number, by `enqueue --file` (a file and
/// standard input) and `batch create`, and nothing is enqueued; the other bad lines are named
/// too.
#[tokio::test]
async fn a_non_utf8_line_is_refused_by_its_number() {
    let ns = support::namespace("ops-utf8");
    let bytes = b"{\"class\":\"A\",\"args\":[]}\n{\"class\":\"B\",\"args\":[\"\xff\"]}\nnope\n{\"class\":\"C\",\"args\":[]}\n";
    let f = TempFile::new(bytes);
    for args in [
        vec!["enqueue", "--file", f.path()],
        vec!["enqueue", "--track", "--file", f.path()],
        vec!["batch", "create", "--jobs-file", f.path()],
    ] {
        let o = resq(&ns, &args).await;
        assert_eq!(code(&o), 1, "{args:?}: {}", stdout(&o));
        let e = stderr(&o);
        assert!(
            e.contains("line 2: not UTF-8 text (byte 0xff"),
            "{args:?}: {e}"
        );
        assert!(e.contains("line 3: not JSON"), "{args:?}: {e}");
        assert!(e.contains("2 of 4 lines are not jobs"), "{args:?}: {e}");
    }
    let mut c = support::cli::cmd(&ns, &["enqueue", "--file", "-"]);
    c.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let o = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = c.spawn().expect("run resq");
        child.stdin.take().unwrap().write_all(bytes).unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("line 2: not UTF-8"), "{}", stderr(&o));
    let mut con = support::con().await;
    let keys: Vec<String> = con.keys(format!("{ns}:*")).await.unwrap();
    assert!(keys.is_empty(), "nothing enqueued: {keys:?}");
}

/// Peak memory (kB) of `resq <args>`, as `/usr/bin/time -v` measures it (a missing tool fails
/// the test).
fn peak_kb(ns: &str, args: &[&str]) -> (u64, Output) {
    let mut c = std::process::Command::new("/usr/bin/time");
    c.arg("-v")
        .arg(support::resq_bin())
        .args(["--url", &support::url(), "--namespace", ns])
        .args(args)
        .env_remove("RUST_LOG");
    let o = c
        .output()
        .expect("run /usr/bin/time (Debian package `time`)");
    let e = stderr(&o);
    let kb = e
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak memory in: {e}"));
    (kb, o)
}

/// `enqueue --file` reads a line at a time: checking a file four times as long takes about
/// as much memory (a ratio, not a figure), and enqueueing streams too.
#[tokio::test]
async fn a_file_is_read_in_bounded_memory() {
    let _turn = HEAVY.lock().await;
    let ns = support::namespace("ops-mem");
    let file = |n: usize| {
        let mut t = String::with_capacity(n * 40);
        for i in 0..n - 1 {
            t.push_str(&format!(
                "{{\"class\":\"Job\",\"args\":[{i},\"payload-{i}\"]}}\n"
            ));
        }
        t.push_str("nope\n");
        TempFile::new(t.as_bytes())
    };
    let (small, large) = (file(100_000), file(400_000));
    let ns2 = ns.clone();
    let (a, b) = tokio::task::spawn_blocking(move || {
        let (a, oa) = peak_kb(&ns2, &["enqueue", "--track", "--file", small.path()]);
        let (b, ob) = peak_kb(&ns2, &["enqueue", "--track", "--file", large.path()]);
        assert_eq!(code(&oa), 1);
        assert!(
            stderr(&ob).contains("line 400000: not JSON"),
            "{}",
            stderr(&ob)
        );
        (a, b)
    })
    .await
    .unwrap();
    assert!(
        (b as f64) < 1.5 * a as f64,
        "checking 400,000 lines took {b} kB, 100,000 lines {a} kB: not streamed"
    );
    let mut con = support::con().await;
    let keys: Vec<String> = con.keys(format!("{ns}:*")).await.unwrap();
    assert!(keys.is_empty(), "nothing enqueued: {keys:?}");
}

/// The name the server knows the library's function `name` by (`resq_<version>_<name>`), the
/// library loaded by an earlier command.
async fn function_name(name: &str) -> String {
    fn find(v: &redis::Value, suffix: &str) -> Option<String> {
        match v {
            redis::Value::BulkString(b) => {
                let s = String::from_utf8_lossy(b);
                (s.starts_with("resq_") && s.ends_with(suffix)).then(|| s.into_owned())
            }
            redis::Value::SimpleString(s) => {
                (s.starts_with("resq_") && s.ends_with(suffix)).then(|| s.clone())
            }
            redis::Value::Array(a) | redis::Value::Set(a) => a.iter().find_map(|x| find(x, suffix)),
            redis::Value::Map(m) => m
                .iter()
                .find_map(|(k, x)| find(k, suffix).or_else(|| find(x, suffix))),
            _ => None,
        }
    }
    let mut con = support::con().await;
    let v: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .query_async(&mut con)
        .await
        .unwrap();
    find(&v, &format!("_{name}")).unwrap_or_else(|| panic!("no function {name}: {v:?}"))
}

/// A batch whose creator stopped before its commit: what was staged expires (the stage step
/// sets it; the commit keeps what it makes visible), `batch show` says how to remove it, and
/// `resq batch discard` removes all of it and its count in its parent; any other batch is
/// refused.
#[tokio::test]
async fn staged_data_expires_and_batch_discard_removes_it() {
    let ns = support::namespace("ops-staged");
    let k = Keys::new(&ns);
    let f = TempFile::new(b"{\"class\":\"M\",\"args\":[],\"queue\":\"pq\"}\n");
    let parent = stdout(&ok(&ns, &["batch", "create", "--jobs-file", f.path()]).await)
        .trim()
        .to_string();
    let mut con = support::con().await;
    // A committed batch keeps its hash, members and records (no expiry while they run).
    let pm: Vec<String> = con.smembers(k.batch_jobs(&parent)).await.unwrap();
    for key in [
        k.batch(&parent),
        k.batch_jobs(&parent),
        k.job_record(&pm[0]),
    ] {
        let ttl: i64 = con.ttl(&key).await.unwrap();
        assert_eq!(ttl, -1, "{key} kept");
    }
    // A child batch staged in two parts, never committed (its creator died).
    let stage = function_name("batch_stage").await;
    let bid = resq::workflows::BatchId::new().to_string();
    let (m1, m2) = (JobId::new().to_string(), JobId::new().to_string());
    let now = 1_795_000_000_000i64;
    for (first, m) in [(true, &m1), (false, &m2)] {
        let header = if first {
            format!("cq\t{parent}\t86400\tkilled midway")
        } else {
            String::new()
        };
        // (Its KEYS as batch_stage.lua's header names them.)
        let _: i64 = redis::cmd("FCALL")
            .arg(&stage)
            .arg(12)
            .arg(k.batch(&bid))
            .arg(k.batch_jobs(&bid))
            .arg(k.batch_queues(&bid))
            .arg(k.batches())
            .arg(k.queues())
            .arg(k.batch(&parent))
            .arg(k.batch_jobs(&parent))
            .arg(k.unended())
            .arg(k.job_record(m))
            .arg(k.batch_staged(&bid, "cq"))
            .arg(k.queue("cq"))
            .arg(k.batch_staged(&bid, "cq"))
            .arg(format!("{ns}:"))
            .arg(&bid)
            .arg(now)
            .arg(header)
            .arg("")
            .arg("")
            .arg("")
            .arg(1)
            .arg(m.as_str())
            .arg("cq")
            .arg("M")
            .arg(payload(m))
            .query_async(&mut con)
            .await
            .unwrap();
    }
    let staged_keys = [
        k.batch(&bid),
        k.batch_jobs(&bid),
        format!("{}:queues", k.batch(&bid)),
        format!("{}:staged:cq", k.batch(&bid)),
        k.job_record(&m1),
        k.job_record(&m2),
    ];
    for key in &staged_keys {
        let ttl: i64 = con.ttl(key).await.unwrap();
        assert!(ttl > 0 && ttl <= 86_400, "{key} expires: {ttl}");
    }
    let total: u64 = con.hget(k.batch(&parent), "total").await.unwrap();
    assert_eq!(total, 2, "the parent counts its staging child");
    let text = stdout(&ok(&ns, &["batch", "show", &bid]).await);
    assert!(
        text.contains(&format!("resq batch discard {bid}")),
        "{text}"
    );

    // Only a staging batch can be discarded.
    let o = resq(&ns, &["batch", "discard", &parent]).await;
    assert_eq!(code(&o), 1);
    assert!(
        stderr(&o).contains("only a batch whose creation stopped"),
        "{}",
        stderr(&o)
    );
    let o = ok(&ns, &["batch", "discard", &bid]).await;
    assert!(
        stdout(&o).contains("2 staged members removed"),
        "{}",
        stdout(&o)
    );
    for key in &staged_keys {
        let n: u64 = con.exists(key).await.unwrap();
        assert_eq!(n, 0, "{key} removed");
    }
    let listed: Option<f64> = con
        .zscore(format!("{ns}:resq:batches"), &bid)
        .await
        .unwrap();
    assert!(listed.is_none(), "no longer listed");
    let (total, pending): (u64, u64) = redis::cmd("HMGET")
        .arg(k.batch(&parent))
        .arg("total")
        .arg("pending")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!((total, pending), (1, 1), "the parent counts it no more");
    let child: bool = con
        .sismember(k.batch_jobs(&parent), format!("@{bid}"))
        .await
        .unwrap();
    assert!(!child);
    let o = resq(&ns, &["batch", "discard", &bid]).await;
    assert_eq!(code(&o), 1, "a second discard: no such batch");
}

/// A batch of more than 100,000 members is reported in parts, each bounded: the first says how
/// many it read and where to go on (`--from`), the next reads the rest, and the stuck member is
/// named by one of them.
#[tokio::test]
async fn batch_show_goes_on_past_its_bound() {
    let _turn = HEAVY.lock().await;
    let ns = support::namespace("ops-huge");
    let k = Keys::new(&ns);
    let n = 100_500u64;
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "{{\"class\":\"M\",\"args\":[{i}],\"queue\":\"huge\"}}\n"
        ));
    }
    let f = TempFile::new(text.as_bytes());
    let bid = stdout(&ok(&ns, &["batch", "create", "--jobs-file", f.path()]).await)
        .trim()
        .to_string();
    let mut con = support::con().await;
    // A foreign worker's pop.
    let taken: String = con.lpop(k.queue("huge"), None).await.unwrap();
    let taken: serde_json::Value = serde_json::from_str(&taken).unwrap();
    let taken = taken["resq_id"].as_str().unwrap().to_string();
    let first = json_of(&ns, &["batch", "show", &bid]).await;
    let read1 = first["members_read"].as_u64().unwrap();
    assert!((100_000..n).contains(&read1), "{read1}");
    assert_eq!(first["members_total"], n);
    assert_eq!(first["sampled"], true);
    let cursor = first["next_cursor"].as_u64().unwrap();
    assert_ne!(cursor, 0);
    let text = stdout(&ok(&ns, &["batch", "show", &bid]).await);
    assert!(
        text.contains(&format!("resq batch show {bid} --from ")),
        "{text}"
    );
    let c = cursor.to_string();
    let rest = json_of(&ns, &["batch", "show", &bid, "--from", &c]).await;
    assert_eq!(rest["next_cursor"], 0);
    let read2 = rest["members_read"].as_u64().unwrap();
    assert!(read1 + read2 >= n, "{read1} + {read2} of {n}");
    let mut gone: Vec<String> = Vec::new();
    for r in [&first, &rest] {
        for g in r["gone"].as_array().unwrap() {
            gone.push(g.as_str().unwrap().to_string());
        }
    }
    assert_eq!(gone, vec![taken], "named by one part");
}
