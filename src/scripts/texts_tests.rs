//! The texts between Rust and Lua (`texts.rs`), made on one side and read on the other against
//! a real server: what Lua makes, Rust's one parser reads back, hostile fields included.

use super::texts::{parse_held, problem_lines};
use crate::jobs::{JobId, Started, Track};
use crate::keys::Keys;
use crate::testing;
use redis::AsyncCommands;

fn keys() -> Keys {
    Keys::new(testing::namespace("texts"))
}

fn client(con: &crate::conn::Conn, keys: &Keys) -> crate::client::Client {
    crate::client::Client::new(con.clone(), keys.clone())
}

/// A tracked job queued on `q`, with job key `key`.
async fn enqueue(con: &crate::conn::Conn, keys: &Keys, key: &str) -> JobId {
    let id = JobId::new();
    client(con, keys)
        .enqueue_class_tracked("q", "A", &[], Track::new().id(id.clone()).key(key))
        .await
        .expect("enqueue");
    id
}

/// A job start (`Rec.start_text` → `parse_start`): a job key holding a tab and a newline comes
/// back whole, and a cancelled job's start says drop.
#[tokio::test]
async fn a_job_start_carries_a_job_key_with_a_tab_and_a_newline() {
    let mut con = testing::con().await;
    let keys = keys();
    let id = enqueue(&con, &keys, "a\tb\nc").await;
    let started = crate::jobs::start_claimed(&mut con, &keys, &id, false, "A", "w-1").await;
    assert_eq!(
        started,
        Some(Some(Started::Tracked {
            attempt: 1,
            key: "a\tb\nc".into(),
            batch: None
        }))
    );
    let other = enqueue(&con, &keys, "k").await;
    crate::jobs::cancel(&mut con, &keys, &other)
        .await
        .expect("cancel");
    let started = crate::jobs::start_claimed(&mut con, &keys, &other, false, "A", "w-1").await;
    assert_eq!(started, None, "a cancelled job's start says drop");
}

/// A cancel's reply (`job_cancel.lua`'s `reply` → `parse_cancel`): its word, and the state of
/// a finished job.
#[tokio::test]
async fn a_cancel_reply_reads_back() {
    use crate::jobs::Cancelled;
    let mut con = testing::con().await;
    let keys = keys();
    let id = enqueue(&con, &keys, "k").await;
    let first = crate::jobs::cancel(&mut con, &keys, &id)
        .await
        .expect("cancel");
    assert!(matches!(first, Cancelled::Cancelled), "{first:?}");
    let again = crate::jobs::cancel(&mut con, &keys, &id)
        .await
        .expect("cancel");
    assert!(
        matches!(again, Cancelled::Finished(crate::jobs::State::Cancelled)),
        "{again:?}"
    );
}

/// Problems (`G.lines` → `problem_lines`): one line per problem, each naming its key.
#[tokio::test]
async fn problems_read_back_one_a_line() {
    let mut con = testing::con().await;
    let keys = keys();
    let ids = [
        "00000000000000000000000000000001",
        "00000000000000000000000000000002",
    ];
    for id in ids {
        let _: () = con.set(keys.job_record(id), "not a hash").await.unwrap();
        let _: () = con.sadd(keys.runs(), id).await.unwrap();
    }
    let (_, _, _, problems): (u64, u64, u64, String) = super::JobLost {
        runs: keys.runs(),
        workers: keys.workers(),
        running: keys.running(),
        prefix: keys.prefix(),
        now_ms: 1000,
        ttl_s: 60,
        from: 0,
        most: 100,
        spread: "",
    }
    .call()
    .invoke_async(&mut con)
    .await
    .unwrap();
    let lines: Vec<&str> = problem_lines(&problems).collect();
    assert_eq!(lines.len(), 2, "{problems:?}");
    // (The running jobs' index is a set: its order is Redis's.)
    for id in ids {
        let key = keys.job_record(id);
        assert_eq!(
            lines.iter().filter(|l| l.contains(&key)).count(),
            1,
            "{problems:?}"
        );
    }
}

/// A held job (`Lim.member_text` → `parse_held`): a claimed job held under a full limit reads
/// back with its queue, units, limit and payload list; one whose queue holds a tab is refused,
/// not misread.
#[tokio::test]
async fn a_held_member_reads_back_and_a_tab_in_its_queue_is_refused() {
    const LIMITS: &str =
        r#"{"defs":[{"name":"one","kind":"concurrency","limit":1,"class":"A"}],"open":{}}"#;
    let mut con = testing::con().await;
    for (queue, read) in [("q", true), ("q\tx", false)] {
        let keys = keys();
        let id = "w-1";
        let view = r#"{"class":"A","args":[]}"#;
        let _: () = con
            .rpush(keys.claim(id), &[view, "tok", "\"q\""])
            .await
            .unwrap();
        let _: () = con.sadd(keys.claims(), id).await.unwrap();
        let _: () = con
            .hset(keys.limit_holders("one", None), "__units", 1)
            .await
            .unwrap();
        let _: redis::Value = super::LimitClaim {
            claim: keys.claim(id),
            claims: keys.claims(),
            prefix: keys.prefix(),
            limits: LIMITS,
            view: view.into(),
            queue_name: queue,
            worker: id,
            now_ms: 1_000,
            token: "tok",
            sequence: "tok.1000".into(),
        }
        .call()
        .invoke_async(&mut con)
        .await
        .unwrap();
        let held: Vec<Vec<u8>> = con
            .zrange(keys.limit_held("one", None), 0, -1)
            .await
            .unwrap();
        assert_eq!(held.len(), 1, "{queue:?}: held");
        let m = parse_held(&held[0]);
        if !read {
            assert_eq!(m, None, "{queue:?}");
            continue;
        }
        let m = m.expect("a held member");
        assert_eq!(
            (m.seq, m.queue, m.units, m.name),
            (&b"tok.1000"[..], &b"q"[..], &b"1"[..], &b"one"[..])
        );
        assert!(m.payload.starts_with(b"@"), "{:?}", m.payload);
    }
}

/// A batch's first chunk (`batch_header` → `batch_stage.lua`'s `header`): its queue, parent and
/// description (a newline in it made a space) come back as the batch's fields; a tab in the
/// callbacks' queue is refused before anything is sent.
#[tokio::test]
async fn a_batch_header_reads_back_and_a_tab_in_its_queue_is_refused() {
    use crate::workflows::Batch;
    let mut con = testing::con().await;
    let keys = keys();
    let c = client(&con, &keys);
    let (parent, _) = c
        .create_batch(Batch::new().job("q", "A", vec![]))
        .await
        .expect("a parent batch");
    let (bid, _) = c
        .create_batch(
            Batch::new()
                .description("two\nlines, and: colons")
                .callback_queue("cq")
                .parent(parent.clone())
                .job("q", "A", vec![]),
        )
        .await
        .expect("a batch");
    let fields: Vec<Option<String>> = redis::cmd("HMGET")
        .arg(keys.batch(bid.as_str()))
        .arg(&["queue", "parent", "description"])
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(
        fields,
        vec![
            Some("cq".into()),
            Some(parent.to_string()),
            Some("two lines, and: colons".into())
        ]
    );
    let refused = c
        .create_batch(Batch::new().callback_queue("c\tq").job("q", "A", vec![]))
        .await;
    assert!(
        matches!(refused, Err(crate::Error::Rejected(_))),
        "{refused:?}"
    );
}

/// A job's workflow (`workflow_text` → `job_enqueue.lua`'s `workflow`): a job enqueued after
/// two others waits for both, and its record names them.
#[tokio::test]
async fn a_workflow_text_reads_back() {
    let mut con = testing::con().await;
    let keys = keys();
    let (a, b) = (
        enqueue(&con, &keys, "ka").await,
        enqueue(&con, &keys, "kb").await,
    );
    let id = JobId::new();
    client(&con, &keys)
        .enqueue_class_tracked(
            "q",
            "A",
            &[],
            Track::new()
                .id(id.clone())
                .after(a.clone())
                .after(b.clone()),
        )
        .await
        .expect("enqueue");
    let fields: Vec<Option<String>> = redis::cmd("HMGET")
        .arg(keys.job_record(id.as_str()))
        .arg(&["state", "deps"])
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(
        fields,
        vec![Some("waiting".into()), Some(format!("{a} {b}"))]
    );
}
