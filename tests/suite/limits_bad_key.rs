//! A limits key that cannot be read never lifts a limit (issue 29): a running worker keeps the
//! limits it last read in force and warns naming the key, at a bounded rate, until the key is
//! mended; a worker starting meanwhile starts with its declarations and an error naming the
//! key; the CLI's errors name the key.

use crate::support;

use redis::AsyncCommands;
use resq::admin::Admin;
use resq::limits::Limit;
use resq::{Client, JobContext, Registry};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::cli;
use support::Keys;

/// Enqueues `n` compat `Gauge` jobs of 150 ms on `ns` and waits until they are done; the most
/// that ran at once.
async fn gauge_batch(ns: &str, n: u64) -> u64 {
    let echo = Keys::new(ns).compat_echo();
    let (max, done) = (format!("{echo}:max"), format!("{echo}:done"));
    let mut con = support::con().await;
    let _: () = con.del(&[&max, &done]).await.unwrap();
    let c = Client::connect(&support::url(), ns).await.unwrap();
    for i in 0..n {
        c.enqueue_class("Gauge", &[json!(150), json!(format!("g{i}"))])
            .await
            .unwrap();
    }
    support::eventually(30, "every job of the batch", || async {
        let d: u64 = support::con().await.llen(&done).await.unwrap();
        (d == n).then_some(())
    })
    .await;
    con.get(&max).await.unwrap()
}

/// Waits until `w`'s log holds `text`; the log.
async fn logged(w: &support::WorkerProc, text: &str) -> String {
    support::eventually(10, text, || async {
        let log = w.stderr();
        log.contains(text).then_some(log)
    })
    .await
}

/// A namespace where an operator set `pair`, a limit of 2 on the compat worker's `Gauge` class
/// (no worker declares it), and its admin.
async fn overridden(prefix: &str) -> (String, Admin) {
    let ns = support::namespace(prefix);
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    admin
        .set_limit(&Limit::concurrency("pair", 2).class("Gauge"))
        .await
        .unwrap();
    (ns, admin)
}

#[tokio::test]
async fn a_wrong_typed_override_key_keeps_the_override_in_force_until_mended() {
    let (ns, _admin) = overridden("lim-wrongtype").await;
    let keys = Keys::new(&ns);
    let set_key = keys.limits_set();
    let w = support::WorkerProc::start(&support::url(), &ns, 8, &[]);
    let mut con = support::con().await;
    // `SET` replaces the hash with a string at once; then again and again (each write tells
    // the worker to read the limits again).
    for i in 0..20 {
        let _: () = con.set(&set_key, format!("garbage {i}")).await.unwrap();
    }
    let warning = format!("WRONGTYPE at {set_key}");
    let log = logged(&w, &warning).await;
    let max = gauge_batch(&ns, 12).await;
    assert!(max <= 2, "{max} ran at once under a limit of 2\n{log}");
    let log = w.stderr();
    assert!(
        log.contains("WARN") && log.contains("the limits last read from it stay in force"),
        "{log}"
    );
    // At a bounded rate: not once per read.
    let warnings = log.lines().filter(|l| l.contains(&warning)).count();
    assert!(warnings <= 2, "{warnings} warnings:\n{log}");
    // Mended (in one step: the new override renamed over the string): the worker says so and
    // applies what the key holds now.
    let fixed = format!("{set_key}:fixed");
    let limit = Limit::concurrency("pair", 4).class("Gauge");
    let _: () = con
        .hset(&fixed, "pair", serde_json::to_string(&limit).unwrap())
        .await
        .unwrap();
    let _: () = con.rename(&fixed, &set_key).await.unwrap();
    logged(&w, "the stored limits can be read again").await;
    let max = gauge_batch(&ns, 24).await;
    assert!(
        (3..=4).contains(&max),
        "{max} ran at once under the mended limit of 4"
    );
}

#[tokio::test]
async fn an_override_that_does_not_parse_keeps_the_one_last_read() {
    let (ns, _admin) = overridden("lim-garbage").await;
    let set_key = Keys::new(&ns).limits_set();
    let w = support::WorkerProc::start(&support::url(), &ns, 8, &[]);
    let mut con = support::con().await;
    let _: () = con.hset(&set_key, "pair", "{not json").await.unwrap();
    let log = logged(&w, &format!("limit \"pair\" in {set_key} cannot be read")).await;
    assert!(
        log.contains("the definition last read stays in force"),
        "{log}"
    );
    let max = gauge_batch(&ns, 12).await;
    assert!(max <= 2, "{max} ran at once under a limit of 2\n{log}");
    // The operator's listing says so too.
    let out = cli::ok(&ns, &["limits", "list"]).await;
    let err = cli::stderr(&out);
    assert!(
        err.contains(&format!(
            "WARNING: limit \"pair\" in {set_key} cannot be read"
        )),
        "{err}"
    );
}

#[tokio::test]
async fn a_worker_starting_while_the_key_is_broken_starts_and_says_so() {
    let (ns, _admin) = overridden("lim-start").await;
    let set_key = Keys::new(&ns).limits_set();
    let _: () = support::con().await.set(&set_key, "garbage").await.unwrap();
    let w = support::WorkerProc::start(&support::url(), &ns, 2, &[]);
    let log = logged(&w, &format!("WRONGTYPE at {set_key}")).await;
    assert!(
        log.contains("ERROR") && log.contains("none of it applies until it is mended"),
        "{log}"
    );
}

#[tokio::test]
async fn a_worker_starting_while_the_key_is_broken_applies_its_declarations() {
    let ns = support::namespace("lim-declared");
    let keys = Keys::new(&ns);
    let mut con = support::con().await;
    let _: () = con.set(keys.limits_set(), "garbage").await.unwrap();
    let (now, max, done) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (n, m, d) = (now.clone(), max.clone(), done.clone());
    let registry = Registry::new()
        .limit(Limit::concurrency("slow", 2).class("Slow"))
        .handler("Slow", move |_ctx: JobContext| {
            let (n, m, d) = (n.clone(), m.clone(), d.clone());
            async move {
                m.fetch_max(n.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                n.fetch_sub(1, Ordering::SeqCst);
                d.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        });
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    for _ in 0..10 {
        c.enqueue_class("Slow", &[]).await.unwrap();
    }
    let w = support::start(
        support::builder(&ns, "default")
            .concurrency(8)
            .registry(registry),
    )
    .await;
    support::eventually(20, "every job", || async {
        (done.load(Ordering::SeqCst) == 10).then_some(())
    })
    .await;
    support::stop(w).await;
    assert_eq!(max.load(Ordering::SeqCst), 2, "the declared limit held");
}

#[tokio::test]
async fn the_cli_names_the_broken_key() {
    let (ns, _admin) = overridden("lim-cli").await;
    let set_key = Keys::new(&ns).limits_set();
    let _: () = support::con().await.set(&set_key, "garbage").await.unwrap();
    for args in [
        &["limits", "list"][..],
        &["--json", "limits", "list"],
        &["limits", "set", "pair", "--concurrency", "3"],
        &["limits", "clear", "pair"],
    ] {
        let out = cli::resq(&ns, args).await;
        let err = cli::stderr(&out);
        assert!(!out.status.success(), "{args:?}: {}", cli::stdout(&out));
        assert!(
            err.contains(&format!("WRONGTYPE at {set_key}")) && !err.contains("Pipeline"),
            "{args:?}: {err}"
        );
    }
}
