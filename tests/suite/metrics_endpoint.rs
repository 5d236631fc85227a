//! The metrics listener of a real worker process (`METRICS_ADDR`): Prometheus text with job,
//! queue, tracked-job, slot and Redis series; `/healthz`; `/readyz` (ready while the worker
//! runs).

use crate::support;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};

/// `GET path` over plain HTTP/1.0; returns (status, body), or None when nothing listens.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let status = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// The value of the sample line starting with `prefix` (labels included), if any.
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The worker process, killed when dropped (a failed assertion does not leave it running).
struct Worker(Child);

impl std::ops::Deref for Worker {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Worker {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn start(ns: &str, port: u16) -> Worker {
    Worker(
        Command::new(support::example_bin("compat_worker"))
            .env("REDIS_URL", support::url())
            .env("RESQUE_NAMESPACE", ns)
            .env("QUEUES", "m1,m2")
            .env("CONCURRENCY", "2")
            .env("METRICS_ADDR", format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("compat_worker"),
    )
}

#[tokio::test]
async fn worker_serves_metrics_health_and_readiness() {
    let ns = support::namespace("metrics");
    let port = support::free_port();
    let mut child = start(&ns, port);
    support::eventually(15, "/readyz to answer 200", || async {
        get(port, "/readyz").filter(|(s, _)| *s == 200)
    })
    .await;
    assert_eq!(get(port, "/healthz").map(|(s, _)| s), Some(200));
    let client = resq::Client::connect(&support::url(), &ns).await.unwrap();
    for _ in 0..3 {
        client.enqueue_to("m1", "Noop", &[]).await.unwrap();
    }
    client
        .enqueue_to("m2", "Fail", &[serde_json::json!("boom")])
        .await
        .unwrap();
    let text = support::eventually(15, "job counters", || async {
        let (_, body) = get(port, "/metrics")?;
        let ok = sample(
            &body,
            r#"resq_jobs_processed_total{queue="m1",class="Noop"}"#,
        ) == Some(3.0)
            && sample(&body, r#"resq_jobs_failed_total{queue="m2",class="Fail"}"#) == Some(1.0);
        ok.then_some(body)
    })
    .await;
    assert_eq!(
        sample(
            &text,
            r#"resq_jobs_processed_total{queue="m2",class="Fail"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"resq_job_duration_seconds_count{queue="m1",class="Noop"}"#
        ),
        Some(3.0)
    );
    assert_eq!(sample(&text, "resq_slots "), Some(2.0));
    assert!(sample(&text, "resq_busy_slots ").is_some(), "{text}");
    assert!(
        sample(&text, "resq_redis_errors_total ").is_some(),
        "{text}"
    );
    assert!(
        sample(&text, "resq_redis_reconnects_total ").is_some(),
        "{text}"
    );
    // Queue depth is read at scrape time.
    let k = support::Keys::new(ns.clone());
    let mut con = support::con().await;
    let () = redis::pipe()
        .sadd(k.queues(), "backlog")
        .ignore()
        .rpush(k.queue("backlog"), &[r#"{"class":"A","args":[]}"#; 4])
        .ignore()
        .query_async(&mut con)
        .await
        .unwrap();
    let (_, body) = get(port, "/metrics").unwrap();
    assert_eq!(
        sample(&body, r#"resq_queue_depth{queue="backlog"}"#),
        Some(4.0),
        "{body}"
    );
    assert!(
        body.contains("# TYPE resq_job_duration_seconds histogram"),
        "{body}"
    );
    // Jobs by state, counted at scrape time: one completed, one queued on a queue no worker
    // reads and one cancelled there; queued counts every job in the queues (the four untracked
    // ones of `backlog` too, and the cancelled one not taken yet); every state counted has its
    // series, retries count as scheduled.
    let track = resq::jobs::Track::new;
    let done = client
        .enqueue_class_tracked("m2", "Noop", &[], track())
        .await
        .unwrap();
    let s = client
        .wait(&done, std::time::Duration::from_secs(15))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.state, resq::jobs::State::Completed);
    client
        .enqueue_class_tracked("backlog", "A", &[], track())
        .await
        .unwrap();
    let gone = client
        .enqueue_class_tracked("backlog", "A", &[], track())
        .await
        .unwrap();
    client.cancel(&gone).await.unwrap();
    let (_, body) = get(port, "/metrics").unwrap();
    assert_eq!(sample(&body, "resq_batches"), Some(0.0), "{body}");
    assert!(body.contains("# TYPE resq_jobs gauge"), "{body}");
    for (state, n) in [
        ("queued", Some(6.0)),
        ("scheduled", Some(0.0)),
        ("waiting", Some(0.0)),
        ("working", Some(0.0)),
        ("retrying", None),
        ("completed", Some(1.0)),
        ("failed", Some(0.0)),
        ("killed", Some(0.0)),
        ("cancelled", Some(1.0)),
    ] {
        assert_eq!(
            sample(&body, &format!("resq_jobs{{state=\"{state}\"}}")),
            n,
            "{state}: {body}"
        );
    }
    // Batches, counted at scrape time.
    let batch = resq::workflows::Batch::new().job("backlog", "A", vec![]);
    client.create_batch(batch).await.unwrap();
    let (_, body) = get(port, "/metrics").unwrap();
    assert_eq!(sample(&body, "resq_batches"), Some(1.0), "{body}");
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    assert!(child.wait().unwrap().success());
    assert!(
        get(port, "/readyz").is_none(),
        "the listener ends with the process"
    );
}

#[tokio::test]
async fn a_bad_metrics_address_is_a_config_error() {
    let out = Command::new(support::example_bin("compat_worker"))
        .env("REDIS_URL", support::url())
        .env("RESQUE_NAMESPACE", support::namespace("badaddr"))
        .env("METRICS_ADDR", "not-an-address")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("METRICS_ADDR"));
}

#[tokio::test]
async fn limit_gauges_are_read_at_scrape_time() {
    let ns = support::namespace("metricslim");
    let port = support::free_port();
    let mut child = start(&ns, port);
    support::eventually(15, "/readyz to answer 200", || async {
        get(port, "/readyz").filter(|(s, _)| *s == 200)
    })
    .await;
    let admin = resq::admin::Admin::connect(&support::url(), &ns)
        .await
        .unwrap();
    admin
        .set_limit(&resq::limits::Limit::concurrency("mlim", 4).queue("nowhere"))
        .await
        .unwrap();
    let keys = support::Keys::new(ns.as_str());
    let (holders, held) = (
        keys.limit_holders("mlim", None),
        keys.limit_held("mlim", None),
    );
    let held_at = chrono::Utc::now().timestamp_millis() - 30_000;
    let mut con = support::con().await;
    // Three units held by a slot running a job (the running process derives the sum from the
    // slots' shares: a sum no slot holds would be corrected).
    let slot = "elsewhere~resq:1-0:nowhere";
    let () = redis::pipe()
        .hset(&holders, "__units", 3)
        .hset(keys.sharing(), slot, format!("3 {}:{holders}", holders.len()))
        .set(keys.worker(slot), r#"{"queue":"nowhere","run_at":"2026-11-27T00:00:00Z","payload":{"class":"A","args":[]}}"#)
        .zadd(
            &held,
            r#"{"class":"A","args":[]}"#,
            99.0 * 1e13 + held_at as f64,
        )
        .zadd(
            &held,
            r#"{"class":"A","args":[1]}"#,
            99.0 * 1e13 + held_at as f64 + 1000.0,
        )
        .query_async(&mut con)
        .await
        .unwrap();
    let (_, body) = get(port, "/metrics").unwrap();
    for t in [
        "resq_limit_capacity",
        "resq_limit_in_use",
        "resq_limit_held",
        "resq_limit_oldest_held_seconds",
    ] {
        assert!(body.contains(&format!("# TYPE {t} gauge")), "{t}: {body}");
    }
    assert_eq!(
        sample(&body, r#"resq_limit_capacity{limit="mlim"}"#),
        Some(4.0),
        "{body}"
    );
    assert_eq!(
        sample(&body, r#"resq_limit_in_use{limit="mlim"}"#),
        Some(3.0),
        "{body}"
    );
    assert_eq!(
        sample(&body, r#"resq_limit_held{limit="mlim"}"#),
        Some(2.0),
        "{body}"
    );
    let oldest = sample(&body, r#"resq_limit_oldest_held_seconds{limit="mlim"}"#).unwrap();
    assert!((29.0..90.0).contains(&oldest), "{body}");
    // A limit removed is gone from the next scrape.
    assert!(admin.clear_limit("mlim", true).await.unwrap());
    let (_, body) = get(port, "/metrics").unwrap();
    assert!(!body.contains(r#"{limit="mlim"}"#), "{body}");
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    assert!(child.wait().unwrap().success());
}
