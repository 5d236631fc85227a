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

/// Drains `n` pre-filled Noop jobs with `c` connections; returns jobs/s.
pub fn run(url: &str, ns: &str, queue: &str, n: usize, c: usize) -> Result<f64> {
    let client = redis::Client::open(url)?;
    let mut con = client.get_connection()?;
    measure::fill(&mut con, ns, queue, n)?;
    let barrier = Arc::new(Barrier::new(c + 1));
    let mut handles = Vec::new();
    for k in 0..c {
        let mut con = client.get_connection()?;
        let barrier = barrier.clone();
        let id = format!("ceiling:{}-{k}:{queue}", std::process::id());
        let keys = [
            format!("{ns}:worker:{id}"),
            format!("{ns}:stat:processed"),
            format!("{ns}:stat:processed:{id}"),
            format!("{ns}:pause-all-workers"),
            format!("{ns}:queue:{queue}"),
        ];
        let queue_json = format!("\"{queue}\"");
        handles.push(std::thread::spawn(move || -> Result<()> {
            let script = redis::Script::new(SCRIPT);
            barrier.wait();
            let mut prev: Option<Vec<u8>> = None;
            loop {
                let mut inv = script.prepare_invoke();
                for k in &keys {
                    inv.key(k);
                }
                inv.arg(prev.as_deref().unwrap_or(b""))
                    .arg("2026-01-01T00:00:00.000+0000")
                    .arg(&queue_json);
                let next: Option<Vec<u8>> = inv.invoke(&mut con)?;
                match next {
                    Some(r) => prev = Some(r),
                    None => return Ok(()),
                }
            }
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
    let done: u64 = redis::cmd("GET")
        .arg(format!("{ns}:stat:processed"))
        .query(&mut con)?;
    if done != n as u64 {
        bail!("ceiling: {done} of {n} jobs counted");
    }
    Ok(n as f64 / secs)
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
    let client = redis::Client::open(url)?;
    let mut con = client.get_connection()?;
    let script = redis::Script::new(SCRIPT);
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SCRIPT)
        .query(&mut con)?;
    let sha = script.get_hash().to_string();
    measure::fill(&mut con, ns, queue, n)?;
    let barrier = Arc::new(Barrier::new(threads + 1));
    let mut handles = Vec::new();
    for t in 0..threads {
        let mut con = client.get_connection()?;
        let barrier = barrier.clone();
        let sha = sha.clone();
        let slots: Vec<[String; 5]> = (0..depth)
            .map(|k| {
                let id = format!("ceiling:{}-{t}.{k}:{queue}", std::process::id());
                [
                    format!("{ns}:worker:{id}"),
                    format!("{ns}:stat:processed"),
                    format!("{ns}:stat:processed:{id}"),
                    format!("{ns}:pause-all-workers"),
                    format!("{ns}:queue:{queue}"),
                ]
            })
            .collect();
        let queue_json = format!("\"{queue}\"");
        handles.push(std::thread::spawn(move || -> Result<()> {
            let mut prev: Vec<Option<Vec<u8>>> = vec![None; slots.len()];
            let mut active: Vec<usize> = (0..slots.len()).collect();
            barrier.wait();
            while !active.is_empty() {
                let mut p = redis::pipe();
                for &i in &active {
                    let c = p.cmd("EVALSHA").arg(&sha).arg(5);
                    for k in &slots[i] {
                        c.arg(k);
                    }
                    c.arg(prev[i].as_deref().unwrap_or(b""))
                        .arg("2026-01-01T00:00:00.000+0000")
                        .arg(&queue_json);
                }
                let replies: Vec<Option<Vec<u8>>> = p.query(&mut con)?;
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
    let done: u64 = redis::cmd("GET")
        .arg(format!("{ns}:stat:processed"))
        .query(&mut con)?;
    if done != n as u64 {
        bail!("ceiling: {done} of {n} jobs counted");
    }
    Ok(n as f64 / secs)
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
    let client = redis::Client::open(url)?;
    let mut con = client.get_connection()?;
    measure::fill(&mut con, ns, queue, n)?;
    let barrier = Arc::new(Barrier::new(threads + 1));
    let mut handles = Vec::new();
    for t in 0..threads {
        let mut con = client.get_connection()?;
        let barrier = barrier.clone();
        let ids: Vec<[String; 2]> = (0..depth)
            .map(|k| {
                let id = format!("ceiling:{}-{t}.{k}:{queue}", std::process::id());
                [
                    format!("{ns}:worker:{id}"),
                    format!("{ns}:stat:processed:{id}"),
                ]
            })
            .collect();
        let shared = [
            format!("{ns}:stat:processed"),
            format!("{ns}:pause-all-workers"),
            format!("{ns}:queue:{queue}"),
        ];
        let queue_json = format!("\"{queue}\"");
        handles.push(std::thread::spawn(move || -> Result<()> {
            let script = redis::Script::new(BATCH_SCRIPT);
            let mut prev: Vec<Vec<u8>> = vec![Vec::new(); ids.len()];
            let mut active: Vec<usize> = (0..ids.len()).collect();
            barrier.wait();
            while !active.is_empty() {
                let mut inv = script.prepare_invoke();
                for k in &shared {
                    inv.key(k);
                }
                for &i in &active {
                    inv.key(&ids[i][0]).key(&ids[i][1]);
                }
                inv.arg("2026-01-01T00:00:00.000+0000").arg(&queue_json);
                for &i in &active {
                    inv.arg(prev[i].as_slice());
                }
                let replies: Vec<Vec<u8>> = inv.invoke(&mut con)?;
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
    let done: u64 = redis::cmd("GET")
        .arg(format!("{ns}:stat:processed"))
        .query(&mut con)?;
    if done != n as u64 {
        bail!("ceiling: {done} of {n} jobs counted");
    }
    Ok(n as f64 / secs)
}
