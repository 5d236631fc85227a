//! Queues, delayed items, info and the pause switch, read from golden captures and from
//! payloads that carry their enqueue time.

use crate::admin_common;
use crate::support;

use redis::AsyncCommands;
use resq::admin::{Admin, DelayedSource, QueueKind};
use support::Keys;

#[tokio::test]
async fn list_and_jesque_zset_queues_with_ages() {
    let ns = support::namespace("qages");
    let mut con = support::con().await;
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    let k = Keys::new(admin.namespace());
    let now = admin.now().await.unwrap().timestamp();
    // Sidekiq-style top-level enqueued_at (epoch seconds) and ActiveJob's args[0].enqueued_at.
    let aged = format!(
        r#"{{"class":"A","args":[],"enqueued_at":{}.25}}"#,
        now - 120
    );
    let aj = r#"{"class":"ActiveJob::QueueAdapters::ResqueAdapter::JobWrapper","args":[{"job_class":"X","enqueued_at":"2020-01-01T00:00:00.000000000Z"}]}"#;
    let () = con
        .sadd(k.queues(), &["aged", "aj", "plain", "gone"])
        .await
        .unwrap();
    let () = con
        .rpush(
            k.queue("aged"),
            &[aged.as_str(), r#"{"class":"A","args":[]}"#],
        )
        .await
        .unwrap();
    let () = con.rpush(k.queue("aj"), aj).await.unwrap();
    let () = con
        .rpush(k.queue("plain"), r#"{"class":"A","args":[1]}"#)
        .await
        .unwrap();
    // A Jesque delayed queue: one member overdue by 60 s, one far in the future.
    let () = con
        .zadd(
            k.queue("jz"),
            r#"{"class":"J","args":[],"vars":null}"#,
            (now - 60) * 1000,
        )
        .await
        .unwrap();
    let () = con
        .zadd(
            k.queue("jz"),
            r#"{"class":"J","args":[1],"vars":null}"#,
            4_102_444_800_000i64,
        )
        .await
        .unwrap();
    let () = con.sadd(k.queues(), "jz").await.unwrap();
    let qs = admin.queues().await.unwrap();
    let q = |n: &str| {
        qs.iter()
            .find(|q| q.name == n)
            .unwrap_or_else(|| panic!("{n} missing"))
    };
    assert_eq!(q("aged").size, 2);
    let age = q("aged").oldest_age_s.unwrap();
    assert!((119.0..125.0).contains(&age), "{age}");
    assert!(q("aj").oldest_age_s.unwrap() > 86_400.0 * 365.0);
    assert_eq!(
        q("plain").oldest_age_s,
        None,
        "a bare Resque payload has no time"
    );
    assert_eq!(q("gone").kind, QueueKind::Empty);
    assert_eq!(q("jz").kind, QueueKind::Zset);
    assert_eq!((q("jz").size, q("jz").pending), (2, Some(1)));
    let age = q("jz").oldest_age_s.unwrap();
    assert!((59.0..65.0).contains(&age), "{age}");
}

#[tokio::test]
async fn delayed_items_of_resque_scheduler_and_jesque() {
    let ns = support::namespace("qdelayed");
    let mut con = support::con().await;
    admin_common::load_fixture(&mut con, "resque/14_scheduler_delayed.json", "keys", &ns).await;
    let f6 = support::fixture("jesque/06_recurring_enqueue.json");
    admin_common::load_keys(&mut con, &f6["keys"], "resque", &ns).await;
    // Jesque does not add a recurring queue to <ns>:queues; a worker told about it would.
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    let () = con
        .sadd(Keys::new(admin.namespace()).queues(), "recurring")
        .await
        .unwrap();
    let items = admin.delayed(100).await.unwrap();
    let sched: Vec<_> = items
        .iter()
        .filter(|i| i.source == DelayedSource::Scheduler)
        .collect();
    assert_eq!(sched.len(), 6, "{sched:?}");
    assert!(sched
        .iter()
        .all(|i| i.queue.is_some() && i.class.is_some() && i.at.is_some()));
    assert!(sched.windows(2).all(|w| w[0].at <= w[1].at));
    let jes: Vec<_> = items
        .iter()
        .filter(|i| i.source == DelayedSource::Jesque)
        .collect();
    assert_eq!(jes.len(), 6, "{jes:?}");
    let hourly = jes.iter().find(|i| i.raw.contains("hourly")).unwrap();
    assert_eq!(hourly.every_s, Some(3600.0));
    assert_eq!(admin.delayed(2).await.unwrap().len(), 2);
}

#[tokio::test]
async fn info_counts_and_pause_switch() {
    let ns = support::namespace("qinfo");
    let mut con = support::con().await;
    admin_common::load_fixture(&mut con, "resque/07_failures.json", "keys", &ns).await;
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    let k = Keys::new(admin.namespace());
    let () = con.set(k.stat_processed(), "5").await.unwrap();
    let () = con.set(k.stat_failed(), "4").await.unwrap();
    let i = admin.info().await.unwrap();
    assert_eq!((i.processed, i.failed, i.failed_entries), (5, 4, 5));
    assert!(!i.paused);
    admin.pause().await.unwrap();
    let v: String = con.get(k.pause_all_workers()).await.unwrap();
    assert_eq!(v, "true");
    assert!(admin.info().await.unwrap().paused);
    // Ruby's rule: trimmed, case-insensitive.
    let () = con.set(k.pause_all_workers(), " TRUE ").await.unwrap();
    assert!(admin.is_paused().await.unwrap());
    admin.resume().await.unwrap();
    let exists: bool = con.exists(k.pause_all_workers()).await.unwrap();
    assert!(!exists);
}
