//! Producers and the operator side on a namespace spread over a Redis Cluster's slots (a
//! cluster namespace without a hash tag): a real cluster of 3 masters, queues chosen so their
//! lists land on every master.
//!
//! * The client's enqueues (`enqueue_to`, `push_raw`, `enqueue_front`, `enqueue_batch`, Jesque
//!   form) write Ruby Resque's keys and bytes, each list on its slot's master, `<ns>:queues`
//!   naming them; `remove_queue` unlists and deletes.
//! * Every feature that writes keys of several slots in one step (tracked jobs, delayed or
//!   not, unique jobs, Jesque delayed queues, batches, cancel) is refused with `Error::Spread`,
//!   nothing written anywhere in the cluster (delayed jobs and recurring schedules work there:
//!   `spread_delayed`).
//! * The CLI (`enqueue`, `enqueue --file`, `info`, `queues`, `workers`, `failed
//!   list/retry/remove/clear`, and its refusals) and the dashboard's overview, queues, workers
//!   and failed pages read and repair that namespace.

use crate::support;

use super::spread_common::{dashboard, http_get, resq, resq_run};

use redis::Commands;
use resq::client::NewJob;
use serde_json::json;
use support::topology::{self, Cluster};

/// Fails the test unless the cluster's tools are installed.
fn require_tools() {
    topology::require("redis-server", "redis-server");
    topology::require("redis-cli", "redis-tools");
}

/// A connection to the master that owns `key`'s slot.
fn on_owner(cluster: &Cluster, key: &str) -> redis::Connection {
    cluster.owner(key).expect("an owner").con()
}

/// Three queue names of `ns` whose lists are on three different masters.
fn queues_on_every_master(cluster: &Cluster, ns: &str) -> Vec<String> {
    let mut found: Vec<(u16, String)> = Vec::new();
    for i in 0..1000 {
        let q = format!("q{i}");
        let port = cluster
            .owner(&format!("{ns}:queue:{q}"))
            .expect("an owner")
            .port;
        if !found.iter().any(|(p, _)| *p == port) {
            found.push((port, q));
        }
        if found.len() == 3 {
            return found.into_iter().map(|(_, q)| q).collect();
        }
    }
    panic!("no queue names on 3 masters");
}

/// Keys in the whole cluster (`DBSIZE` of every master).
fn keys_in_cluster(cluster: &Cluster) -> i64 {
    cluster
        .nodes
        .iter()
        .map(|n| {
            redis::cmd("DBSIZE")
                .query::<i64>(&mut n.con())
                .expect("DBSIZE")
        })
        .sum()
}

fn list(cluster: &Cluster, key: &str) -> Vec<String> {
    on_owner(cluster, key).lrange(key, 0, -1).expect("LRANGE")
}

fn members(cluster: &Cluster, key: &str) -> Vec<String> {
    let mut m: Vec<String> = on_owner(cluster, key).smembers(key).expect("SMEMBERS");
    m.sort();
    m
}

#[test]
fn client_enqueues_write_ruby_bytes_on_every_master_and_multi_slot_features_are_refused() {
    require_tools();
    let root = topology::temp_dir("spread-client");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(1);
    let ns = support::namespace("spread-client");
    let qs = queues_on_every_master(&cluster, &ns);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt
        .block_on(resq::Client::connect(&url, &ns))
        .expect("connect");

    // Features that write keys of several slots in one step: refused, nothing written.
    let before = keys_in_cluster(&cluster);
    let q = qs[0].as_str();
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    let refusals: Vec<(&str, resq::Error)> = rt.block_on(async {
        let mut out = Vec::new();
        let mut take = |what: &'static str, r: resq::Result<()>| {
            out.push((what, r.expect_err(what)));
        };
        take(
            "tracked with a job key",
            client
                .enqueue_class_tracked(q, "T", &[], resq::jobs::Track::new().key("k"))
                .await
                .map(drop),
        );
        take(
            "tracked and delayed",
            client
                .enqueue_class_tracked(q, "T", &[], resq::jobs::Track::new().at(later))
                .await
                .map(drop),
        );
        take(
            "create_status",
            client
                .create_status_class(q, "S", serde_json::Map::new(), resq::jobs::Track::new())
                .await
                .map(drop),
        );
        // A tracked delayed job stays refused (delayed jobs work there: spread_delayed).
        take(
            "tracked delayed",
            client
                .enqueue_class_tracked(q, "T", &[], resq::jobs::Track::new().at(later))
                .await
                .map(drop),
        );
        take(
            "unique",
            client
                .enqueue_unique(q, "U", &[], &resq::client::Unique::new("k"))
                .await
                .map(drop),
        );
        take(
            "jesque delayed",
            client
                .jesque_delayed_enqueue(q, &resq::client::JesqueJob::new("J", vec![]), later)
                .await,
        );
        take(
            "batch",
            client
                .create_batch(resq::workflows::Batch::new().job(q, "B", vec![]))
                .await
                .map(drop),
        );
        out
    });
    for (what, e) in &refusals {
        assert!(
            matches!(e, resq::Error::Spread { .. }),
            "{what}: not a spread refusal: {e}"
        );
        let text = e.to_string();
        assert!(
            text.contains(&ns) && text.contains("hash tag") && text.contains("docs/cluster.md"),
            "{what}: {text}"
        );
    }
    assert_eq!(
        keys_in_cluster(&cluster),
        before,
        "a refusal wrote something"
    );

    rt.block_on(async {
        for q in &qs {
            client
                .enqueue_to(q, "Mailer", &[json!(42), json!("welcome")])
                .await
                .expect("enqueue_to");
            client
                .push_raw(q, r#"{"class":"Raw","args":[]}"#)
                .await
                .expect("push_raw");
            client
                .enqueue_front(q, "Urgent", &[json!(1.5)])
                .await
                .expect("enqueue_front");
        }
        let batch: Vec<(&str, NewJob)> = qs
            .iter()
            .map(|q| (q.as_str(), NewJob::new("Batched", vec![json!(q)])))
            .chain(std::iter::once((
                qs[0].as_str(),
                NewJob::jesque("Java", Some(vec![json!(7)]), None),
            )))
            .collect();
        client.enqueue_batch(&batch).await.expect("enqueue_batch");
    });

    // Ruby Resque's keys and bytes, each list on the master of its own slot.
    let mut ports: Vec<u16> = qs
        .iter()
        .map(|q| cluster.owner(&format!("{ns}:queue:{q}")).unwrap().port)
        .collect();
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), 3, "the lists are on three masters");
    let mut want_queues = qs.clone();
    want_queues.sort();
    assert_eq!(members(&cluster, &format!("{ns}:queues")), want_queues);
    for (i, q) in qs.iter().enumerate() {
        let mut want = vec![
            r#"{"class":"Urgent","args":[1.5]}"#.to_string(),
            r#"{"class":"Mailer","args":[42,"welcome"]}"#.to_string(),
            r#"{"class":"Raw","args":[]}"#.to_string(),
            format!(r#"{{"class":"Batched","args":["{q}"]}}"#),
        ];
        if i == 0 {
            want.push(r#"{"class":"Java","args":[7],"vars":null}"#.to_string());
        }
        let got = list(&cluster, &format!("{ns}:queue:{q}"));
        assert_eq!(got, want, "{q}");
    }

    // The client's readers and remove_queue (Ruby's SREM + DEL, each in its slot).
    rt.block_on(async {
        assert_eq!(client.queues().await.expect("queues"), want_queues);
        assert_eq!(client.size(&qs[1]).await.expect("size"), 4);
        client.remove_queue(&qs[2]).await.expect("remove_queue");
    });
    assert!(!members(&cluster, &format!("{ns}:queues")).contains(&qs[2]));
    assert!(list(&cluster, &format!("{ns}:queue:{}", qs[2])).is_empty());

    // The admin side's queue repairs (resque-web's clear and remove), each key in its slot.
    let admin = rt
        .block_on(resq::admin::Admin::connect(&url, &ns))
        .expect("admin");
    rt.block_on(async {
        assert!(admin.has_data().await.expect("has_data"));
        assert_eq!(admin.clear_queue(&qs[1]).await.expect("clear_queue"), 4);
        assert_eq!(admin.remove_queue(&qs[0]).await.expect("remove_queue"), 5);
    });
    assert_eq!(
        members(&cluster, &format!("{ns}:queues")),
        vec![qs[1].clone()]
    );
    assert!(list(&cluster, &format!("{ns}:queue:{}", qs[0])).is_empty());
    assert!(list(&cluster, &format!("{ns}:queue:{}", qs[1])).is_empty());
}

/// A Ruby Resque failure entry for a job of `queue`.
fn failure(queue: &str, class: &str, arg: i64) -> String {
    format!(
        r#"{{"failed_at":"2026/11/29 10:00:00 UTC","payload":{{"class":"{class}","args":[{arg}]}},"exception":"RuntimeError","error":"boom","backtrace":["x.rb:1"],"worker":"h:1:{queue}","queue":"{queue}"}}"#
    )
}

#[test]
fn the_cli_enqueues_on_every_master_and_refuses_multi_slot_features() {
    require_tools();
    let root = topology::temp_dir("spread-cli-enqueue");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(1);
    let ns = support::namespace("spread-cli-enqueue");
    let qs = queues_on_every_master(&cluster, &ns);
    let resq = |args: &[&str]| resq(&url, &ns, args);

    // Refused on the spread namespace, nothing written.
    let before = keys_in_cluster(&cluster);
    for args in [
        &[
            "enqueue",
            "--track",
            "--key",
            "k",
            "--queue",
            qs[0].as_str(),
            "T",
        ][..],
        &[
            "enqueue",
            "--track",
            "--in",
            "3600",
            "--queue",
            qs[0].as_str(),
            "D",
        ],
        &[
            "enqueue",
            "--jesque",
            "--in",
            "3600",
            "--queue",
            qs[0].as_str(),
            "J",
            "1",
        ],
        &[
            "limits",
            "set",
            "mail",
            "--concurrency",
            "2",
            "--queue",
            qs[0].as_str(),
        ],
        &["limits", "clear", "mail"],
    ] {
        let out = resq_run(&url, &ns, args, None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("hash tag") && err.contains("docs/cluster.md"),
            "{args:?}: {err}"
        );
    }
    let out = resq_run(
        &url,
        &ns,
        &["enqueue", "--track", "--file", "-"],
        Some(&format!(
            "{{\"class\":\"T\",\"args\":[],\"queue\":\"{}\"}}\n",
            qs[0]
        )),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("hash tag"),
        "a tracked file was accepted: {err}"
    );
    assert_eq!(
        keys_in_cluster(&cluster),
        before,
        "a refusal wrote something"
    );

    // Enqueue, one job at a time and from a file, onto the three masters.
    for (i, q) in qs.iter().enumerate() {
        resq(&["enqueue", "--queue", q, "Plain", &i.to_string(), "\"x\""]);
    }
    let file: String = qs
        .iter()
        .map(|q| format!("{{\"class\":\"Filed\",\"args\":[\"{q}\"],\"queue\":\"{q}\"}}\n"))
        .collect();
    let out = resq_run(&url, &ns, &["enqueue", "--file", "-"], Some(&file));
    assert!(
        out.status.success(),
        "enqueue --file: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for (i, q) in qs.iter().enumerate() {
        assert_eq!(
            list(&cluster, &format!("{ns}:queue:{q}")),
            vec![
                format!(r#"{{"class":"Plain","args":[{i},"x"]}}"#),
                format!(r#"{{"class":"Filed","args":["{q}"]}}"#),
            ],
            "{q}"
        );
    }
    let mut want_queues = qs.clone();
    want_queues.sort();
    assert_eq!(members(&cluster, &format!("{ns}:queues")), want_queues);
}

#[test]
fn the_cli_and_the_dashboard_read_and_repair_a_spread_namespace() {
    require_tools();
    let root = topology::temp_dir("spread-cli");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(1);
    let ns = support::namespace("spread-cli");
    let qs = queues_on_every_master(&cluster, &ns);
    let resq = |args: &[&str]| resq(&url, &ns, args);

    // Two jobs in each of the three queues, as Ruby's enqueue writes them.
    for (i, q) in qs.iter().enumerate() {
        let key = format!("{ns}:queues");
        let _: () = on_owner(&cluster, &key).sadd(&key, q).expect("SADD");
        let key = format!("{ns}:queue:{q}");
        let _: () = on_owner(&cluster, &key)
            .rpush(
                &key,
                &[
                    format!(r#"{{"class":"Plain","args":[{i},"x"]}}"#),
                    format!(r#"{{"class":"Filed","args":["{q}"]}}"#),
                ],
            )
            .expect("RPUSH");
    }

    // A worker slot registered as a spread worker does (its keys in its queue's slot), the
    // stats, and failures of jobs of the three queues.
    let q0_key = format!("{ns}:queue:{}", qs[0]);
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(&q0_key)
        .query(&mut on_owner(&cluster, &q0_key))
        .expect("KEYSLOT");
    // The tag resq gives that slot (the rule of src/keys/slots.rs), checked by the server.
    let tag = support::keys::slot_tag(slot);
    let tagged: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(format!("x{{{tag}}}"))
        .query(&mut on_owner(&cluster, &q0_key))
        .expect("KEYSLOT");
    assert_eq!(tagged, slot, "the tag of q0's slot");
    let id = format!("box~resq{{{tag}}}:4242-0:{}", qs[0]);
    let record = format!(
        r#"{{"queue":"{}","run_at":"2026-11-29T10:00:00Z","payload":{{"class":"Busy","args":[]}}}}"#,
        qs[0]
    );
    let _: () = on_owner(&cluster, &format!("{ns}:workers"))
        .sadd(format!("{ns}:workers"), &id)
        .expect("SADD");
    let _: () = on_owner(&cluster, &format!("{ns}:worker:{id}"))
        .set(format!("{ns}:worker:{id}"), &record)
        .expect("SET");
    let _: () = on_owner(&cluster, &format!("{ns}:worker:{id}:started"))
        .set(
            format!("{ns}:worker:{id}:started"),
            "2026-11-29 10:00:00 +0000",
        )
        .expect("SET");
    let _: () = on_owner(&cluster, &format!("{ns}:stat:processed"))
        .set(format!("{ns}:stat:processed"), 17)
        .expect("SET");
    let _: () = on_owner(&cluster, &format!("{ns}:stat:failed"))
        .set(format!("{ns}:stat:failed"), 3)
        .expect("SET");
    let failed = format!("{ns}:failed");
    let entries: Vec<String> = qs
        .iter()
        .enumerate()
        .map(|(i, q)| failure(q, "Broken", i as i64))
        .collect();
    let _: () = on_owner(&cluster, &failed)
        .rpush(&failed, &entries)
        .expect("RPUSH");

    let info: serde_json::Value =
        serde_json::from_str(&resq(&["--json", "info"])).expect("info JSON");
    assert_eq!(info["processed"], 17, "{info}");
    assert_eq!(info["failed"], 3, "{info}");
    assert_eq!(info["failed_entries"], 3, "{info}");
    assert_eq!(info["queues"], 3, "{info}");
    assert_eq!(info["pending"], 6, "{info}");
    assert_eq!(info["workers"], 1, "{info}");
    assert_eq!(info["working"], 1, "{info}");
    let queues = resq(&["queues"]);
    for q in &qs {
        assert!(
            queues
                .lines()
                .any(|l| l.contains(q.as_str()) && l.contains('2')),
            "{q}: {queues}"
        );
    }
    let workers = resq(&["workers"]);
    let host = format!("box~resq{{{tag}}}");
    assert!(
        workers.lines().any(|l| l.contains(&host)
            && l.contains("4242-0")
            && l.contains(qs[0].as_str())
            && l.contains("busy")
            && l.contains("Busy")),
        "{workers}"
    );
    let listed = resq(&["failed", "list"]);
    assert_eq!(listed.matches("Broken").count(), 3, "{listed}");
    // The readers of what is not available there answer (nothing), as on one server.
    for args in [
        &["delayed", "list"][..],
        &["schedule", "list"],
        &["limits", "list"],
        &["jobs"],
        &["batches"],
        &["pause", "--queue", qs[0].as_str()],
        &["resume", "--queue", qs[0].as_str()],
    ] {
        resq(args);
    }
    let coverage = resq(&["coverage"]);
    for q in &qs {
        assert!(coverage.contains(&format!("queue {q} ")), "{q}: {coverage}");
    }

    // Retry one, then all: each job pushed onto its queue (Ruby's `{"class","args"}`), each
    // entry rewritten in place with its `retried_at`.
    resq(&["failed", "retry", "1"]);
    let q1 = format!("{ns}:queue:{}", qs[1]);
    assert_eq!(
        list(&cluster, &q1).last().map(String::as_str),
        Some(r#"{"class":"Broken","args":[1]}"#)
    );
    let now: Vec<String> = on_owner(&cluster, &failed)
        .lrange(&failed, 0, -1)
        .expect("LRANGE");
    assert_eq!(now.len(), 3);
    assert_eq!(now[0], entries[0]);
    let marked: serde_json::Value = serde_json::from_str(&now[1]).expect("entry JSON");
    assert!(marked["retried_at"].is_string(), "{}", now[1]);
    assert!(
        now[1].starts_with(&entries[1][..entries[1].len() - 1]),
        "the entry keeps its bytes: {}",
        now[1]
    );
    resq(&["failed", "retry", "--all"]);
    for (i, q) in qs.iter().enumerate() {
        let got = list(&cluster, &format!("{ns}:queue:{q}"));
        let copies = got
            .iter()
            .filter(|j| **j == format!(r#"{{"class":"Broken","args":[{i}]}}"#))
            .count();
        assert_eq!(copies, if i == 1 { 2 } else { 1 }, "{q}: {got:?}");
    }

    // The dashboard's pages on the namespace.
    // (The guard stops the dashboard when it is dropped, or when this process dies.)
    let (web, port) = dashboard(&url, &ns);
    let queue_page = format!("/queue?name={}", qs[0]);
    for (page, want) in [
        ("/overview", vec!["17", qs[0].as_str()]),
        ("/queues", qs.iter().map(String::as_str).collect()),
        ("/workers", vec![host.as_str(), "Busy"]),
        ("/failed", vec!["Broken", "boom"]),
        (
            "/api/live",
            vec!["\"processed\":17", "\"failed_entries\":3"],
        ),
        (queue_page.as_str(), vec!["Plain", "Filed"]),
        ("/stats", vec!["17"]),
        ("/delayed", vec![]),
        ("/recurring", vec![]),
        ("/limits", vec![]),
        ("/jobs", vec![]),
    ] {
        let (code, body) = http_get(port, page).expect("an answer");
        assert_eq!(code, 200, "{page}: {body}");
        for w in want {
            assert!(body.contains(w), "{page} lacks {w:?}: {body}");
        }
    }
    drop(web);

    // Remove one, then clear.
    resq(&["failed", "remove", "0"]);
    let now: Vec<String> = on_owner(&cluster, &failed)
        .lrange(&failed, 0, -1)
        .expect("LRANGE");
    assert_eq!(now.len(), 2);
    assert!(now.iter().all(|e| !e.contains(r#""args":[0]"#)), "{now:?}");
    resq(&["failed", "clear"]);
    let n: i64 = on_owner(&cluster, &failed).llen(&failed).expect("LLEN");
    assert_eq!(n, 0);
}
