//! The ceiling: what Redis allows for this job lifecycle here. `c` threads, each with its own
//! connection and worker id, call `ceiling.lua` (finish the previous job + reserve the next,
//! the same Redis work as one resq step) back to back until the queue is empty.

use crate::measure;
use anyhow::{bail, Result};
use std::sync::{Arc, Barrier};
use std::time::Instant;

static SCRIPT: &str = include_str!("ceiling.lua");

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
