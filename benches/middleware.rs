//! What middleware costs: one worker process draining the same jobs with no user middleware,
//! with three pass-through layers, with a `Hooks` set (before/after/on_failure), and with a
//! retry policy on the handler (jobs that succeed: what the policy costs a job that needs no
//! retry; docs/retry.md quotes it), against a
//! real redis-server it starts on a free port. Rounds alternate between the setups so drift in
//! the machine hits them alike; the report is the median throughput of each and its ratio to
//! the run without middleware. `cargo bench --bench middleware` (env: `JOBS`, default 30000;
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
            Setup::Bare => {}
            Setup::Retry => {
                r = r.retry("Noop", RetryPolicy::fixed(Duration::from_secs(1), 3));
            }
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
        r.handler("Noop", move |_ctx: JobContext| {
            let done = done.clone();
            async move {
                done.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
        })
    }
}

async fn round(url: &str, setup: Setup, round: usize, jobs: usize, slots: usize) -> f64 {
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
    running.stop(Phase::Quit);
    running.wait().await.expect("stop");
    let _: () = redis::cmd("FLUSHDB")
        .query_async(&mut con)
        .await
        .expect("flush");
    rate
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
                rates[i].push(round(&url, *s, r, jobs, slots).await);
            }
        }
    });
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let medians: Vec<f64> = rates.iter_mut().map(median).collect();
    println!("{jobs} jobs × {rounds} rounds, CONCURRENCY={slots}, one process, one async thread\n");
    println!("| setup | jobs/s (median) | vs no middleware |");
    println!("|---|---|---|");
    for (s, m) in setups.iter().zip(&medians) {
        println!("| {} | {:.0} | {:.3} |", s.name(), m, m / medians[0]);
    }
    let _ = server.kill();
    let _ = server.wait();
}
