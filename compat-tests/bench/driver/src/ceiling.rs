//! The ceiling: what Redis allows for this job lifecycle here. Worker ids call `ceiling.lua`
//! (finish the previous job + reserve the next, the same Redis work as one resq step) back to
//! back until the queue is empty: either `c` threads with a connection and an id each
//! ([`run`]), or threads that each drive `depth` ids over one connection, one pipeline of
//! `depth` calls per round trip ([`run_pipelined`]) — as a multiplexed client does — or in one
//! call of `ceiling_batch.lua` per round trip ([`run_batched`]) — as resq's step batching does.

use crate::measure;
use anyhow::{bail, Result};
use std::sync::{Arc, Barrier};
use std::time::Instant;

static SCRIPT: &str = include_str!("ceiling.lua");
static BATCH_SCRIPT: &str = include_str!("ceiling_batch.lua");

/// One client thread's loop: given its connection, drains until the queue is empty.
type Drainer = Box<dyn FnOnce(&mut redis::Connection) -> Result<()> + Send>;

/// Runs the shell command in env `name`, if set (`FLOW_BEFORE_DRAIN` / `FLOW_AFTER_DRAIN`, the
/// flow bench's hooks around a drain's measured part: scripts/drain-cost zeroes and dumps
/// callgrind's counts of the server with them, so the fill is not counted).
fn hook(name: &str) -> Result<()> {
    if let Ok(cmd) = std::env::var(name) {
        let status = std::process::Command::new("sh")
            .args(["-c", &cmd])
            .env("SETUP", "ceiling")
            .status()?;
        if !status.success() {
            bail!("{name} failed: {cmd}");
        }
    }
    Ok(())
}

/// Redis CPU µs per job over the last ceiling drain's measured part (between the hooks): the
/// fill is not in it.
static WINDOW_REDIS_US: std::sync::Mutex<Option<f64>> = std::sync::Mutex::new(None);

/// Redis CPU µs per job over the last drain's measured part (between the hooks).
pub fn window_redis_us() -> Option<f64> {
    *WINDOW_REDIS_US.lock().unwrap()
}

/// Fills the queue with `n` Noop jobs, starts one thread per drainer (each with its own
/// connection), times them from a common start to the last one's end, checks that all `n`
/// jobs were counted and returns jobs/s.
fn drain(url: &str, ns: &str, queue: &str, n: usize, drainers: Vec<Drainer>) -> Result<f64> {
    let client = redis::Client::open(url)?;
    let mut con = client.get_connection()?;
    measure::fill(&mut con, ns, queue, n)?;
    hook("FLOW_BEFORE_DRAIN")?;
    let cpu0 = measure::redis_cpu(&mut con)?;
    let barrier = Arc::new(Barrier::new(drainers.len() + 1));
    let mut handles = Vec::new();
    for d in drainers {
        let mut con = client.get_connection()?;
        let barrier = barrier.clone();
        handles.push(std::thread::spawn(move || -> Result<()> {
            barrier.wait();
            d(&mut con)
        }));
    }
    barrier.wait();
    let t = Instant::now();
    for h in handles {
        match h.join() {
            Ok(r) => r?,
            Err(_) => bail!("ceiling thread panicked"),
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu1 = measure::redis_cpu(&mut con)?;
    hook("FLOW_AFTER_DRAIN")?;
    *WINDOW_REDIS_US.lock().unwrap() = Some((cpu1 - cpu0) * 1e6 / n as f64);
    let done: u64 = redis::cmd("GET")
        .arg(format!("{ns}:stat:processed"))
        .query(&mut con)?;
    if done != n as u64 {
        bail!("ceiling: {done} of {n} jobs counted");
    }
    Ok(n as f64 / secs)
}

/// A worker id for thread `t`, id `k`.
fn id(t: usize, k: usize, queue: &str) -> String {
    format!("ceiling:{}-{t}.{k}:{queue}", std::process::id())
}

/// `ceiling.lua`'s keys for worker `id`.
fn keys(ns: &str, queue: &str, id: &str) -> [String; 5] {
    [
        format!("{ns}:worker:{id}"),
        format!("{ns}:stat:processed"),
        format!("{ns}:stat:processed:{id}"),
        format!("{ns}:pause-all-workers"),
        format!("{ns}:queue:{queue}"),
    ]
}

/// The `run_at` every ceiling record carries.
const RUN_AT: &str = "2026-01-01T00:00:00.000+0000";

/// Drains `n` pre-filled Noop jobs with `c` connections; returns jobs/s.
pub fn run(url: &str, ns: &str, queue: &str, n: usize, c: usize) -> Result<f64> {
    let queue_json = format!("\"{queue}\"");
    let drainers = (0..c)
        .map(|t| {
            let keys = keys(ns, queue, &id(t, 0, queue));
            let queue_json = queue_json.clone();
            Box::new(move |con: &mut redis::Connection| -> Result<()> {
                let script = redis::Script::new(SCRIPT);
                let mut prev: Option<Vec<u8>> = None;
                loop {
                    let mut inv = script.prepare_invoke();
                    for k in &keys {
                        inv.key(k);
                    }
                    inv.arg(prev.as_deref().unwrap_or(b""))
                        .arg(RUN_AT)
                        .arg(&queue_json);
                    match inv.invoke::<Option<Vec<u8>>>(con)? {
                        Some(r) => prev = Some(r),
                        None => return Ok(()),
                    }
                }
            }) as Drainer
        })
        .collect();
    drain(url, ns, queue, n, drainers)
}

/// Drains `n` pre-filled Noop jobs with `threads` connections, each pipelining the calls of
/// `depth` worker ids; returns jobs/s.
pub fn run_pipelined(
    url: &str,
    ns: &str,
    queue: &str,
    n: usize,
    threads: usize,
    depth: usize,
) -> Result<f64> {
    let mut con = redis::Client::open(url)?.get_connection()?;
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SCRIPT)
        .query(&mut con)?;
    let queue_json = format!("\"{queue}\"");
    let drainers = (0..threads)
        .map(|t| {
            let slots: Vec<[String; 5]> = (0..depth)
                .map(|k| keys(ns, queue, &id(t, k, queue)))
                .collect();
            let (sha, queue_json) = (sha.clone(), queue_json.clone());
            Box::new(move |con: &mut redis::Connection| -> Result<()> {
                let mut prev: Vec<Option<Vec<u8>>> = vec![None; slots.len()];
                let mut active: Vec<usize> = (0..slots.len()).collect();
                while !active.is_empty() {
                    let mut p = redis::pipe();
                    for &i in &active {
                        let c = p.cmd("EVALSHA").arg(&sha).arg(5);
                        for k in &slots[i] {
                            c.arg(k);
                        }
                        c.arg(prev[i].as_deref().unwrap_or(b""))
                            .arg(RUN_AT)
                            .arg(&queue_json);
                    }
                    let replies: Vec<Option<Vec<u8>>> = p.query(con)?;
                    let mut still = Vec::with_capacity(active.len());
                    for (&i, r) in active.iter().zip(replies) {
                        if r.is_some() {
                            still.push(i);
                        }
                        prev[i] = r;
                    }
                    active = still;
                }
                Ok(())
            }) as Drainer
        })
        .collect();
    drain(url, ns, queue, n, drainers)
}

/// Drains `n` pre-filled Noop jobs with `threads` connections, each sending the transitions of
/// `depth` worker ids as one `ceiling_batch.lua` call per round trip; returns jobs/s.
pub fn run_batched(
    url: &str,
    ns: &str,
    queue: &str,
    n: usize,
    threads: usize,
    depth: usize,
) -> Result<f64> {
    let queue_json = format!("\"{queue}\"");
    let shared = [
        format!("{ns}:stat:processed"),
        format!("{ns}:pause-all-workers"),
        format!("{ns}:queue:{queue}"),
    ];
    let drainers = (0..threads)
        .map(|t| {
            let ids: Vec<[String; 2]> = (0..depth)
                .map(|k| {
                    let [worker, _, processed, _, _] = keys(ns, queue, &id(t, k, queue));
                    [worker, processed]
                })
                .collect();
            let (shared, queue_json) = (shared.clone(), queue_json.clone());
            Box::new(move |con: &mut redis::Connection| -> Result<()> {
                let script = redis::Script::new(BATCH_SCRIPT);
                let mut prev: Vec<Vec<u8>> = vec![Vec::new(); ids.len()];
                let mut active: Vec<usize> = (0..ids.len()).collect();
                while !active.is_empty() {
                    let mut inv = script.prepare_invoke();
                    for k in &shared {
                        inv.key(k);
                    }
                    for &i in &active {
                        inv.key(&ids[i][0]).key(&ids[i][1]);
                    }
                    inv.arg(RUN_AT).arg(&queue_json);
                    for &i in &active {
                        inv.arg(prev[i].as_slice());
                    }
                    let replies: Vec<Vec<u8>> = inv.invoke(con)?;
                    let mut still = Vec::with_capacity(active.len());
                    for (&i, r) in active.iter().zip(replies) {
                        if !r.is_empty() {
                            still.push(i);
                        }
                        prev[i] = r;
                    }
                    active = still;
                }
                Ok(())
            }) as Drainer
        })
        .collect();
    drain(url, ns, queue, n, drainers)
}
