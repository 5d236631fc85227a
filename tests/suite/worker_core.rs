//! The runtime against a real Redis: priority, wildcards, non-list keys, bad input, resend
//! safety of the step script, typed/blocking/panicking handlers, pause, byte preservation.

use crate::support;

use support::stop;

use redis::AsyncCommands;
use resq::{Client, Job, JobContext, JobError, JobResult, Registry, Running, Worker};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use support::Keys;

type Seen = Arc<Mutex<Vec<(String, Vec<Value>)>>>;

/// A registry whose handlers record (class, args) in order.
fn recording(classes: &[&str]) -> (Registry, Seen) {
    let seen: Seen = Arc::default();
    let mut r = Registry::new();
    for c in classes {
        let s = seen.clone();
        r = r.handler(c, move |ctx: JobContext| {
            let s = s.clone();
            async move {
                s.lock()
                    .unwrap()
                    .push((ctx.class().to_string(), ctx.args().to_vec()));
                Ok(())
            }
        });
    }
    (r, seen)
}

async fn start(ns: &str, queues: &str, concurrency: usize, registry: Registry) -> Running {
    Worker::builder()
        .redis_url(support::url())
        .namespace(ns)
        .queues(queues)
        .unwrap()
        .concurrency(concurrency)
        .registry(registry)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap()
}

async fn wait_len(seen: &Seen, n: usize) {
    support::eventually(10, &format!("{n} jobs"), || async {
        (seen.lock().unwrap().len() >= n).then_some(())
    })
    .await;
}

async fn wait_failed(ns: &str, n: usize) -> Vec<Value> {
    let key = Keys::new(ns).failed();
    support::eventually(10, &format!("{n} failures"), || {
        let key = key.clone();
        async move {
            let mut con = support::con().await;
            let v: Vec<String> = con.lrange(&key, 0, -1).await.unwrap();
            (v.len() >= n).then(|| v.iter().map(|s| serde_json::from_str(s).unwrap()).collect())
        }
    })
    .await
}

#[tokio::test]
async fn strict_priority_across_queues() {
    let ns = support::namespace("priority");
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    for i in 0..3 {
        client
            .enqueue_to("low", "A", &[json!(format!("low{i}"))])
            .await
            .unwrap();
    }
    for i in 0..3 {
        client
            .enqueue_to("high", "A", &[json!(format!("high{i}"))])
            .await
            .unwrap();
    }
    let (reg, seen) = recording(&["A"]);
    let w = start(&ns, "high,low", 1, reg).await;
    wait_len(&seen, 6).await;
    let order: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, a)| a[0].as_str().unwrap().to_string())
        .collect();
    assert_eq!(order, ["high0", "high1", "high2", "low0", "low1", "low2"]);
    stop(w).await;
}

#[tokio::test]
async fn wildcards_follow_ruby_and_skip_non_lists() {
    let ns = support::namespace("glob");
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    let keys = Keys::new(&ns);
    let mut con = support::con().await;
    client
        .enqueue_to("b_two", "A", &[json!("b_two")])
        .await
        .unwrap();
    client
        .enqueue_to("a_one", "A", &[json!("a_one")])
        .await
        .unwrap();
    client
        .enqueue_to("skipme", "A", &[json!("skipme")])
        .await
        .unwrap();
    client
        .enqueue_to("critical", "A", &[json!("critical")])
        .await
        .unwrap();
    // A queue that is not in <ns>:queues is not polled by a wildcard list, even when named.
    let _: () = con
        .rpush(
            keys.queue("unlisted"),
            r#"{"class":"A","args":["unlisted"]}"#,
        )
        .await
        .unwrap();
    // A Jesque-style zset queue in the set must be skipped, not crash the worker.
    let _: () = con.sadd(keys.queues(), "zq").await.unwrap();
    let _: () = con
        .zadd(keys.queue("zq"), r#"{"class":"A","args":["z"]}"#, 1)
        .await
        .unwrap();
    let (reg, seen) = recording(&["A"]);
    let w = start(&ns, "critical,unlisted,*,!skip*", 1, reg).await;
    assert!(
        w.ids()[0].ends_with(":critical,unlisted,*"),
        "{}",
        w.ids()[0]
    );
    wait_len(&seen, 3).await;
    client
        .enqueue_to("a_one", "A", &[json!("after")])
        .await
        .unwrap();
    wait_len(&seen, 4).await;
    let order: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, a)| a[0].as_str().unwrap().to_string())
        .collect();
    assert_eq!(order, ["critical", "a_one", "b_two", "after"]);
    assert_eq!(con.llen::<_, usize>(keys.queue("skipme")).await.unwrap(), 1);
    assert_eq!(
        con.llen::<_, usize>(keys.queue("unlisted")).await.unwrap(),
        1
    );
    assert_eq!(con.zcard::<_, usize>(keys.queue("zq")).await.unwrap(), 1);
    stop(w).await;
}

#[tokio::test]
async fn bad_input_becomes_failures_and_the_worker_carries_on() {
    let ns = support::namespace("bad");
    let keys = Keys::new(&ns);
    let mut con = support::con().await;
    let bad: Vec<Vec<u8>> = vec![
        b"{\"class\":\"A\",\"args\":[1]".to_vec(),
        b"{\"class\":\"A\",\"args\":[\"\xff\xfe\"]}".to_vec(),
        b"{\"args\":[1]}".to_vec(),
        b"{\"class\":\"A\",\"args\":\"nope\"}".to_vec(),
        b"{\"class\":\"Unregistered\",\"args\":[]}".to_vec(),
        b"[1,2,3]".to_vec(),
        b"".to_vec(),
    ];
    let _: () = con.sadd(keys.queues(), "q").await.unwrap();
    for b in &bad {
        let _: () = con.rpush(keys.queue("q"), b.as_slice()).await.unwrap();
    }
    let _: () = con
        .rpush(keys.queue("q"), r#"{"class":"A","args":["ok"]}"#)
        .await
        .unwrap();
    let (reg, seen) = recording(&["A"]);
    let w = start(&ns, "q", 2, reg).await;
    wait_len(&seen, 1).await;
    let failures = wait_failed(&ns, bad.len()).await;
    assert_eq!(failures.len(), bad.len());
    for f in &failures {
        let keys: Vec<&String> = f.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "failed_at",
                "payload",
                "exception",
                "error",
                "backtrace",
                "worker",
                "queue"
            ]
        );
        // Readable by Jesque's FailureDAO: payload is null or an object with a class.
        assert!(
            f["payload"].is_null() || f["payload"]["class"].is_string(),
            "{f}"
        );
        assert_eq!(f["queue"], "q");
    }
    let exceptions: Vec<&str> = failures
        .iter()
        .map(|f| f["exception"].as_str().unwrap())
        .collect();
    assert_eq!(
        exceptions
            .iter()
            .filter(|e| **e == "Resq::MalformedPayload")
            .count(),
        6
    );
    assert!(exceptions.contains(&"Resq::UnknownJobClass"));
    assert!(failures
        .iter()
        .any(|f| f["error"].as_str().unwrap().contains("not valid UTF-8")));
    stop(w).await;
}

#[tokio::test]
async fn payload_bytes_survive_into_record_and_failure() {
    let ns = support::namespace("bytes");
    let keys = Keys::new(&ns);
    let mut con = support::con().await;
    let raw = r#"{ "args" : [ 1.50, "x/y", 18446744073709551616 ], "class":"Boom", "extra": {"id": "é"} }"#;
    let _: () = con.sadd(keys.queues(), "q").await.unwrap();
    let _: () = con.rpush(keys.queue("q"), raw).await.unwrap();
    let reg = Registry::new().handler("Boom", |_c: JobContext| async {
        Err(JobError::msg("boom"))
    });
    let w = start(&ns, "q", 1, reg).await;
    let f = wait_failed(&ns, 1).await;
    let text: Vec<String> = con.lrange(keys.failed(), 0, -1).await.unwrap();
    assert!(
        text[0].contains(&format!(r#""payload":{raw},"#)),
        "{}",
        text[0]
    );
    assert_eq!(f[0]["exception"], "RuntimeError");
    stop(w).await;
}

struct Resize;

#[derive(Deserialize)]
struct Size {
    w: u32,
    h: u32,
}

impl Job for Resize {
    const CLASS: &'static str = "Resize";
    type Args = (u64, Size);
    async fn perform(&self, (id, size): Self::Args, ctx: JobContext) -> JobResult {
        let mut con = support::con().await;
        let _: () = con
            .rpush(
                format!("{}:out", ctx.queue()),
                format!("{id}:{}x{}", size.w, size.h),
            )
            .await?;
        Ok(())
    }
}

#[tokio::test]
async fn typed_blocking_and_panicking_handlers() {
    let ns = support::namespace("kinds");
    let mut con = support::con().await;
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    let q = format!("{ns}-q");
    let thread_name = Arc::new(Mutex::new(String::new()));
    let tn = thread_name.clone();
    let reg = Registry::new()
        .job(Resize)
        .blocking("Crunch", move |ctx| {
            *tn.lock().unwrap() = std::thread::current().name().unwrap_or("").to_string();
            if ctx.arg::<bool>(0)? {
                panic!("crunch exploded");
            }
            Ok(())
        })
        .handler("Explode", |_c: JobContext| async { panic!("async boom") });
    client
        .enqueue_to(&q, "Resize", &[json!(7), json!({"w": 10, "h": 20})])
        .await
        .unwrap();
    client
        .enqueue_to(&q, "Resize", &[json!("not a number")])
        .await
        .unwrap();
    client
        .enqueue_to(&q, "Crunch", &[json!(false)])
        .await
        .unwrap();
    client
        .enqueue_to(&q, "Crunch", &[json!(true)])
        .await
        .unwrap();
    client.enqueue_to(&q, "Explode", &[]).await.unwrap();
    let w = start(&ns, &q, 1, reg).await;
    let f = wait_failed(&ns, 3).await;
    let out: Vec<String> = con.lrange(format!("{q}:out"), 0, -1).await.unwrap();
    assert_eq!(out, ["7:10x20"]);
    assert_eq!(f[0]["exception"], "Resq::InvalidArgs");
    assert_eq!(f[1]["exception"], "Resq::Panic");
    assert_eq!(f[1]["error"], "crunch exploded");
    assert!(f[1]["backtrace"][0]
        .as_str()
        .unwrap()
        .contains("worker_core.rs"));
    assert_eq!(f[2]["error"], "async boom");
    assert_ne!(
        *thread_name.lock().unwrap(),
        "",
        "blocking handler ran on a named pool thread"
    );
    stop(w).await;
    let _: () = con.del(format!("{q}:out")).await.unwrap();
}

#[tokio::test]
async fn slots_have_their_own_ids_and_pause_all_workers_is_obeyed() {
    let server = support::RedisServer::start(&[]);
    let ns = support::namespace("pause");
    let keys = Keys::new(&ns);
    let mut con = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let client = Client::connect(&server.url(), &ns).await.unwrap();
    let _: () = con.set(keys.pause_all_workers(), " TRUE\n").await.unwrap();
    client.enqueue_to("q", "A", &[json!(1)]).await.unwrap();
    let (reg, seen) = recording(&["A"]);
    let w = Worker::builder()
        .redis_url(server.url())
        .namespace(&ns)
        .queues("q")
        .unwrap()
        .concurrency(4)
        .interval(std::time::Duration::from_millis(200))
        .registry(reg)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    let mut ids = w.ids().to_vec();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4);
    let members: Vec<String> = con.smembers(keys.workers()).await.unwrap();
    assert_eq!(members.len(), 4);
    // Each slot's first reserve ran with the job already queued: it must have left it there.
    support::eventually(10, "the slots' first reserves", || async {
        (w.reserve_attempts() >= 4).then_some(())
    })
    .await;
    assert_eq!(con.llen::<_, usize>(keys.queue("q")).await.unwrap(), 1);
    assert!(seen.lock().unwrap().is_empty());
    let _: () = con.del(keys.pause_all_workers()).await.unwrap();
    support::eventually(15, "the job after resuming", || async {
        (seen.lock().unwrap().len() == 1).then_some(())
    })
    .await;
    stop(w).await;
    let members: Vec<String> = con.smembers(keys.workers()).await.unwrap();
    assert!(members.is_empty());
}
