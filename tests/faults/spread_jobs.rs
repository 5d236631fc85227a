//! Tracked jobs on a spread cluster namespace (no hash tag, docs/cluster.md) on a real 3-master
//! cluster: a tracked job's id carries its queue's slot tag (`<32 hex>{<tag>}`), so its record
//! and the indexes it moves in share its queue's slot; jobs on queues on every master run and
//! their records read right through the `Client` and `resq job show`; a cancelled queued job
//! never runs; a running one is killed from its id; a worker `kill -9`ed mid-run has its tracked
//! record ended by the pruner in the record's slot; and no node ever answers `CROSSSLOT`.

use crate::support;

use super::spread_common::{
    crossslot_errors, dashboard, http_get, push, queue_per_master, quit_cleanly, require_tools,
    resq,
};
use redis::Commands;
use resq::jobs::{Cancelled, JobFilter, JobId, State, Track};
use serde_json::json;
use std::time::Duration;
use support::topology::{self, Cluster, Node};
use support::{wait_until, Keys, WorkerProc};

/// The slot of `key`, asked of `node`.
fn keyslot(node: &Node, key: &str) -> i64 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut node.con())
        .expect("KEYSLOT")
}

/// A zset's members read on its owner.
fn zmembers(cluster: &Cluster, key: &str) -> Vec<String> {
    cluster
        .owner(key)
        .expect("owner")
        .con()
        .zrange(key, 0, -1)
        .expect("ZRANGE")
}

/// A set's members read on its owner.
fn smembers(cluster: &Cluster, key: &str) -> Vec<String> {
    cluster
        .owner(key)
        .expect("owner")
        .con()
        .smembers(key)
        .expect("SMEMBERS")
}

/// The record of `id` through the `Client`, once it says `state`.
fn wait_state(
    rt: &tokio::runtime::Runtime,
    client: &resq::Client,
    id: &JobId,
    state: State,
) -> resq::jobs::JobStatus {
    wait_until(60, &format!("{id} {state}"), || {
        let s = rt.block_on(client.status(id)).expect("status")?;
        (s.state == state).then_some(s)
    })
}

#[test]
fn tracked_jobs_on_every_master_run_and_are_cancelled_and_killed_from_their_ids() {
    require_tools();
    let root = topology::temp_dir("spread-jobs");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let ns = support::namespace("spread-jobs");
    let keys = Keys::new(&ns);
    let queues = queue_per_master(&cluster, &ns);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt
        .block_on(resq::Client::connect(&url, &ns))
        .expect("connect");

    // What a tracked job cannot have there (parts in other slots): refused, nothing written.
    let q0 = queues[0].0.as_str();
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    let some = JobId::new();
    for (what, track) in [
        ("job key", Track::new().key("k")),
        ("delayed", Track::new().at(later)),
        ("after", Track::new().after(some.clone())),
        ("parent", Track::new().parent(some.clone())),
    ] {
        let e = rt
            .block_on(client.enqueue_class_tracked(q0, "Echo", &[], track))
            .expect_err(what);
        assert!(matches!(e, resq::Error::Spread { .. }), "{what}: {e}");
        assert!(e.to_string().contains("docs/cluster.md"), "{what}: {e}");
    }
    let e = rt
        .block_on(client.create_status_class(q0, "S", serde_json::Map::new(), Track::new()))
        .expect_err("resque-status");
    assert!(matches!(e, resq::Error::Spread { .. }), "{e}");
    assert!(
        (0..3).all(|i| cluster.nodes[i]
            .con()
            .keys::<_, Vec<String>>(format!("{ns}:*"))
            .expect("KEYS")
            .is_empty()),
        "a refusal wrote something"
    );

    // One completing and one failing tracked job per queue, and one cancelled before it runs.
    let mut runs: Vec<(JobId, String, bool)> = Vec::new();
    for (q, _) in &queues {
        for (class, fails) in [("Echo", false), ("Fail", true)] {
            let id = rt
                .block_on(client.enqueue_class_tracked(
                    q,
                    class,
                    &[json!(format!("{q}-{class}"))],
                    Track::new().tag("nightly"),
                ))
                .expect("enqueue tracked");
            runs.push((id, q.clone(), fails));
        }
    }
    let cancelled = rt
        .block_on(client.enqueue_class_tracked(q0, "Echo", &[json!("never")], Track::new()))
        .expect("enqueue tracked");
    assert_eq!(
        rt.block_on(client.cancel(&cancelled)).expect("cancel"),
        Cancelled::Cancelled
    );

    // Each id names its queue's slot: the record, the queue and the slot's indexes share it;
    // the payload is Resque's with the id in `resq_id`.
    for (id, q, _) in &runs {
        let tag = keys.queue_tag(q);
        assert_eq!(id.slot_tag(), Some(tag), "{id}");
        assert_eq!(id.as_str().len(), 34 + tag.len());
        let owner = cluster.owner(&keys.queue(q)).expect("owner");
        let qslot = keyslot(owner, &keys.queue(q));
        for key in [
            keys.job_record(id.as_str()),
            Keys::in_slot(keys.unended(), Some(tag)),
            Keys::in_slot(keys.job_tag("nightly"), Some(tag)),
        ] {
            assert_eq!(keyslot(owner, &key), qslot, "{key} in {q}'s slot");
        }
        assert!(
            zmembers(&cluster, &Keys::in_slot(keys.job_tag("nightly"), Some(tag)))
                .contains(&id.to_string()),
            "{id} listed under its tag in its slot"
        );
    }
    let (first, q, _) = &runs[0];
    let listed: Vec<String> = cluster
        .owner(&keys.queue(q))
        .expect("owner")
        .con()
        .lrange(keys.queue(q), 0, 0)
        .expect("LRANGE");
    assert_eq!(
        listed,
        vec![format!(
            r#"{{"class":"Echo","args":["{q}-Echo"],"resq_id":"{first}"}}"#
        )]
    );
    let mut names: Vec<String> = smembers(&cluster, &keys.queues());
    names.sort();
    let mut want: Vec<String> = queues.iter().map(|(q, _)| q.clone()).collect();
    want.sort();
    assert_eq!(names, want, "<ns>:queues lists every queue");

    // A split queue: a tracked job goes to a shard, its id carries the shard's tag.
    resq(&url, &ns, &["split", "vid", "3"]);
    let sharded = rt
        .block_on(client.enqueue_class_tracked("vid", "Echo", &[json!("sharded")], Track::new()))
        .expect("enqueue to a split queue");
    let shard = rt
        .block_on(client.status(&sharded))
        .expect("status")
        .expect("record")
        .queue
        .expect("queue");
    assert!(shard.starts_with("vid~"), "{shard}");
    assert_eq!(sharded.slot_tag(), Some(keys.queue_tag(&shard)));

    let list = queues
        .iter()
        .map(|(q, _)| q.as_str())
        .chain(std::iter::once("vid"))
        .collect::<Vec<_>>()
        .join(",");
    // A slot per queue, and for `vid` one for itself and one per shard.
    let mut w = WorkerProc::start(
        &url,
        &ns,
        7,
        &[("CONCURRENCY", "1"), ("QUEUES", list.as_str())],
    );
    let s = wait_state(&rt, &client, &sharded, State::Completed);
    assert!(s.worker.expect("worker").ends_with(&format!(":{shard}")));
    for (id, q, fails) in &runs {
        let want = if *fails {
            State::Failed
        } else {
            State::Completed
        };
        let s = wait_state(&rt, &client, id, want);
        assert_eq!(s.attempts, 1, "{id}");
        assert_eq!(s.queue.as_deref(), Some(q.as_str()));
        let worker = s.worker.clone().expect("worker");
        assert!(w.ids.contains(&worker), "{worker} is a slot of the worker");
        assert!(worker.ends_with(&format!(":{q}")), "{worker} serves {q}");
        assert!(s.started_at.is_some() && s.finished_at.is_some(), "{s:?}");
        let tag = id.slot_tag().expect("tag");
        let state = if *fails { "failed" } else { "completed" };
        assert!(
            zmembers(&cluster, &Keys::in_slot(keys.job_state(state), Some(tag)))
                .contains(&id.to_string()),
            "{id} in its slot's {state} index"
        );
    }
    // Every job ended: no slot's running or unended index holds one.
    for (id, _, _) in &runs {
        let tag = id.slot_tag().expect("tag");
        assert!(smembers(&cluster, &Keys::in_slot(keys.runs(), Some(tag))).is_empty());
        assert!(zmembers(&cluster, &Keys::in_slot(keys.unended(), Some(tag))).is_empty());
    }
    // `resq job show` reads a record from its id alone.
    let shown = resq(&url, &ns, &["--json", "job", "show", runs[1].0.as_str()]);
    let v: serde_json::Value = serde_json::from_str(&shown).expect("json");
    assert_eq!(v["state"], "failed", "{shown}");
    assert_eq!(v["attempts"], 1, "{shown}");
    let text = resq(&url, &ns, &["job", "show", runs[0].0.as_str()]);
    assert!(text.contains("completed"), "{text}");

    // The cancelled job never ran; its record says so.
    assert_eq!(
        rt.block_on(client.status(&cancelled))
            .expect("status")
            .expect("record")
            .state,
        State::Cancelled
    );
    let echoed: Vec<String> = super::spread_common::list(&cluster, &format!("{ns}:compat:echo"));
    assert!(!echoed.iter().any(|e| e.contains("never")), "{echoed:?}");
    assert_eq!(echoed.len(), 4, "{echoed:?}");

    // A running job is killed from its id.
    let q1 = queues[1].0.as_str();
    let long = rt
        .block_on(client.enqueue_class_tracked(q1, "Stoppable", &[json!(120_000)], Track::new()))
        .expect("enqueue");
    // Its progress is written in its record's slot (job_progress.lua).
    wait_until(60, "the long job's progress", || {
        let s = rt.block_on(client.status(&long)).expect("status")?;
        (s.state == State::Working && s.message.as_deref() == Some("started")).then_some(())
    });
    assert_eq!(
        rt.block_on(client.cancel(&long)).expect("kill"),
        Cancelled::Killing
    );
    // `wait` follows the record to its end (polling its slot: no invalidations on a cluster).
    let s = rt
        .block_on(client.wait(&long, Duration::from_secs(60)))
        .expect("wait")
        .expect("a record");
    assert_eq!(s.state, State::Killed, "{s:?}");
    assert_eq!(s.attempts, 1);

    // A job whose id names another slot runs untracked, its record never touched.
    let stray = format!("{}{{zzz}}", JobId::new().as_str());
    push(
        &cluster,
        &ns,
        q1,
        &[format!(
            r#"{{"class":"Echo","args":["stray"],"resq_id":"{stray}"}}"#
        )],
    );
    wait_until(60, "the stray job run", || {
        super::spread_common::list(&cluster, &format!("{ns}:compat:echo"))
            .iter()
            .any(|e| e.contains("stray"))
            .then_some(())
    });
    assert!(
        w.stderr().contains(&format!("{stray} runs untracked")),
        "the stray id was not reported:\n{}",
        w.stderr()
    );

    // `resq enqueue --track` prints the id it wrote, which names the queue's slot; the job runs.
    let out = resq(
        &url,
        &ns,
        &[
            "--json", "enqueue", "--track", "--queue", q1, "Echo", "\"cli\"",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let id = JobId::parse(v["id"].as_str().expect("id")).expect("an id");
    assert_eq!(id.slot_tag(), Some(keys.queue_tag(q1)), "{out}");
    assert_eq!(
        v["payload"].as_str(),
        Some(format!(r#"{{"class":"Echo","args":["cli"],"resq_id":"{id}"}}"#).as_str()),
        "{out}"
    );
    wait_state(&rt, &client, &id, State::Completed);
    // A cancel of a finished job changes nothing; one of an id of no slot is refused.
    assert_eq!(
        rt.block_on(client.cancel(&id)).expect("cancel"),
        Cancelled::Finished(State::Completed)
    );
    assert!(rt.block_on(client.cancel(&JobId::new())).is_err());

    // Listings walk the indexes of every queue's slot, merged newest first, page by page.
    let admin = rt
        .block_on(resq::admin::Admin::connect(&url, &ns))
        .expect("admin");
    let listed = |filter: &JobFilter| -> Vec<String> {
        let mut out = Vec::new();
        let mut page = rt.block_on(admin.jobs(filter, 0, 2)).expect("jobs");
        loop {
            out.extend(page.jobs.iter().map(|j| j.id.to_string()));
            let Some(next) = page.next.clone() else { break };
            page = rt
                .block_on(admin.jobs_from(filter, &next, 2))
                .expect("jobs_from");
        }
        out
    };
    let mut tagged: Vec<String> = runs.iter().map(|(id, _, _)| id.to_string()).collect();
    tagged.sort();
    let by_tag = JobFilter {
        tag: Some("nightly".into()),
        ..Default::default()
    };
    let mut got = listed(&by_tag);
    got.sort();
    assert_eq!(got, tagged, "the tag's jobs, from every slot");
    let failed = JobFilter {
        state: Some(State::Failed),
        ..Default::default()
    };
    let got = listed(&failed);
    let mut want: Vec<String> = runs
        .iter()
        .filter(|r| r.2)
        .map(|(id, _, _)| id.to_string())
        .collect();
    want.sort();
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(sorted, want, "the failed jobs, from every slot");
    let page = rt.block_on(admin.jobs(&failed, 0, 50)).expect("jobs");
    assert_eq!(page.total, Some(3));
    let newest_first: Vec<i64> = page
        .jobs
        .iter()
        .map(|j| j.finished_at.expect("finished").timestamp_millis())
        .collect();
    assert!(
        newest_first.windows(2).all(|p| p[0] >= p[1]),
        "{newest_first:?}"
    );
    let counts: std::collections::BTreeMap<State, u64> = rt
        .block_on(admin.job_counts())
        .expect("counts")
        .into_iter()
        .collect();
    assert_eq!(counts[&State::Completed], 5, "{counts:?}");
    assert_eq!(counts[&State::Failed], 3, "{counts:?}");
    assert_eq!(counts[&State::Killed], 1, "{counts:?}");
    assert_eq!(counts[&State::Cancelled], 1, "{counts:?}");
    let out = resq(&url, &ns, &["--json", "jobs", "--state", "cancelled"]);
    assert!(out.contains(cancelled.as_str()), "{out}");

    // The dashboard's Jobs page lists them, and a job's page reads its record from its id.
    // (The guard stops the dashboard when it is dropped, or when this process dies.)
    let (web, port) = dashboard(&url, &ns);
    let (failed_id, _, _) = &runs[1];
    let enc = failed_id.as_str().replace('{', "%7B").replace('}', "%7D");
    for (page, want) in [
        ("/jobs?state=failed".to_string(), failed_id.to_string()),
        ("/jobs?tag=nightly".to_string(), runs[0].0.to_string()),
        (format!("/job?id={enc}"), "failed".to_string()),
    ] {
        let (code, body) = http_get(port, &page).expect("an answer");
        assert_eq!(code, 200, "{page}: {body}");
        assert!(body.contains(&want), "{page} lacks {want:?}: {body}");
    }
    drop(web);

    quit_cleanly(&cluster, &ns, &mut w);
    assert_eq!(crossslot_errors(&cluster), 0, "a node answered CROSSSLOT");
}

#[test]
fn a_worker_killed_mid_run_has_its_tracked_records_ended_by_the_pruner_in_their_slots() {
    require_tools();
    let root = topology::temp_dir("spread-jobs-kill");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let ns = support::namespace("spread-jobs-kill");
    let keys = Keys::new(&ns);
    let queues = queue_per_master(&cluster, &ns);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt
        .block_on(resq::Client::connect(&url, &ns))
        .expect("connect");
    let list = queues
        .iter()
        .map(|(q, _)| q.as_str())
        .collect::<Vec<_>>()
        .join(",");
    // Three jobs running at once: CONCURRENCY=3, so 3 slots for each of the 3 queues.
    let mut w = WorkerProc::start(
        &url,
        &ns,
        9,
        &[("CONCURRENCY", "3"), ("QUEUES", list.as_str())],
    );
    let ids: Vec<JobId> = queues
        .iter()
        .map(|(q, _)| {
            rt.block_on(client.enqueue_class_tracked(q, "Sleep", &[json!(600_000)], Track::new()))
                .expect("enqueue")
        })
        .collect();
    for id in &ids {
        wait_state(&rt, &client, id, State::Working);
        let tag = id.slot_tag().expect("tag");
        assert!(
            smembers(&cluster, &Keys::in_slot(keys.runs(), Some(tag))).contains(&id.to_string()),
            "{id} in its slot's running set"
        );
    }
    w.kill9();
    // Ruby's pruner got to one of the dead slots first (`unregister_worker`: out of
    // `<ns>:workers`, its record and `:started` deleted): its job's record still says working;
    // resq's round ends it, judged in its slot.
    let gone = rt
        .block_on(client.status(&ids[0]))
        .expect("status")
        .and_then(|s| s.worker)
        .expect("the slot running the first queue's job");
    assert!(gone.ends_with(&format!(":{}", queues[0].0)), "{gone}");
    let _: i64 = cluster
        .owner(&keys.workers())
        .expect("owner")
        .con()
        .srem(keys.workers(), &gone)
        .expect("SREM");
    let _: i64 = cluster
        .owner(&keys.worker(&gone))
        .expect("owner")
        .con()
        .del(&[keys.worker(&gone), keys.worker_started(&gone)])
        .expect("DEL");
    let _: i64 = cluster
        .owner(&keys.heartbeats())
        .expect("owner")
        .con()
        .hdel(keys.heartbeats(), &gone)
        .expect("HDEL");
    // The worker's start took Ruby's prune lock (a round a minute across the fleet): as if that
    // minute had passed.
    let lock = keys.pruning_lock();
    let _: i64 = cluster
        .owner(&lock)
        .expect("owner")
        .con()
        .del(&lock)
        .expect("DEL");
    // The dead slots are pruned (their pid is gone on this host): each job's failure entry, and
    // its record ended failed in the same step as its worker record's removal, in its slot.
    let admin = rt
        .block_on(resq::admin::Admin::connect(&url, &ns))
        .expect("admin");
    let out = rt
        .block_on(admin.prune(Duration::from_secs(300), false))
        .expect("prune");
    // Every slot but the one Ruby's pruner took (the other idle ones too).
    assert_eq!(out.pruned.len(), w.ids.len() - 1, "{out:?}");
    for (n, id) in ids.iter().enumerate() {
        let s = rt
            .block_on(client.status(id))
            .expect("status")
            .expect("record");
        assert_eq!(s.state, State::Failed, "{id}: {s:?}");
        let why = if n == 0 {
            format!("worker {gone} is gone")
        } else {
            "died while running it".to_string()
        };
        assert!(
            s.error.as_deref().unwrap_or("").contains(&why),
            "{why}: {s:?}"
        );
        let tag = id.slot_tag().expect("tag");
        assert!(smembers(&cluster, &Keys::in_slot(keys.runs(), Some(tag))).is_empty());
        assert!(zmembers(
            &cluster,
            &Keys::in_slot(keys.job_state("failed"), Some(tag))
        )
        .contains(&id.to_string()));
    }
    // Two failure entries from resq's pruner (Ruby's would have written the third).
    let failed = super::spread_common::list(&cluster, &keys.failed());
    assert_eq!(failed.len(), 2, "{failed:?}");

    // Queued tracked jobs another runtime's worker took (no resq worker runs now): one popped
    // and gone, one popped and held in a Ruby worker's record. The next round looks per slot:
    // the first is ended failed at its second look; the one a Ruby worker runs is kept.
    let (q1, q2) = (queues[1].0.as_str(), queues[2].0.as_str());
    let taken = rt
        .block_on(client.enqueue_class_tracked(q1, "Echo", &[json!("taken")], Track::new()))
        .expect("enqueue");
    let held = rt
        .block_on(client.enqueue_class_tracked(q2, "Echo", &[json!("held")], Track::new()))
        .expect("enqueue");
    let pop = |q: &str| -> String {
        let key = keys.queue(q);
        cluster
            .owner(&key)
            .expect("owner")
            .con()
            .lpop(&key, None)
            .expect("LPOP")
    };
    let _ = pop(q1);
    let payload = pop(q2);
    let ruby = format!("rubyhost:4242:{q2}");
    let _: i64 = cluster
        .owner(&keys.workers())
        .expect("owner")
        .con()
        .sadd(keys.workers(), &ruby)
        .expect("SADD");
    let _: () = cluster
        .owner(&keys.worker(&ruby))
        .expect("owner")
        .con()
        .set(
            keys.worker(&ruby),
            format!(r#"{{"queue":"{q2}","run_at":"2026-11-29T10:00:00Z","payload":{payload}}}"#),
        )
        .expect("SET");
    let _: i64 = cluster
        .owner(&lock)
        .expect("owner")
        .con()
        .del(&lock)
        .expect("DEL");
    rt.block_on(admin.prune(Duration::from_secs(300), false))
        .expect("prune");
    let s = rt
        .block_on(client.status(&taken))
        .expect("status")
        .expect("record");
    assert_eq!(s.state, State::Failed, "{s:?}");
    assert!(
        s.error
            .as_deref()
            .unwrap_or("")
            .contains("taken from its queue"),
        "{s:?}"
    );
    let s = rt
        .block_on(client.status(&held))
        .expect("status")
        .expect("record");
    assert_eq!(
        s.state,
        State::Queued,
        "the job a Ruby worker runs is kept: {s:?}"
    );
    assert_eq!(crossslot_errors(&cluster), 0, "a node answered CROSSSLOT");
}
