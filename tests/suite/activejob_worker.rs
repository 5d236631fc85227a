//! ActiveJob jobs through a real Redis and the real runtime: Rails' wrapper payloads
//! (`fixtures/activejob/rails-6.1.json`, produced by real ActiveJob) dispatched by `job_class`,
//! typed handlers taking keyword arguments, failures keeping the wrapper bytes, the wrapper
//! name taking precedence, and the ActiveJob client's immediate and delayed layouts.

use crate::support;

use support::stop;

use redis::AsyncCommands;
use resq::activejob::{ActiveJobClient, Arg, NewJob, Rails, WRAPPER_CLASS};
use resq::{Client, Job, JobContext, JobError, JobResult, Registry, Running, Worker};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::Keys;

/// What a handler saw: (class, args, job_id, executions).
type Seen = Arc<Mutex<Vec<(String, Vec<Value>, Option<String>)>>>;

fn recording(classes: &[&str]) -> (Registry, Seen) {
    let seen: Seen = Arc::default();
    let mut r = Registry::new();
    for c in classes {
        let s = seen.clone();
        r = r.handler(c, move |ctx: JobContext| {
            let s = s.clone();
            async move {
                let id = ctx.activejob().and_then(|j| j.metadata().job_id.clone());
                s.lock()
                    .unwrap()
                    .push((ctx.class().to_string(), ctx.args().to_vec(), id));
                Ok(())
            }
        });
    }
    (r, seen)
}

async fn start(ns: &str, queues: &str, registry: Registry) -> Running {
    Worker::builder()
        .redis_url(support::url())
        .namespace(ns)
        .queues(queues)
        .unwrap()
        .concurrency(2)
        .registry(registry)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap()
}

/// Pushes raw bytes the way Resque does (SADD queues + RPUSH).
async fn push(ns: &str, queue: &str, bytes: &str) {
    let keys = Keys::new(ns);
    let mut con = support::con().await;
    let _: () = redis::pipe()
        .sadd(keys.queues(), queue)
        .rpush(keys.queue(queue), bytes)
        .query_async(&mut con)
        .await
        .unwrap();
}

async fn failures(ns: &str, n: usize) -> Vec<String> {
    let key = Keys::new(ns).failed();
    support::eventually(10, &format!("{n} failures"), || {
        let key = key.clone();
        async move {
            let mut con = support::con().await;
            let v: Vec<String> = con.lrange(&key, 0, -1).await.unwrap();
            (v.len() >= n).then_some(v)
        }
    })
    .await
}

#[tokio::test]
async fn rails_payloads_reach_handlers_by_job_class_with_decoded_args() {
    let ns = support::namespace("aj-dispatch");
    let fixture = support::fixture("activejob/rails-6.1.json");
    let cases: Vec<Value> = fixture["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["job_class"] == json!("EchoJob"))
        .cloned()
        .collect();
    assert!(cases.len() >= 17);
    let (registry, seen) = recording(&["EchoJob"]);
    let running = start(&ns, "aj_echo", registry).await;
    for c in &cases {
        push(
            &ns,
            c["queue"].as_str().unwrap(),
            c["payload"].as_str().unwrap(),
        )
        .await;
    }
    support::eventually(10, "every case performed", || async {
        (seen.lock().unwrap().len() >= cases.len()).then_some(())
    })
    .await;
    stop(running).await;
    let seen = seen.lock().unwrap().clone();
    for c in &cases {
        let data: Value = serde_json::from_str(c["payload"].as_str().unwrap()).unwrap();
        let id = data["args"][0]["job_id"].as_str().map(String::from);
        let (class, args, _) = seen
            .iter()
            .find(|(_, _, i)| *i == id)
            .unwrap_or_else(|| panic!("{} not performed", c["name"]));
        assert_eq!(class, "EchoJob");
        assert_eq!(
            serde_json::to_string(args).unwrap(),
            serde_json::to_string(&c["expected_args"]).unwrap(),
            "{}",
            c["name"]
        );
    }
    let mut con = support::con().await;
    let failed: i64 = con.llen(Keys::new(&ns).failed()).await.unwrap();
    assert_eq!(failed, 0);
}

/// What `SendInvoice` saw: (invoice id, notify, cc, executions).
type Invoices = Arc<Mutex<Vec<(u64, bool, Vec<String>, u64)>>>;

/// `SendInvoiceJob#perform(invoice_id, notify:, cc: [])` as a typed job.
struct SendInvoice(Invoices);

#[derive(Deserialize)]
struct Opts {
    notify: bool,
    #[serde(default)]
    cc: Vec<String>,
}

impl Job for SendInvoice {
    const CLASS: &'static str = "SendInvoiceJob";
    type Args = (u64, Opts);

    async fn perform(&self, (id, o): Self::Args, ctx: JobContext) -> JobResult {
        let executions = ctx
            .activejob()
            .map(|j| j.metadata().executions)
            .unwrap_or(99);
        self.0
            .lock()
            .unwrap()
            .push((id, o.notify, o.cc, executions));
        Ok(())
    }
}

#[tokio::test]
async fn typed_jobs_take_keyword_arguments_with_serde() {
    let ns = support::namespace("aj-typed");
    let fixture = support::fixture("activejob/rails-6.1.json");
    let case = fixture["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == json!("typed_kwargs"))
        .cloned()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let registry = Registry::new().job(SendInvoice(seen.clone()));
    let running = start(&ns, "aj_echo", registry).await;
    push(&ns, "aj_echo", case["payload"].as_str().unwrap()).await;
    // A Rust-enqueued job of the same class, without the optional keyword.
    let client = ActiveJobClient::new(
        Client::connect(&support::url(), &ns).await.unwrap(),
        Rails::V6_1,
    );
    let job = NewJob::new("SendInvoiceJob")
        .queue("aj_echo")
        .arg(json!(7))
        .arg(Arg::keywords([("notify", json!(false).into())]));
    client.enqueue(&job).await.unwrap();
    support::eventually(10, "two invoices", || async {
        (seen.lock().unwrap().len() >= 2).then_some(())
    })
    .await;
    stop(running).await;
    let mut got = seen.lock().unwrap().clone();
    got.sort();
    assert_eq!(
        got,
        vec![
            (7, false, vec![], 0),
            (42, true, vec!["ops@example.com".to_string()], 0)
        ]
    );
}

#[tokio::test]
async fn failures_keep_the_wrapper_bytes_and_name_the_job_class() {
    let ns = support::namespace("aj-fail");
    let registry = Registry::new().handler("FailJob", |ctx: JobContext| async move {
        let msg: String = ctx.arg(0)?;
        Err(JobError::msg(msg))
    });
    let running = start(&ns, "q", registry).await;
    let fail = NewJob::new("FailJob").queue("q").arg(json!("boom ✓ <&>"));
    let client = ActiveJobClient::new(
        Client::connect(&support::url(), &ns).await.unwrap(),
        Rails::V7_1,
    );
    let failing = client.enqueue(&fail).await.unwrap().bytes;
    let unknown = client
        .enqueue(&NewJob::new("NobodyJob").queue("q"))
        .await
        .unwrap()
        .bytes;
    let malformed = format!(r#"{{"class":"{WRAPPER_CLASS}","args":[{{"job_id":"x"}}]}}"#);
    push(&ns, "q", &malformed).await;
    let entries = failures(&ns, 3).await;
    stop(running).await;
    for (bytes, exception, text) in [
        (failing.as_str(), "RuntimeError", "boom ✓ <&>"),
        (unknown.as_str(), "Resq::UnknownJobClass", "NobodyJob"),
        (malformed.as_str(), "Resq::MalformedPayload", "job_class"),
    ] {
        let entry = entries
            .iter()
            .find(|e| e.contains(bytes))
            .unwrap_or_else(|| panic!("no entry holds {bytes} verbatim: {entries:?}"));
        let e: Value = serde_json::from_str(entry).unwrap();
        assert_eq!(e["exception"], json!(exception));
        assert!(
            e["error"].as_str().unwrap().contains(text),
            "{}",
            e["error"]
        );
        assert_eq!(e["queue"], json!("q"));
        assert_eq!(e["payload"]["class"], json!(WRAPPER_CLASS));
    }
}

#[tokio::test]
async fn a_handler_under_the_wrapper_name_takes_precedence() {
    let ns = support::namespace("aj-wrapper");
    let (registry, seen) = recording(&[WRAPPER_CLASS, "EchoJob"]);
    let running = start(&ns, "q", registry).await;
    let client = ActiveJobClient::new(
        Client::connect(&support::url(), &ns).await.unwrap(),
        Rails::V6_1,
    );
    client
        .enqueue(&NewJob::new("EchoJob").queue("q").arg(Arg::symbol("s")))
        .await
        .unwrap();
    support::eventually(10, "one job", || async {
        (!seen.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    stop(running).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let (class, args, id) = &seen[0];
    // The wrapper handler got the raw payload view, not the decoded ActiveJob view.
    assert_eq!(class, WRAPPER_CLASS);
    assert_eq!(args[0]["job_class"], json!("EchoJob"));
    assert_eq!(id, &None);
}

#[tokio::test]
async fn rust_enqueued_jobs_round_trip_through_a_resq_worker() {
    let ns = support::namespace("aj-roundtrip");
    let (registry, seen) = recording(&["EchoJob"]);
    let running = start(&ns, "q", registry).await;
    let client = ActiveJobClient::new(
        Client::connect(&support::url(), &ns).await.unwrap(),
        Rails::V7_1,
    );
    let job = NewJob::new("EchoJob").queue("q").args([
        Arg::symbol("s"),
        Arg::duration(Duration::from_millis(1500)),
        Arg::range(json!(1), json!(null), true),
        Arg::big_decimal("1.50"),
        Arg::global_id("gid://app/User/1"),
        json!({"k": [1, 2.0]}).into(),
    ]);
    let done = client.enqueue(&job).await.unwrap();
    support::eventually(10, "one job", || async {
        (!seen.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    stop(running).await;
    let (class, args, id) = seen.lock().unwrap()[0].clone();
    assert_eq!(class, "EchoJob");
    assert_eq!(id.as_deref(), Some(done.job_id.as_str()));
    assert_eq!(
        serde_json::to_string(&args).unwrap(),
        r#"["s",1.5,{"begin":1,"end":null,"exclude_end":true},"1.50","gid://app/User/1",{"k":[1,2.0]}]"#
    );
}

#[tokio::test]
async fn delayed_jobs_use_resque_schedulers_layout() {
    let ns = support::namespace("aj-delayed");
    let keys = Keys::new(&ns);
    let client = ActiveJobClient::new(
        Client::connect(&support::url(), &ns).await.unwrap(),
        Rails::V7_1,
    );
    let job = NewJob::new("EchoJob").queue("later").arg(json!(1));
    let done = client
        .enqueue_in(&job, Duration::from_secs(3600))
        .await
        .unwrap();
    let ts = done.delayed_until.expect("delayed");
    let now = chrono::Utc::now().timestamp();
    assert!((ts - now - 3600).abs() <= 2, "{ts} vs {now}");
    let item: Value = serde_json::from_str(&done.bytes).unwrap();
    let keys_of: Vec<&str> = item
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys_of, ["class", "args", "queue"]);
    assert_eq!(item["queue"], json!("later"));
    assert_eq!(item["args"][0]["job_id"], json!(done.job_id));
    let scheduled = item["args"][0]["scheduled_at"].as_str().unwrap();
    assert_eq!(
        resq::time::parse_any(scheduled).map(|t| t.timestamp()),
        Some(ts)
    );

    let mut con = support::con().await;
    let bucket: Vec<String> = con.lrange(keys.delayed_bucket(ts), 0, -1).await.unwrap();
    assert_eq!(bucket, vec![done.bytes.clone()]);
    let index: Vec<String> = con.smembers(keys.timestamps(&done.bytes)).await.unwrap();
    assert_eq!(index, vec![Keys::delayed_bucket_member(ts)]);
    let schedule: Vec<(String, f64)> = con
        .zrange_withscores(keys.delayed_schedule(), 0, -1)
        .await
        .unwrap();
    assert_eq!(schedule, vec![(ts.to_string(), ts as f64)]);
    let queued: i64 = con.llen(keys.queue("later")).await.unwrap();
    assert_eq!(queued, 0);

    // Not after now: enqueued at once, as the plain wrapper payload.
    let past = chrono::Utc::now() - chrono::Duration::seconds(5);
    let done = client.enqueue_at(&job, past).await.unwrap();
    assert_eq!(done.delayed_until, None);
    let queued: Vec<String> = con.lrange(keys.queue("later"), 0, -1).await.unwrap();
    assert_eq!(queued, vec![done.bytes.clone()]);
    assert!(done
        .bytes
        .starts_with(&format!(r#"{{"class":"{WRAPPER_CLASS}","args":[{{"#)));
    let scheduled: usize = con.zcard(keys.delayed_schedule()).await.unwrap();
    assert_eq!(scheduled, 1);
}
