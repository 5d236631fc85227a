//! `resq limits list|set|clear`, `resq pause|resume --queue` and `resq top`'s limits section
//! (issue 15, operator side): the real `resq` binary against the test binary's own
//! `redis-server`. Limits are declared as a worker declares them (`<ns>:resq:limits`) and their
//! use seeded in the keys the scripts keep (`…:holders`, `…:held`), so every figure shown is
//! known. Bad input exits non-zero and leaves Redis as it was.

use crate::support;

use redis::AsyncCommands;
use resq::limits::Limit;
use serde_json::Value;
use std::collections::BTreeMap;

use support::cli::{json_of, ok, resq, stderr, stdout};
use support::Keys;

/// Runs `resq` with `a`, which must exit 1 saying `why`.
async fn refused(ns: &str, a: &[&str], why: &str) {
    let out = resq(ns, a).await;
    assert_eq!(out.status.code(), Some(1), "{a:?}: {}", stderr(&out));
    assert!(
        stderr(&out).contains(why),
        "{a:?}: wanted {why}: {}",
        stderr(&out)
    );
}

/// Declares `l` as a worker does at start.
async fn declare(ns: &str, l: &Limit) {
    let mut con = support::con().await;
    let () = con
        .hset(
            Keys::new(ns).limits_declared(),
            &l.name,
            serde_json::to_string(l).unwrap(),
        )
        .await
        .unwrap();
}

/// Seeds a limit's use: `units` running, one job held since `held_for_ms` ago.
async fn seed_use(ns: &str, name: &str, units: u64, held_for_ms: i64) {
    let mut con = support::con().await;
    let keys = Keys::new(ns);
    let (holders, held) = (keys.limit_holders(name, None), keys.limit_held(name, None));
    let now_ms = chrono::Utc::now().timestamp_millis();
    let score = 99.0 * 1e13 + (now_ms - held_for_ms) as f64;
    let () = redis::pipe()
        .hset(&holders, "__units", units)
        .hset(&holders, "host~resq:1:0", units)
        .zadd(&held, r#"{"class":"Charge","args":[1]}"#, score)
        .query_async(&mut con)
        .await
        .unwrap();
}

/// Every key of the namespace with its value (DUMP), to check that nothing changed.
async fn snapshot(ns: &str) -> BTreeMap<String, Vec<u8>> {
    let mut con = support::con().await;
    let keys: Vec<String> = con.keys(format!("{ns}:*")).await.unwrap();
    let mut out = BTreeMap::new();
    for k in keys {
        let v: Vec<u8> = redis::cmd("DUMP")
            .arg(&k)
            .query_async(&mut con)
            .await
            .unwrap();
        out.insert(k, v);
    }
    out
}

#[tokio::test]
async fn limits_list_set_clear_round_trip() {
    let ns = support::namespace("climits");
    let k = Keys::new(ns.as_str());
    declare(
        &ns,
        &Limit::concurrency("payments", 5)
            .class("Charge")
            .weight("Refund", 2),
    )
    .await;
    seed_use(&ns, "payments", 3, 65_000).await;

    let out = ok(&ns, &["limits", "list"]).await;
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{text}");
    for col in [
        "KIND",
        "SCOPE",
        "SETTING",
        "CAPACITY",
        "IN USE",
        "HELD",
        "OLDEST HELD",
        "STATE",
        "SOURCE",
    ] {
        assert!(lines[0].contains(col), "{col}: {text}");
    }
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        row[..9],
        [
            "payments",
            "concurrency",
            "class=Charge",
            "5",
            "weight",
            "Refund=2",
            "5",
            "3",
            "1",
        ],
        "{text}"
    );
    assert!(row[9].starts_with("1m0"), "oldest held about 65s: {text}");
    assert_eq!(row[10..], ["open", "declared"], "{text}");
    assert!(text.contains("paused queues: none"), "{text}");
    assert!(!stderr(&out).contains("WARNING"), "{}", stderr(&out));
    // A namespace holding only limits is not an empty one.
    assert!(!stderr(&out).contains("hint:"), "{}", stderr(&out));

    // An override keeps what its flags do not name (the class, the weight).
    let out = ok(&ns, &["limits", "set", "payments", "--concurrency", "3"]).await;
    assert!(
        stdout(&out).contains("limit payments set"),
        "{}",
        stdout(&out)
    );
    let stored: String = support::con()
        .await
        .hget(k.limits_set(), "payments")
        .await
        .unwrap();
    let stored: Limit = serde_json::from_str(&stored).unwrap();
    assert_eq!(
        stored,
        Limit::concurrency("payments", 3)
            .class("Charge")
            .weight("Refund", 2)
    );
    let j = json_of(&ns, &["limits", "list"]).await;
    assert_eq!(j["paused_queues"], serde_json::json!([]), "{j}");
    let l = &j["limits"][0];
    assert_eq!(l["limit"]["name"], "payments", "{j}");
    assert_eq!(l["limit"]["kind"], "concurrency", "{j}");
    assert_eq!(l["limit"]["limit"], 3, "{j}");
    assert_eq!(l["limit"]["class"], "Charge", "{j}");
    assert_eq!(l["limit"]["weights"]["Refund"], 2, "{j}");
    assert_eq!(l["overridden"], true, "{j}");
    assert_eq!(l["open"], Value::Null, "{j}");
    assert_eq!(l["foreign_workers"], serde_json::json!([]), "{j}");
    let p = &l["partitions"][0];
    assert_eq!(p["partition"], Value::Null, "{j}");
    assert_eq!(p["in_use"], 3, "{j}");
    assert_eq!(p["held"], 1, "{j}");
    let oldest = p["oldest_held_secs"].as_f64().unwrap();
    assert!((64.0..120.0).contains(&oldest), "{j}");
    let text = stdout(&ok(&ns, &["limits", "list"]).await);
    assert!(text.contains(" closed ") && text.contains(" set"), "{text}");

    // Back to the declaration; a second clear has nothing to remove.
    let out = ok(&ns, &["limits", "clear", "payments"]).await;
    assert!(
        stdout(&out).contains("declaration applies"),
        "{}",
        stdout(&out)
    );
    let n: usize = support::con().await.hlen(k.limits_set()).await.unwrap();
    assert_eq!(n, 0);
    let j = json_of(&ns, &["limits", "list"]).await;
    assert_eq!(j["limits"][0]["limit"]["limit"], 5, "{j}");
    assert_eq!(j["limits"][0]["overridden"], false, "{j}");
    let out = resq(&ns, &["limits", "clear", "payments"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("has no override"), "{}", stderr(&out));

    // A new limit from flags alone: rate, sliding, a key, weights and priorities.
    let j = json_of(
        &ns,
        &[
            "limits",
            "set",
            "partner",
            "--rate",
            "50",
            "--per",
            "10s",
            "--sliding",
            "--queue",
            "partner",
            "--key",
            "cust-{args.1}",
            "--weight",
            "Big=2",
            "--priority",
            "Urgent=50",
            "--priority",
            "Later=1",
        ],
    )
    .await;
    assert_eq!(
        serde_json::from_value::<Limit>(j).unwrap(),
        Limit::rate("partner", 50, std::time::Duration::from_secs(10))
            .sliding()
            .queue("partner")
            .key("cust-{args.1}")
            .weight("Big", 2)
            .priority("Urgent", 50)
            .priority("Later", 1)
    );
    let j = json_of(
        &ns,
        &[
            "limits",
            "set",
            "night",
            "--window",
            "22:00-24:00",
            "--window",
            "mon,tue 00:00-06:00",
            "--tz",
            "Europe/Paris",
            "--class",
            "Report",
        ],
    )
    .await;
    assert_eq!(j["kind"], "window", "{j}");
    assert_eq!(j["windows"][1]["days"], serde_json::json!(["mon", "tue"]));
    let text = stdout(&ok(&ns, &["limits", "list"]).await);
    assert!(
        text.contains("50 per 10s sliding weight Big=2 priority Later=1,Urgent=50"),
        "{text}"
    );
    assert!(text.contains("Europe/Paris"), "{text}");
    let out = ok(&ns, &["limits", "clear", "partner"]).await;
    assert!(
        stdout(&out).contains("limit partner: removed"),
        "{}",
        stdout(&out)
    );
    let out = ok(&ns, &["limits", "clear", "payments", "--declaration"]).await;
    assert!(stdout(&out).contains("removed"), "{}", stdout(&out));
    let j = json_of(&ns, &["limits", "list"]).await;
    let names: Vec<&str> = j["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["limit"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["night"], "{j}");
    let out = resq(&ns, &["limits", "clear", "missing"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no limit named \"missing\""),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn bad_input_exits_non_zero_and_writes_nothing() {
    let ns = support::namespace("climitsbad");
    declare(&ns, &Limit::concurrency("payments", 5).class("Charge")).await;
    ok(&ns, &["limits", "set", "payments", "--concurrency", "4"]).await;
    ok(&ns, &["pause", "--queue", "slow"]).await;
    let before = snapshot(&ns).await;
    let cases: &[(&[&str], &str)] = &[
        (
            &["--concurrency", "abc"],
            "--concurrency: \"abc\" is not a whole number",
        ),
        (&["--concurrency", "0"], "--concurrency: \"0\""),
        (&["--concurrency", "-3"], "--concurrency: \"-3\""),
        (&["--concurrency", "2.5"], "--concurrency"),
        (
            &["--rate", "10", "--per", "3fortnights"],
            "--per: \"3fortnights\"",
        ),
        (&["--rate", "10", "--per", "0s"], "--per"),
        (&["--rate", "-1", "--per", "1s"], "--rate"),
        (&["--weight", "Refund=-1"], "--weight: \"Refund=-1\""),
        (
            &["--weight", "Refund=0"],
            "the weight of Refund must be at least 1",
        ),
        (&["--weight", "Refund"], "CLASS=N"),
        (&["--priority", "Urgent=100"], "--priority"),
        (
            &["--key", "acct-{argz.0}"],
            "{argz.0} is not class, queue or args.N",
        ),
        (&["--key", "acct-{args.0"], "unclosed"),
        (&["--sliding"], "--sliding applies to a rate limit"),
        (&["--window", "18:00-09:00"], "ends before it starts"),
        (
            &["--window", "09:00-17:00", "--tz", "Mars/Base"],
            "not an IANA zone",
        ),
        (
            &["--concurrency", "2", "--rate", "3", "--per", "1s"],
            "one of",
        ),
    ];
    for (args, why) in cases {
        let mut a = vec!["limits", "set", "payments"];
        a.extend_from_slice(args);
        refused(&ns, &a, why).await;
    }
    // A new name with no scope, or a bad name.
    for (a, why) in [
        (
            vec!["limits", "set", "fresh", "--concurrency", "2"],
            "name a queue, a class or a key",
        ),
        (vec!["limits", "set", "fresh"], "there is no limit named"),
        (
            vec!["limits", "set", "a b", "--concurrency", "2", "--class", "A"],
            "a name is 1 to 100",
        ),
        (vec!["pause", "--queue", ""], "--queue"),
    ] {
        refused(&ns, &a, why).await;
    }
    // --rate without --per is refused by the parser (exit status 2).
    let out = resq(&ns, &["limits", "set", "payments", "--rate", "5"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--per"), "{}", stderr(&out));
    assert_eq!(snapshot(&ns).await, before, "bad input changed Redis");
}

#[tokio::test]
async fn pause_and_resume_a_queue() {
    let ns = support::namespace("cqpause");
    let k = Keys::new(ns.as_str());
    let mut con = support::con().await;
    let out = ok(&ns, &["pause", "--queue", "reports", "--queue", "slow"]).await;
    assert!(
        stderr(&out).contains("hint:"),
        "a fresh namespace gets the hint"
    );
    let out2 = ok(&ns, &["limits", "list"]).await;
    assert!(!stderr(&out2).contains("hint:"), "{}", stderr(&out2));
    assert!(
        stdout(&out).contains("queue reports: paused"),
        "{}",
        stdout(&out)
    );
    let mut paused: Vec<String> = con.smembers(k.paused_queues()).await.unwrap();
    paused.sort();
    assert_eq!(paused, ["reports", "slow"]);
    assert_eq!(k.paused_queues(), format!("{ns}:resq:paused_queues"));
    // The global switch is untouched.
    let global: bool = con.exists(k.pause_all_workers()).await.unwrap();
    assert!(!global);
    let text = stdout(&ok(&ns, &["limits", "list"]).await);
    assert!(text.contains("paused queues: reports, slow"), "{text}");
    let j = json_of(&ns, &["resume", "--queue", "slow"]).await;
    assert_eq!(
        j,
        serde_json::json!({"queues": ["slow"], "paused": false, "paused_queues": ["reports"]})
    );
    let j = json_of(&ns, &["limits", "list"]).await;
    assert_eq!(j["paused_queues"], serde_json::json!(["reports"]), "{j}");
    ok(&ns, &["resume", "--queue", "reports"]).await;
    let n: usize = con.scard(k.paused_queues()).await.unwrap();
    assert_eq!(n, 0);
    // Without --queue, Resque's global switch, as before.
    ok(&ns, &["pause"]).await;
    let global: bool = con.exists(k.pause_all_workers()).await.unwrap();
    assert!(global);
    ok(&ns, &["resume"]).await;
    let global: bool = con.exists(k.pause_all_workers()).await.unwrap();
    assert!(!global);
}

#[tokio::test]
async fn foreign_workers_on_a_limited_queue_are_named() {
    let ns = support::namespace("cforeign");
    let k = Keys::new(ns.as_str());
    let mut con = support::con().await;
    declare(&ns, &Limit::concurrency("api", 2).queue("api")).await;
    declare(&ns, &Limit::concurrency("other", 2).queue("elsewhere")).await;
    let () = con
        .sadd(
            k.workers(),
            &["rubyhost:4242:api,mail", "box~resq:77:0:api"],
        )
        .await
        .unwrap();
    let out = ok(&ns, &["limits", "list"]).await;
    let err = stderr(&out);
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("WARNING")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains("limit api") && warnings[0].contains("rubyhost:4242:api,mail"),
        "{err}"
    );
    assert!(!warnings[0].contains("box~resq"), "{err}");
    let j = json_of(&ns, &["limits", "list"]).await;
    assert_eq!(
        j["limits"][0]["foreign_workers"],
        serde_json::json!(["rubyhost:4242:api,mail"]),
        "{j}"
    );
}

#[tokio::test]
async fn top_shows_a_limits_section() {
    let ns = support::namespace("ctoplim");
    declare(&ns, &Limit::concurrency("payments", 5).class("Charge")).await;
    seed_use(&ns, "payments", 2, 3000).await;
    let frame = stdout(
        &ok(
            &ns,
            &[
                "top",
                "--once",
                "--interval",
                "0.05",
                "--width",
                "110",
                "--height",
                "30",
            ],
        )
        .await,
    );
    assert!(frame.contains("limits"), "{frame}");
    let row = frame
        .lines()
        .find(|l| l.contains("payments"))
        .unwrap_or_else(|| panic!("no payments row: {frame}"));
    let cells: Vec<&str> = row
        .split(|c: char| c == '│' || c.is_whitespace())
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cells[..5],
        ["payments", "concurrency", "5", "2", "1"],
        "{frame}"
    );
    // Without limits, no section.
    let empty = support::namespace("ctoplim-none");
    let frame = stdout(&ok(&empty, &["top", "--once", "--interval", "0.05"]).await);
    assert!(!frame.contains(" limits "), "{frame}");
}
