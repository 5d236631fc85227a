//! Corruption-harness scenarios (tests.rs) of functions an operator's, a handler's or a timer's
//! call runs on one job: `job_cancel` (resq job cancel), `job_start` (the start of a job whose
//! payload the step claimed), `delayed_take` (a scheduled item run now), `fire_schedule` (a
//! recurring schedule's fire), `limits_release` (held jobs back to their queues), `batch_discard`
//! (a batch whose creation stopped), `job_progress` (a running job's progress, resq's record and
//! resque-status's) and `limit_claim` (a claimed job's limits: admitted, or held with its payload's
//! list renamed). Each key they touch is given every wrong type in turn: the call refuses before
//! any write, naming the key, or goes through and leaves the job in one place.

use super::*;

const JOB: &str = "00112233445566778899aabbccddeeff";

fn id() -> crate::jobs::JobId {
    crate::jobs::JobId::parse(JOB).expect("a job id")
}

/// A tracked job queued on `q` with tag `t` and job key `k`.
async fn queued(con: Conn, keys: Keys) {
    let client = crate::client::Client::new(con, keys);
    let track = crate::jobs::Track::new().id(id()).tag("t").key("k");
    client
        .enqueue_class_tracked("q", "A", &[serde_json::json!("c-1")], track)
        .await
        .expect("enqueue");
}

/// The record's state in a snapshot (None: no record).
fn state(snap: &Snapshot, keys: &Keys) -> Option<String> {
    let rec = snap.get(&keys.job_record(JOB))?;
    let at = rec.find("\"state\": \"")? + "\"state\": \"".len();
    Some(rec[at..].split('"').next()?.to_string())
}

/// The namespace's keys, from any key of a snapshot (`<ns>:…`).
fn keys_of(snap: &Snapshot) -> Keys {
    let ns = snap
        .keys()
        .next()
        .and_then(|k| k.split(':').next())
        .unwrap_or("");
    Keys::new(ns)
}

/// A function's reply as the harness reads it.
fn reply<T: std::fmt::Debug>(r: redis::RedisResult<T>) -> Answer {
    match r {
        Ok(v) => Answer::Done(format!("{v:?}")),
        Err(e) => refused(e),
    }
}

fn answer<T>(r: crate::Result<T>) -> Answer {
    match r {
        Ok(_) => Answer::Done(String::new()),
        Err(crate::Error::Redis(e)) => refused(e),
        Err(e) => Answer::Refused(e.to_string()),
    }
}

/// job_cancel.lua: a queued tracked job cancelled — its record `cancelled`, its job key free
/// — or refused with nothing written.
pub(super) fn job_cancel() -> Scenario {
    Scenario {
        name: "job_cancel",
        setup: Box::new(|con, keys| Box::pin(queued(con, keys))),
        run: Box::new(|con, keys| {
            Box::pin(async move {
                let admin = crate::admin::Admin::new(con, keys);
                answer(admin.cancel_job(&id()).await)
            })
        }),
        keys: Box::new(|k| {
            vec![
                (k.job_record(JOB), Kind::Hash),
                (k.resque_status_kill(), Kind::Set),
                (k.job_key("k"), Kind::Str),
                (k.job_tag("t"), Kind::Zset),
                (k.job_state("cancelled"), Kind::Zset),
            ]
        }),
        check: Box::new(|_, after, c| {
            let k = keys_of(after);
            if c.is_none() {
                // (Its payload stays queued: the reserve drops a cancelled job when it meets it.)
                assert_eq!(
                    state(after, &k).as_deref(),
                    Some("cancelled"),
                    "an untouched cancel"
                );
                assert!(!after.contains_key(&k.job_key("k")), "the job key is free");
            }
        }),
    }
}

/// job_start.lua: a claimed tracked job's start — its record `working` — or refused with
/// nothing written.
pub(super) fn job_start() -> Scenario {
    Scenario {
        name: "job_start",
        setup: Box::new(|con, keys| Box::pin(queued(con, keys))),
        run: Box::new(|mut con, keys| {
            Box::pin(async move {
                let conn = &mut con;
                match crate::jobs::start_claimed(conn, &keys, &id(), false, "A", ID).await {
                    Some(Some(_)) => Answer::Done(String::new()),
                    Some(None) => Answer::Done("unwritten".into()),
                    None => Answer::Done("cancelled".into()),
                }
            })
        }),
        keys: Box::new(|k| {
            vec![
                (k.job_record(JOB), Kind::Hash),
                (k.runs(), Kind::Set),
                (k.unended(), Kind::Zset),
            ]
        }),
        check: Box::new(|_, after, c| {
            if c.is_none() {
                let k = keys_of(after);
                assert_eq!(
                    state(after, &k).as_deref(),
                    Some("working"),
                    "an untouched start"
                );
            }
        }),
    }
}

const ITEM: &str = r#"{"class":"A","args":["d-1"],"queue":"q"}"#;
const TS: i64 = 1_900_000_000;

/// delayed_take.lua ("run now" of one resque-scheduler item): the item out of its bucket and
/// onto its queue in one step, or refused with nothing written.
pub(super) fn delayed_take() -> Scenario {
    Scenario {
        name: "delayed_take",
        setup: Box::new(|mut con, keys| {
            Box::pin(async move {
                let bucket = keys.delayed_bucket(TS);
                let _: () = con.rpush(&bucket, ITEM).await.unwrap();
                let _: () = con.zadd(keys.delayed_schedule(), TS, TS).await.unwrap();
                let _: () = con
                    .sadd(keys.timestamps(ITEM), Keys::delayed_bucket_member(TS))
                    .await
                    .unwrap();
            })
        }),
        run: Box::new(|mut con, keys| {
            Box::pin(async move {
                let bucket = keys.delayed_bucket(TS);
                reply::<i64>(
                    crate::scripts::DelayedTake {
                        bucket: &bucket,
                        schedule: keys.delayed_schedule(),
                        timestamps: keys.timestamps(ITEM),
                        queues: keys.queues(),
                        queue: keys.queue("q"),
                        item: ITEM.as_bytes(),
                        ts: TS,
                        member: Keys::delayed_bucket_member(TS),
                        queue_name: "q",
                        payload: r#"{"class":"A","args":["d-1"]}"#,
                    }
                    .call()
                    .invoke_async(&mut con)
                    .await,
                )
            })
        }),
        keys: Box::new(|k| {
            vec![
                (k.delayed_bucket(TS), Kind::List),
                (k.delayed_schedule(), Kind::Zset),
                (k.timestamps(ITEM), Kind::Set),
                (k.queues(), Kind::Set),
                (k.queue("q"), Kind::List),
            ]
        }),
        check: Box::new(|before, after, c| {
            // The job is in one place: its bucket (not taken: the bucket was corrupted) or its
            // queue.
            assert_eq!(
                count(after, "d-1"),
                count(before, "d-1"),
                "delayed_take with {c:?}: the job is in one place"
            );
            if c.is_none() {
                let k = keys_of(after);
                assert!(
                    after.contains_key(&k.queue("q")),
                    "an untouched take enqueues"
                );
                assert!(
                    !after.contains_key(&k.delayed_bucket(TS)),
                    "and empties its bucket"
                );
            }
        }),
    }
}

/// fire_schedule.lua: a recurring schedule fired once — its token moved, its job enqueued and
/// `last_enqueued_at` written together — or refused with nothing written.
pub(super) fn fire_schedule() -> Scenario {
    Scenario {
        name: "fire_schedule",
        setup: Box::new(|mut con, keys| {
            Box::pin(async move {
                let _: () = con.set(keys.scheduler_master_lock(), "me").await.unwrap();
                let _: () = con.hset(keys.schedule_next(), "s", "100 x").await.unwrap();
            })
        }),
        run: Box::new(|mut con, keys| {
            Box::pin(async move {
                let lock = keys.scheduler_master_lock();
                reply::<i64>(
                    crate::scripts::FireSchedule {
                        lock: &lock,
                        schedule_next: keys.schedule_next(),
                        last_enqueued_at: keys.last_enqueued_at(),
                        queues: keys.queues(),
                        queue: keys.queue("q"),
                        lock_value: "me",
                        name: "s",
                        token: "100 x",
                        new_token: "200 x",
                        mode: "fire",
                        last_enqueued_at_text: "2026-01-01 00:00:00 +0000".into(),
                        queue_name: "q",
                        payload: r#"{"class":"A","args":["f-1"]}"#,
                    }
                    .call()
                    .invoke_async(&mut con)
                    .await,
                )
            })
        }),
        keys: Box::new(|k| {
            vec![
                (k.scheduler_master_lock(), Kind::Str),
                (k.schedule_next(), Kind::Hash),
                (k.last_enqueued_at(), Kind::Hash),
                (k.queues(), Kind::Set),
                (k.queue("q"), Kind::List),
            ]
        }),
        check: Box::new(|_, after, c| {
            // Fired (token moved and job enqueued) or not at all: never one without the other.
            let k = keys_of(after);
            let moved = after
                .get(&k.schedule_next())
                .is_some_and(|v| v.contains("200 x"));
            let fired = count(after, "f-1") == 1;
            assert_eq!(
                moved, fired,
                "fire_schedule with {c:?}: token and job together"
            );
            if c.is_none() {
                assert!(fired, "an untouched fire enqueues");
            }
        }),
    }
}

/// A held member of limit `one` (limits_held.lua's layout: score, queue, units, limit, payload).
const HELD: &str = "1.000001\tdefault\t1\tone\t{\"class\":\"A\",\"args\":[\"h-1\"]}";

/// limits_release.lua: the job held by a limit no longer in force goes back to the head of its
/// queue (a list, or a Jesque delayed zset), or stays held; never both, never neither.
pub(super) fn limits_release() -> Scenario {
    Scenario {
        name: "limits_release",
        setup: Box::new(|mut con, keys| {
            Box::pin(async move {
                let _: () = con
                    .zadd(keys.limit_held("one", None), HELD, 1)
                    .await
                    .unwrap();
            })
        }),
        run: Box::new(|mut con, keys| {
            Box::pin(async move {
                let gone = ["one".to_string()];
                reply::<(u64, String)>(
                    crate::scripts::LimitsRelease {
                        held_due: keys.held_due(),
                        prefix: keys.prefix(),
                        limits: "",
                        now_ms: 1_000,
                        budget: 100,
                        gone: &gone,
                    }
                    .call()
                    .invoke_async(&mut con)
                    .await,
                )
            })
        }),
        keys: Box::new(|k| {
            vec![
                (k.limit_held("one", None), Kind::Zset),
                (k.queue("default"), Kind::List),
                (k.queues(), Kind::Set),
                (k.held_due(), Kind::Zset),
                (k.held_sets(), Kind::Set),
            ]
        }),
        check: Box::new(|before, after, c| {
            assert_eq!(
                count(after, "h-1"),
                count(before, "h-1"),
                "limits_release with {c:?}: the held job is in one place"
            );
            if c.is_none() {
                let k = keys_of(after);
                let queued = after
                    .get(&k.queue("default"))
                    .is_some_and(|v| v.contains("h-1"));
                assert!(
                    queued,
                    "an untouched release puts the job back in its queue"
                );
            }
        }),
    }
}

const BID: &str = "ffeeddccbbaa99887766554433221100";

/// batch_discard.lua: a batch whose creation stopped (staging) removed — its member's record,
/// its staged payload, the batch and its entry — or refused with nothing written.
pub(super) fn batch_discard() -> Scenario {
    Scenario {
        name: "batch_discard",
        setup: Box::new(|mut con, keys| {
            Box::pin(async move {
                let _: () = con.hset(keys.batch(BID), "state", "staging").await.unwrap();
                let _: () = con.sadd(keys.batch_jobs(BID), JOB).await.unwrap();
                let _: () = con.sadd(keys.batch_queues(BID), "q").await.unwrap();
                let _: () = con.zadd(keys.batches(), BID, 1).await.unwrap();
                let _: () = con
                    .hset_multiple(keys.job_record(JOB), &[("state", "queued"), ("batch", BID)])
                    .await
                    .unwrap();
                let _: () = con
                    .rpush(
                        keys.batch_staged(BID, "q"),
                        r#"{"class":"A","args":["b-1"]}"#,
                    )
                    .await
                    .unwrap();
            })
        }),
        run: Box::new(|mut con, keys| {
            Box::pin(async move {
                reply::<(u64, u64)>(
                    crate::scripts::BatchDiscard {
                        batch: keys.batch(BID),
                        jobs: keys.batch_jobs(BID),
                        queues_staged: keys.batch_queues(BID),
                        batches: keys.batches(),
                        prefix: keys.prefix(),
                        bid: BID,
                        now_ms: 1_000,
                        chunk: 1000,
                    }
                    .call()
                    .invoke_async(&mut con)
                    .await,
                )
            })
        }),
        keys: Box::new(|k| {
            vec![
                (k.batch(BID), Kind::Hash),
                (k.batch_jobs(BID), Kind::Set),
                (k.batch_queues(BID), Kind::Set),
                (k.batches(), Kind::Zset),
                (k.job_record(JOB), Kind::Hash),
                (k.batch_staged(BID, "q"), Kind::List),
            ]
        }),
        check: Box::new(|_, after, c| {
            if c.is_none() {
                assert!(
                    after.is_empty(),
                    "an untouched discard leaves nothing: {after:?}"
                );
            }
        }),
    }
}

/// job_progress.lua on a running job, resq's record (`r`) or resque-status's (`s`): the
/// progress written, or refused with nothing written.
fn job_progress(kind: &'static str) -> Scenario {
    Scenario {
        name: if kind == "r" {
            "job_progress_r"
        } else {
            "job_progress_s"
        },
        setup: Box::new(move |mut con, keys| {
            Box::pin(async move {
                if kind == "r" {
                    let _: () = con
                        .hset(keys.job_record(JOB), "state", "working")
                        .await
                        .unwrap();
                } else {
                    let text = format!(r#"{{"uuid":"{JOB}","status":"working","time":1}}"#);
                    let _: () = con.set(keys.resque_status(JOB), text).await.unwrap();
                }
            })
        }),
        run: Box::new(move |mut con, keys| {
            Box::pin(async move {
                let fields = [("num".to_string(), "\"p-7\"".to_string())];
                reply::<String>(
                    crate::scripts::JobProgress {
                        kill: keys.resque_status_kill(),
                        record: if kind == "r" {
                            keys.job_record(JOB)
                        } else {
                            keys.resque_status(JOB)
                        },
                        id: JOB,
                        kind,
                        fields: &fields,
                    }
                    .call()
                    .invoke_async(&mut con)
                    .await,
                )
            })
        }),
        keys: Box::new(move |k| {
            let record = if kind == "r" {
                (k.job_record(JOB), Kind::Hash)
            } else {
                (k.resque_status(JOB), Kind::Str)
            };
            vec![record, (k.resque_status_kill(), Kind::Set)]
        }),
        check: Box::new(|_, after, c| {
            if c.is_none() {
                assert_eq!(count(after, "p-7"), 1, "an untouched progress is written");
            }
        }),
    }
}

pub(super) fn job_progress_record() -> Scenario {
    job_progress("r")
}

pub(super) fn job_progress_status() -> Scenario {
    job_progress("s")
}

/// limit_claim.lua on a claimed job (its payload too large for a step) under a concurrency
/// limit: with room (`full` false) the slot's share is taken; with none (the holders already
/// count the limit) the claim's list becomes the held job's own list. Either in one step, or
/// refused with nothing written: the payload is in one place.
fn limit_claim(full: bool) -> Scenario {
    const LIMITS: &str =
        r#"{"defs":[{"name":"one","kind":"concurrency","limit":1,"class":"A"}],"open":{}}"#;
    Scenario {
        name: if full {
            "limit_claim_held"
        } else {
            "limit_claim_admitted"
        },
        setup: Box::new(move |mut con, keys| {
            Box::pin(async move {
                let _: () = con
                    .rpush(
                        keys.claim(ID),
                        &[r#"{"class":"A","args":["lc-1"]}"#, "tok", "\"q\""],
                    )
                    .await
                    .unwrap();
                let _: () = con.sadd(keys.claims(), ID).await.unwrap();
                if full {
                    let _: () = con
                        .hset(keys.limit_holders("one", None), "__units", 1)
                        .await
                        .unwrap();
                }
            })
        }),
        run: Box::new(|mut con, keys| {
            Box::pin(async move {
                reply::<Vec<String>>(
                    crate::scripts::LimitClaim {
                        claim: keys.claim(ID),
                        claims: keys.claims(),
                        prefix: keys.prefix(),
                        limits: LIMITS,
                        view: r#"{"class":"A","args":["lc-1"]}"#.into(),
                        queue_name: "q",
                        worker: ID,
                        now_ms: 1_000,
                        token: "tok",
                        sequence: "tok.1000".into(),
                    }
                    .call()
                    .invoke_async(&mut con)
                    .await,
                )
            })
        }),
        keys: Box::new(|k| {
            vec![
                (k.claim(ID), Kind::List),
                (k.claims(), Kind::Set),
                (k.limit_holders("one", None), Kind::Hash),
                (k.limit_held("one", None), Kind::Zset),
                (k.sharing(), Kind::Hash),
                (k.held_due(), Kind::Zset),
                (k.held_sets(), Kind::Set),
            ]
        }),
        check: Box::new(move |before, after, c| {
            // The payload's bytes are in the claim or in the held job's list: never lost, never
            // copied.
            assert_eq!(
                count(after, "lc-1"),
                count(before, "lc-1"),
                "limit_claim with {c:?}: the payload is in one place"
            );
            if c.is_none() && full {
                let k = keys_of(after);
                assert!(
                    !after.contains_key(&k.claim(ID)),
                    "held: the claim is renamed"
                );
                assert!(
                    after.contains_key(&k.limit_held("one", None)),
                    "held: in the held set"
                );
            }
        }),
    }
}

pub(super) fn limit_claim_admitted() -> Scenario {
    limit_claim(false)
}

pub(super) fn limit_claim_held() -> Scenario {
    limit_claim(true)
}
