//! A success under a retry policy costs what a plain success costs: resque-retry's attempt
//! counter and failure details go in the step's own completion, so a slot's job end and its
//! next reserve stay one function call (`FCALL`s counted with `INFO commandstats` on a
//! redis-server of the test's own, so nothing else calls it meanwhile).

use crate::support;

use redis::AsyncCommands;
use resq::{JobContext, Registry, RetryPolicy};
use std::time::Duration;
use support::Keys;

/// Jobs drained by each worker.
const JOBS: usize = 40;

/// The server's `FCALL`s so far.
async fn fcalls(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await
        .expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_fcall:"))
        .and_then(|rest| rest.split(',').find_map(|f| f.strip_prefix("calls=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// resque-retry's logical key of a `Noop` job with the one argument `i`.
fn retry_key(i: usize) -> String {
    let digest = sha1_smol::Sha1::from(i.to_string()).digest().to_string();
    Keys::resque_retry_logical("Noop", Some(&digest))
}

/// Drains `JOBS` succeeding jobs (`args: [i]`) with one slot, each with resque-retry's keys
/// left by an earlier failure; returns the `FCALL`s the drain cost and the retry keys left.
async fn drain(server: &support::RedisServer, retry: bool) -> (u64, usize) {
    let ns = support::namespace(if retry { "retry" } else { "plain" });
    let keys = Keys::new(&ns);
    let mut con = server.con().await;
    for i in 0..JOBS {
        let _: () = con
            .rpush(
                keys.queue("q"),
                format!(r#"{{"class":"Noop","args":[{i}]}}"#),
            )
            .await
            .expect("push");
        let _: () = con
            .set(keys.retry_attempts(&retry_key(i)), "0")
            .await
            .expect("counter");
        let _: () = con
            .set(keys.retry_failure(&retry_key(i)), "{}")
            .await
            .expect("failure");
    }
    let mut registry = Registry::new().handler("Noop", |_ctx: JobContext| async { Ok(()) });
    if retry {
        registry = registry.retry("Noop", RetryPolicy::fixed(Duration::from_secs(1), 3));
    }
    let before = fcalls(&mut con).await;
    let running = support::start(
        support::builder(&ns, "q")
            .redis_url(server.url())
            .concurrency(1)
            .registry(registry),
    )
    .await;
    support::eventually(60, "every job counted processed", || {
        let mut con = con.clone();
        let key = keys.stat_processed();
        async move {
            let n: Option<usize> = con.get(&key).await.expect("get");
            (n == Some(JOBS)).then_some(())
        }
    })
    .await;
    let cost = fcalls(&mut con).await - before;
    support::stop(running).await;
    let mut left = 0;
    for i in 0..JOBS {
        let k = retry_key(i);
        let n: usize = con
            .exists(&[keys.retry_attempts(&k), keys.retry_failure(&k)])
            .await
            .expect("exists");
        left += n;
    }
    (cost, left)
}

#[tokio::test]
async fn a_success_under_a_retry_policy_is_one_step_and_clears_resque_retry_keys() {
    let server = support::RedisServer::start(&[]);
    let (plain, plain_left) = drain(&server, false).await;
    let (retry, retry_left) = drain(&server, true).await;
    eprintln!("FCALLs for {JOBS} jobs at one slot: {plain} plain, {retry} under a retry policy");
    // Without a policy nothing touches resque-retry's keys; with one, every success clears
    // its job's counter and failure details.
    assert_eq!(plain_left, 2 * JOBS);
    assert_eq!(retry_left, 0);
    // One step per job either way (the start and the idle polls around the drain vary by a
    // few calls; a second call per job would add JOBS).
    assert!(
        plain >= JOBS as u64 && retry <= plain + JOBS as u64 / 4,
        "FCALLs for {JOBS} jobs: {plain} without a retry policy, {retry} with one"
    );
}
