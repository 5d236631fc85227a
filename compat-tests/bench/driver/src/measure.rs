//! The measurements: drain throughput, idle Redis commands per second, idle pick-up latency.

use anyhow::{bail, Result};
use std::time::{Duration, Instant};

/// The job every subject drains.
pub const NOOP: &str = r#"{"class":"Noop","args":[]}"#;
/// The job whose start every subject signals (`RPUSH <ns>:compat:echo`).
pub const ECHO: &str = r#"{"class":"Echo","args":[]}"#;

/// Pushes `n` Noop jobs (SADD + RPUSH in batches of 1000, one pipeline).
pub fn fill(con: &mut redis::Connection, ns: &str, queue: &str, n: usize) -> Result<()> {
    let key = format!("{ns}:queue:{queue}");
    // PAYLOAD_BYTES: the Noop jobs carry one string argument of that many bytes (ASCII), to
    // see what a payload's size costs; none by default.
    let pad = std::env::var("PAYLOAD_BYTES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    let job = if pad == 0 {
        NOOP.to_string()
    } else {
        format!(r#"{{"class":"Noop","args":["{}"]}}"#, "a".repeat(pad))
    };
    // NOOP_ARG_MOD=m: job i is `{"class":"Noop","args":[i % m]}`, the flow bench's jobs
    // (scripts/drain-cost prices the ceiling with the same jobs as resq's drains).
    let arg_mod = std::env::var("NOOP_ARG_MOD")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&m| m > 0);
    let mut p = redis::pipe();
    p.cmd("SADD")
        .arg(format!("{ns}:queues"))
        .arg(queue)
        .ignore();
    let mut left = n;
    let mut i = 0;
    while left > 0 {
        let k = left.min(1000);
        match arg_mod {
            Some(m) => {
                let jobs: Vec<String> = (i..i + k)
                    .map(|j| format!(r#"{{"class":"Noop","args":[{}]}}"#, j % m))
                    .collect();
                p.cmd("RPUSH").arg(&key).arg(jobs).ignore();
            }
            None => {
                p.cmd("RPUSH").arg(&key).arg(vec![job.as_str(); k]).ignore();
            }
        }
        i += k;
        left -= k;
    }
    let () = p.query(con)?;
    Ok(())
}

/// `<ns>:stat:processed`.
fn processed(con: &mut redis::Connection, ns: &str) -> Result<u64> {
    let v: Option<u64> = redis::cmd("GET")
        .arg(format!("{ns}:stat:processed"))
        .query(con)?;
    Ok(v.unwrap_or(0))
}

/// Pushes `n` Noop jobs into a running subject and measures jobs/s from the first job counted
/// to the last (so start-up and the subject's first poll are not counted).
pub fn drain(con: &mut redis::Connection, ns: &str, queue: &str, n: usize) -> Result<f64> {
    let base = processed(con, ns)?;
    fill(con, ns, queue, n)?;
    let deadline = Instant::now() + Duration::from_secs(900);
    let mut first: Option<(Instant, u64)> = None;
    loop {
        let p = processed(con, ns)?.saturating_sub(base);
        let now = Instant::now();
        if p > 0 && first.is_none() {
            first = Some((now, p));
        }
        if p >= n as u64 {
            let (t0, p0) = first.unwrap_or((now, p));
            let secs = now.duration_since(t0).as_secs_f64();
            return Ok(if secs > 0.0 {
                (p - p0) as f64 / secs
            } else {
                f64::NAN
            });
        }
        if now > deadline {
            bail!("drain: only {p} of {n} jobs processed in 900 s");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sum of `calls` over `INFO commandstats`, leaving out INFO itself.
pub fn commands(con: &mut redis::Connection) -> Result<u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con)?;
    Ok(info
        .lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
        .filter_map(|l| l.split("calls=").nth(1))
        .filter_map(|s| s.split(',').next())
        .filter_map(|s| s.parse::<u64>().ok())
        .sum())
}

/// Redis commands per second over `secs` while nothing is enqueued.
pub fn idle_rate(con: &mut redis::Connection, secs: u64) -> Result<f64> {
    let a = commands(con)?;
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let b = commands(con)?;
    Ok((b.saturating_sub(a)) as f64 / t.elapsed().as_secs_f64())
}

/// Pick-up latencies (enqueue → the job's first Redis write), one job at a time into an idle
/// subject, at most `jobs` jobs or `budget` time; sorted, in milliseconds.
pub fn pickup(
    con: &mut redis::Connection,
    ns: &str,
    queue: &str,
    jobs: usize,
    budget: Duration,
) -> Result<Vec<f64>> {
    let qkey = format!("{ns}:queue:{queue}");
    let echo = format!("{ns}:compat:echo");
    let _: () = redis::cmd("DEL").arg(&echo).query(con)?;
    let start = Instant::now();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(jobs);
    while out.len() < jobs && start.elapsed() < budget {
        // An idle gap of 30–70 ms, varied so it never locks onto a peer's poll period.
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        std::thread::sleep(Duration::from_millis(30 + (seed >> 33) % 41));
        let t = Instant::now();
        let _: () = redis::cmd("RPUSH").arg(&qkey).arg(ECHO).query(con)?;
        let got: Option<(String, String)> = redis::cmd("BLPOP").arg(&echo).arg(30).query(con)?;
        if got.is_none() {
            bail!("pick-up: the Echo job did not run within 30 s");
        }
        out.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    out.sort_by(|a, b| a.total_cmp(b));
    Ok(out)
}

/// The `q`-quantile of sorted values (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// Redis server CPU seconds so far (`used_cpu_user + used_cpu_sys`).
pub fn redis_cpu(con: &mut redis::Connection) -> Result<f64> {
    let info: String = redis::cmd("INFO").arg("cpu").query(con)?;
    Ok(info
        .lines()
        .filter(|l| l.starts_with("used_cpu_user:") || l.starts_with("used_cpu_sys:"))
        .filter_map(|l| l.split(':').nth(1))
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .sum())
}

/// CPU seconds `pid` has used (user + system), from /proc.
pub fn process_cpu(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}
