//! What middleware costs: one worker process draining the same jobs with no user middleware,
//! with three pass-through layers, with a `Hooks` set (before/after/on_failure), and with a
//! retry policy on the handler (jobs that succeed: what the policy costs a job that needs no
//! retry; docs/retry.md quotes it), against a
//! real redis-server it starts on a free port. Rounds alternate between the setups so drift in
//! the machine hits them alike; the report is the median throughput of each and its ratio to
//! the run without middleware, with the `FCALL`s (round trips of the worker's steps) and
//! Redis commands each job cost in the last round (counts, which a loaded machine does not
//! move). `cargo bench --bench middleware` (env: `JOBS`, default 30000;
//! `ROUNDS`, default 3; `CONCURRENCY`, default 8).

use redis::AsyncCommands;
use resq::middleware::{from_fn, BoxFuture, Hooks, Next};
use resq::{JobContext, JobResult, Phase, Registry, RetryPolicy, Worker};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
enum Setup {
    Bare,
    Layers3,
    Hooks,
    Retry,
}

impl Setup {
    fn name(self) -> &'static str {
        match self {
            Setup::Bare => "no user middleware",
            Setup::Layers3 => "3 pass-through layers",
            Setup::Hooks => "Hooks (before, after, on_failure)",
            Setup::Retry => "a retry policy (jobs that succeed)",
        }
    }

    fn registry(self, done: Arc<AtomicUsize>) -> Registry {
        let mut r = Registry::new();
        match self {
            Setup::Bare | Setup::Retry => {}
            Setup::Layers3 => {
                for _ in 0..3 {
                    r = r.layer(from_fn(|ctx: JobContext, next: Next<'_>| {
                        Box::pin(async move { next.run(ctx).await }) as BoxFuture<'_, JobResult>
                    }));
                }
            }
            Setup::Hooks => {
                let seen = Arc::new(AtomicUsize::new(0));
                let (a, b) = (seen.clone(), seen);
                r = r.hooks(
                    Hooks::new()
                        .before_perform(move |_| {
                            a.fetch_add(1, Ordering::Relaxed);
                            Ok(())
                        })
                        .after_perform(move |_| {
                            b.fetch_add(1, Ordering::Relaxed);
                        })
                        .on_failure(|_, _| {}),
                );
            }
        }
        let r = r.handler("Noop", move |_ctx: JobContext| {
            let done = done.clone();
            async move {
                done.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
        });
        match self {
            Setup::Retry => r.retry("Noop", RetryPolicy::fixed(Duration::from_secs(1), 3)),
            _ => r,
        }
    }
}

/// The server's `FCALL`s (calls of resq's functions, one per round trip of a step) and all
/// commands so far (`INFO commandstats`).
async fn counts(con: &mut redis::aio::MultiplexedConnection) -> (u64, u64) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await
        .expect("info");
    let (mut fcalls, mut all) = (0, 0);
    for line in info.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let calls: u64 = rest
            .split(',')
            .find_map(|f| f.strip_prefix("calls="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if name == "cmdstat_fcall" {
            fcalls += calls;
        }
        if name != "cmdstat_info" {
            all += calls;
        }
    }
    (fcalls, all)
}

/// One drain: its jobs/s, and the function calls and commands it cost per job.
async fn round(
    url: &str,
    setup: Setup,
    round: usize,
    jobs: usize,
    slots: usize,
) -> (f64, f64, f64) {
    let ns = format!("mw-bench-{round}-{setup:?}");
    let client = redis::Client::open(url).expect("url");
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let queue = format!("{ns}:queue:default");
    let payload = r#"{"class":"Noop","args":[1,"two",{"three":3}]}"#;
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(1000) {
        let mut pipe = redis::pipe();
        for _ in chunk {
            pipe.rpush(&queue, payload).ignore();
        }
        let _: () = pipe.query_async(&mut con).await.expect("push");
    }
    let _: () = con
        .sadd(format!("{ns}:queues"), "default")
        .await
        .expect("sadd");
    let done = Arc::new(AtomicUsize::new(0));
    let before = counts(&mut con).await;
    let started = Instant::now();
    let running = Worker::builder()
        .redis_url(url)
        .namespace(&ns)
        .queues("default")
        .expect("queues")
        .concurrency(slots)
        .registry(setup.registry(done.clone()))
        .build()
        .expect("config")
        .start()
        .await
        .expect("start");
    while done.load(Ordering::Relaxed) < jobs {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let rate = jobs as f64 / started.elapsed().as_secs_f64();
    let after = counts(&mut con).await;
    running.stop(Phase::Quit);
    running.wait().await.expect("stop");
    let _: () = redis::cmd("FLUSHDB")
        .query_async(&mut con)
        .await
        .expect("flush");
    let per_job = |a: u64, b: u64| (a - b) as f64 / jobs as f64;
    (rate, per_job(after.0, before.0), per_job(after.1, before.1))
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let jobs = env_usize("JOBS", 30_000);
    let rounds = env_usize("ROUNDS", 3);
    let slots = env_usize("CONCURRENCY", 8);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut server = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server (apt-get install -y redis-server)");
    let url = format!("redis://127.0.0.1:{port}");
    let rt = resq::runtime::build().expect("runtime");
    let setups = [Setup::Bare, Setup::Layers3, Setup::Hooks, Setup::Retry];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); setups.len()];
    let mut cost: Vec<(f64, f64)> = vec![(0.0, 0.0); setups.len()];
    rt.block_on(async {
        let client = redis::Client::open(url.as_str()).expect("url");
        for _ in 0..500 {
            if client.get_multiplexed_async_connection().await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for r in 0..rounds {
            for (i, s) in setups.iter().enumerate() {
                let (rate, fcalls, commands) = round(&url, *s, r, jobs, slots).await;
                rates[i].push(rate);
                cost[i] = (fcalls, commands);
            }
        }
    });
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let medians: Vec<f64> = rates.iter_mut().map(median).collect();
    println!("{jobs} jobs × {rounds} rounds, CONCURRENCY={slots}, one process, one async thread\n");
    println!("| setup | jobs/s (median) | vs no middleware | FCALLs/job | commands/job |");
    println!("|---|---|---|---|---|");
    for ((s, m), (f, c)) in setups.iter().zip(&medians).zip(&cost) {
        println!(
            "| {} | {:.0} | {:.3} | {:.2} | {:.2} |",
            s.name(),
            m,
            m / medians[0],
            f,
            c
        );
    }
    let _ = server.kill();
    let _ = server.wait();
}
