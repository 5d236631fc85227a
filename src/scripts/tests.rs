//! Every script, with each key it touches set to every wrong type: it either refuses before
//! writing anything (the whole namespace is unchanged, and the error names the key), or it
//! goes through with every job in exactly one place and every counter it may count exact.
//!
//! Each scenario prepares a realistic state, runs one script through the crate's own code
//! path, and is repeated once untouched (it must go through) and once per (key, wrong value).

use crate::conn::Conn;
use crate::keys::Keys;
use crate::testing;
use futures::future::BoxFuture;
use redis::AsyncCommands;
use std::collections::BTreeMap;

#[path = "declared_tests.rs"]
mod declared_tests;
#[path = "job_tests.rs"]
mod job_tests;

/// A wrong value a key can be set to.
#[derive(Debug, Clone, Copy)]
enum Bad {
    /// A string that is not an integer.
    Text,
    /// An integer one increment from overflowing.
    Huge,
    List,
    Set,
    Zset,
    Hash,
}

/// What a key normally holds.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Str,
    Counter,
    List,
    Set,
    Zset,
    Hash,
}

impl Kind {
    /// The wrong values for a key of this kind.
    fn bad(self) -> Vec<Bad> {
        let all = [Bad::Text, Bad::List, Bad::Set, Bad::Zset, Bad::Hash];
        let mut v: Vec<Bad> = all
            .into_iter()
            .filter(|b| {
                !matches!(
                    (self, b),
                    (Kind::Str, Bad::Text)
                        | (Kind::List, Bad::List)
                        | (Kind::Set, Bad::Set)
                        | (Kind::Zset, Bad::Zset)
                        | (Kind::Hash, Bad::Hash)
                )
            })
            .collect();
        if self == Kind::Counter {
            v.push(Bad::Huge);
        }
        v
    }
}

async fn corrupt(con: &mut Conn, key: &str, bad: Bad) {
    let _: () = con.del(key).await.unwrap();
    let _: () = match bad {
        Bad::Text => con.set(key, "not-a-number").await.unwrap(),
        Bad::Huge => con.set(key, "9223372036854775807").await.unwrap(),
        Bad::List => con.rpush(key, "x").await.unwrap(),
        Bad::Set => con.sadd(key, "x").await.unwrap(),
        Bad::Zset => con.zadd(key, "x", 1).await.unwrap(),
        Bad::Hash => con.hset(key, "x", "y").await.unwrap(),
    };
}

/// Every key of the namespace with its type and content (lists in order, sets sorted).
async fn snapshot(con: &mut Conn, ns: &str) -> BTreeMap<String, String> {
    let keys: Vec<String> = con.keys(format!("{ns}:*")).await.unwrap();
    let mut out = BTreeMap::new();
    for k in keys {
        let t: String = redis::cmd("TYPE").arg(&k).query_async(con).await.unwrap();
        let v = match t.as_str() {
            "string" => {
                let v: Vec<u8> = con.get(&k).await.unwrap();
                String::from_utf8_lossy(&v).into_owned()
            }
            "list" => {
                let v: Vec<Vec<u8>> = con.lrange(&k, 0, -1).await.unwrap();
                format!(
                    "{:?}",
                    v.iter()
                        .map(|b| String::from_utf8_lossy(b))
                        .collect::<Vec<_>>()
                )
            }
            "set" => {
                let mut v: Vec<String> = con.smembers(&k).await.unwrap();
                v.sort();
                format!("{v:?}")
            }
            "zset" => {
                let v: Vec<(String, f64)> = con.zrange_withscores(&k, 0, -1).await.unwrap();
                format!("{v:?}")
            }
            _ => {
                let v: BTreeMap<String, String> = con.hgetall(&k).await.unwrap();
                format!("{v:?}")
            }
        };
        out.insert(k, format!("{t}:{v}"));
    }
    // Ruby's prune lock is a step of its own (taken before the round, expiring by itself).
    out.retain(|k, _| !k.ends_with(":pruning_dead_workers_in_progress"));
    out
}

/// How many values of a snapshot mention `marker`.
fn count(snap: &BTreeMap<String, String>, marker: &str) -> usize {
    snap.values().map(|v| v.matches(marker).count()).sum()
}

/// How the script answered.
#[derive(Debug)]
enum Answer {
    /// It went through (the caller's check decides whether the result is right).
    Done(String),
    /// It refused (an error, or a per-slot refusal) and must have written nothing.
    Refused(String),
}

/// A namespace's keys and contents.
type Snapshot = BTreeMap<String, String>;
/// A scenario step that writes or runs against a namespace.
type Step<T> = Box<dyn Fn(Conn, Keys) -> BoxFuture<'static, T> + Send + Sync>;
/// The keys to corrupt.
type KeyList = Box<dyn Fn(&Keys) -> Vec<(String, Kind)> + Send + Sync>;
/// The check of a run that went through.
type Check = Box<dyn Fn(&Snapshot, &Snapshot, Option<&str>) + Send + Sync>;

/// One scenario: a state, a script run, the keys it touches, and what a run that went through
/// must leave.
struct Scenario {
    name: &'static str,
    /// Writes the state (the namespace is fresh).
    setup: Step<()>,
    /// Runs the script.
    run: Step<Answer>,
    /// The keys (and what they hold) to corrupt, one at a time.
    keys: KeyList,
    /// Checks a run that went through: (before, after, corrupted key or none).
    check: Check,
}

async fn play(s: &Scenario) {
    let mut con = testing::con().await;
    let mut cases: Vec<Option<(String, Bad)>> = vec![None];
    let probe = Keys::new("probe");
    for (key, kind) in (s.keys)(&probe) {
        for bad in kind.bad() {
            cases.push(Some((key.clone(), bad)));
        }
    }
    for case in cases {
        let ns = testing::namespace(s.name);
        let keys = Keys::new(&ns);
        (s.setup)(con.clone(), keys.clone()).await;
        let target = case.as_ref().map(|(probe_key, bad)| {
            let key = format!("{ns}:{}", probe_key.strip_prefix("probe:").unwrap());
            (key, *bad)
        });
        if let Some((key, bad)) = &target {
            corrupt(&mut con, key, *bad).await;
        }
        let before = snapshot(&mut con, &ns).await;
        let answer = (s.run)(con.clone(), keys.clone()).await;
        let after = snapshot(&mut con, &ns).await;
        let label = format!("{} with {:?}", s.name, target);
        match answer {
            Answer::Refused(why) => {
                assert!(
                    target.is_some(),
                    "{label}: refused an untouched state: {why}"
                );
                assert_eq!(before, after, "{label}: refused ({why}) but wrote");
                let key = &target.as_ref().unwrap().0;
                assert!(
                    why.contains(key.as_str()),
                    "{label}: the refusal does not name the key: {why}"
                );
            }
            Answer::Done(what) => {
                let key = target.as_ref().map(|(k, _)| k.as_str());
                (s.check)(&before, &after, key);
                let _ = what;
            }
        }
    }
}

fn refused(e: redis::RedisError) -> Answer {
    Answer::Refused(e.to_string())
}

/// The counter delta between snapshots (a key absent counts 0; a corrupted one is skipped).
fn delta(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
    key: &str,
) -> Option<i64> {
    let read = |m: &BTreeMap<String, String>| -> Option<i64> {
        match m.get(key) {
            None => Some(0),
            Some(v) => v.strip_prefix("string:").and_then(|n| n.parse().ok()),
        }
    };
    Some(read(after)? - read(before)?)
}

fn assert_delta(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
    key: &str,
    want: i64,
    label: &str,
) {
    if let Some(d) = delta(before, after, key) {
        assert_eq!(d, want, "{label}: {key} moved by {d}, not {want}");
    }
}

const ID: &str = "h~resq:1-0:q";

mod step_scenarios {
    use super::*;
    use crate::worker::step::{
        call_step, Completion, Ends, JobRef, QueueKeys, Reply, StepReply, StepRequest, Stepper,
    };
    use std::sync::Arc;

    fn step_keys(k: &Keys) -> Vec<(String, Kind)> {
        vec![
            (k.stat_processed(), Kind::Counter),
            (k.stat_failed(), Kind::Counter),
            (k.failed(), Kind::List),
            (k.pause_all_workers(), Kind::Str),
            (k.claims(), Kind::Set),
            (k.queue("q"), Kind::List),
            (k.worker(ID), Kind::Str),
            (k.stat_processed_by(ID), Kind::Counter),
            (k.stat_failed_by(ID), Kind::Counter),
            (k.claim(ID), Kind::Str),
            (k.claim_token(ID), Kind::Str),
        ]
    }

    fn record(queue: &str, payload: &str) -> String {
        format!(
            r#"{{"queue":"{queue}","run_at":"2026-11-24T00:00:00.000+0000","payload":{payload}}}"#
        )
    }

    async fn step(con: Conn, keys: Keys, completion: Option<Completion>) -> Answer {
        let mut con = con;
        let stepper = Stepper::new(&keys, ID, true);
        let queues = Arc::new(QueueKeys::new(&keys, &["q".to_string()]));
        let item = StepRequest::new(Arc::new(stepper), completion, true, &queues);
        match call_step(&mut con, &queues, &[item], "").await {
            Err(e) => refused(e),
            Ok(mut out) => match out.replies.pop().map(|r| (r.reply, r.applied)) {
                // A refused reserve after an applied completion: the completion is checked.
                Some((Reply::Refused(why), true)) => Answer::Done(why),
                Some((Reply::Refused(why), false)) => Answer::Refused(why),
                Some((r, applied)) => Answer::Done(format!("{r:?} {applied}")),
                None => panic!("no reply"),
            },
        }
    }

    fn job(marker: &str) -> String {
        format!(r#"{{"class":"A","args":["{marker}"]}}"#)
    }

    pub(super) fn reserve() -> Scenario {
        Scenario {
            name: "step-reserve",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = con.rpush(keys.queue("q"), job("m-1")).await.unwrap();
                })
            }),
            run: Box::new(|con, keys| Box::pin(step(con, keys, None))),
            keys: Box::new(step_keys),
            check: Box::new(|before, after, _| {
                // The job is where it was, or in the worker record: never twice, never gone.
                assert_eq!(count(before, "m-1"), count(after, "m-1"));
            }),
        }
    }

    fn finish(failure: bool) -> Scenario {
        Scenario {
            name: if failure { "step-fail" } else { "step-finish" },
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = con
                        .set(keys.worker(ID), record("q", &job("m-1")))
                        .await
                        .unwrap();
                    let _: () = con.rpush(keys.queue("q"), job("m-2")).await.unwrap();
                })
            }),
            run: Box::new(move |con, keys| {
                let job = JobRef::Record(record("q", &job("m-1")).into_bytes());
                let completion = if failure {
                    Completion::Failure {
                        job,
                        entry: r#"{"failed_at":"x","payload":{"class":"A","args":["m-1"]},"exception":"E","error":"e","backtrace":[],"worker":"w","queue":"q"}"#.into(), track: None, ends: None }
                } else {
                    Completion::Success {
                        job,
                        track: None,
                        ends: None,
                    }
                };
                Box::pin(step(con, keys, Some(completion)))
            }),
            keys: Box::new(step_keys),
            check: Box::new(move |before, after, corrupted| {
                let label = format!("finish(failure={failure}) with {corrupted:?}");
                let ns = before
                    .keys()
                    .chain(after.keys())
                    .next()
                    .and_then(|k| k.split(':').next())
                    .unwrap_or("")
                    .to_string();
                let k = Keys::new(ns);
                // The finished job: gone (success) or once in the failure list.
                assert_eq!(count(after, "m-1"), usize::from(failure), "{label}");
                // The next job: in exactly one place.
                assert_eq!(count(before, "m-2"), count(after, "m-2"), "{label}");
                assert_delta(before, after, &k.stat_processed(), 1, &label);
                assert_delta(before, after, &k.stat_processed_by(ID), 1, &label);
                assert_delta(before, after, &k.stat_failed(), i64::from(failure), &label);
                assert_delta(
                    before,
                    after,
                    &k.stat_failed_by(ID),
                    i64::from(failure),
                    &label,
                );
            }),
        }
    }

    pub(super) fn finish_success() -> Scenario {
        finish(false)
    }

    pub(super) fn finish_failure() -> Scenario {
        finish(true)
    }

    /// A success whose end deletes more (op 'x'): resque-retry's keys and a unique lock go
    /// with it, whatever they hold (DEL cannot fail; a lock of another type is not the job's).
    pub(super) fn finish_ends() -> Scenario {
        const RETRY: &str = "resque-retry:A:m1";
        Scenario {
            name: "step-finish-ends",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = con
                        .set(keys.worker(ID), record("q", &job("m-1")))
                        .await
                        .unwrap();
                    let _: () = con.rpush(keys.queue("q"), job("m-2")).await.unwrap();
                    let _: () = con.set(keys.retry_attempts(RETRY), "1").await.unwrap();
                    let _: () = con.set(keys.retry_failure(RETRY), "{}").await.unwrap();
                    let _: () = con.set(keys.unique("u1"), "id-1").await.unwrap();
                })
            }),
            run: Box::new(move |con, keys| {
                let completion = Completion::Success {
                    job: JobRef::Record(record("q", &job("m-1")).into_bytes()),
                    track: None,
                    ends: Ends::of(
                        Some(RETRY.into()),
                        Some(crate::registry::unique::UniqueMark {
                            key: "u1".into(),
                            id: "id-1".into(),
                        }),
                    ),
                };
                Box::pin(step(con, keys, Some(completion)))
            }),
            keys: Box::new(|k| {
                let mut v = step_keys(k);
                v.push((k.retry_attempts(RETRY), Kind::Counter));
                v.push((k.retry_failure(RETRY), Kind::Str));
                v.push((k.unique("u1"), Kind::Str));
                v
            }),
            check: Box::new(|before, after, corrupted| {
                let label = format!("finish with ends, {corrupted:?}");
                let ns = before.keys().next().and_then(|k| k.split(':').next());
                let k = Keys::new(ns.unwrap_or(""));
                assert_eq!(count(after, "m-1"), 0, "{label}");
                assert_eq!(count(before, "m-2"), count(after, "m-2"), "{label}");
                assert_delta(before, after, &k.stat_processed_by(ID), 1, &label);
                assert!(!after.contains_key(&k.retry_attempts(RETRY)), "{label}");
                assert!(!after.contains_key(&k.retry_failure(RETRY)), "{label}");
                let lock = k.unique("u1");
                if corrupted == Some(lock.as_str()) {
                    assert_eq!(before.get(&lock), after.get(&lock), "{label}");
                } else {
                    assert!(!after.contains_key(&lock), "{label}");
                }
            }),
        }
    }

    pub(super) fn malformed() -> Scenario {
        Scenario {
            name: "step-malformed",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = con.rpush(keys.queue("q"), "not json m-3").await.unwrap();
                    let _: () = con.rpush(keys.queue("q"), job("m-4")).await.unwrap();
                })
            }),
            run: Box::new(|con, keys| Box::pin(step(con, keys, None))),
            keys: Box::new(step_keys),
            check: Box::new(|before, after, corrupted| {
                let label = format!("malformed with {corrupted:?}");
                assert_eq!(count(before, "m-3"), count(after, "m-3"), "{label}");
                assert_eq!(count(before, "m-4"), count(after, "m-4"), "{label}");
            }),
        }
    }

    pub(super) fn large() -> Scenario {
        Scenario {
            name: "step-large",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let big = format!(r#"{{"class":"A","args":["m-5","{}"]}}"#, "x".repeat(9000));
                    let _: () = con.rpush(keys.queue("q"), big).await.unwrap();
                })
            }),
            run: Box::new(|con, keys| Box::pin(step(con, keys, None))),
            keys: Box::new(step_keys),
            check: Box::new(|before, after, corrupted| {
                assert_eq!(
                    count(before, "m-5"),
                    count(after, "m-5"),
                    "large with {corrupted:?}"
                );
            }),
        }
    }

    pub(super) fn token_finish() -> Scenario {
        Scenario {
            name: "step-token",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = con
                        .set(keys.worker(ID), record("q", &job("m-6")))
                        .await
                        .unwrap();
                    let _: () = con.set(keys.claim_token(ID), "t.1").await.unwrap();
                })
            }),
            run: Box::new(|con, keys| {
                let c = Completion::Success {
                    job: JobRef::Token("t.1".into()),
                    track: None,
                    ends: None,
                };
                Box::pin(step(con, keys, Some(c)))
            }),
            keys: Box::new(step_keys),
            check: Box::new(|_, after, corrupted| {
                assert_eq!(count(after, "m-6"), 0, "token finish with {corrupted:?}");
            }),
        }
    }

    #[tokio::test]
    async fn a_refused_slot_holds_no_other_slot_back() {
        let mut con = testing::con().await;
        let ns = testing::namespace("step-batch");
        let keys = Keys::new(&ns);
        let ids = ["h~resq:1-0:q", "h~resq:1-1:q"];
        let steppers: Vec<Arc<Stepper>> = ids
            .iter()
            .map(|id| Arc::new(Stepper::new(&keys, id, true)))
            .collect();
        let queues = Arc::new(QueueKeys::new(&keys, &["q".to_string()]));
        for m in ["b-1", "b-2", "b-3"] {
            let _: () = con.rpush(keys.queue("q"), job(m)).await.unwrap();
        }
        // Slot 0's failed-job counter is a hash: its failure cannot be recorded.
        let rec0 = record("q", &job("b-0"));
        let _: () = con.set(keys.worker(ids[0]), &rec0).await.unwrap();
        let _: () = con
            .hset(keys.stat_failed_by(ids[0]), "x", "y")
            .await
            .unwrap();
        let failed = Completion::Failure {
            job: JobRef::Record(rec0.clone().into_bytes()),
            entry: r#"{"failed_at":"x","payload":{"class":"A","args":["b-0"]},"exception":"E","error":"e","backtrace":[],"worker":"w","queue":"q"}"#.into(), track: None, ends: None };
        let items = [
            StepRequest::new(steppers[0].clone(), Some(failed), true, &queues),
            StepRequest::new(steppers[1].clone(), None, true, &queues),
        ];
        let out = call_step(&mut con, &queues, &items, "").await.unwrap();
        match &out.replies[0] {
            StepReply {
                reply: Reply::Refused(why),
                applied: false,
                ..
            } => {
                assert!(why.contains(&keys.stat_failed_by(ids[0])), "{why}")
            }
            other => panic!("slot 0 not refused: {other:?}"),
        }
        assert!(
            matches!(&out.replies[1].reply, Reply::Job(r, _) if String::from_utf8_lossy(r).contains("b-1"))
        );
        // Slot 0's job is still its record; nothing counted for it.
        let held: String = con.get(keys.worker(ids[0])).await.unwrap();
        assert_eq!(held, rec0);
        assert_eq!(con.llen::<_, usize>(keys.failed()).await.unwrap(), 0);
        assert_eq!(
            con.get::<_, Option<i64>>(keys.stat_failed()).await.unwrap(),
            None
        );
        assert_eq!(con.llen::<_, usize>(keys.queue("q")).await.unwrap(), 2);
    }

    /// Members of one batch ended in one call are counted in it when the call closes, all
    /// together (workflow.lua's Flow.hold_ends): the counts are exact, each callback fires
    /// once, and a member whose end another call already counted is not counted again.
    #[tokio::test]
    async fn members_ended_in_one_call_are_counted_together_once() {
        let mut con = testing::con().await;
        let ns = testing::namespace("step-members");
        let keys = Keys::new(&ns);
        let queues = Arc::new(QueueKeys::new(&keys, &["q".to_string()]));
        let _: () = con
            .hset_multiple(
                keys.batch("b1"),
                &[
                    ("total", "4"),
                    ("pending", "4"),
                    ("unsucceeded", "4"),
                    ("failed", "0"),
                    ("queue", "cb"),
                    ("on_complete", r#"{"class":"Done","args":[]}"#),
                    ("on_success", r#"{"class":"Won","args":[]}"#),
                    ("on_death", r#"{"class":"Dead","args":[]}"#),
                ],
            )
            .await
            .unwrap();
        // Four members running on four slots; the first already counted attempted and
        // succeeded by an earlier end (run again by hand), so this end counts nothing new.
        let mut items = Vec::new();
        for i in 0..4 {
            let id = format!("{i:032x}");
            let slot = format!("h~resq:1-{i}:q");
            let _: () = con
                .hset_multiple(
                    keys.job_record(&id),
                    &[
                        ("state", "working"),
                        ("attempts", "1"),
                        ("worker", slot.as_str()),
                        ("batch", "b1"),
                    ],
                )
                .await
                .unwrap();
            let rec = record(
                "q",
                &format!(r#"{{"class":"A","args":[],"resq_id":"{id}"}}"#),
            );
            let _: () = con.set(keys.worker(&slot), &rec).await.unwrap();
            let stepper = Arc::new(Stepper::new(&keys, &slot, true));
            let state = if i == 3 { "killed" } else { "completed" };
            let done = Completion::Success {
                job: JobRef::Record(rec.into_bytes()),
                track: Some(format!("r\n{id}\n1\n\n{state}\n60\n\n")),
                ends: None,
            };
            items.push(StepRequest::new(stepper, Some(done), false, &queues));
        }
        let first = format!("{:032x}", 0);
        let _: () = con
            .hset_multiple(
                keys.job_record(&first),
                &[("attempted", "1"), ("succeeded", "1")],
            )
            .await
            .unwrap();
        let _: () = con
            .hset_multiple(keys.batch("b1"), &[("pending", "3"), ("unsucceeded", "3")])
            .await
            .unwrap();
        let out = call_step(&mut con, &queues, &items, "").await.unwrap();
        assert!(out.replies.iter().all(|r| r.applied), "{:?}", out.replies);
        assert!(
            out.tracking_problems.is_empty(),
            "{:?}",
            out.tracking_problems
        );
        let b: std::collections::HashMap<String, String> =
            con.hgetall(keys.batch("b1")).await.unwrap();
        assert_eq!(b["pending"], "0", "{b:?}");
        assert_eq!(
            b["unsucceeded"], "1",
            "the killed member never succeeds: {b:?}"
        );
        assert_eq!(b["failed"], "1", "{b:?}");
        let cb: Vec<String> = con.lrange(keys.queue("cb"), 0, -1).await.unwrap();
        assert_eq!(cb.len(), 2, "complete and death, once each: {cb:?}");
        assert!(cb.iter().any(|p| p.contains("Done")) && cb.iter().any(|p| p.contains("Dead")));
        for i in 0..4 {
            let rec: std::collections::HashMap<String, String> = con
                .hgetall(keys.job_record(&format!("{i:032x}")))
                .await
                .unwrap();
            assert_eq!(rec["attempted"], "1", "{rec:?}");
        }
    }
}

mod other_scenarios {
    use super::*;

    pub(super) fn requeue() -> Scenario {
        Scenario {
            name: "requeue",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let r = r#"{"queue":"q","run_at":"x","payload":{"class":"A","args":["r-1"]}}"#;
                    let _: () = con.set(keys.worker(ID), r).await.unwrap();
                })
            }),
            run: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let r = r#"{"queue":"q","run_at":"x","payload":{"class":"A","args":["r-1"]}}"#;
                    let job = crate::worker::requeue::HeldJob::from_record(r.as_bytes()).unwrap();
                    match crate::worker::requeue::requeue(
                        &mut con,
                        &keys,
                        ID,
                        r.as_bytes(),
                        &job,
                        "",
                        false,
                    )
                    .await
                    {
                        Ok(b) => Answer::Done(b.to_string()),
                        Err(e) => refused(e),
                    }
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.worker(ID), Kind::Str),
                    (k.queue("q"), Kind::List),
                    (k.queues(), Kind::Set),
                ]
            }),
            check: Box::new(|before, after, c| {
                assert_eq!(
                    count(before, "r-1"),
                    count(after, "r-1"),
                    "requeue with {c:?}"
                )
            }),
        }
    }

    pub(super) fn enqueue() -> Scenario {
        Scenario {
            name: "enqueue",
            setup: Box::new(|_, _| Box::pin(async {})),
            run: Box::new(|con, keys| {
                Box::pin(async move {
                    let client = crate::client::Client::new(con, keys);
                    match client
                        .enqueue_to("q", "A", &[serde_json::json!("e-1")])
                        .await
                    {
                        Ok(_) => Answer::Done(String::new()),
                        Err(crate::Error::Redis(e)) => refused(e),
                        Err(e) => panic!("{e}"),
                    }
                })
            }),
            keys: Box::new(|k| vec![(k.queues(), Kind::Set), (k.queue("q"), Kind::List)]),
            check: Box::new(|_, after, c| assert_eq!(count(after, "e-1"), 1, "enqueue with {c:?}")),
        }
    }

    pub(super) fn register() -> Scenario {
        Scenario {
            name: "register",
            setup: Box::new(|_, _| Box::pin(async {})),
            run: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let ids = [ID.to_string()];
                    match crate::worker::lifecycle::register(
                        &mut con,
                        &keys,
                        &ids,
                        chrono::Utc::now(),
                    )
                    .await
                    {
                        Ok(()) => Answer::Done(String::new()),
                        Err(e) => refused(e),
                    }
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.workers(), Kind::Set),
                    (k.heartbeats(), Kind::Hash),
                    (k.worker_started(ID), Kind::Str),
                ]
            }),
            check: Box::new(|_, after, c| assert!(count(after, ID) >= 2, "register with {c:?}")),
        }
    }

    pub(super) fn failed_retry() -> Scenario {
        Scenario {
            name: "failed-retry",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let e = r#"{"failed_at":"2026/11/24 00:00:00 UTC","payload":{"class":"A","args":["f-1"]},"exception":"E","error":"e","backtrace":[],"worker":"w","queue":"q"}"#;
                    let _: () = con.rpush(keys.failed(), e).await.unwrap();
                })
            }),
            run: Box::new(|con, keys| {
                Box::pin(async move {
                    let admin = crate::admin::Admin::new(con, keys);
                    match admin
                        .retry_failures(&crate::admin::Selector::Index(0))
                        .await
                    {
                        Ok(o) if o.done == 1 => Answer::Done(String::new()),
                        Ok(o) => Answer::Refused(o.skipped.join("; ")),
                        Err(crate::Error::Redis(e)) => refused(e),
                        Err(e) => Answer::Refused(e.to_string()),
                    }
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.failed(), Kind::List),
                    (k.queues(), Kind::Set),
                    (k.queue("q"), Kind::List),
                ]
            }),
            check: Box::new(|_, after, c| {
                // The entry stays (marked retried) and the job is queued once.
                assert_eq!(count(after, "f-1"), 2, "failed retry with {c:?}")
            }),
        }
    }
}

mod spread_scenarios {
    use super::*;

    /// failed_mark.lua: a retry on a spread namespace (the job pushed first, then the entry
    /// marked), each key it touches corrupted in turn.
    pub(super) fn failed_retry_spread() -> Scenario {
        Scenario {
            name: "failed-retry-spread",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let e = r#"{"failed_at":"2026/11/24 00:00:00 UTC","payload":{"class":"A","args":["f-1"]},"exception":"E","error":"e","backtrace":[],"worker":"w","queue":"q"}"#;
                    let _: () = con.rpush(keys.failed(), e).await.unwrap();
                })
            }),
            run: Box::new(|con, keys| {
                Box::pin(async move {
                    let admin = crate::admin::Admin::new(con, keys.spread());
                    match admin
                        .retry_failures(&crate::admin::Selector::Index(0))
                        .await
                    {
                        Ok(o) if o.done == 1 => Answer::Done(String::new()),
                        Ok(o) => Answer::Refused(o.skipped.join("; ")),
                        Err(crate::Error::Redis(e)) => refused(e),
                        Err(e) => Answer::Refused(e.to_string()),
                    }
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.failed(), Kind::List),
                    (k.queues(), Kind::Set),
                    (k.queue("q"), Kind::List),
                ]
            }),
            check: Box::new(|_, after, c| {
                // The entry stays (marked retried) and the job is queued once.
                assert_eq!(count(after, "f-1"), 2, "spread failed retry with {c:?}")
            }),
        }
    }
}

mod more_scenarios {
    use super::*;
    use crate::worker::step::{Completion, JobRef, Stepper};
    use serde_json::json;

    /// The answer of a call returning the crate's `Result`.
    fn answer<T: std::fmt::Debug>(r: crate::Result<T>) -> Answer {
        match r {
            Ok(v) => Answer::Done(format!("{v:?}")),
            Err(crate::Error::Redis(e)) => refused(e),
            Err(e) => Answer::Refused(e.to_string()),
        }
    }

    const REC: &str = r#"{"queue":"q","run_at":"x","payload":{"class":"A","args":["c-1"]}}"#;

    /// complete.lua, with a retry through the delayed set and a unique lock.
    pub(super) fn complete_retry() -> Scenario {
        Scenario {
            name: "complete-retry",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = con.set(keys.worker(ID), REC).await.unwrap();
                })
            }),
            run: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let registry = crate::Registry::new()
                        .handler("A", |_| async { Err(crate::JobError::msg("boom")) })
                        .retry(
                            "A",
                            crate::registry::retry::RetryPolicy::fixed(
                                std::time::Duration::from_secs(60),
                                3,
                            ),
                        );
                    let payload = std::sync::Arc::new(
                        crate::wire::Payload::parse(br#"{"class":"A","args":["c-1"]}"#).unwrap(),
                    );
                    let ctx = crate::JobContext::new(payload, "q".into(), ID.into());
                    let Ok((entry, ctx)) = registry.resolve(ctx) else {
                        panic!("no handler")
                    };
                    let chain = crate::middleware::Chain::new(&[], None);
                    let _ = chain.run(&entry.handler, ctx.clone()).await;
                    let x = ctx.take_extras();
                    let c = crate::worker::complete::retrying(
                        x.retry.expect("a retry plan"),
                        x.unique,
                        x.track,
                        JobRef::Record(REC.as_bytes().to_vec()),
                    );
                    let Completion::Extended(ext) = c else {
                        panic!("not extended")
                    };
                    let stepper = Stepper::new(&keys, ID, true);
                    match stepper.apply_extended(&mut con, &ext, false).await {
                        Ok(b) => Answer::Done(b.to_string()),
                        Err(e) => refused(e),
                    }
                })
            }),
            keys: Box::new(|k| {
                let logical = Keys::resque_retry_logical(
                    "A",
                    crate::registry::retry::retry_identifier(&[json!("c-1")]).as_deref(),
                );
                vec![
                    (k.worker(ID), Kind::Str),
                    (k.stat_processed(), Kind::Counter),
                    (k.stat_failed(), Kind::Counter),
                    (k.stat_processed_by(ID), Kind::Counter),
                    (k.stat_failed_by(ID), Kind::Counter),
                    (k.retry_attempts(&logical), Kind::Counter),
                    (k.retry_failure(&logical), Kind::Str),
                    (k.delayed_schedule(), Kind::Zset),
                ]
            }),
            check: Box::new(|before, after, c| {
                // The job left its record for the delayed set (a bucket item), or — a retry
                // counter that cannot be read as a count of attempts — for the failure list:
                // in one place either way.
                let places = after
                    .iter()
                    .filter(|(k, v)| {
                        (k.contains(":delayed:") || k.ends_with(":failed")) && v.contains("c-1")
                    })
                    .count();
                assert_eq!(places, 1, "complete retry with {c:?}: {after:?}");
                assert!(!after.keys().any(|k| k.contains(":worker:")), "{c:?}");
                assert!(count(before, "c-1") >= 1);
            }),
        }
    }

    /// prune.lua: a dead Ruby worker's job becomes a failure entry.
    pub(super) fn prune() -> Scenario {
        const DEAD: &str = "ruby-host:77:q";
        Scenario {
            name: "prune",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = con.sadd(keys.workers(), DEAD).await.unwrap();
                    let _: () = con.set(keys.worker(DEAD), REC).await.unwrap();
                    let _: () = con
                        .hset(keys.heartbeats(), DEAD, "2020-01-01T00:00:00+00:00")
                        .await
                        .unwrap();
                })
            }),
            run: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let pruner = crate::worker::prune::Pruner::new(
                        keys.clone(),
                        &["me~resq:1-0:q".to_string()],
                        1,
                        std::time::Duration::from_secs(300),
                        false,
                    );
                    match pruner.run_once(&mut con).await {
                        Ok(r) if r.pruned.len() == 1 => Answer::Done(String::new()),
                        Ok(r) if r.locked => Answer::Refused(format!("{:?}", r.skipped)),
                        Ok(r) => Answer::Done(format!("{r:?}")),
                        Err(e) => refused(e),
                    }
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.workers(), Kind::Set),
                    (k.worker(DEAD), Kind::Str),
                    (k.heartbeats(), Kind::Hash),
                    (k.failed(), Kind::List),
                    (k.claims(), Kind::Set),
                ]
            }),
            check: Box::new(|before, after, c| {
                let label = format!("prune with {c:?}");
                if c.is_some_and(|k| k.ends_with(":claims")) {
                    // The claims pass ran after the id was pruned: its refusal is only logged.
                    assert_eq!(count(after, "c-1"), count(before, "c-1"), "{label}");
                    return;
                }
                assert_eq!(count(before, "c-1"), count(after, "c-1"), "{label}");
            }),
        }
    }

    /// A claim is promoted to its record (WATCH/MULTI), failed (promote.lua) or put back
    /// (unclaim.lua).
    fn claimed(name: &'static str, how: &'static str) -> Scenario {
        const RAW: &str = r#"{"class":"A","args":["p-1"]}"#;
        Scenario {
            name,
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = con
                        .rpush(keys.claim(ID), &[RAW, "t.1", "\"q\""])
                        .await
                        .unwrap();
                    let _: () = con.sadd(keys.claims(), ID).await.unwrap();
                })
            }),
            run: Box::new(move |mut con, keys| {
                Box::pin(async move {
                    let stepper = Stepper::new(&keys, ID, true);
                    let claim = crate::worker::step::Claim {
                        token: "t.1".into(),
                        queue: "q".into(),
                        size: RAW.len(),
                    };
                    let r = match how {
                        "unclaim" => crate::worker::claim::unclaim(&mut con, &keys, ID, "t.1", "q")
                            .await
                            .map(|b| b.to_string()),
                        "fail" => crate::worker::claim::fail(
                            &mut con,
                            &stepper,
                            &claim,
                            r#"{"payload":null,"error":"p-1 bad"}"#,
                        )
                        .await
                        .map(|p| format!("{p:?}")),
                        _ => crate::worker::claim::promote(&mut con, &stepper, &claim, RAW)
                            .await
                            .map(|p| format!("{p:?}")),
                    };
                    match r {
                        Ok(v) => Answer::Done(v),
                        Err(e) => refused(e),
                    }
                })
            }),
            keys: Box::new(move |k| {
                let mut v = vec![(k.claim(ID), Kind::List), (k.claims(), Kind::Set)];
                match how {
                    "unclaim" => {
                        v.push((k.queue("q"), Kind::List));
                        v.push((k.queues(), Kind::Set));
                    }
                    "fail" => {
                        v.push((k.failed(), Kind::List));
                        v.push((k.stat_failed(), Kind::Counter));
                        v.push((k.stat_failed_by(ID), Kind::Counter));
                        v.push((k.stat_processed(), Kind::Counter));
                    }
                    _ => {
                        v.push((k.worker(ID), Kind::Str));
                        v.push((k.claim_token(ID), Kind::Str));
                    }
                }
                v
            }),
            check: Box::new(|before, after, c| {
                assert_eq!(
                    count(before, "p-1"),
                    count(after, "p-1"),
                    "claim with {c:?}"
                )
            }),
        }
    }

    pub(super) fn promote() -> Scenario {
        claimed("promote", "run")
    }

    pub(super) fn promote_failed() -> Scenario {
        claimed("promote-failed", "fail")
    }

    pub(super) fn unclaim() -> Scenario {
        claimed("unclaim", "unclaim")
    }

    pub(super) fn unique_enqueue() -> Scenario {
        Scenario {
            name: "unique",
            setup: Box::new(|_, _| Box::pin(async {})),
            run: Box::new(|con, keys| {
                Box::pin(async move {
                    let client = crate::client::Client::new(con, keys);
                    let u = crate::client::unique::Unique::new("u-key");
                    answer(client.enqueue_unique("q", "A", &[json!("u-1")], &u).await)
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.unique("u-key"), Kind::Str),
                    (k.queues(), Kind::Set),
                    (k.queue("q"), Kind::List),
                ]
            }),
            check: Box::new(|_, after, c| assert_eq!(count(after, "u-1"), 1, "unique with {c:?}")),
        }
    }

    pub(super) fn jesque_enqueue() -> Scenario {
        Scenario {
            name: "jesque",
            setup: Box::new(|_, _| Box::pin(async {})),
            run: Box::new(|con, keys| {
                Box::pin(async move {
                    let client = crate::client::Client::new(con, keys);
                    let job = crate::client::jesque::JesqueJob::new("A", vec![json!("j-1")]);
                    let at = chrono::Utc::now() + chrono::Duration::seconds(60);
                    answer(client.jesque_delayed_enqueue("q", &job, at).await)
                })
            }),
            keys: Box::new(|k| vec![(k.queue("q"), Kind::Zset), (k.queues(), Kind::Set)]),
            check: Box::new(|_, after, c| assert_eq!(count(after, "j-1"), 1, "jesque with {c:?}")),
        }
    }

    pub(super) fn delayed_push() -> Scenario {
        Scenario {
            name: "delayed",
            setup: Box::new(|_, _| Box::pin(async {})),
            run: Box::new(|con, keys| {
                Box::pin(async move {
                    let client = crate::client::Client::new(con, keys);
                    answer(
                        client
                            .delayed_push_raw(
                                4_000_000_000,
                                r#"{"class":"A","args":["d-1"],"queue":"q"}"#,
                            )
                            .await,
                    )
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.delayed_bucket(4_000_000_000), Kind::List),
                    (k.delayed_schedule(), Kind::Zset),
                ]
            }),
            check: Box::new(|_, after, c| assert!(count(after, "d-1") >= 1, "delayed with {c:?}")),
        }
    }

    /// move_delayed.lua (through the mover) and the master lock poll.
    pub(super) fn move_delayed() -> Scenario {
        const ITEM: &str = r#"{"class":"A","args":["v-1"],"queue":"q"}"#;
        Scenario {
            name: "move",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = con.rpush(keys.delayed_bucket(100), ITEM).await.unwrap();
                    let _: () = con.zadd(keys.delayed_schedule(), 100, 100).await.unwrap();
                    let _: () = con.set(keys.scheduler_master_lock(), "me").await.unwrap();
                })
            }),
            run: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let lock = crate::scheduler::lock::MasterLock {
                        key: keys.scheduler_master_lock(),
                        value: "me".into(),
                        timeout: std::time::Duration::from_secs(60),
                        schedule_key: keys.delayed_schedule(),
                    };
                    if let Err(e) = lock.poll(&mut con, 200).await {
                        return answer::<()>(Err(e));
                    }
                    let mover = crate::scheduler::mover::Mover {
                        keys: keys.clone(),
                        lock_key: keys.scheduler_master_lock(),
                        lock_value: "me".into(),
                        batch: 100,
                        float_format: Default::default(),
                    };
                    answer(mover.drain(&mut con, 100).await)
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.scheduler_master_lock(), Kind::Str),
                    (k.delayed_schedule(), Kind::Zset),
                    (k.delayed_bucket(100), Kind::List),
                    (k.queues(), Kind::Set),
                    (k.queue("q"), Kind::List),
                ]
            }),
            check: Box::new(|before, after, c| {
                assert_eq!(
                    count(before, "v-1").min(1),
                    count(after, "v-1"),
                    "move with {c:?}"
                )
            }),
        }
    }

    pub(super) fn failed_remove() -> Scenario {
        Scenario {
            name: "failed-remove",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = con
                        .rpush(keys.failed(), r#"{"payload":{"class":"A","args":["x-1"]}}"#)
                        .await
                        .unwrap();
                })
            }),
            run: Box::new(|con, keys| {
                Box::pin(async move {
                    let admin = crate::admin::Admin::new(con, keys);
                    answer(
                        admin
                            .remove_failures(&crate::admin::Selector::Index(0))
                            .await,
                    )
                })
            }),
            keys: Box::new(|k| vec![(k.failed(), Kind::List)]),
            check: Box::new(|_, after, c| assert_eq!(count(after, "x-1"), 0, "remove with {c:?}")),
        }
    }

    pub(super) fn unregister() -> Scenario {
        Scenario {
            name: "unregister",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = con.sadd(keys.workers(), ID).await.unwrap();
                    let _: () = con.hset(keys.heartbeats(), ID, "x").await.unwrap();
                })
            }),
            run: Box::new(|mut con, keys| {
                Box::pin(async move {
                    match crate::worker::lifecycle::unregister(&mut con, &keys, &[ID.to_string()])
                        .await
                    {
                        Ok(()) => Answer::Done(String::new()),
                        Err(e) => refused(e),
                    }
                })
            }),
            keys: Box::new(|k| vec![(k.workers(), Kind::Set), (k.heartbeats(), Kind::Hash)]),
            check: Box::new(|_, after, c| assert_eq!(count(after, ID), 0, "unregister with {c:?}")),
        }
    }
}

/// The functions of tracked jobs and workflows: a tracked enqueue with a tag and a job key, a
/// batch's creation, a purge.
mod flow_scenarios {
    use super::*;

    fn outcome<T>(r: crate::Result<T>) -> Answer {
        match r {
            Ok(_) => Answer::Done(String::new()),
            Err(crate::Error::Redis(e)) => refused(e),
            Err(e) => Answer::Refused(e.to_string()),
        }
    }

    pub(super) fn tracked_enqueue() -> Scenario {
        Scenario {
            name: "tracked_enqueue",
            setup: Box::new(|_, _| Box::pin(async {})),
            run: Box::new(|con, keys| {
                Box::pin(async move {
                    let client = crate::client::Client::new(con, keys);
                    let track = crate::jobs::Track::new().tag("t").key("k");
                    outcome(
                        client
                            .enqueue_class_tracked("q", "A", &[serde_json::json!("t-1")], track)
                            .await,
                    )
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.queues(), Kind::Set),
                    (k.queue("q"), Kind::List),
                    (k.job_tag("t"), Kind::Zset),
                    (k.job_tags(), Kind::Set),
                    (k.job_key("k"), Kind::Str),
                ]
            }),
            check: Box::new(|_, after, c| {
                assert_eq!(count(after, "t-1"), 1, "tracked enqueue with {c:?}")
            }),
        }
    }

    /// job_lost.lua: a tracked run whose worker is gone ends failed (its job key freed, its
    /// batch counting it), by the function every end goes through.
    pub(super) fn job_lost() -> Scenario {
        const JOB: &str = "0123456789abcdef0123456789abcdef";
        const GONE: &str = "h~resq:9-0:q";
        Scenario {
            name: "job_lost",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = redis::pipe()
                        .hset_multiple(
                            keys.job_record(JOB),
                            &[
                                ("state", "working"),
                                ("worker", GONE),
                                ("key", "lk"),
                                ("batch", "b1"),
                                ("attempts", "1"),
                            ],
                        )
                        .sadd(keys.runs(), JOB)
                        .set(keys.job_key("lk"), JOB)
                        .hset_multiple(
                            keys.batch("b1"),
                            &[("total", "2"), ("pending", "2"), ("unsucceeded", "2")],
                        )
                        .query_async(&mut con)
                        .await
                        .unwrap();
                })
            }),
            run: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let r: redis::RedisResult<(u64, u64, u64, String)> = crate::scripts::JobLost {
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
                    .await;
                    match r {
                        Ok(v) => Answer::Done(format!("{v:?}")),
                        Err(e) => refused(e),
                    }
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.runs(), Kind::Set),
                    (k.workers(), Kind::Set),
                    (k.running(), Kind::Zset),
                    (k.job_record(JOB), Kind::Hash),
                    (k.job_key("lk"), Kind::Str),
                    (k.job_state("failed"), Kind::Zset),
                    (k.batch("b1"), Kind::Hash),
                    (k.worker(GONE), Kind::Str),
                ]
            }),
            check: Box::new(|_, after, c| {
                let label = format!("job_lost with {c:?}");
                let rec = after.iter().find(|(k, _)| k.ends_with(JOB));
                let running = after
                    .iter()
                    .any(|(k, v)| k.ends_with(":resq:runs") && v.contains(JOB));
                if let Some((_, v)) = rec {
                    if v.starts_with("hash:") {
                        // Ended, or (its worker record of another type says nothing) left
                        // indexed for the next round: never working and forgotten.
                        assert!(
                            v.contains("\"state\": \"failed\"") || running,
                            "{label}: {v}"
                        );
                    }
                }
                if c.is_none() {
                    assert!(!running, "{label}");
                    assert!(
                        !after.keys().any(|k| k.ends_with(":resq:jobkey:lk")),
                        "{label}: the job key is freed"
                    );
                    let b = after
                        .iter()
                        .find(|(k, _)| k.ends_with(":resq:batch:b1"))
                        .unwrap()
                        .1;
                    assert!(b.contains("\"pending\": \"1\""), "{label}: {b}");
                }
            }),
        }
    }

    /// job_taken.lua: a queued tracked job whose payload is nowhere (a foreign worker took
    /// it) ends failed (its job key freed, its batch counting it), by the function every end
    /// goes through; one whose places cannot all be read is kept.
    pub(super) fn job_taken() -> Scenario {
        const JOB: &str = "fedcba9876543210fedcba9876543210";
        Scenario {
            name: "job_taken",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let _: () = redis::pipe()
                        .hset_multiple(
                            keys.job_record(JOB),
                            &[
                                ("state", "queued"),
                                ("queue", "q"),
                                ("key", "tk"),
                                ("batch", "b1"),
                                ("attempts", "0"),
                            ],
                        )
                        .zadd(keys.unended(), JOB, 1)
                        .zadd(keys.missed(), JOB, 1)
                        .set(keys.job_key("tk"), JOB)
                        .rpush(keys.queue("q"), r#"{"class":"A","args":[],"resq_id":"00000000000000000000000000000000"}"#)
                        .hset_multiple(
                            keys.batch("b1"),
                            &[("total", "2"), ("pending", "2"), ("unsucceeded", "2")],
                        )
                        .query_async(&mut con)
                        .await
                        .unwrap();
                })
            }),
            run: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let r: redis::RedisResult<(u64, u64, u64, String, u64)> =
                        crate::scripts::JobTaken {
                            unended: keys.unended(),
                            workers: keys.workers(),
                            failed: keys.failed(),
                            claims: keys.claims(),
                            missed: keys.missed(),
                            prefix: keys.prefix(),
                            now_ms: 1_000_000,
                            ttl_s: 60,
                            cutoff_ms: 999_940,
                            most: 100,
                            scan: 1000,
                            limits: "",
                            grace_ms: 60,
                            spread: "",
                            here: String::new(),
                            foreign: String::new(),
                        }
                        .call()
                        .invoke_async(&mut con)
                        .await;
                    match r {
                        Ok(v) => Answer::Done(format!("{v:?}")),
                        Err(e) => refused(e),
                    }
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.unended(), Kind::Zset),
                    (k.missed(), Kind::Zset),
                    (k.workers(), Kind::Set),
                    (k.failed(), Kind::List),
                    (k.claims(), Kind::Set),
                    (k.job_record(JOB), Kind::Hash),
                    (k.job_key("tk"), Kind::Str),
                    (k.queue("q"), Kind::List),
                    (k.job_state("failed"), Kind::Zset),
                    (k.batch("b1"), Kind::Hash),
                ]
            }),
            check: Box::new(|_, after, c| {
                let label = format!("job_taken with {c:?}");
                let rec = after.iter().find(|(k, _)| k.ends_with(JOB));
                if let Some((_, v)) = rec {
                    if v.starts_with("hash:") {
                        assert!(
                            v.contains("\"state\": \"failed\"")
                                || v.contains("\"state\": \"queued\""),
                            "{label}: {v}"
                        );
                    }
                }
                if c.is_none() {
                    let (_, v) = rec.unwrap();
                    assert!(v.contains("\"state\": \"failed\""), "{label}: {v}");
                    assert!(
                        !after.keys().any(|k| k.ends_with(":resq:jobkey:tk")),
                        "{label}: the job key is freed"
                    );
                    let b = after
                        .iter()
                        .find(|(k, _)| k.ends_with(":resq:batch:b1"))
                        .unwrap()
                        .1;
                    assert!(b.contains("\"pending\": \"1\""), "{label}: {b}");
                }
            }),
        }
    }

    pub(super) fn batch_create() -> Scenario {
        Scenario {
            name: "batch_create",
            setup: Box::new(|_, _| Box::pin(async {})),
            run: Box::new(|con, keys| {
                Box::pin(async move {
                    let client = crate::client::Client::new(con, keys);
                    let batch = crate::workflows::Batch::new()
                        .on_complete("Cb", vec![])
                        .job("q", "A", vec![serde_json::json!("b-1")]);
                    outcome(client.create_batch(batch).await)
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.batches(), Kind::Zset),
                    (k.queues(), Kind::Set),
                    (k.queue("q"), Kind::List),
                ]
            }),
            check: Box::new(|_, after, c| {
                assert_eq!(count(after, "b-1"), 1, "batch create with {c:?}")
            }),
        }
    }

    pub(super) fn purge() -> Scenario {
        Scenario {
            name: "purge",
            setup: Box::new(|_, _| Box::pin(async {})),
            run: Box::new(|con, keys| {
                Box::pin(async move {
                    let admin = crate::admin::Admin::new(con, keys);
                    outcome(admin.purge_jobs(None, std::time::Duration::ZERO).await)
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.job_tags(), Kind::Set),
                    (k.job_state("completed"), Kind::Zset),
                    (k.resque_statuses(), Kind::Zset),
                    (k.batches(), Kind::Zset),
                ]
            }),
            check: Box::new(|before, after, c| assert_eq!(before, after, "purge with {c:?}")),
        }
    }
}

/// The functions that keep limits converging: an operator's change (limits_set.lua) and the
/// sweep (limits_sweep.lua).
mod limit_scenarios {
    use super::*;

    const HELD: &str = "1.000001\tdefault\t1\tone\t{\"class\":\"A\",\"args\":[\"h-1\"]}";
    const LIVE: &str = "h~resq:1-1:default";
    const GONE: &str = "h~resq:1-2:default";
    const JSON: &str = r#"{"defs":[{"name":"one","kind":"concurrency","limit":1,"class":"A"},{"name":"rk","kind":"rate","limit":5,"interval_ms":1000,"class":"B","key":"{args.0}"}],"open":{}}"#;

    async fn held_state(con: &mut Conn, keys: &Keys) {
        let _: () = con
            .zadd(keys.limit_held("one", None), HELD, 1)
            .await
            .unwrap();
    }

    fn keep_the_job(what: &'static str) -> Check {
        Box::new(move |before, after, c| {
            assert_eq!(
                count(before, "h-1"),
                count(after, "h-1"),
                "{what} with {c:?}: the held job is in one place"
            );
        })
    }

    pub(super) fn set() -> Scenario {
        Scenario {
            name: "limits_set",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let def = r#"{"name":"one","kind":"concurrency","limit":1,"class":"A"}"#;
                    let _: () = con.hset(keys.limits_declared(), "one", def).await.unwrap();
                    held_state(&mut con, &keys).await;
                })
            }),
            run: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let r: redis::RedisResult<(u64, u64, u64)> = crate::scripts::LIMITS_SET
                        .key(keys.limits_set())
                        .key(keys.limits_declared())
                        .key(keys.limits_rejudge())
                        .arg(keys.prefix())
                        .arg("one")
                        .arg("")
                        .arg("1")
                        .arg("1")
                        .arg(1000)
                        .arg(0)
                        .invoke_async(&mut con)
                        .await;
                    match r {
                        Ok(_) => Answer::Done(String::new()),
                        Err(e) => refused(e),
                    }
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.limits_set(), Kind::Hash),
                    (k.limits_declared(), Kind::Hash),
                    (k.limits_rejudge(), Kind::Hash),
                    (k.limit_held("one", None), Kind::Zset),
                    (k.held_sets(), Kind::Zset),
                    (k.limit_parts("one"), Kind::Set),
                    (k.queue("default"), Kind::List),
                    (k.queues(), Kind::Set),
                    (k.wake(), Kind::Str),
                ]
            }),
            check: keep_the_job("limits_set"),
        }
    }

    /// A split changed while one shard drains (split_set.lua).
    pub(super) fn split_set() -> Scenario {
        Scenario {
            name: "split_set",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let d = r#"{"shards":["v~0{a}"],"draining":["v~1{b}"],"changed":0}"#;
                    let _: () = con.hset(keys.splits(), "v", d).await.unwrap();
                })
            }),
            run: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let r: redis::RedisResult<String> = crate::scripts::SplitSet {
                        splits: keys.splits(),
                        queue: "v",
                        set: "1",
                        shards: r#"["v~0{c}","v~1{d}"]"#.into(),
                        empty: r#"["v~1{b}"]"#.into(),
                        changed: 0,
                        now_ms: 100_000,
                        grace_ms: 1000,
                    }
                    .call()
                    .invoke_async(&mut con)
                    .await;
                    match r {
                        Ok(t) => Answer::Done(t),
                        Err(e) => refused(e),
                    }
                })
            }),
            keys: Box::new(|k| vec![(k.splits(), Kind::Hash)]),
            check: Box::new(|_, after, c| {
                let d = after.values().find(|v| v.contains("v~0{c}"));
                assert!(
                    d.is_some_and(|d| d.contains("v~0{a}") && !d.contains("v~1{b}")),
                    "split_set with {c:?}: the old shard drains, the empty one is dropped: {after:?}"
                );
            }),
        }
    }

    pub(super) fn sweep() -> Scenario {
        Scenario {
            name: "limits_sweep",
            setup: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let h = keys.limit_holders("one", None);
                    let entry = format!("1 {}:{h}", h.len());
                    let _: () = con.hset(&h, "__units", 5).await.unwrap();
                    let _: () = con.hset(keys.sharing(), LIVE, &entry).await.unwrap();
                    let _: () = con.hset(keys.sharing(), GONE, &entry).await.unwrap();
                    let _: () = con.sadd(keys.workers(), LIVE).await.unwrap();
                    let _: () = con
                        .set(keys.worker(LIVE), r#"{"queue":"default","run_at":"2026-11-27T00:00:00Z","payload":{"class":"A","args":["r-1"]}}"#)
                        .await
                        .unwrap();
                    held_state(&mut con, &keys).await;
                    let _: () = con.hset(keys.limits_rejudge(), "one", "").await.unwrap();
                    let _: () = con.sadd(keys.limit_parts("rk"), "idle").await.unwrap();
                })
            }),
            run: Box::new(|mut con, keys| {
                Box::pin(async move {
                    let r: redis::RedisResult<(u64, u64, u64, String)> =
                        crate::scripts::LimitsSweep {
                            sharing: keys.sharing(),
                            prefix: keys.prefix(),
                            limits: JSON,
                            now_ms: chrono::Utc::now().timestamp_millis(),
                            budget: 1000,
                            moved: &["one".to_string()],
                        }
                        .call()
                        .invoke_async(&mut con)
                        .await;
                    match r {
                        Ok(_) => Answer::Done(String::new()),
                        Err(e) => refused(e),
                    }
                })
            }),
            keys: Box::new(|k| {
                vec![
                    (k.sharing(), Kind::Hash),
                    (k.limit_holders("one", None), Kind::Hash),
                    (k.limit_held("one", None), Kind::Zset),
                    (k.held_sets(), Kind::Zset),
                    (k.limit_parts("one"), Kind::Set),
                    (k.limits_rejudge(), Kind::Hash),
                    (k.limits_sweep(), Kind::Hash),
                    (k.limit_parts("rk"), Kind::Set),
                    (k.limit_held("rk", Some("idle")), Kind::Zset),
                    (k.workers(), Kind::Set),
                    (k.worker(LIVE), Kind::Str),
                    (k.queue("default"), Kind::List),
                    (k.queues(), Kind::Set),
                    (k.wake(), Kind::Str),
                ]
            }),
            check: Box::new(|before, after, c| {
                keep_the_job("limits_sweep")(before, after, c);
                let label = format!("limits_sweep with {c:?}");
                assert_eq!(count(before, "r-1"), count(after, "r-1"), "{label}");
                if c.is_none() {
                    // The sum is what the live slot holds; the dead slot's entry is gone.
                    let h = after
                        .iter()
                        .find(|(k, _)| k.ends_with(":resq:limit:one:holders"))
                        .map(|(_, v)| v.clone());
                    assert_eq!(h.as_deref(), Some(r#"hash:{"__units": "1"}"#), "{label}");
                    assert_eq!(count(after, GONE), 0, "{label}");
                }
            }),
        }
    }
}

/// Every scenario of the harness: each function's call with every key it touches corrupted in
/// turn (this file's test), and under `MONITOR` (declared_tests.rs).
fn every_scenario() -> Vec<Scenario> {
    vec![
        step_scenarios::reserve(),
        step_scenarios::finish_success(),
        step_scenarios::finish_failure(),
        step_scenarios::finish_ends(),
        step_scenarios::malformed(),
        step_scenarios::large(),
        step_scenarios::token_finish(),
        other_scenarios::requeue(),
        other_scenarios::enqueue(),
        other_scenarios::register(),
        other_scenarios::failed_retry(),
        spread_scenarios::failed_retry_spread(),
        more_scenarios::complete_retry(),
        more_scenarios::prune(),
        more_scenarios::promote(),
        more_scenarios::promote_failed(),
        more_scenarios::unclaim(),
        more_scenarios::unique_enqueue(),
        more_scenarios::jesque_enqueue(),
        more_scenarios::delayed_push(),
        more_scenarios::move_delayed(),
        more_scenarios::failed_remove(),
        more_scenarios::unregister(),
        flow_scenarios::tracked_enqueue(),
        flow_scenarios::batch_create(),
        flow_scenarios::purge(),
        flow_scenarios::job_lost(),
        flow_scenarios::job_taken(),
        limit_scenarios::set(),
        limit_scenarios::sweep(),
        limit_scenarios::split_set(),
        job_tests::job_cancel(),
        job_tests::job_start(),
        job_tests::delayed_take(),
        job_tests::fire_schedule(),
        job_tests::limits_release(),
        job_tests::batch_discard(),
        job_tests::job_progress_record(),
        job_tests::job_progress_status(),
        job_tests::limit_claim_admitted(),
        job_tests::limit_claim_held(),
    ]
}

#[tokio::test]
async fn no_script_writes_when_it_refuses() {
    for s in every_scenario() {
        play(&s).await;
    }
}

/// job_taken.lua's reads of runs are bounded by the fleet that can hold the job: resq's own
/// slots' records are never read (a resq run makes the record `working` in the call that takes
/// the job), and other workers' records only when a candidate is still unseen after its queue.
/// With a budget smaller than the fleet, reading every record first would leave the queue
/// unread and the job kept for want of budget.
#[tokio::test]
async fn job_taken_reads_worker_records_only_of_foreign_workers_and_only_when_needed() {
    const JOB: &str = "0123456789abcdef0123456789abcdef";
    async fn call(con: &mut Conn, keys: &Keys) -> (u64, u64, u64, String, u64) {
        crate::scripts::JobTaken {
            unended: keys.unended(),
            workers: keys.workers(),
            failed: keys.failed(),
            claims: keys.claims(),
            missed: keys.missed(),
            prefix: keys.prefix(),
            now_ms: 1_000_000,
            ttl_s: 60,
            cutoff_ms: 999_940,
            most: 100,
            scan: 50,
            limits: "",
            grace_ms: 60,
            spread: "",
            here: String::new(),
            foreign: String::new(),
        }
        .call()
        .invoke_async(con)
        .await
        .unwrap()
    }
    let mut con = testing::con().await;
    for (fleet, in_queue) in [("vm~resq:1-{}:q", false), ("rubyhost:{}:q", true)] {
        let ns = testing::namespace("taken-fleet");
        let keys = Keys::new(&ns);
        let mut p = redis::pipe();
        p.hset_multiple(keys.job_record(JOB), &[("state", "queued"), ("queue", "q")])
            .zadd(keys.unended(), JOB, 1)
            .zadd(keys.missed(), JOB, 1);
        if in_queue {
            p.rpush(
                keys.queue("q"),
                format!(r#"{{"class":"A","args":[],"resq_id":"{JOB}"}}"#),
            );
        }
        for i in 0..200 {
            let w = fleet.replace("{}", &i.to_string());
            p.sadd(keys.workers(), &w)
                .set(keys.worker(&w), r#"{"queue":"q","payload":{"class":"B"}}"#);
        }
        let _: () = p.query_async(&mut con).await.unwrap();
        let (_, ended, kept, problems, _) = call(&mut con, &keys).await;
        assert_eq!(problems, "");
        if in_queue {
            assert_eq!((ended, kept), (0, 0), "seen in its queue, no record read");
        } else {
            assert_eq!((ended, kept), (1, 0), "taken: resq's own records not read");
        }
    }
}
