//! The failure list: Ruby's requeue and remove reproduced against the golden captures
//! (fixtures 08 and 09), bulk operations by class and `--all`, and safety against workers
//! pushing failures while an operation runs.

use crate::admin_common;
use crate::support;

use redis::AsyncCommands;
use resq::admin::{Admin, Selector};
use support::Keys;

/// Replaces the value of `"retried_at":"…"` so entries compare without the volatile time.
fn mask_retried(s: &str) -> String {
    match s.find(r#""retried_at":""#) {
        Some(i) => {
            let start = i + r#""retried_at":""#.len();
            let end = start + s[start..].find('"').unwrap_or(0);
            format!("{}T{}", &s[..start], &s[end..])
        }
        None => s.to_string(),
    }
}

async fn list(con: &mut redis::aio::MultiplexedConnection, key: &str) -> Vec<String> {
    con.lrange(key, 0, -1).await.unwrap()
}

#[tokio::test]
async fn retry_matches_rubys_requeue_byte_for_byte() {
    let ns = support::namespace("fretry");
    let mut con = support::con().await;
    let f = admin_common::load_fixture(
        &mut con,
        "resque/08_failure_requeue.json",
        "keys_before",
        &ns,
    )
    .await;
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    let out = admin.retry_failures(&Selector::Index(0)).await.unwrap();
    assert_eq!(out.done, 1);
    let k = Keys::new(admin.namespace());
    let got: Vec<String> = list(&mut con, &k.failed())
        .await
        .iter()
        .map(|s| mask_retried(s))
        .collect();
    let want: Vec<String> = admin_common::fixture_list(&f, "keys", "failed")
        .iter()
        .map(|s| mask_retried(s))
        .collect();
    assert_eq!(got, want);
    // retried_at is in failed_at's format.
    let first: serde_json::Value =
        serde_json::from_str(&list(&mut con, &k.failed()).await[0]).unwrap();
    let retried = first["retried_at"].as_str().unwrap();
    assert!(
        resq::time::parse_any(retried).is_some() && retried.ends_with(" UTC"),
        "{retried}"
    );
    assert_eq!(
        list(&mut con, &k.queue("failing")).await,
        admin_common::fixture_list(&f, "keys", "queue:failing")
    );
    let members: Vec<String> = con.smembers(k.queues()).await.unwrap();
    assert!(members.contains(&"failing".to_string()));
}

#[tokio::test]
async fn remove_matches_rubys_remove() {
    let ns = support::namespace("fremove");
    let mut con = support::con().await;
    let f = admin_common::load_fixture(
        &mut con,
        "resque/09_failure_remove.json",
        "keys_before",
        &ns,
    )
    .await;
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    let out = admin.remove_failures(&Selector::Index(0)).await.unwrap();
    assert_eq!(out.done, 1);
    assert_eq!(
        list(&mut con, &Keys::new(admin.namespace()).failed()).await,
        admin_common::fixture_list(&f, "keys", "failed")
    );
    assert!(admin.remove_failures(&Selector::Index(99)).await.is_err());
}

#[tokio::test]
async fn lists_ruby_and_jesque_entries_and_retries_by_class() {
    let ns = support::namespace("fmixed");
    let mut con = support::con().await;
    admin_common::load_fixture(&mut con, "resque/07_failures.json", "keys", &ns).await;
    // Jesque's failure entry appended to the same list (its own JSON shape and dates).
    let jq = support::fixture("jesque/13_worker_failure.json");
    let jesque_entries = jq["keys"]["resque:failed"]["value"]
        .as_array()
        .unwrap()
        .clone();
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    let k = Keys::new(admin.namespace());
    for e in &jesque_entries {
        let () = con.rpush(k.failed(), e.as_str().unwrap()).await.unwrap();
    }
    let () = con.rpush(k.failed(), "not json at all").await.unwrap();
    let rows = admin.failures(0, 100).await.unwrap();
    assert_eq!(rows.len(), 5 + jesque_entries.len() + 1);
    assert!(rows[..rows.len() - 1]
        .iter()
        .all(|r| r.entry.is_some() && r.class.is_some()));
    assert!(rows.last().unwrap().entry.is_none());
    let out = admin
        .retry_failures(&Selector::Class("HangJob".into()))
        .await
        .unwrap();
    assert_eq!(out.done, 2, "{out:?}");
    let hang: Vec<String> = list(&mut con, &k.queue("hang")).await;
    let queued_total: usize = {
        let names: Vec<String> = con.smembers(k.queues()).await.unwrap();
        let mut n = 0;
        for q in names {
            let items: Vec<String> = list(&mut con, &k.queue(&q)).await;
            n += items.iter().filter(|i| i.contains("\"HangJob\"")).count();
        }
        n
    };
    assert_eq!(queued_total, 2, "hang queue: {hang:?}");
    let retried = admin.remove_failures(&Selector::Retried).await.unwrap();
    assert_eq!(retried.done, 2);
    assert_eq!(admin.failure_count().await.unwrap(), rows.len() - 2);
}

#[tokio::test]
async fn bulk_remove_keeps_entries_pushed_meanwhile() {
    let ns = support::namespace("fconcurrent");
    let mut con = support::con().await;
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    let k = Keys::new(admin.namespace());
    let entry = |class: &str, i: usize| {
        format!(
            r#"{{"failed_at":"2026/11/21 19:15:46 UTC","payload":{{"class":"{class}","args":[{i}]}},"exception":"E","error":"e","backtrace":[],"worker":"w:1:q","queue":"q"}}"#
        )
    };
    let mut p = redis::pipe();
    for i in 0..3000 {
        p.rpush(
            k.failed(),
            entry(if i % 2 == 0 { "Old" } else { "Keep" }, i),
        )
        .ignore();
    }
    let () = p.query_async(&mut con).await.unwrap();
    // A "worker" keeps appending Old failures while the removal walks the list.
    let pusher = {
        let mut con = support::con().await;
        let key = k.failed();
        let e = entry("Old", 99_999);
        tokio::spawn(async move {
            for _ in 0..300 {
                let () = con.rpush(&key, &e).await.unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    let out = admin
        .remove_failures(&Selector::Class("Keep".into()))
        .await
        .unwrap();
    pusher.await.unwrap();
    assert_eq!(out.done, 1500, "{out:?}");
    let rest: Vec<String> = list(&mut con, &k.failed()).await;
    assert_eq!(rest.len(), 1500 + 300);
    assert!(rest.iter().all(|e| e.contains("\"Old\"")));
    // Clear removes what is there when it starts; entries pushed after survive.
    let n = admin.clear_failures().await.unwrap();
    assert_eq!(n, 1800);
    let () = con.rpush(k.failed(), entry("Late", 1)).await.unwrap();
    assert_eq!(admin.failure_count().await.unwrap(), 1);
}

#[tokio::test]
async fn retry_follows_an_entry_moved_by_a_concurrent_removal() {
    let ns = support::namespace("fmoved");
    let mut con = support::con().await;
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    let k = Keys::new(admin.namespace());
    let a =
        r#"{"payload":{"class":"A","args":[]},"queue":"q","failed_at":"2026/11/21 19:15:46 UTC"}"#;
    let b =
        r#"{"payload":{"class":"B","args":[2]},"queue":"q","failed_at":"2026/11/21 19:15:46 UTC"}"#;
    let () = con.rpush(k.failed(), &[a, b]).await.unwrap();
    let row = admin.failure(1).await.unwrap().unwrap();
    assert_eq!(row.class.as_deref(), Some("B"));
    // Someone removes entry 0: B moves to index 0. Retrying "B at 1" must still find B.
    let () = con.lpop(k.failed(), None).await.unwrap();
    let out = admin
        .retry_failures(&Selector::Class("B".into()))
        .await
        .unwrap();
    assert_eq!(out.done, 1);
    let left: Vec<String> = list(&mut con, &k.failed()).await;
    assert_eq!(left.len(), 1);
    assert!(left[0].contains("\"retried_at\""));
    assert_eq!(
        list(&mut con, &k.queue("q")).await,
        vec![r#"{"class":"B","args":[2]}"#.to_string()]
    );
}
