//! resque-scheduler's delayed jobs, written by resq's client and moved by resq's scheduler:
//! golden replays of fixtures 14 → 15 → 16, the master lock shared with a resque-scheduler,
//! node-resque's items, many concurrent movers, and the in-process and standalone schedulers.

use crate::keydump;
use crate::support;

use support::scheduler;

use chrono::Utc;
use redis::AsyncCommands;
use resq::client::Scheduled;
use resq::Client;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::Keys;

async fn client(ns: &str) -> Client {
    Client::connect(&support::url(), ns).await.unwrap()
}

fn vol(fx: &Value, name: &str) -> i64 {
    fx["volatile_values"][name].as_i64().unwrap()
}

#[tokio::test]
async fn golden_14_15_16_enqueue_move_remove() {
    let ns = support::namespace("golden");
    let c = client(&ns).await;
    let mut con = support::con().await;
    let now = Utc::now().timestamp();
    let f14 = support::fixture("resque/14_scheduler_delayed.json");
    let (fx_in, fx_fixed, fx_due) = (
        vol(&f14, "ENQUEUE_IN_TIMESTAMP"),
        vol(&f14, "FIXED_TIMESTAMP"),
        vol(&f14, "DUE_TIMESTAMP"),
    );

    // Fixture 14's actions, with this run's times.
    let Scheduled::Delayed(t_in) = c
        .enqueue_in(
            "default",
            Duration::from_secs(3600),
            "SimpleJob",
            &[json!(1), json!("a")],
        )
        .await
        .unwrap()
    else {
        panic!("not delayed")
    };
    let fixed = now + 7200;
    let at = |t: i64| chrono::DateTime::from_timestamp(t, 0).unwrap();
    for _ in 0..2 {
        c.enqueue_at("default", at(fixed), "SimpleJob", &[json!({"x": 1})])
            .await
            .unwrap();
    }
    c.enqueue_at("high", at(fixed), "SimpleJob", &[json!(2)])
        .await
        .unwrap();
    let r = c
        .enqueue_at(
            "default",
            at(fixed + 60),
            "Jobs::Nested",
            &[json!("unicode ✓"), Value::Null, json!(1.5)],
        )
        .await
        .unwrap();
    assert_eq!(r, Scheduled::Delayed(fixed + 60));
    let r = c
        .enqueue_at("default", at(now - 10), "SimpleJob", &[json!("past")])
        .await
        .unwrap();
    assert_eq!(r, Scheduled::Now);
    let due = now - 3600;
    c.delayed_push(due, "default", "SimpleJob", &[json!("due-now")])
        .await
        .unwrap();

    let swaps = vec![
        (fx_in.to_string(), t_in.to_string()),
        ((fx_fixed + 60).to_string(), (fixed + 60).to_string()),
        (fx_fixed.to_string(), fixed.to_string()),
        (fx_due.to_string(), due.to_string()),
    ];
    let want = keydump::expected(&f14, "keys", &swaps);
    keydump::assert_same(&keydump::dump(&mut con, &ns).await, &want);
    assert_eq!(c.delayed_queue_schedule_size().await.unwrap(), 4);
    assert_eq!(c.count_all_scheduled_jobs().await.unwrap(), 6);
    assert_eq!(
        c.delayed_queue_peek(0, 10).await.unwrap(),
        [due, t_in, fixed, fixed + 60]
    );
    assert_eq!(c.delayed_timestamp_size(fixed).await.unwrap(), 3);
    assert_eq!(
        c.scheduled_at("high", "SimpleJob", &[json!(2)])
            .await
            .unwrap(),
        [fixed]
    );

    // Fixture 15: one scheduler pass as master (lock value as Ruby's, HOST:PID).
    let f15 = support::fixture("resque/15_scheduler_after_handle_delayed.json");
    let s = scheduler(&ns, "localhost:21895").await;
    let tick = s.tick().await.unwrap();
    assert!(tick.master);
    assert_eq!(tick.moved, 1);
    let mut got = keydump::dump(&mut con, &ns).await;
    let lock = "resque:resque:resque_scheduler_master_lock";
    let ttl = got[lock]["ttl"].as_i64().unwrap();
    assert!((178..=180).contains(&ttl), "lock TTL {ttl}");
    keydump::mask_ttl(&mut got, lock);
    let mut want = keydump::expected(&f15, "keys", &swaps);
    keydump::mask_ttl(&mut want, lock);
    keydump::assert_same(&got, &want);

    // Fixture 16: Resque.remove_delayed(SimpleJob, {"x" => 1}) → 2; the zset is left alone.
    let f16 = support::fixture("resque/16_scheduler_remove_delayed.json");
    assert_eq!(
        c.remove_delayed("default", "SimpleJob", &[json!({"x": 1})])
            .await
            .unwrap(),
        2
    );
    let mut got = keydump::dump(&mut con, &ns).await;
    keydump::mask_ttl(&mut got, lock);
    let mut want = keydump::expected(&f16, "keys", &swaps);
    keydump::mask_ttl(&mut want, lock);
    keydump::assert_same(&got, &want);
    assert_eq!(
        c.remove_delayed("default", "SimpleJob", &[json!({"x": 1})])
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn a_foreign_master_blocks_moving_until_its_lock_is_gone() {
    let ns = support::namespace("foreign");
    let c = client(&ns).await;
    let keys = Keys::new(&ns);
    let mut con = support::con().await;
    c.delayed_push(Utc::now().timestamp() - 1, "q", "A", &[json!(1)])
        .await
        .unwrap();
    // A Ruby resque-scheduler on another host holds the lock.
    let _: () = con
        .set_ex(keys.scheduler_master_lock(), "otherhost:4242", 180)
        .await
        .unwrap();
    let s = scheduler(&ns, "me:1").await;
    for _ in 0..3 {
        let t = s.tick().await.unwrap();
        assert!(!t.master);
        assert_eq!(t.moved, 0);
    }
    assert_eq!(c.size("q").await.unwrap(), 0);
    let holder: String = con.get(keys.scheduler_master_lock()).await.unwrap();
    assert_eq!(holder, "otherhost:4242");
    // It exits (its lock expires or is released): resq takes over and moves the job.
    let _: () = con.del(keys.scheduler_master_lock()).await.unwrap();
    let t = s.tick().await.unwrap();
    assert!(t.master);
    assert_eq!(t.moved, 1);
    assert_eq!(
        c.peek("q", 0, 5).await.unwrap(),
        [r#"{"class":"A","args":[1]}"#]
    );
    let holder: String = con.get(keys.scheduler_master_lock()).await.unwrap();
    assert_eq!(holder, "me:1");
    let ttl: i64 = con.ttl(keys.scheduler_master_lock()).await.unwrap();
    assert!((178..=180).contains(&ttl));
    // Another resq process is not master while this one keeps the lock.
    let other = scheduler(&ns, "me:2").await;
    assert!(!other.tick().await.unwrap().master);
    assert!(s.tick().await.unwrap().master);
}

#[tokio::test]
async fn node_resque_and_unusable_items_are_handled_and_buckets_cleaned() {
    let ns = support::namespace("node");
    let keys = Keys::new(&ns);
    let mut con = support::con().await;
    let ts = Utc::now().timestamp() - 5;
    // node-resque's enqueueAt: {"class","queue","args"} and its own timestamps: key.
    let node_item = r#"{"class":"NodeJob","queue":"nq","args":[{"a":1},2.50]}"#;
    let no_queue = r#"{"class":"Lost","args":[1]}"#;
    let not_json = "{oops";
    for item in [node_item, no_queue, not_json] {
        let _: () = redis::pipe()
            .rpush(keys.delayed_bucket(ts), item)
            .sadd(keys.timestamps(item), Keys::delayed_bucket_member(ts))
            .zadd(keys.delayed_schedule(), ts, ts)
            .query_async(&mut con)
            .await
            .unwrap();
    }
    // An empty bucket left behind by remove_delayed: its zset member is cleaned too.
    let empty_ts = ts - 100;
    let _: () = con
        .zadd(keys.delayed_schedule(), empty_ts, empty_ts)
        .await
        .unwrap();
    let s = scheduler(&ns, "me:1").await;
    let t = s.tick().await.unwrap();
    assert_eq!(t.moved, 3);
    let c = client(&ns).await;
    assert_eq!(
        c.peek("nq", 0, 5).await.unwrap(),
        [r#"{"class":"NodeJob","args":[{"a":1},2.50]}"#]
    );
    let failed: Vec<String> = con.lrange(keys.failed(), 0, -1).await.unwrap();
    assert_eq!(failed.len(), 2);
    for (f, item) in failed.iter().zip([no_queue, not_json]) {
        let v: Value = serde_json::from_str(f).unwrap();
        assert_eq!(v["exception"], "Resq::UnschedulableItem");
        assert_eq!(v["payload"], Value::Null);
        assert!(v["error"].as_str().unwrap().ends_with(item), "{f}");
    }
    let left: Vec<String> = con.keys(format!("{ns}:delayed*")).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
    let left: Vec<String> = con.keys(format!("{ns}:timestamps:*")).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn many_movers_move_every_item_exactly_once() {
    const N: usize = 3000;
    let ns = support::namespace("race");
    let keys = Keys::new(&ns);
    let c = client(&ns).await;
    let now = Utc::now().timestamp();
    // Items due over the last few seconds and the next two, several per bucket.
    let producer = {
        let c = c.clone();
        tokio::spawn(async move {
            for i in 0..N {
                let ts = now - 3 + (i % 6) as i64;
                c.delayed_push(ts, "out", "Job", &[json!(i)]).await.unwrap();
            }
        })
    };
    // Four resq schedulers ("processes"), ticking as fast as they can.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut movers = Vec::new();
    for p in 0..4 {
        let s = scheduler(&ns, &format!("host:{p}")).await;
        let stop = stop.clone();
        movers.push(tokio::spawn(async move {
            let mut ticks = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                s.tick().await.unwrap();
                ticks += 1;
                tokio::task::yield_now().await;
            }
            ticks
        }));
    }
    // Mastership changes hands: the lock is deleted every few ms, as if its holder died.
    let thief = {
        let stop = stop.clone();
        let lock = keys.scheduler_master_lock();
        tokio::spawn(async move {
            let mut con = support::con().await;
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let _: () = con.del(&lock).await.unwrap();
                n += 1;
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            n
        })
    };
    producer.await.unwrap();
    let out = keys.queue("out");
    support::eventually(20, "every item moved", || {
        let out = out.clone();
        async move {
            let mut con = support::con().await;
            let n: usize = con.llen(&out).await.unwrap();
            (n >= N).then_some(())
        }
    })
    .await;
    // Nothing left to move; the movers' calls still under way end before they are joined, so
    // a duplicate any of them makes is in the list read below.
    let schedule = keys.delayed_schedule();
    support::eventually(20, "the delayed schedule to empty", || {
        let schedule = schedule.clone();
        async move {
            let mut con = support::con().await;
            let n: usize = con.zcard(&schedule).await.unwrap();
            (n == 0).then_some(())
        }
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let steals = thief.await.unwrap();
    for m in movers {
        m.await.unwrap();
    }
    let mut con = support::con().await;
    let jobs: Vec<String> = con.lrange(&out, 0, -1).await.unwrap();
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for j in &jobs {
        let v: Value = serde_json::from_str(j).unwrap();
        *seen.entry(v["args"][0].as_u64().unwrap()).or_default() += 1;
    }
    assert_eq!(
        jobs.len(),
        N,
        "duplicates: {:?}",
        seen.iter().filter(|(_, n)| **n > 1).count()
    );
    assert_eq!(seen.len(), N);
    assert!(steals > 10, "the lock changed hands only {steals} times");
    let left: Vec<String> = con.keys(format!("{ns}:delayed*")).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
    let left: Vec<String> = con.keys(format!("{ns}:timestamps:*")).await.unwrap();
    assert!(left.is_empty(), "{} timestamps keys left", left.len());
}

#[tokio::test]
async fn a_concurrent_foreign_popper_never_causes_a_double_move() {
    // node-resque's scheduler pops items one by one under its own lock; while it runs next to
    // resq (a setup the wire notes warn against), every item still ends up on the queue once.
    const N: usize = 2000;
    let ns = support::namespace("popper");
    let keys = Keys::new(&ns);
    let c = client(&ns).await;
    let ts = Utc::now().timestamp() - 1;
    for i in 0..N {
        c.delayed_push(ts, "out", "Job", &[json!(i)]).await.unwrap();
    }
    let popper = {
        let (bucket, out) = (keys.delayed_bucket(ts), keys.queue("out"));
        tokio::spawn(async move {
            let mut con = support::con().await;
            let script = redis::Script::new(
                "local x = redis.call('LPOP', KEYS[1]) if x then \
                 local j = cjson.decode(x) \
                 redis.call('RPUSH', KEYS[2], '{\"class\":\"Job\",\"args\":[' .. j['args'][1] .. ']}') \
                 return 1 end return 0",
            );
            let mut n = 0;
            loop {
                let r: i64 = script
                    .key(&bucket)
                    .key(&out)
                    .invoke_async(&mut con)
                    .await
                    .unwrap();
                if r == 0 {
                    return n;
                }
                n += 1;
            }
        })
    };
    let s = scheduler(&ns, "me:1").await;
    let mut moved = 0;
    loop {
        let t = s.tick().await.unwrap();
        moved += t.moved;
        if c.delayed_queue_schedule_size().await.unwrap() == 0 {
            break;
        }
    }
    let popped = popper.await.unwrap();
    eprintln!("resq moved {moved}, the popper {popped}");
    assert_eq!(moved + popped, N, "resq moved {moved}, the popper {popped}");
    let jobs: Vec<String> = support::con()
        .await
        .lrange(keys.queue("out"), 0, -1)
        .await
        .unwrap();
    let mut ids: Vec<u64> = jobs
        .iter()
        .map(|j| {
            serde_json::from_str::<Value>(j).unwrap()["args"][0]
                .as_u64()
                .unwrap()
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), N);
    assert_eq!(jobs.len(), N);
}

#[test]
fn in_process_scheduler_runs_a_delayed_job_about_on_time() {
    let ns = support::namespace("inproc");
    let mut w = support::WorkerProc::start(
        &support::url(),
        &ns,
        1,
        &[("RESQ_SCHEDULER", "1"), ("QUEUES", "default")],
    );
    let keys = Keys::new(&ns);
    let client = redis::Client::open(support::url()).unwrap();
    let mut con = client.get_connection().unwrap();
    // `resq enqueue --in 1` (resque-scheduler form).
    let due = Instant::now() + Duration::from_secs(1);
    let out = std::process::Command::new(support::resq_bin())
        .args([
            "enqueue",
            "--url",
            &support::url(),
            "--namespace",
            &ns,
            "--queue",
            "default",
            "--in",
            "1",
            "--",
            "Echo",
            "\"later\"",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sched: Vec<String> =
        redis::Commands::zrange(&mut con, keys.delayed_schedule(), 0, -1).unwrap();
    assert_eq!(sched.len(), 1, "filed in the delayed set");
    support::wait_until(5, "the delayed Echo to run", || {
        let v: Vec<String> = redis::Commands::lrange(&mut con, keys.compat_echo(), 0, -1).unwrap();
        (v == [r#"["later"]"#]).then_some(())
    });
    let late = Instant::now().saturating_duration_since(due);
    // Whole-second due times plus a 1 s poll: within about two seconds.
    assert!(
        late < Duration::from_millis(2500),
        "ran {late:?} after its time"
    );
    let holder: String = redis::Commands::get(&mut con, keys.scheduler_master_lock()).unwrap();
    assert!(holder.ends_with(&format!(":{}", w.pid())), "{holder}");
    w.signal("QUIT");
    assert!(w.wait_exit(10).success());
    let held: Option<String> =
        redis::Commands::get(&mut con, keys.scheduler_master_lock()).unwrap();
    assert_eq!(held, None, "lock released on exit");
}

#[test]
fn standalone_scheduler_moves_and_releases_its_lock() {
    let ns = support::namespace("cli");
    let keys = Keys::new(&ns);
    let client = redis::Client::open(support::url()).unwrap();
    let mut con = client.get_connection().unwrap();
    let mut child = std::process::Command::new(support::resq_bin())
        .args(["scheduler", "--url", &support::url(), "--namespace", &ns])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    support::wait_until(5, "the scheduler to take the lock", || {
        let v: Option<String> =
            redis::Commands::get(&mut con, keys.scheduler_master_lock()).unwrap();
        v.filter(|v| v.ends_with(&format!(":{pid}")))
    });
    let out = std::process::Command::new(support::resq_bin())
        .args([
            "enqueue",
            "--url",
            &support::url(),
            "--namespace",
            &ns,
            "--queue",
            "q",
            "--at",
            &(Utc::now().timestamp() + 1).to_string(),
            "--",
            "A",
            "1",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    support::wait_until(5, "the job on its queue", || {
        let v: Vec<String> = redis::Commands::lrange(&mut con, keys.queue("q"), 0, -1).unwrap();
        (v == [r#"{"class":"A","args":[1]}"#]).then_some(())
    });
    let ok = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(ok.success());
    let status = child.wait().unwrap();
    assert!(status.success());
    let held: Option<String> =
        redis::Commands::get(&mut con, keys.scheduler_master_lock()).unwrap();
    assert_eq!(held, None);
}
