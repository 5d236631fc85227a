//! The quick way of concurrency limits on whole queues (`limits_quick.lua`) against the general
//! way (`limits.lua`): the same step calls in two namespaces, one whose limits the quick way
//! takes and one with an extra limit that sends every call the general way (a class limit no
//! job meets). After every call both must hold the same shares, sums, held sets, queues and
//! records, and have given the same answers — also when a key the limits use is unusable,
//! where the quick way must leave the call to the general way before it writes anything.

use super::step::{step_batch, Completion, JobRef, QueueKeys, Reply, StepItem, Stepper};
use crate::limits::{store::script_json, Limit};
use crate::testing;
use crate::Keys;
use redis::AsyncCommands;

type Con = crate::conn::Conn;

const SLOTS: usize = 7;
const QUEUES: [&str; 3] = ["a", "b", "c"];

fn id(k: usize) -> String {
    format!("h~resq:1-{k}:a,b,c")
}

/// What `key` holds, whatever its type, as text.
async fn dump(con: &mut Con, key: &str) -> String {
    let t: String = redis::cmd("TYPE").arg(key).query_async(con).await.unwrap();
    let mut c = match t.as_str() {
        "none" => return "none".into(),
        "string" => redis::cmd("GET"),
        "hash" => redis::cmd("HGETALL"),
        "list" => redis::cmd("LRANGE"),
        "set" => redis::cmd("SMEMBERS"),
        _ => redis::cmd("ZRANGE"),
    };
    c.arg(key);
    match t.as_str() {
        "list" => {
            c.arg(0).arg(-1);
        }
        "zset" => {
            c.arg(0).arg(-1).arg("WITHSCORES");
        }
        _ => {}
    }
    let v: redis::Value = c.query_async(con).await.unwrap();
    // Hash fields come back in the hash's order, which depends on its history: sorted here.
    let mut items: Vec<String> = match v {
        redis::Value::Array(a) => a
            .chunks(if t == "hash" { 2 } else { 1 })
            .map(|c| format!("{c:?}"))
            .collect(),
        redis::Value::Map(m) => m.iter().map(|kv| format!("{kv:?}")).collect(),
        other => vec![format!("{other:?}")],
    };
    if t == "hash" || t == "set" {
        items.sort();
    }
    format!("{t} {items:?}")
}

/// The same slots and queues in two namespaces of the same length, stepped alike.
struct Twin {
    ns: [String; 2],
    steppers: [Vec<Stepper>; 2],
    queues: [QueueKeys; 2],
    /// Per side, per slot: the record of the job it holds.
    held: [Vec<Option<Vec<u8>>>; 2],
    /// How many calls of the quick side went the quick way.
    quick_calls: usize,
    /// How many of those were planned as uniform (`'u'`: every slot holds one queue's shares,
    /// completes and goes on).
    uniform_calls: usize,
}

impl Twin {
    fn new() -> Twin {
        let ns = [testing::namespace("limq"), testing::namespace("limg")];
        let names: Vec<String> = QUEUES.iter().map(|q| q.to_string()).collect();
        let make = |ns: &str| {
            let keys = Keys::new(ns);
            let steppers: Vec<Stepper> = (0..SLOTS)
                .map(|k| Stepper::new(&keys, &id(k), true))
                .collect();
            (steppers, QueueKeys::new(&keys, &names))
        };
        let (s0, q0) = make(&ns[0]);
        let (s1, q1) = make(&ns[1]);
        Twin {
            ns,
            steppers: [s0, s1],
            queues: [q0, q1],
            held: [vec![None; SLOTS], vec![None; SLOTS]],
            quick_calls: 0,
            uniform_calls: 0,
        }
    }

    async fn push(&self, con: &mut Con, q: &str, job: usize) {
        // Every 13th job is too large to be checked inside Redis: the step claims it for the
        // worker to check (here it stays claimed), popped under the queue's room but taking no
        // share, the same on both sides.
        let pad = if job > 0 && job.is_multiple_of(13) {
            "x".repeat(9000)
        } else {
            String::new()
        };
        for ns in &self.ns {
            let _: () = con
                .rpush(
                    format!("{ns}:queue:{q}"),
                    format!(r#"{{"class":"J","args":[{job},"{pad}"]}}"#),
                )
                .await
                .unwrap();
        }
    }

    /// One step call per side: `plan` is (slot, how its job ended: 0 failed, else succeeded;
    /// whether it wants another); `json[side]` the limits. Returns, per side, the answers and
    /// the problems reported, with the namespace taken out.
    async fn step(
        &mut self,
        con: &mut Con,
        plan: &[(usize, u64, bool)],
        json: [&str; 2],
    ) -> [Vec<String>; 2] {
        let mut out = [Vec::new(), Vec::new()];
        for side in 0..2 {
            let ns = self.ns[side].clone();
            let completions: Vec<Option<Completion>> = plan
                .iter()
                .map(|&(k, outcome, _)| {
                    let job = JobRef::Record(self.held[side][k].clone()?);
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
                    stepper: &self.steppers[side][k],
                    completion: c.as_ref(),
                    reserve,
                })
                .collect();
            let r = step_batch(con, &self.queues[side], &items, json[side])
                .await
                .unwrap();
            if side == 0 && r.quick {
                self.quick_calls += 1;
                self.uniform_calls += usize::from(r.uniform);
            }
            // What each slot holds, as its worker knows it, is what Redis holds.
            for (k, stepper) in self.steppers[side].iter().enumerate() {
                if let Some(known) = stepper.shares.known() {
                    // (Unless the test made the hash unusable.)
                    let entry: redis::RedisResult<Option<String>> =
                        con.hget(format!("{ns}:resq:sharing"), id(k)).await;
                    if let Ok(entry) = entry {
                        assert_eq!(known, entry.unwrap_or_default(), "side {side}, slot {k}");
                    }
                }
            }
            for (&(k, _, _), (reply, applied)) in plan.iter().zip(&r.replies) {
                let text = match reply {
                    Reply::Job(rec) => {
                        self.held[side][k] = Some(rec.clone());
                        let rec = String::from_utf8_lossy(rec);
                        format!("job {}", &rec[rec.find("\"payload\"").unwrap_or(0)..])
                    }
                    Reply::Empty => {
                        self.held[side][k] = None;
                        "none".into()
                    }
                    other => {
                        if *applied {
                            self.held[side][k] = None;
                        }
                        format!("{other:?}")
                    }
                };
                out[side].push(format!("slot {k} applied {applied} {text}"));
            }
            out[side].push(format!("problems {:?}", r.tracking_problems));
            out[side].push(format!("found {:?}", r.found));
            for line in out[side].iter_mut() {
                *line = line.replace(&format!("{ns}:"), "NS:");
                // A claim's token numbers the call, which differs between the sides.
                if let Some(at) = line.find("token: \"") {
                    let end = line[at + 8..].find('"').map_or(line.len(), |e| at + 9 + e);
                    line.replace_range(at..end, "token: T");
                }
            }
        }
        out
    }

    /// New twins with six jobs of `b` queued, two slots of which took one each (its limit of 2
    /// is full) and learned what they hold.
    async fn holding_b(con: &mut Con, json: [&str; 2]) -> Twin {
        let mut twin = Twin::new();
        for job in 0..6 {
            twin.push(con, "b", job).await;
        }
        let [a, b] = twin.step(con, &[(0, 9, true), (1, 9, true)], json).await;
        assert_eq!(a, b);
        twin
    }

    /// One call per side that the quick side must plan as uniform; both sides must answer and
    /// hold the same after it. Returns the quick side's answers.
    async fn uniform_step(
        &mut self,
        con: &mut Con,
        json: [&str; 2],
        plan: &[(usize, u64, bool)],
        what: &str,
    ) -> Vec<String> {
        let before = self.uniform_calls;
        let [a, b] = self.step(con, plan, json).await;
        assert_eq!(a, b, "answers: {what}");
        let [sa, sb] = self.state(con).await;
        assert_eq!(sa, sb, "state: {what}");
        assert_eq!(self.uniform_calls, before + 1, "planned as uniform: {what}");
        a
    }

    /// What each side holds that the limits touch, with the namespace taken out.
    async fn state(&self, con: &mut Con) -> [Vec<String>; 2] {
        let mut out = [Vec::new(), Vec::new()];
        for (ns, lines) in self.ns.iter().zip(out.iter_mut()) {
            let mut keys = vec![format!("{ns}:resq:sharing")];
            for name in ["qa", "qa2", "qb"] {
                let base = format!("{ns}:resq:limit:{name}");
                keys.push(format!("{base}:holders"));
                keys.push(format!("{base}:held"));
            }
            for q in QUEUES {
                keys.push(format!("{ns}:queue:{q}"));
            }
            for k in 0..SLOTS {
                keys.push(format!("{ns}:worker:{}", id(k)));
            }
            for key in keys {
                let mut v = dump(con, &key).await;
                if key.contains(":worker:") {
                    // A record's run_at is the call's time, which differs between the sides.
                    v = v[v.find("payload").unwrap_or(0)..].to_string();
                }
                lines.push(format!("{key} {v}").replace(&format!("{ns}:"), "NS:"));
            }
        }
        out
    }
}

/// A small deterministic generator (both sides must see the same calls).
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

/// The limits of the quick side, and the same with the inert class limit for the general side.
fn limits(with_qa2: bool) -> [String; 2] {
    let mut l = vec![Limit::concurrency("qa", 3).queue("a")];
    if with_qa2 {
        l.push(Limit::concurrency("qa2", 2).queue("a"));
    }
    l.push(Limit::concurrency("qb", 2).queue("b"));
    let now = chrono::Utc::now();
    let quick = script_json(&l, now);
    l.push(Limit::concurrency("inert", 1000).class("Nothing"));
    [quick, script_json(&l, now)]
}

#[tokio::test]
async fn the_quick_way_writes_what_the_general_way_writes() {
    let mut con = testing::con().await;
    let mut twin = Twin::new();
    let both = limits(true);
    // From the first round after the 60th in which a slot holds a share of it, the second limit
    // on `a` is cleared: entries naming it are no longer what a job of `a` takes, and the calls
    // of slots holding one go the general way on both sides.
    let fewer = limits(false);
    let mut rng = Rng(7);
    let mut forget = Rng(11);
    let mut job = 0;
    let mut full = std::collections::BTreeSet::new();
    let mut cleared = None;
    let mut claims = 0;
    for round in 0..120 {
        // New jobs, the same on both sides.
        for _ in 0..rng.next(4) {
            job += 1;
            twin.push(&mut con, QUEUES[rng.next(3) as usize], job).await;
        }
        if round >= 60 && cleared.is_none() {
            let sharing: Vec<String> = con
                .hvals(format!("{}:resq:sharing", twin.ns[0]))
                .await
                .unwrap();
            if sharing.iter().any(|v| v.contains(":qa2:")) {
                cleared = Some(round);
            }
        }
        // Which slots step, how their jobs ended, whether they want another.
        let mut plan = Vec::new();
        for (k, rec) in twin.held[0].iter().enumerate() {
            if rng.next(3) == 0 {
                continue;
            }
            let outcome = if rec.is_some() { rng.next(4) } else { 9 };
            plan.push((k, outcome, rng.next(5) != 0));
        }
        // Now and then the quick side's worker does not know what a slot holds (as after a
        // reply it did not get): that slot's entry is read.
        if forget.next(3) == 0 {
            twin.steppers[0][forget.next(SLOTS as u64) as usize]
                .shares
                .forget();
        }
        let json = if cleared.is_none() { &both } else { &fewer };
        let [a, b] = twin.step(&mut con, &plan, [&json[0], &json[1]]).await;
        assert_eq!(a, b, "answers, round {round}");
        assert!(!a.iter().any(|l| l.contains("Refused")), "{a:?}");
        claims += a.iter().filter(|l| l.contains("Claim")).count();
        let [a, b] = twin.state(&mut con).await;
        assert_eq!(a, b, "state, round {round}");
        for name in ["qa2", "qb"] {
            let sum: Option<u32> = con
                .hget(
                    format!("{}:resq:limit:{name}:holders", twin.ns[0]),
                    "__units",
                )
                .await
                .unwrap();
            if sum == Some(2) {
                full.insert(name);
            }
        }
    }
    // The limits were used: each reached its cap at some point; one was cleared while a slot
    // held a share of it; and large payloads were claimed under them.
    assert_eq!(full.len(), 2, "{full:?} full, {job} jobs");
    assert!(cleared.is_some_and(|r| r < 110), "cleared at {cleared:?}");
    assert!(claims > 0, "no large payload was claimed");
    // Calls of the quick side went the quick way, and others the general way: a call with a
    // slot whose entry its worker does not know (forgotten above, or a slot holding a claim,
    // which this test never promotes) or that names the cleared limit.
    assert!(twin.quick_calls >= 10, "{} quick calls", twin.quick_calls);
}

/// Each key the quick way reads, made unusable on both sides while slots hold shares: the quick
/// way must not write (a write it cannot make would fail the script after its first write) and
/// leaves the call to the general way, so both sides answer, report and hold the same.
#[tokio::test]
async fn the_quick_way_leaves_unusable_keys_to_the_general_way() {
    let bad: [(&str, &[&str]); 6] = [
        ("resq:sharing", &["SET", "{k}", "x"]),
        ("resq:limit:qa:holders", &["SET", "{k}", "x"]),
        ("resq:limit:qa:holders", &["HSET", "{k}", "__units", "many"]),
        ("resq:limit:qa:held", &["SET", "{k}", "x"]),
        // A held job (a limit that had priorities before): returning a share releases it.
        (
            "resq:limit:qa:held",
            &[
                "ZADD",
                "{k}",
                "1",
                "j\ta\t1\tqa\t{\"class\":\"J\",\"args\":[99]}",
            ],
        ),
        ("resq:limit:qb:holders", &["RPUSH", "{k}", "x"]),
    ];
    let mut con = testing::con().await;
    let json = limits(true);
    for (key, cmd) in bad {
        let mut twin = Twin::new();
        for job in 0..4 {
            twin.push(&mut con, "a", job).await;
            twin.push(&mut con, "b", 10 + job).await;
        }
        // Four slots take jobs (shares of qa and qa2 or of qb), with every key usable.
        let first: Vec<(usize, u64, bool)> = (0..4).map(|k| (k, 9, true)).collect();
        let [a, b] = twin.step(&mut con, &first, [&json[0], &json[1]]).await;
        assert_eq!(a, b);
        for ns in &twin.ns {
            let k = format!("{ns}:{key}");
            let _: () = con.del(&k).await.unwrap();
            let mut c = redis::cmd(cmd[0]);
            for arg in &cmd[1..] {
                c.arg(if *arg == "{k}" { k.as_str() } else { arg });
            }
            let _: () = c.query_async(&mut con).await.unwrap();
        }
        // They finish and want more; a fifth slot wants one too.
        let mut next: Vec<(usize, u64, bool)> = (0..4).map(|k| (k, 1, true)).collect();
        next.push((4, 9, true));
        let [a, b] = twin.step(&mut con, &next, [&json[0], &json[1]]).await;
        assert_eq!(a, b, "answers with {key} made unusable by {cmd:?}");
        let [sa, sb] = twin.state(&mut con).await;
        assert_eq!(sa, sb, "state with {key} made unusable by {cmd:?}");
    }
}

/// The quick way takes the worker's word for the entries its slots hold (it does not read
/// them). Ruby's pruner unregisters a running slot (its record goes, its entry stays): the
/// slot, still running, ends its job (not applied: the record is gone) and takes another. Its
/// entry must then name both shares (the old one is returned when this job ends: the slot has
/// a record again, so the pass over leftover shares leaves it) — or, when that pass ran in
/// between and returned the old share, the new one only. Both sides must hold the same
/// entries and sums.
#[tokio::test]
async fn an_entry_kept_while_taking_more_is_read_not_trusted() {
    for orphans_pass in [false, true] {
        let mut con = testing::con().await;
        let json = limits(true);
        let mut twin = Twin::new();
        for job in 0..6 {
            twin.push(&mut con, "a", job).await;
        }
        // The first call reads every slot's entry; the second goes the quick way.
        let first: Vec<(usize, u64, bool)> = (0..2).map(|k| (k, 9, true)).collect();
        let [a, b] = twin.step(&mut con, &first, [&json[0], &json[1]]).await;
        assert_eq!(a, b);
        let next: Vec<(usize, u64, bool)> = (0..2).map(|k| (k, 1, true)).collect();
        let [a, b] = twin.step(&mut con, &next, [&json[0], &json[1]]).await;
        assert_eq!(a, b);
        for (side, ns) in twin.ns.iter().enumerate() {
            let _: () = con.del(format!("{ns}:worker:{}", id(0))).await.unwrap();
            if orphans_pass {
                let (returned, problems): (u64, String) = crate::scripts::LIMIT_ORPHANS
                    .arg(format!("{ns}:"))
                    .arg(&json[side])
                    .arg(1000)
                    .invoke_async(&mut con)
                    .await
                    .unwrap();
                assert_eq!((returned, problems.as_str()), (1, ""));
            }
        }
        let (quick_before, uniform_before) = (twin.quick_calls, twin.uniform_calls);
        let [a, b] = twin.step(&mut con, &next, [&json[0], &json[1]]).await;
        assert_eq!(a, b);
        assert_eq!(
            (twin.quick_calls, twin.uniform_calls),
            (quick_before + 1, uniform_before + 1),
            "the call went the quick way, planned as uniform"
        );
        assert!(a[0].contains("applied false job"), "{a:?}");
        let [sa, sb] = twin.state(&mut con).await;
        assert_eq!(sa, sb, "orphans pass: {orphans_pass}");
        let entry: String = con
            .hget(format!("{}:resq:sharing", twin.ns[0]), id(0))
            .await
            .unwrap();
        let shares = entry.matches(":qa:holders").count();
        assert_eq!(shares, if orphans_pass { 1 } else { 2 }, "{entry}");
    }
}

/// Calls planned as uniform (`'u'`: every slot holds the shares of queue `b`, completes and
/// reserves), where the script skips looking at each slot's entry only when every slot took a
/// job of `b` again. Each call below breaks that in one way after the plan was made, and must
/// still write what the general way writes: the queue runs dry, a large payload is claimed
/// instead of taken, a job of a queue polled first (`a`) goes to one of the slots, a
/// completion fails instead of succeeding.
#[tokio::test]
async fn uniform_calls_write_what_the_general_way_writes() {
    let mut con = testing::con().await;
    let json = limits(true);
    let json = [json[0].as_str(), json[1].as_str()];
    let mut twin = Twin::holding_b(&mut con, json).await;
    let both = [(0, 9, true), (1, 9, true)];
    let again = [(0, 1, true), (1, 1, true)];
    // Each takes the next job of `b`: nothing changes but the records.
    let a = twin
        .uniform_step(&mut con, json, &again, "each takes b again")
        .await;
    assert!(
        a[..2].iter().all(|l| l.contains("applied true job")),
        "{a:?}"
    );
    // One ends failed, one succeeds: both take the last two jobs.
    twin.uniform_step(&mut con, json, &[(0, 0, true), (1, 1, true)], "a failure")
        .await;
    // The queue is dry: both return their shares and take nothing.
    let a = twin.uniform_step(&mut con, json, &again, "b dry").await;
    assert!(a[..2].iter().all(|l| l.contains("none")), "{a:?}");
    let sharing: usize = con
        .hlen(format!("{}:resq:sharing", twin.ns[0]))
        .await
        .unwrap();
    assert_eq!(sharing, 0);
    // Back to two slots holding `b`'s shares.
    for job in 10..12 {
        twin.push(&mut con, "b", job).await;
    }
    let [a, b] = twin.step(&mut con, &both, json).await;
    assert_eq!(a, b);
    // A large payload at the head (job 13) is claimed by one slot; the other takes job 14.
    for job in [13, 14] {
        twin.push(&mut con, "b", job).await;
    }
    let a = twin.uniform_step(&mut con, json, &again, "a claim").await;
    assert!(a.iter().any(|l| l.contains("Claim")), "{a:?}");
    // Slot 0 now holds the claim (this test never promotes it): slots 1 and 2 go on, both
    // holding `b`'s shares after this call.
    twin.push(&mut con, "b", 15).await;
    twin.push(&mut con, "b", 16).await;
    let [a, b] = twin
        .step(&mut con, &[(1, 1, true), (2, 9, true)], json)
        .await;
    assert_eq!(a, b);
    // A job of `a`, polled before `b`, goes to the first slot; the second takes `b`'s.
    twin.push(&mut con, "a", 20).await;
    twin.push(&mut con, "b", 21).await;
    let a = twin
        .uniform_step(&mut con, json, &[(1, 1, true), (2, 1, true)], "a job of a")
        .await;
    assert!(a[0].contains(r#""args":[20,"#), "{a:?}");
}

/// A plan whose numbers are not whole (a queue index, a capacity or the units returned that is
/// a fraction, missing or not a number) sends the call the general way before it writes
/// anything: such a number would make the quick way's counts, or its HINCRBY, raise after the
/// call's first write. Both sides answer and hold the same, and no call of the quick side went
/// the quick way.
#[tokio::test]
async fn a_plan_with_numbers_not_whole_goes_the_general_way() {
    let bad: [fn(&mut Vec<String>); 4] = [
        |t| t[2] = "1.5".into(),
        |t| t[3] = "x".into(),
        |t| t[3] = "nan".into(),
        |t| t[6] = "2.5".into(),
    ];
    let mut con = testing::con().await;
    let json = limits(false);
    let json = [json[0].as_str(), json[1].as_str()];
    for (i, f) in bad.into_iter().enumerate() {
        let mut twin = Twin::holding_b(&mut con, json).await;
        super::step::tests::tamper(Some(f));
        let again = [(0, 1, true), (1, 1, true)];
        let [a, b] = twin.step(&mut con, &again, json).await;
        super::step::tests::tamper(None);
        assert_eq!(a, b, "answers, change {i}");
        assert!(
            a[..2].iter().all(|l| l.contains("applied true job")),
            "{a:?}"
        );
        let [sa, sb] = twin.state(&mut con).await;
        assert_eq!(sa, sb, "state, change {i}");
        assert_eq!(twin.quick_calls, 0, "change {i} went the quick way");
    }
}
