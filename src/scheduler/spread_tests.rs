//! The scheduler's single-slot steps on a spread namespace, on a real three-master cluster
//! ([`crate::testing::cluster`]): the guard that keeps a bucket a producer filled while the
//! mover emptied it visible, and taking items out of a bucket whose head changed.

use super::spread::{settle, take};
use crate::conn::{Conn, Endpoint};
use crate::keys::Keys;
use crate::testing::{self, cluster::cluster};
use redis::AsyncCommands;

/// A spread namespace on the cluster (the library loaded on every node), its connection, and
/// the cluster held for this test (`SERIAL`: other tests count the cluster's commands).
async fn spread(prefix: &str) -> (Conn, Keys, tokio::sync::MutexGuard<'static, ()>) {
    let serial = crate::testing::cluster::SERIAL.lock().await;
    let c = cluster();
    c.load_library().await;
    let endpoint = Endpoint::open(&c.url()).expect("cluster url");
    let keys = endpoint.keys(&testing::namespace(prefix)).expect("keys");
    assert!(keys.is_spread());
    (endpoint.connect().await.expect("connect"), keys, serial)
}

/// Files `item` in bucket `ts` as a producer does (the spread delayed writer).
async fn file(con: &mut Conn, keys: &Keys, ts: i64, item: &str) {
    crate::client::delayed::push_spread(con, keys, ts, item)
        .await
        .expect("filed");
}

async fn member(con: &mut Conn, keys: &Keys, ts: i64) -> Option<f64> {
    con.zscore(keys.delayed_schedule(), ts)
        .await
        .expect("ZSCORE")
}

#[tokio::test]
async fn settling_a_bucket_a_producer_filled_meanwhile_keeps_its_member() {
    let (mut con, keys, _serial) = spread("sched-settle").await;
    // The mover found bucket 100 empty; before its ZREM a producer pushed the bucket and added
    // the member (ZADD of a member already there): without the re-check, the ZREM would leave
    // the item in a bucket no scheduler sees.
    file(
        &mut con,
        &keys,
        100,
        r#"{"class":"A","args":[],"queue":"q"}"#,
    )
    .await;
    settle(&mut con, &keys, 100).await.expect("settle");
    assert_eq!(member(&mut con, &keys, 100).await, Some(100.0));
    // An empty bucket's member goes.
    let _: i64 = con
        .zadd(keys.delayed_schedule(), 200, 200)
        .await
        .expect("ZADD");
    settle(&mut con, &keys, 200).await.expect("settle");
    assert_eq!(member(&mut con, &keys, 200).await, None);
}

#[tokio::test]
async fn items_are_taken_from_a_changed_bucket_one_copy_each() {
    let (mut con, keys, _serial) = spread("sched-take").await;
    let [a, b, c] = ["A", "B", "C"].map(|x| format!(r#"{{"class":"{x}","args":[],"queue":"q"}}"#));
    for item in [&a, &b, &c, &a] {
        file(&mut con, &keys, 300, item).await;
    }
    let ts_of = |item: &str| keys.timestamps(item);
    // Not the head (someone took A's first copy meanwhile, say): one copy of each, wherever.
    let n = take(&mut con, &keys, 300, &[b.as_bytes(), a.as_bytes()])
        .await
        .expect("take");
    assert_eq!(n, 2);
    let left: Vec<String> = con
        .lrange(keys.delayed_bucket(300), 0, -1)
        .await
        .expect("LRANGE");
    assert_eq!(left, vec![c.clone(), a.clone()]);
    // A copy of A is left: its reverse index stays; B's goes.
    let a_members: Vec<String> = con.smembers(ts_of(&a)).await.expect("SMEMBERS");
    assert_eq!(a_members, vec!["delayed:300".to_string()]);
    let b_members: Vec<String> = con.smembers(ts_of(&b)).await.expect("SMEMBERS");
    assert!(b_members.is_empty());
    assert_eq!(member(&mut con, &keys, 300).await, Some(300.0));
    // The head: trimmed; the bucket emptied takes its member and the reverse indexes with it.
    let n = take(&mut con, &keys, 300, &[c.as_bytes(), a.as_bytes()])
        .await
        .expect("take");
    assert_eq!(n, 2);
    assert_eq!(member(&mut con, &keys, 300).await, None);
    for item in [&a, &b, &c] {
        let exists: bool = con.exists(ts_of(item)).await.expect("EXISTS");
        assert!(!exists, "{item}");
    }
    // Taking what is gone takes nothing.
    let n = take(&mut con, &keys, 300, &[a.as_bytes()])
        .await
        .expect("take");
    assert_eq!(n, 0);
}
