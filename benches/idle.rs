//! Idle behaviour of one resq process: Redis commands per second while idle, and the pick-up
//! latency of a job enqueued into an idle process (enqueue → handler start), p50/p99 over 100
//! jobs. Run with `cargo bench --bench idle` (starts its own redis-server on a free port).
//!
//! Compare with a Ruby worker at its default `INTERVAL=5`: per poll `GET pause-all-workers` plus
//! one `LPOP` per queue, i.e. 0.4 commands/s for one queue, and up to 5 s pick-up latency.

#[path = "../src/testing/server.rs"]
mod server;

use redis::AsyncCommands;
use resq::{JobContext, Phase, Registry, Worker};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

async fn total_commands(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(con)
        .await
        .unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

async fn measure(url: &str, slots: usize, idle_secs: u64) {
    let ns = format!("idle-bench-{slots}");
    let lat: Arc<Mutex<Vec<f64>>> = Arc::default();
    let l = lat.clone();
    let registry = Registry::new().handler("Stamp", move |ctx: JobContext| {
        let l = l.clone();
        async move {
            let sent: u128 = ctx.arg::<String>(0)?.parse().unwrap_or(0);
            l.lock()
                .unwrap()
                .push((now_ns().saturating_sub(sent)) as f64 / 1e6);
            Ok(())
        }
    });
    let running = Worker::builder()
        .redis_url(url)
        .namespace(&ns)
        .queues("default")
        .unwrap()
        .concurrency(slots)
        .registry(registry)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    let mut con = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = total_commands(&mut con).await;
    let t = Instant::now();
    tokio::time::sleep(Duration::from_secs(idle_secs)).await;
    let after = total_commands(&mut con).await;
    // Subtract our own INFO call.
    let per_sec = (after - before).saturating_sub(1) as f64 / t.elapsed().as_secs_f64();

    let queue = format!("{ns}:queue:default");
    for i in 0..100 {
        let payload = format!(r#"{{"class":"Stamp","args":["{}"]}}"#, now_ns());
        let _: () = con.rpush(&queue, payload).await.unwrap();
        while lat.lock().unwrap().len() <= i {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        // Let the process go idle again (the slot parks, the watcher blocks).
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut v = lat.lock().unwrap().clone();
    v.sort_by(|a, b| a.total_cmp(b));
    let p = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "| {slots} | {per_sec:.2} | {:.3} | {:.3} | {:.3} |",
        p(0.5),
        p(0.99),
        v[v.len() - 1]
    );
    running.stop(Phase::Quit);
    running.wait().await.unwrap();
}

#[tokio::main]
async fn main() {
    let idle_secs: u64 = std::env::var("IDLE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    // A private server, stopped by its guard when the bench ends.
    let (_guard, url) = server::start_redis(&[]);
    println!("idle over {idle_secs} s, QUEUES=default, INTERVAL=5 (Ruby at INTERVAL=5: 0.40 commands/s, pick-up up to 5000 ms)\n");
    println!("| slots | idle Redis commands/s | pick-up p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|");
    for slots in [1, 25] {
        measure(&url, slots, idle_secs).await;
    }
}
