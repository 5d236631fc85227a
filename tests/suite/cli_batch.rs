//! `resq batch create|show`, `resq batches` and `resq enqueue --track --after …` (issue 30):
//! the real `resq` binary against the test binary's own `redis-server`, with an in-process
//! worker where jobs must run. A file becomes a batch whose callback fires; one bad line and
//! nothing is created; a member a foreign worker took makes `batch show` say the batch is
//! stuck and name that worker; `--after` makes a waiting job, released when its dependency ends.

use crate::support;

use redis::AsyncCommands;
use resq::jobs::{JobId, State};
use resq::{Client, JobContext, JobError, Registry};
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Output, Stdio};
use std::time::Duration;
use support::cli::{cmd, json_of, ok, resq, stderr, stdout};
use support::Keys;

fn code(o: &Output) -> i32 {
    o.status.code().expect("an exit code")
}

/// `resq <args>` for `ns` with `input` on its standard input.
async fn with_stdin(ns: &str, args: &[&str], input: &str) -> Output {
    let mut c = cmd(ns, args);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let input = input.to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = c.spawn().expect("run resq");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("wait")
    })
    .await
    .expect("join")
}

/// A file holding `text`, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(text: &str) -> TempFile {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p =
            std::env::temp_dir().join(format!("resq-test-batch-{}-{n}.ndjson", std::process::id()));
        std::fs::write(&p, text).expect("write file");
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

/// Every element of `<ns>:queue:<q>`, decoded.
async fn queue(ns: &str, q: &str) -> Vec<Value> {
    let items: Vec<String> = support::con()
        .await
        .lrange(Keys::new(ns).queue(q), 0, -1)
        .await
        .unwrap();
    items
        .iter()
        .map(|i| serde_json::from_str(i).expect("a JSON payload"))
        .collect()
}

/// Every key of namespace `ns`.
async fn keys_of(ns: &str) -> Vec<String> {
    let mut con = support::con().await;
    let mut out = Vec::new();
    let mut it: redis::AsyncIter<String> = con.scan_match(format!("{ns}:*")).await.unwrap();
    while let Some(k) = it.next_item().await {
        out.push(k.unwrap());
    }
    out
}

/// Handlers: `Resize` succeeds; `Sheet` records its args and batch in `<ns>:test:sheet`.
fn registry(ns: &str) -> Registry {
    let key = format!("{ns}:test:sheet");
    Registry::new()
        .handler("Resize", |_ctx: JobContext| async { Ok(()) })
        .handler("Sheet", move |ctx: JobContext| {
            let key = key.clone();
            async move {
                let line = json!({"args": ctx.args(), "batch": ctx.batch().map(|b| b.to_string())});
                let mut con = support::con().await;
                let _: () = con
                    .rpush(&key, line.to_string())
                    .await
                    .map_err(JobError::from)?;
                Ok(())
            }
        })
}

#[tokio::test]
async fn a_file_becomes_a_batch_listed_and_its_callback_fires() {
    let ns = support::namespace("cli-batch");
    let f = TempFile::new(
        "{\"class\":\"Resize\",\"args\":[\"b.png\"],\"queue\":\"thumbs\"}\n\n\
         {\"class\":\"Resize\",\"args\":[\"a.png\"]}\n\
         {\"class\":\"Resize\",\"args\":[\"c.png\",2.50]}\n",
    );
    let out = ok(
        &ns,
        &[
            "batch",
            "create",
            "--queue",
            "images",
            "--jobs-file",
            f.path(),
            "--on-success",
            r#"Sheet:["album",7]"#,
            "--description",
            "album 7",
        ],
    )
    .await;
    let bid = stdout(&out).trim().to_string();
    assert!(
        bid.len() == 32 && bid.bytes().all(|b| b.is_ascii_hexdigit()),
        "{bid:?}"
    );
    // The members are in their queues as plain Resque payloads with their ids, in order.
    let images = queue(&ns, "images").await;
    let thumbs = queue(&ns, "thumbs").await;
    assert_eq!(images.len(), 2, "{images:?}");
    assert_eq!(thumbs.len(), 1, "{thumbs:?}");
    assert_eq!(images[0]["args"], json!(["a.png"]));
    assert_eq!(images[1]["args"], json!(["c.png", 2.5]));
    assert_eq!(thumbs[0]["class"], "Resize");
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    for p in images.iter().chain(&thumbs) {
        let id = JobId::parse(p["resq_id"].as_str().unwrap()).unwrap();
        assert_eq!(c.status(&id).await.unwrap().unwrap().state, State::Queued);
    }

    // A second batch from standard input, with --json.
    let out = with_stdin(
        &ns,
        &[
            "--json",
            "batch",
            "create",
            "--queue",
            "later",
            "--jobs-file",
            "-",
        ],
        "{\"class\":\"Resize\",\"args\":[1]}\n{\"class\":\"Resize\",\"args\":[2]}\n",
    )
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let second = v["id"].as_str().unwrap().to_string();
    let jobs: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j.as_str().unwrap())
        .collect();
    let later = queue(&ns, "later").await;
    let queued: Vec<&str> = later
        .iter()
        .map(|p| p["resq_id"].as_str().unwrap())
        .collect();
    assert_eq!(jobs, queued);

    // Listed newest first, by people and programs.
    let listed = stdout(&ok(&ns, &["batches"]).await);
    let lines: Vec<&str> = listed.lines().collect();
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("SUCCEEDED"),
        "{listed}"
    );
    assert!(lines[1].starts_with(&second), "{listed}");
    assert!(
        lines[2].starts_with(&bid) && lines[2].contains("running") && lines[2].contains("album 7"),
        "{listed}"
    );
    assert!(
        listed.contains("(2 shown of 2 batches, newest first)"),
        "{listed}"
    );
    let v = json_of(&ns, &["batches", "--limit", "1", "--offset", "1"]).await;
    assert_eq!(v["total"], 2);
    let b = &v["batches"][0];
    assert_eq!(
        (&b["id"], &b["total"], &b["pending"], &b["phase"]),
        (&json!(bid), &json!(3), &json!(3), &json!("running"))
    );
    // The callbacks go to --queue, not to the first line's queue.
    assert_eq!(b["queue"], "images");

    // The members run; the callback fires with its args and the batch's id.
    let w = support::start(support::builder(&ns, "images,thumbs").registry(registry(&ns))).await;
    let sheet = support::eventually(15, "the on_success callback", || async {
        let got: Vec<String> = support::con()
            .await
            .lrange(format!("{ns}:test:sheet"), 0, -1)
            .await
            .unwrap();
        got.into_iter().next()
    })
    .await;
    support::stop(w).await;
    let sheet: Value = serde_json::from_str(&sheet).unwrap();
    assert_eq!(sheet, json!({"args": ["album", 7], "batch": bid}));
    let shown = stdout(&ok(&ns, &["batch", "show", &bid]).await);
    for want in [
        "state        succeeded",
        "succeeded    3",
        "unfinished   none",
    ] {
        assert!(shown.contains(want), "{want:?} not in:\n{shown}");
    }
    assert!(!shown.contains("STUCK"), "{shown}");
    // A member's record expires after it ended: the batch still has nothing unfinished.
    let expired = images[0]["resq_id"].as_str().unwrap();
    let _: () = support::con()
        .await
        .del(Keys::new(ns.as_str()).job_record(expired))
        .await
        .unwrap();
    let shown = stdout(&ok(&ns, &["batch", "show", &bid]).await);
    assert!(shown.contains("unfinished   none"), "{shown}");
}

#[tokio::test]
async fn a_bad_line_or_callback_creates_nothing() {
    let ns = support::namespace("cli-batch-bad");
    let f = TempFile::new(
        "{\"class\":\"Resize\",\"args\":[\"a.png\"]}\n\
         {\"class\":\"Resize\"}\n\
         {\"class\":\"Resize\",\"args\":[\"c.png\"]}\n",
    );
    let out = resq(&ns, &["batch", "create", "--jobs-file", f.path()]).await;
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("line 2: no \"args\""), "{err}");
    assert!(!err.contains("line 1") && !err.contains("line 3"), "{err}");
    assert!(
        err.contains("1 of 3 lines are not jobs (listed above); nothing was created"),
        "{err}"
    );
    assert!(keys_of(&ns).await.is_empty(), "{:?}", keys_of(&ns).await);

    // A malformed callback, an empty file: refused, saying why, nothing written.
    let good = TempFile::new("{\"class\":\"Resize\",\"args\":[]}\n");
    for (flag, value, said) in [
        (
            "--on-death",
            "Notify:7",
            "--on-death: \"Notify:7\": the args \"7\" after ':' are not a JSON array",
        ),
        (
            "--on-success",
            ":[1]",
            "--on-success: \":[1]\": no class name before the args",
        ),
        (
            "--on-complete",
            "Notify:[1",
            "--on-complete: \"Notify:[1\": the args \"[1\" after ':' are not JSON",
        ),
    ] {
        let out = resq(
            &ns,
            &["batch", "create", "--jobs-file", good.path(), flag, value],
        )
        .await;
        assert_eq!(code(&out), 1, "{flag}");
        assert!(stderr(&out).contains(said), "{flag}: {}", stderr(&out));
    }
    let empty = TempFile::new("\n\n");
    let out = resq(&ns, &["batch", "create", "--jobs-file", empty.path()]).await;
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("holds no job; nothing was created"),
        "{}",
        stderr(&out)
    );
    assert!(keys_of(&ns).await.is_empty(), "{:?}", keys_of(&ns).await);

    // Unknown and malformed batch ids.
    let unknown = resq::workflows::BatchId::new();
    let out = resq(&ns, &["batch", "show", unknown.as_str()]).await;
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains(&format!("no batch {unknown}")),
        "{}",
        stderr(&out)
    );
    let out = resq(&ns, &["batch", "show", "nope"]).await;
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("\"nope\" is not a batch id"),
        "{}",
        stderr(&out)
    );
    let out = resq(
        &ns,
        &[
            "batch",
            "create",
            "--jobs-file",
            good.path(),
            "--parent",
            unknown.as_str(),
        ],
    )
    .await;
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("is not a batch"), "{}", stderr(&out));
}

#[tokio::test]
async fn show_says_a_batch_is_stuck_when_a_foreign_worker_took_a_member() {
    let ns = support::namespace("cli-batch-stuck");
    let k = Keys::new(ns.as_str());
    let v = {
        let f = TempFile::new(
            "{\"class\":\"Resize\",\"args\":[1]}\n{\"class\":\"Resize\",\"args\":[2]}\n",
        );
        json_of(
            &ns,
            &[
                "batch",
                "create",
                "--queue",
                "mixed",
                "--jobs-file",
                f.path(),
            ],
        )
        .await
    };
    let bid = v["id"].as_str().unwrap().to_string();
    // A Ruby worker polls the queue (a resq worker too, which counts members and is not named).
    let ruby = "rubybox:4242:mixed";
    let ours = "rustbox~resq:77-0:mixed";
    let _: () = support::con()
        .await
        .sadd(k.workers(), &[ruby, ours][..])
        .await
        .unwrap();
    let before = stdout(&ok(&ns, &["batch", "show", &bid]).await);
    assert!(!before.contains("STUCK"), "{before}");
    assert!(
        before.contains("WARNING") && before.contains(ruby),
        "{before}"
    );
    assert!(!before.contains(ours), "{before}");

    // A flow-control limit holds a member: out of its queue, in the limit's held set, its
    // record still queued — not gone.
    let held: String = support::con()
        .await
        .lpop(k.queue("mixed"), None)
        .await
        .unwrap();
    let _: () = redis::pipe()
        .hset(k.limits_declared(), "gate", "{}")
        .zadd(
            k.limit_held("gate", None),
            format!("1\tmixed\t1\tgate\t{held}"),
            1,
        )
        .query_async(&mut support::con().await)
        .await
        .unwrap();
    let holding = stdout(&ok(&ns, &["batch", "show", &bid]).await);
    assert!(!holding.contains("STUCK"), "{holding}");

    // The Ruby worker takes a member: it is gone from its queue, its record still says queued.
    let taken: String = support::con()
        .await
        .lpop(k.queue("mixed"), None)
        .await
        .unwrap();
    let taken: Value = serde_json::from_str(&taken).unwrap();
    let gone = taken["resq_id"].as_str().unwrap();
    let after = stdout(&ok(&ns, &["batch", "show", &bid]).await);
    assert!(
        after.contains("STUCK: 1 member is no longer in its queue"),
        "{after}"
    );
    assert!(after.contains(&format!("gone:\n    {gone}")), "{after}");
    assert!(after.contains(ruby) && !after.contains(ours), "{after}");
    assert!(after.contains("the next prune round"), "{after}");
    let v = json_of(&ns, &["batch", "show", &bid]).await;
    assert_eq!(v["stuck"], true);
    assert_eq!(v["gone"], json!([gone]));
    assert_eq!(v["foreign_workers"], json!([ruby]));
    assert_eq!(
        v["unfinished"],
        json!([{"state": "queued", "count": 2, "ids": v["unfinished"][0]["ids"]}])
    );
    assert_eq!(v["batch"]["phase"], "running");

    // A batch whose creator stopped midway (still staging) has its members outside their
    // queues as it should: said so, not called stuck.
    let _: () = support::con()
        .await
        .hset(k.batch(&bid), "state", "staging")
        .await
        .unwrap();
    let staging = stdout(&ok(&ns, &["batch", "show", &bid]).await);
    assert!(
        staging.contains("STAGING: its creator stopped"),
        "{staging}"
    );
    assert!(!staging.contains("STUCK"), "{staging}");
    assert_eq!(json_of(&ns, &["batch", "show", &bid]).await["stuck"], false);
}

#[tokio::test]
async fn after_makes_a_waiting_job_released_when_its_dependency_ends() {
    let ns = support::namespace("cli-after");
    let first = stdout(
        &ok(
            &ns,
            &["enqueue", "--track", "--queue", "flow", "Resize", "1"],
        )
        .await,
    )
    .trim()
    .to_string();
    let out = ok(
        &ns,
        &[
            "enqueue",
            "--track",
            "--queue",
            "flow",
            "--after",
            &first,
            "--if-dep-failed",
            "cancel",
            "Sheet",
            "\"after\"",
        ],
    )
    .await;
    let waiting = stdout(&out).trim().to_string();
    let v = json_of(&ns, &["job", "show", &waiting]).await;
    assert_eq!(v["state"], "waiting", "{v}");
    // Only the first job is in the queue.
    let q = queue(&ns, "flow").await;
    assert_eq!(q.len(), 1, "{q:?}");
    assert_eq!(q[0]["resq_id"], json!(first));

    // --json names the workflow; --batch and --parent are kept.
    let bid = {
        let f = TempFile::new("{\"class\":\"Resize\",\"args\":[9]}\n");
        json_of(
            &ns,
            &[
                "batch",
                "create",
                "--queue",
                "elsewhere",
                "--jobs-file",
                f.path(),
            ],
        )
        .await["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let v = json_of(
        &ns,
        &[
            "enqueue", "--track", "--queue", "flow", "--after", &first, "--parent", &first,
            "--batch", &bid, "Sheet", "2",
        ],
    )
    .await;
    assert_eq!(v["after"], json!([first]));
    assert_eq!(v["state"], "waiting");
    assert_eq!((&v["parent"], &v["batch"]), (&json!(first), &json!(bid)));
    let second = v["id"].as_str().unwrap().to_string();
    assert_eq!(
        json_of(&ns, &["batch", "show", &bid]).await["batch"]["total"],
        2
    );

    // Workflow flags need --track, and --if-dep-failed needs --after.
    for (args, said) in [
        (
            vec!["enqueue", "--after", first.as_str(), "Sheet"],
            "error: --after: needs --track",
        ),
        (
            vec!["enqueue", "--batch", bid.as_str(), "Sheet"],
            "error: --batch: needs --track",
        ),
        (
            vec!["enqueue", "--track", "--if-dep-failed", "fail", "Sheet"],
            "error: --if-dep-failed: needs --after",
        ),
        (
            vec![
                "enqueue",
                "--track",
                "--after",
                first.as_str(),
                "--in",
                "60",
                "Sheet",
            ],
            "error: --after: a job that waits",
        ),
    ] {
        let out = resq(&ns, &args).await;
        assert_eq!(code(&out), 1, "{args:?}");
        assert!(stderr(&out).contains(said), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(queue(&ns, "flow").await.len(), 1);

    // The dependency ends: both waiting jobs are released and run.
    let w = support::start(support::builder(&ns, "flow").registry(registry(&ns))).await;
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    for id in [&waiting, &second] {
        let s = c
            .wait(&JobId::parse(id).unwrap(), Duration::from_secs(15))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(s.state, State::Completed, "{id}");
    }
    support::stop(w).await;
}
