//! The quick way of concurrency limits on whole queues (`limits_quick.lua`) against the general
//! way (`limits.lua`): the same step calls in two namespaces, one whose limits the quick way
//! takes and one with an extra limit that sends every call the general way (a class limit no
//! job meets). After every call both must hold the same shares, sums, held sets, queues and
//! records, and have given the same answers.

use super::step::{step_batch, Completion, JobRef, QueueKeys, Reply, StepItem, Stepper};
use crate::limits::{store::script_json, Limit};
use crate::testing;
use crate::Keys;
use redis::AsyncCommands;
use std::collections::BTreeMap;

type Con = crate::conn::Conn;

/// What a namespace holds that limits touch, with the namespace taken out of the text.
async fn state(con: &mut Con, ns: &str, queues: &[&str]) -> Vec<String> {
    let norm = |s: String| s.replace(&format!("{ns}:"), "NS:");
    let mut out = Vec::new();
    let sharing: BTreeMap<String, String> =
        con.hgetall(format!("{ns}:resq:sharing")).await.unwrap();
    out.push(format!("sharing {sharing:?}"));
    for name in ["qa", "qa2", "qb"] {
        let base = format!("{ns}:resq:limit:{name}");
        let sum: BTreeMap<String, String> = con.hgetall(format!("{base}:holders")).await.unwrap();
        let held: Vec<String> = con.zrange(format!("{base}:held"), 0, -1).await.unwrap();
        out.push(format!("{name} {sum:?} held {held:?}"));
    }
    for q in queues {
        let items: Vec<String> = con.lrange(format!("{ns}:queue:{q}"), 0, -1).await.unwrap();
        out.push(format!("queue {q} {items:?}"));
    }
    for k in 0..SLOTS {
        let rec: Option<String> = con.get(format!("{ns}:worker:{}", id(k))).await.unwrap();
        // The record's run_at is the call's time, which differs between the namespaces.
        let payload = rec.map(|r| r[r.find("\"payload\"").unwrap_or(0)..].to_string());
        out.push(format!("slot {k} {payload:?}"));
    }
    out.into_iter().map(norm).collect()
}

const SLOTS: usize = 7;

fn id(k: usize) -> String {
    format!("h~resq:1-{k}:a,b,c")
}

/// A small deterministic generator (the test must replay the same calls on both sides).
struct Rng(u64);
impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[tokio::test]
async fn the_quick_way_writes_what_the_general_way_writes() {
    let queues = ["a", "b", "c"];
    let limits = vec![
        Limit::concurrency("qa", 3).queue("a"),
        Limit::concurrency("qa2", 2).queue("a"),
        Limit::concurrency("qb", 2).queue("b"),
    ];
    let mut general = limits.clone();
    general.push(Limit::concurrency("inert", 1000).class("Nothing"));
    let now = chrono::Utc::now();
    let sides = [
        (testing::namespace("limq"), script_json(&limits, now)),
        (testing::namespace("limg"), script_json(&general, now)),
    ];
    // From the first round after the 60th in which a slot holds a share of it, the second limit
    // on `a` is cleared: entries naming it are no longer what a job of `a` takes, and the calls
    // of slots holding one go the general way on both sides.
    let fewer = [
        script_json(&[limits[0].clone(), limits[2].clone()], now),
        script_json(
            &[limits[0].clone(), limits[2].clone(), general[3].clone()],
            now,
        ),
    ];
    let mut con = testing::con().await;
    let names: Vec<String> = queues.iter().map(|q| q.to_string()).collect();
    let setup: Vec<(Keys, Vec<Stepper>, QueueKeys)> = sides
        .iter()
        .map(|(ns, _)| {
            let keys = Keys::new(ns);
            let steppers = (0..SLOTS)
                .map(|k| Stepper::new(&keys, &id(k), true))
                .collect();
            let qk = QueueKeys::new(&keys, &names);
            (keys, steppers, qk)
        })
        .collect();
    let mut held: [Vec<Option<Vec<u8>>>; 2] = [vec![None; SLOTS], vec![None; SLOTS]];
    let mut rng = Rng(7);
    let mut job = 0;
    let mut full = std::collections::BTreeSet::new();
    let mut cleared = None;
    for round in 0..120 {
        // New jobs, the same on both sides.
        for _ in 0..rng.next(4) {
            let q = queues[rng.next(3) as usize];
            job += 1;
            for (ns, _) in &sides {
                let _: () = con
                    .rpush(
                        format!("{ns}:queue:{q}"),
                        format!(r#"{{"class":"J","args":[{job}]}}"#),
                    )
                    .await
                    .unwrap();
            }
        }
        if round >= 60 && cleared.is_none() {
            let sharing: Vec<String> = con
                .hvals(format!("{}:resq:sharing", sides[0].0))
                .await
                .unwrap();
            if sharing.iter().any(|v| v.contains(":qa2:")) {
                cleared = Some(round);
            }
        }
        // Which slots step, how their jobs ended, whether they want another.
        let mut plan = Vec::new();
        for (k, job) in held[0].iter().enumerate() {
            let busy = job.is_some();
            let go = rng.next(3) != 0;
            if !go {
                continue;
            }
            let outcome = if busy { rng.next(4) } else { 9 };
            let reserve = rng.next(5) != 0;
            plan.push((k, outcome, reserve));
        }
        for (side, (ns, json)) in sides.iter().enumerate() {
            let json = if cleared.is_none() {
                json.clone()
            } else {
                // Both sides lose qa2; the general side keeps its inert limit.
                fewer[side].clone()
            };
            let (_, steppers, qk) = &setup[side];
            let completions: Vec<Option<Completion>> = plan
                .iter()
                .map(|&(k, outcome, _)| {
                    let rec = held[side][k].clone()?;
                    let job = JobRef::Record(rec);
                    Some(if outcome == 0 {
                        Completion::Failure {
                            job,
                            entry: r#"{"failed_at":"x","payload":{},"exception":"E","error":"e","backtrace":[],"worker":"w","queue":"a"}"#.into(),
                            track: None,
                        }
                    } else {
                        Completion::Success { job, track: None }
                    })
                })
                .collect();
            let items: Vec<StepItem> = plan
                .iter()
                .zip(&completions)
                .map(|(&(k, _, reserve), c)| StepItem {
                    stepper: &steppers[k],
                    completion: c.as_ref(),
                    reserve,
                })
                .collect();
            let out = step_batch(&mut con, qk, &items, &json).await.unwrap();
            assert!(
                out.tracking_problems.is_empty(),
                "{ns}: {:?}",
                out.tracking_problems
            );
            for (&(k, _, _), (reply, _)) in plan.iter().zip(&out.replies) {
                held[side][k] = match reply {
                    Reply::Job(rec) => Some(rec.clone()),
                    Reply::Empty => None,
                    other => panic!("{ns} slot {k}: {other:?}"),
                };
            }
        }
        let a = state(&mut con, &sides[0].0, &queues).await;
        let b = state(&mut con, &sides[1].0, &queues).await;
        assert_eq!(a, b, "round {round}");
        for name in ["qa2", "qb"] {
            let sum: Option<u32> = con
                .hget(
                    format!("{}:resq:limit:{name}:holders", sides[0].0),
                    "__units",
                )
                .await
                .unwrap();
            if sum == Some(2) {
                full.insert(name);
            }
        }
    }
    // The limits were used: each reached its cap at some point; and one was cleared while a
    // slot held a share of it.
    assert_eq!(full.len(), 2, "{full:?} full, {job} jobs");
    assert!(cleared.is_some_and(|r| r < 110), "cleared at {cleared:?}");
}
