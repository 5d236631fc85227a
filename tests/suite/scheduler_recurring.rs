//! Recurring schedules in resque-scheduler's stored format: one fire per occurrence across
//! several schedulers, no catch-up storm after downtime, no fire at first sight, Ruby's fires
//! respected, and `resq schedule list|add|remove`.

use crate::support;

use support::scheduler;

use chrono::{TimeZone, Utc};
use redis::AsyncCommands;
use resq::scheduler::store::NewSchedule;
use resq::scheduler::{Scheduler, SchedulerConfig};
use serde_json::{json, Map, Value};
use std::time::Duration;
use support::Keys;

async fn conn() -> resq::conn::Conn {
    resq::conn::Endpoint::open(&support::url())
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn config(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[tokio::test]
async fn every_second_fires_once_per_occurrence_across_processes() {
    let ns = support::namespace("every");
    let keys = Keys::new(&ns);
    admin(&ns)
        .await
        .add_schedule(
            "tick",
            &config(json!({"class":"Tick","queue":"ticks","args":[1],"every":"1s"})),
            chrono_tz::Tz::UTC,
        )
        .await
        .unwrap();
    // Three schedulers ticking every 20 ms; the lock is stolen often so mastership moves.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for p in 0..3 {
        let s = scheduler(&ns, &format!("h:{p}")).await;
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut fired = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                fired += s.tick().await.unwrap().fired;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            fired
        }));
    }
    let lock = keys.scheduler_master_lock();
    let started = std::time::Instant::now();
    let mut raw = support::con().await;
    while started.elapsed() < Duration::from_millis(4600) {
        let _: () = raw.del(&lock).await.unwrap();
        tokio::time::sleep(Duration::from_millis(70)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut fired = 0;
    for t in tasks {
        fired += t.await.unwrap();
    }
    let jobs: Vec<String> = raw.lrange(keys.queue("ticks"), 0, -1).await.unwrap();
    assert_eq!(jobs.len(), fired);
    // First sight at 0 s sets the first due time to the next whole second + 1 (0.0–1.0 s
    // away), then one fire per second: 4 or 5 in 4.6 s (3 on a very slow machine), never two
    // per occurrence (three schedulers racing would give 3×).
    assert!((3..=5).contains(&fired), "fired {fired} times in 4.6 s");
    assert!(jobs.iter().all(|j| j == r#"{"class":"Tick","args":[1]}"#));
    let last: Option<String> = raw.hget(keys.last_enqueued_at(), "tick").await.unwrap();
    let last = last.expect("last_enqueued_at written");
    assert!(resq::time::parse_any(&last).is_some(), "{last}");
    assert!(last.ends_with(" +0000"), "Time#to_s in UTC: {last}");
}

#[tokio::test]
async fn downtime_gives_one_fire_not_a_storm() {
    let ns = support::namespace("storm");
    let keys = Keys::new(&ns);
    admin(&ns)
        .await
        .add_schedule(
            "minutely",
            &config(json!({"class":"M","queue":"q","cron":"* * * * *"})),
            chrono_tz::Tz::UTC,
        )
        .await
        .unwrap();
    let s = scheduler(&ns, "h:1").await;
    // First sight: the token is set to the next minute; nothing fires.
    assert_eq!(s.tick().await.unwrap().fired, 0);
    let mut raw = support::con().await;
    let token: String = raw.hget(keys.schedule_next(), "minutely").await.unwrap();
    let (next, digest) = token.split_once(' ').unwrap();
    let next: i64 = next.parse().unwrap();
    assert_eq!(next % 60, 0);
    assert!(next > Utc::now().timestamp());
    // The scheduler was down for three hours: 180 missed occurrences.
    let long_ago = (Utc::now().timestamp() / 60 - 180) * 60;
    let _: () = raw
        .hset(
            keys.schedule_next(),
            "minutely",
            format!("{long_ago} {digest}"),
        )
        .await
        .unwrap();
    assert_eq!(s.tick().await.unwrap().fired, 1);
    assert_eq!(s.tick().await.unwrap().fired, 0);
    assert_eq!(raw.llen::<_, u64>(keys.queue("q")).await.unwrap(), 1);
    let token: String = raw.hget(keys.schedule_next(), "minutely").await.unwrap();
    let next: i64 = token.split_once(' ').unwrap().0.parse().unwrap();
    assert!(next > Utc::now().timestamp() && next % 60 == 0, "{token}");
}

#[tokio::test]
async fn an_occurrence_ruby_already_fired_only_moves_the_token() {
    let ns = support::namespace("rubyfired");
    let keys = Keys::new(&ns);
    admin(&ns)
        .await
        .add_schedule(
            "job",
            &config(json!({"class":"J","queue":"q","every":"1h"})),
            chrono_tz::Tz::UTC,
        )
        .await
        .unwrap();
    let s = scheduler(&ns, "h:1").await;
    s.tick().await.unwrap();
    let mut raw = support::con().await;
    let token: String = raw.hget(keys.schedule_next(), "job").await.unwrap();
    let digest = token.split_once(' ').unwrap().1.to_string();
    let due = Utc::now().timestamp() - 30;
    let _: () = raw
        .hset(keys.schedule_next(), "job", format!("{due} {digest}"))
        .await
        .unwrap();
    // A Ruby master fired it 10 s after it was due (Time#to_s in its own zone).
    let ruby = Utc
        .timestamp_opt(due + 10, 0)
        .unwrap()
        .with_timezone(&chrono::FixedOffset::west_opt(5 * 3600).unwrap())
        .format("%Y-%m-%d %H:%M:%S %z")
        .to_string();
    let _: () = raw
        .hset(keys.last_enqueued_at(), "job", &ruby)
        .await
        .unwrap();
    assert_eq!(s.tick().await.unwrap().fired, 0);
    assert_eq!(raw.llen::<_, u64>(keys.queue("q")).await.unwrap(), 0);
    let token: String = raw.hget(keys.schedule_next(), "job").await.unwrap();
    assert_eq!(token, format!("{} {digest}", due + 3600));
}

#[tokio::test]
async fn cron_with_seconds_fires_and_a_changed_spec_restarts() {
    let ns = support::namespace("cron");
    let keys = Keys::new(&ns);
    admin(&ns)
        .await
        .add_schedule(
            "fast",
            &config(
                json!({"class":"F","queue":"q","args":{"k":"v"},"cron":"* * * * * * Europe/Paris"}),
            ),
            chrono_tz::Tz::UTC,
        )
        .await
        .unwrap();
    let s = scheduler(&ns, "h:1").await;
    assert_eq!(s.tick().await.unwrap().fired, 0, "no fire at first sight");
    let mut raw = support::con().await;
    support::eventually(4, "the every-second cron to fire", || async {
        s.tick().await.unwrap();
        let n: u64 = support::con().await.llen(keys.queue("q")).await.unwrap();
        (n >= 1).then_some(())
    })
    .await;
    let jobs: Vec<String> = raw.lrange(keys.queue("q"), 0, -1).await.unwrap();
    assert_eq!(jobs[0], r#"{"class":"F","args":[{"k":"v"}]}"#);
    // Change it to hourly: the token restarts at the next hour.
    admin(&ns)
        .await
        .add_schedule(
            "fast",
            &config(json!({"class":"F","queue":"q","cron":"0 * * * *"})),
            chrono_tz::Tz::UTC,
        )
        .await
        .unwrap();
    s.tick().await.unwrap();
    let token: String = raw.hget(keys.schedule_next(), "fast").await.unwrap();
    let next: i64 = token.split_once(' ').unwrap().0.parse().unwrap();
    assert_eq!(next % 3600, 0, "{token}");
    // A removed schedule loses its token and never fires again.
    assert!(admin(&ns).await.remove_schedule("fast").await.unwrap());
    s.tick().await.unwrap();
    let token: Option<String> = raw.hget(keys.schedule_next(), "fast").await.unwrap();
    assert_eq!(token, None);
}

#[tokio::test]
async fn only_the_master_fires_and_env_filters_apply() {
    let ns = support::namespace("envs");
    let keys = Keys::new(&ns);
    for (name, env) in [("prod_only", "production"), ("any", "")] {
        let mut c = config(json!({"class":"E","queue":"q","every":"1s"}));
        if !env.is_empty() {
            c.insert("rails_env".into(), json!(env));
        }
        admin(&ns)
            .await
            .add_schedule(name, &c, chrono_tz::Tz::UTC)
            .await
            .unwrap();
    }
    let s = scheduler(&ns, "h:1").await;
    s.tick().await.unwrap();
    let mut raw = support::con().await;
    let tokens: Vec<String> = raw.hkeys(keys.schedule_next()).await.unwrap();
    assert_eq!(
        tokens,
        ["any"],
        "a schedule for another env is not even started"
    );
    let other = scheduler(&ns, "h:2").await;
    let t = other.tick().await.unwrap();
    assert!(!t.master);
    assert_eq!(t.fired, 0);
}

#[test]
fn cli_schedule_add_list_remove_in_resque_schedulers_format() {
    let ns = support::namespace("cli");
    let keys = Keys::new(&ns);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(support::resq_bin())
            .args(["--url", &support::url(), "--namespace", &ns])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, _, err) = run(&[
        "schedule",
        "add",
        "nightly",
        "--class",
        "NightlyReport",
        "--queue",
        "reports",
        "--cron",
        "0 3 * * *",
        "--description",
        "rebuild the nightly report",
        "--",
        "7",
    ]);
    assert!(ok, "{err}");
    let client = redis::Client::open(support::url()).unwrap();
    let mut con = client.get_connection().unwrap();
    let stored: String =
        redis::Commands::hget(&mut con, keys.persistent_schedules(), "nightly").unwrap();
    // Byte for byte the example of the wire notes (§9.1).
    assert_eq!(
        stored,
        r#"{"class":"NightlyReport","queue":"reports","args":[7],"cron":"0 3 * * *","description":"rebuild the nightly report"}"#
    );
    let changed: Vec<String> =
        redis::Commands::smembers(&mut con, keys.schedules_changed()).unwrap();
    assert_eq!(changed, ["nightly"]);
    let (ok, _, err) = run(&[
        "schedule",
        "add",
        "bad",
        "--queue",
        "q",
        "--cron",
        "99 * * * *",
    ]);
    assert!(!ok && err.contains("bad"), "{err}");
    let (ok, _, err) = run(&[
        "schedule", "add", "tick", "--queue", "q", "--every", "1h30m",
    ]);
    assert!(ok, "{err}");
    let (ok, out, _) = run(&["schedule", "list"]);
    assert!(ok);
    assert!(
        out.contains("nightly")
            && out.contains("cron 0 3 * * * (UTC)")
            && out.contains("every 1h30m"),
        "{out}"
    );
    let (ok, out, _) = run(&["--json", "schedule", "list"]);
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["name"], "nightly");
    assert_eq!(v[1]["class"], "tick");
    let (ok, _, _) = run(&["schedule", "remove", "nightly"]);
    assert!(ok);
    let (ok, _, err) = run(&["schedule", "remove", "nightly"]);
    assert!(!ok && err.contains("no stored schedule"), "{err}");
    let left: Vec<String> = redis::Commands::hkeys(&mut con, keys.persistent_schedules()).unwrap();
    assert_eq!(left, ["tick"]);
}

#[tokio::test]
async fn a_schedule_in_code_and_store_add_validation() {
    let ns = support::namespace("static");
    let keys = Keys::new(&ns);
    let cfg = SchedulerConfig {
        redis_url: support::url(),
        namespace: ns.clone(),
        ..SchedulerConfig::default()
    }
    .schedule(
        "beat",
        config(json!({"class":"Beat","queue":"q","every":"1s"})),
    );
    let s = Scheduler::with_lock_value(conn().await, cfg, "h:1".into());
    s.tick().await.unwrap();
    support::eventually(4, "the in-code schedule to fire", || async {
        s.tick().await.unwrap();
        let n: u64 = support::con().await.llen(keys.queue("q")).await.unwrap();
        (n >= 1).then_some(())
    })
    .await;
    let no_queue = NewSchedule {
        class: "X".into(),
        every: Some("1m".into()),
        ..NewSchedule::default()
    };
    assert!(matches!(
        admin(&ns)
            .await
            .add_schedule("x", &no_queue.to_config(), chrono_tz::Tz::UTC)
            .await,
        Err(resq::Error::Rejected(_))
    ));
}

/// The namespace's admin handle (schedules are stored through it).
async fn admin(ns: &str) -> resq::admin::Admin {
    resq::admin::Admin::connect(&support::url(), ns)
        .await
        .expect("admin")
}
