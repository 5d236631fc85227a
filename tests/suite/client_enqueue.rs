//! The producer against a real Redis and the golden fixtures: Ruby's bytes for both MultiJson
//! adapters, Jesque's forms (named vars, priority, batch), Ruby's destroy/dequeue semantics,
//! queue listing, size, peek and removal.

use crate::keydump;
use crate::support;

use redis::AsyncCommands;
use resq::client::{FloatFormat, NewJob};
use resq::Client;
use serde_json::{json, Map, Number, Value};
use support::Keys;

async fn client(ns: &str) -> Client {
    Client::connect(&support::url(), ns).await.unwrap()
}

async fn list(key: &str) -> Vec<String> {
    support::con().await.lrange(key, 0, -1).await.unwrap()
}

/// Scenario a of fixture 01 as Rust values (floats are Rust f64s, Ruby's literals as written).
#[allow(clippy::approx_constant, clippy::excessive_precision)]
fn fixture01_jobs() -> Vec<(&'static str, &'static str, Vec<Value>)> {
    let big: Number = "18446744073709551616".parse().unwrap();
    vec![
        ("default", "SimpleJob", vec![]),
        (
            "default",
            "SimpleJob",
            vec![
                json!("string"),
                json!(42),
                json!(-7),
                json!(0),
                json!(3.14),
                json!(1.0),
                json!(1e20),
                json!(1.5e-7),
                Value::Null,
                json!(true),
                json!(false),
            ],
        ),
        (
            "default",
            "SimpleJob",
            vec![
                Value::Number(big),
                json!(-0.0),
                json!(0.1 + 0.2),
                json!(123456789.123456789),
                json!(10f64.powi(16)),
            ],
        ),
        (
            "default",
            "SimpleJob",
            vec![
                json!({"nested": {"list": [1, "two", null, 2.5], "flag": true}, "sym_key": "sym_value", "3": "int key"}),
            ],
        ),
        (
            "default",
            "SimpleJob",
            vec![
                json!("üñíçødé ✓ 日本語 😀"),
                json!("quote\" backslash\\ slash/ newline\n tab\t ctrl\u{1} del\u{7f}"),
                json!("</script>&<>"),
                json!(""),
            ],
        ),
        (
            "default",
            "Jobs::Nested",
            vec![json!([1, [2, [3, []]]]), json!({})],
        ),
        ("high", "SimpleJob", vec![json!(1)]),
        ("critical", "StringClassName", vec![json!("x")]),
        ("queue.with-dots_and:colon", "SimpleJob", vec![]),
    ]
}

#[tokio::test]
async fn enqueue_writes_ruby_bytes_for_both_json_adapters() {
    for (file, format) in [
        ("resque/01_enqueue.json", FloatFormat::RubyOj),
        ("resque/01_enqueue_json_gem.json", FloatFormat::RubyJsonGem),
    ] {
        let fx = support::fixture(file);
        let ns = support::namespace("enq");
        let c = client(&ns).await.with_float_format(format);
        for (q, class, args) in fixture01_jobs() {
            c.enqueue_to(q, class, &args).await.unwrap();
        }
        for q in ["default", "high", "critical", "queue.with-dots_and:colon"] {
            let want: Vec<String> = fx["keys"][format!("resque:queue:{q}")]["value"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            assert_eq!(list(&Keys::new(&ns).queue(q)).await, want, "{file} {q}");
        }
        let mut queues = c.queues().await.unwrap();
        queues.sort();
        assert_eq!(
            queues,
            ["critical", "default", "high", "queue.with-dots_and:colon"]
        );
    }
}

#[tokio::test]
async fn enqueue_uses_the_default_queue_and_rejects_what_ruby_rejects() {
    let ns = support::namespace("enqdef");
    let c = client(&ns).await.with_default_queue("mail");
    c.enqueue_class("Mailer", &[json!(1)]).await.unwrap();
    assert_eq!(
        c.peek("mail", 0, 10).await.unwrap(),
        [r#"{"class":"Mailer","args":[1]}"#]
    );
    assert!(matches!(
        c.enqueue_to("", "A", &[]).await,
        Err(resq::Error::Rejected(_))
    ));
    assert!(matches!(
        c.enqueue_to("q", "", &[]).await,
        Err(resq::Error::Rejected(_))
    ));
}

#[tokio::test]
async fn jesque_forms_match_the_jesque_fixtures() {
    // 03: two enqueues then a priorityEnqueue (LPUSH: head of the queue).
    let ns = support::namespace("jq03");
    let c = client(&ns).await;
    for a in ["first", "second"] {
        c.enqueue_jesque("default", "SimpleJob", Some(&[json!(a)]), None)
            .await
            .unwrap();
    }
    c.priority_enqueue_jesque("default", "SimpleJob", Some(&[json!("urgent")]), None)
        .await
        .unwrap();
    let mut con = support::con().await;
    let want = keydump::expected(
        &support::fixture("jesque/03_priority_enqueue.json"),
        "keys",
        &[],
    );
    keydump::assert_same(&keydump::dump(&mut con, &ns).await, &want);

    // 04: batchEnqueue of three jobs.
    let ns = support::namespace("jq04");
    let c = client(&ns).await;
    let jobs: Vec<(&str, NewJob)> = (1..=3)
        .map(|i| {
            (
                "batch",
                NewJob::jesque("SimpleJob", Some(vec![json!(i)]), None),
            )
        })
        .collect();
    c.enqueue_batch(&jobs).await.unwrap();
    let want = keydump::expected(
        &support::fixture("jesque/04_batch_enqueue.json"),
        "keys",
        &[],
    );
    keydump::assert_same(&keydump::dump(&mut con, &ns).await, &want);

    // 02: named vars (a LinkedHashMap, key order kept; BigDecimal 12.50 as given), args +
    // vars, and an empty vars map. (The job with extra fields needs setUnknownField: not a
    // producer feature resq offers.)
    let ns = support::namespace("jq02");
    let c = client(&ns).await;
    let vars: Map<String, Value> = serde_json::from_str(
        r#"{"index":1,"name":"job-1","ratio":0.25,"enabled":true,"nothing":null,"tags":["x","y"],"meta":{"unicode":"✓ 日本語","amount":12.50}}"#,
    )
    .unwrap();
    c.enqueue_jesque("default", "NamedJob", None, Some(&vars))
        .await
        .unwrap();
    let flag: Map<String, Value> = serde_json::from_str(r#"{"flag":true}"#).unwrap();
    c.enqueue_jesque(
        "default",
        "BothJob",
        Some(&[json!(1), json!("a")]),
        Some(&flag),
    )
    .await
    .unwrap();
    c.enqueue_jesque("default", "EmptyVarsJob", None, Some(&Map::new()))
        .await
        .unwrap();
    assert!(matches!(
        c.enqueue_jesque("default", "NullArgs", None, None).await,
        Err(resq::Error::Rejected(_))
    ));
    let fx = support::fixture("jesque/02_enqueue_named_vars.json");
    let want: Vec<String> = fx["keys"]["resque:queue:default"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .filter(|v| !v.contains("ExtraFieldsJob"))
        .collect();
    assert_eq!(list(&Keys::new(&ns).queue("default")).await, want);
}

#[tokio::test]
async fn rust_floats_in_jesque_form_are_java_text() {
    let ns = support::namespace("jqf");
    let c = client(&ns).await;
    c.enqueue_jesque(
        "q",
        "F",
        Some(&[json!(1e20), json!(1.5e-7), json!(10.0), json!(0.001)]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        c.peek("q", 0, 1).await.unwrap(),
        [r#"{"class":"F","args":[1.0E20,1.5E-7,10.0,0.001],"vars":null}"#]
    );
}

#[tokio::test]
async fn destroy_and_dequeue_follow_fixture_10() {
    let fx = support::fixture("resque/10_job_destroy.json");
    let ns = support::namespace("destroy");
    let c = client(&ns).await;
    let before: Vec<String> = fx["keys_before"]["resque:queue:default"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    for raw in &before {
        c.push_raw("default", raw).await.unwrap();
    }
    let mut con = support::con().await;
    // Resque::Job.destroy(:default, SimpleJob, 1) → 2 (byte-exact LREM)
    assert_eq!(
        c.destroy("default", "SimpleJob", Some(&[json!(1)]))
            .await
            .unwrap(),
        2
    );
    let want = keydump::expected(&fx, "keys_after_destroy_with_args", &[]);
    keydump::assert_same(&keydump::dump(&mut con, &ns).await, &want);
    // Resque::Job.destroy(:default, 'Jobs::Nested') → 2 (decode and match the class)
    assert_eq!(c.destroy("default", "Jobs::Nested", None).await.unwrap(), 2);
    // Resque.dequeue(SimpleJob, 2) → 1
    assert_eq!(
        c.dequeue("default", "SimpleJob", Some(&[json!(2)]))
            .await
            .unwrap(),
        1
    );
    let want = keydump::expected(&fx, "keys", &[]);
    keydump::assert_same(&keydump::dump(&mut con, &ns).await, &want);
    // Without args, every spelling of the class goes, each by its own bytes.
    assert_eq!(c.destroy("default", "SimpleJob", None).await.unwrap(), 4);
    assert_eq!(c.size("default").await.unwrap(), 0);
}

#[tokio::test]
async fn queue_listing_size_peek_removal() {
    let ns = support::namespace("qops");
    let c = client(&ns).await;
    for i in 0..5 {
        c.enqueue_to("a", "A", &[json!(i)]).await.unwrap();
    }
    c.enqueue_front("a", "A", &[json!("first")]).await.unwrap();
    c.enqueue_to("b", "B", &[]).await.unwrap();
    assert_eq!(c.queues().await.unwrap(), ["a", "b"]);
    assert_eq!(c.size("a").await.unwrap(), 6);
    assert_eq!(
        c.peek("a", 0, 2).await.unwrap(),
        [
            r#"{"class":"A","args":["first"]}"#,
            r#"{"class":"A","args":[0]}"#
        ]
    );
    assert_eq!(
        c.peek("a", 5, 10).await.unwrap(),
        [r#"{"class":"A","args":[4]}"#]
    );
    c.remove_queue("a").await.unwrap();
    assert_eq!(c.queues().await.unwrap(), ["b"]);
    assert_eq!(c.size("a").await.unwrap(), 0);
}

#[tokio::test]
async fn batch_is_one_transaction_over_several_queues() {
    // A private server, so its command counters are ours alone.
    let server = support::RedisServer::start(&[]);
    let ns = support::namespace("batch");
    let c = Client::connect(&server.url(), &ns).await.unwrap();
    let mut con = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // Successful calls (a first FCALL fails with `Function not found` and loads the library).
    let calls = |s: &str, cmd: &str| -> u64 {
        let Some(line) = s
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
        else {
            return 0;
        };
        let field = |name: &str| -> u64 {
            line.split(',')
                .find_map(|f| f.strip_prefix(name))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let total: u64 = line
            .split(',')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        total - field("failed_calls=")
    };
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut con)
        .await
        .unwrap();
    let jobs = vec![
        ("x", NewJob::new("A", vec![json!(1)])),
        ("y", NewJob::new("B", vec![json!(2)])),
        ("x", NewJob::new("A", vec![json!(3)])),
    ];
    c.enqueue_batch(&jobs).await.unwrap();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut con)
        .await
        .unwrap();
    // One atomic step (a checked function: every key's type first, then the writes).
    assert_eq!(calls(&stats, "fcall"), 1, "{stats}");
    assert_eq!(calls(&stats, "rpush"), 2, "one RPUSH per queue: {stats}");
    assert_eq!(
        c.peek("x", 0, 9).await.unwrap(),
        [r#"{"class":"A","args":[1]}"#, r#"{"class":"A","args":[3]}"#]
    );
    assert_eq!(
        c.peek("y", 0, 9).await.unwrap(),
        [r#"{"class":"B","args":[2]}"#]
    );
}
