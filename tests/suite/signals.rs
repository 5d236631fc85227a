//! Fault suite 6d: each signal's semantics (wire notes §8, items 29–33), panics, time limits and
//! exit codes, against the real compat worker process.
//!
//! | signal | running job | new jobs | process |
//! |---|---|---|---|
//! | QUIT | finishes | none | exits 0 after unregistering |
//! | TERM / INT | aborted after `RESQUE_TERM_TIMEOUT` → `Resque::TermException` "SIGTERM" (at-least-once: back at the head of its queue) | none | exits 0 |
//! | second TERM / INT | aborted at once | none | exits 0 |
//! | USR1 | aborted now → `Resque::TermException` "SIGUSR1" | taken | keeps running |
//! | USR2 / CONT | unaffected | paused / resumed | keeps running |

use crate::support;

use redis::Commands;
use serde_json::Value;
use std::time::{Duration, Instant};
use support::{wait_until, WorkerProc};

struct Env {
    url: String,
    ns: String,
    con: redis::Connection,
}

impl Env {
    fn new(name: &str) -> Env {
        let url = support::url();
        let con = redis::Client::open(url.as_str())
            .expect("url")
            .get_connection()
            .expect("connect");
        Env {
            url,
            ns: support::namespace(name),
            con,
        }
    }

    fn worker(&self, env: &[(&str, &str)]) -> WorkerProc {
        WorkerProc::start(&self.url, &self.ns, 1, env)
    }

    fn push(&mut self, payload: &str) {
        let _: () = self
            .con
            .sadd(format!("{}:queues", self.ns), "default")
            .expect("sadd");
        let _: () = self
            .con
            .rpush(format!("{}:queue:default", self.ns), payload)
            .expect("push");
    }

    fn busy(&mut self, id: &str) -> bool {
        self.con
            .exists(format!("{}:worker:{id}", self.ns))
            .expect("exists")
    }

    fn wait_busy(&mut self, id: &str) {
        let key = format!("{}:worker:{id}", self.ns);
        let con = &mut self.con;
        wait_until(10, "the job to start", || {
            con.exists::<_, bool>(&key).ok()?.then_some(())
        });
    }

    fn failures(&mut self) -> Vec<Value> {
        let raw: Vec<String> = self
            .con
            .lrange(format!("{}:failed", self.ns), 0, -1)
            .expect("failed");
        raw.iter()
            .map(|r| serde_json::from_str(r).expect("JSON"))
            .collect()
    }

    fn queue(&mut self) -> Vec<String> {
        self.con
            .lrange(format!("{}:queue:default", self.ns), 0, -1)
            .expect("queue")
    }

    fn stat(&mut self, name: &str) -> i64 {
        let v: Option<i64> = self
            .con
            .get(format!("{}:stat:{name}", self.ns))
            .expect("stat");
        v.unwrap_or(0)
    }

    fn echoes(&mut self) -> Vec<String> {
        self.con
            .lrange(format!("{}:compat:echo", self.ns), 0, -1)
            .expect("echo")
    }

    fn assert_unregistered(&mut self) {
        support::audit::assert_no_ghosts(&mut self.con, &self.ns);
    }
}

fn wait_log(w: &WorkerProc, needle: &str) {
    wait_until(10, &format!("log line {needle:?}"), || {
        w.stderr().contains(needle).then_some(())
    });
}

#[test]
fn quit_lets_the_running_job_finish_takes_no_new_one_and_exits_0() {
    let mut e = Env::new("sig-quit");
    let mut w = e.worker(&[]);
    let id = w.ids[0].clone();
    e.push(r#"{"class":"Sleep","args":[800]}"#);
    e.wait_busy(&id);
    w.signal("QUIT");
    wait_log(&w, "QUIT");
    e.push(r#"{"class":"Echo","args":["after-quit"]}"#);
    let status = w.wait_exit(10);
    assert_eq!(status.code(), Some(0));
    assert_eq!(e.stat("processed"), 1, "the sleeping job finished");
    assert!(e.failures().is_empty());
    assert_eq!(e.queue(), vec![r#"{"class":"Echo","args":["after-quit"]}"#]);
    assert!(e.echoes().is_empty());
    e.assert_unregistered();
}

#[test]
fn term_aborts_the_job_after_the_term_timeout_as_term_exception() {
    let mut e = Env::new("sig-term");
    let mut w = e.worker(&[("RESQUE_TERM_TIMEOUT", "1.5")]);
    let id = w.ids[0].clone();
    let job = r#"{"class":"Sleep","args":[30000],"extra":"kept"}"#;
    e.push(job);
    e.wait_busy(&id);
    let t = Instant::now();
    w.signal("TERM");
    wait_log(&w, "stopping");
    assert!(e.busy(&id), "the job runs on during the term timeout");
    let status = w.wait_exit(10);
    let took = t.elapsed();
    assert_eq!(status.code(), Some(0));
    assert!(
        took >= Duration::from_millis(1450),
        "aborted before the timeout: {took:?}"
    );
    assert!(took < Duration::from_secs(6), "took {took:?}");
    let f = e.failures();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["exception"], "Resque::TermException");
    assert_eq!(f[0]["error"], "SIGTERM");
    assert_eq!(f[0]["backtrace"], serde_json::json!([]));
    assert_eq!(f[0]["worker"], id.as_str());
    assert_eq!(f[0]["payload"], serde_json::from_str::<Value>(job).unwrap());
    assert_eq!(e.stat("failed"), 1);
    assert_eq!(
        e.stat("processed"),
        1,
        "Ruby counts a failed job as processed"
    );
    e.assert_unregistered();
}

#[test]
fn term_lets_a_job_shorter_than_the_timeout_finish() {
    let mut e = Env::new("sig-term-short");
    let mut w = e.worker(&[("RESQUE_TERM_TIMEOUT", "5")]);
    let id = w.ids[0].clone();
    e.push(r#"{"class":"Sleep","args":[400]}"#);
    e.wait_busy(&id);
    w.signal("TERM");
    assert_eq!(w.wait_exit(10).code(), Some(0));
    assert!(e.failures().is_empty());
    assert_eq!(e.stat("processed"), 1);
    e.assert_unregistered();
}

#[test]
fn int_is_term_and_a_second_one_aborts_at_once() {
    let mut e = Env::new("sig-int");
    let mut w = e.worker(&[("RESQUE_TERM_TIMEOUT", "60")]);
    let id = w.ids[0].clone();
    e.push(r#"{"class":"Sleep","args":[30000]}"#);
    e.wait_busy(&id);
    w.signal("INT");
    wait_log(&w, "stopping");
    assert!(w.running());
    let t = Instant::now();
    w.signal("INT");
    assert_eq!(w.wait_exit(10).code(), Some(0));
    assert!(t.elapsed() < Duration::from_secs(5));
    let f = e.failures();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["exception"], "Resque::TermException");
    e.assert_unregistered();
}

#[test]
fn term_under_at_least_once_puts_the_job_back_at_the_head_byte_for_byte() {
    let mut e = Env::new("sig-term-alo");
    let mut w = e.worker(&[("RESQUE_TERM_TIMEOUT", "0.3"), ("RESQ_AT_LEAST_ONCE", "1")]);
    let id = w.ids[0].clone();
    let job = r#"{ "args" : [30000], "class":"Sleep" ,"vars":null}"#;
    e.push(job);
    e.wait_busy(&id);
    e.push(r#"{"class":"Echo","args":["behind"]}"#);
    w.signal("TERM");
    assert_eq!(w.wait_exit(10).code(), Some(0));
    assert!(e.failures().is_empty(), "requeued, not failed");
    assert_eq!(
        e.queue(),
        vec![
            job.to_string(),
            r#"{"class":"Echo","args":["behind"]}"#.to_string()
        ],
        "the aborted job is back at the head with its exact bytes"
    );
    assert_eq!(e.stat("processed"), 0);
    assert!(w.stderr().contains("requeued"));
    e.assert_unregistered();
}

#[test]
fn usr1_aborts_the_running_job_and_keeps_working() {
    let mut e = Env::new("sig-usr1");
    let mut w = e.worker(&[]);
    let id = w.ids[0].clone();
    e.push(r#"{"class":"Sleep","args":[30000]}"#);
    e.wait_busy(&id);
    w.signal("USR1");
    let con = &mut e.con;
    let key = format!("{}:failed", e.ns);
    wait_until(10, "the aborted job's failure", || {
        (con.llen::<_, usize>(&key).ok()? == 1).then_some(())
    });
    let f = e.failures();
    assert_eq!(f[0]["exception"], "Resque::TermException");
    assert_eq!(f[0]["error"], "SIGUSR1");
    e.push(r#"{"class":"Echo","args":["still-working"]}"#);
    let con = &mut e.con;
    let key = format!("{}:compat:echo", e.ns);
    wait_until(10, "the next job", || {
        (con.llen::<_, usize>(&key).ok()? == 1).then_some(())
    });
    assert!(w.running());
    w.signal("QUIT");
    assert_eq!(w.wait_exit(10).code(), Some(0));
    e.assert_unregistered();
}

#[test]
fn usr1_under_at_least_once_requeues_and_the_job_runs_again() {
    let mut e = Env::new("sig-usr1-alo");
    let mut w = e.worker(&[("RESQ_AT_LEAST_ONCE", "1")]);
    let id = w.ids[0].clone();
    // First run sleeps long; USR1 aborts it; the requeued copy is taken again at once.
    e.push(r#"{"class":"Sleep","args":[1500]}"#);
    e.wait_busy(&id);
    w.signal("USR1");
    wait_log(&w, "requeued");
    let con = &mut e.con;
    let key = format!("{}:stat:processed", e.ns);
    wait_until(10, "the requeued job to finish", || {
        (con.get::<_, Option<i64>>(&key).ok()?? == 1).then_some(())
    });
    assert!(e.failures().is_empty());
    w.signal("QUIT");
    assert_eq!(w.wait_exit(10).code(), Some(0));
    e.assert_unregistered();
}

#[test]
fn usr2_pauses_and_cont_resumes() {
    let mut e = Env::new("sig-usr2");
    let mut w = e.worker(&[("INTERVAL", "0.2")]);
    w.signal("USR2");
    wait_log(&w, "USR2");
    e.push(r#"{"class":"Echo","args":["while-paused"]}"#);
    // A paused slot makes no call at all (it waits for CONT), so no event or counter can
    // show that it did not take the job: the test gives it several intervals.
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(e.queue().len(), 1, "a paused worker took a job");
    w.signal("CONT");
    let con = &mut e.con;
    let key = format!("{}:compat:echo", e.ns);
    wait_until(10, "the job after CONT", || {
        (con.llen::<_, usize>(&key).ok()? == 1).then_some(())
    });
    w.signal("QUIT");
    assert_eq!(w.wait_exit(10).code(), Some(0));
}

#[test]
fn pause_all_workers_pauses_every_process_until_cleared() {
    let mut e = Env::new("sig-pause-all");
    let mut a = e.worker(&[("INTERVAL", "0.2")]);
    let mut b = e.worker(&[("INTERVAL", "0.2")]);
    let pause = format!("{}:pause-all-workers", e.ns);
    let _: () = e.con.set(&pause, " TRUE\n").expect("set");
    for i in 0..4 {
        e.push(&format!(r#"{{"class":"Echo","args":["p{i}"]}}"#));
    }
    // As above: paused slots make no call; several intervals show none took a job.
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        e.queue().len(),
        4,
        "a worker took a job while pause-all-workers was set"
    );
    let _: () = e.con.del(&pause).expect("del");
    let con = &mut e.con;
    let key = format!("{}:compat:echo", e.ns);
    wait_until(10, "the jobs after the pause", || {
        (con.llen::<_, usize>(&key).ok()? == 4).then_some(())
    });
    for w in [&mut a, &mut b] {
        w.signal("QUIT");
        assert_eq!(w.wait_exit(10).code(), Some(0));
    }
}

#[test]
fn a_panicking_job_is_a_failure_and_the_worker_goes_on() {
    let mut e = Env::new("panic");
    let mut w = e.worker(&[]);
    e.push(r#"{"class":"Panic","args":["kaboom"]}"#);
    e.push(r#"{"class":"Echo","args":["next"]}"#);
    let con = &mut e.con;
    let key = format!("{}:compat:echo", e.ns);
    wait_until(10, "the job after the panic", || {
        (con.llen::<_, usize>(&key).ok()? == 1).then_some(())
    });
    let f = e.failures();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["exception"], "Resq::Panic");
    assert_eq!(f[0]["error"], "kaboom");
    assert!(f[0]["backtrace"][0]
        .as_str()
        .is_some_and(|l| l.contains(".rs:")));
    assert!(w.running());
    w.signal("QUIT");
    assert_eq!(w.wait_exit(10).code(), Some(0));
}

#[test]
fn a_job_over_its_time_limit_fails_naming_the_limit() {
    let mut e = Env::new("timeout");
    let mut w = e.worker(&[("JOB_TIMEOUT", "0.3")]);
    e.push(r#"{"class":"Sleep","args":[10000]}"#);
    e.push(r#"{"class":"Echo","args":["next"]}"#);
    let con = &mut e.con;
    let key = format!("{}:compat:echo", e.ns);
    wait_until(10, "the job after the timeout", || {
        (con.llen::<_, usize>(&key).ok()? == 1).then_some(())
    });
    let f = e.failures();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["exception"], "Resq::JobTimeout");
    assert!(
        f[0]["error"].as_str().is_some_and(|m| m.contains("0.3s")),
        "{}",
        f[0]["error"]
    );
    w.signal("QUIT");
    assert_eq!(w.wait_exit(10).code(), Some(0));
}

#[test]
fn a_bad_configuration_exits_1_with_the_variable_named() {
    let out = std::process::Command::new(support::example_bin("compat_worker"))
        .env("REDIS_URL", support::url())
        .env("CONCURRENCY", "0")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CONCURRENCY"));
}

#[test]
fn a_signal_sent_the_moment_the_ids_are_printed_is_obeyed() {
    // The handlers are installed before the process registers and prints its ids; a QUIT or
    // TERM sent at once must shut it down cleanly, not kill it with the default action.
    for sig in ["QUIT", "TERM"] {
        let mut e = Env::new("sig-early");
        let mut w = e.worker(&[]);
        w.signal(sig);
        let status = w.wait_exit(10);
        assert_eq!(status.code(), Some(0), "{sig}: {status}");
        e.assert_unregistered();
    }
}
