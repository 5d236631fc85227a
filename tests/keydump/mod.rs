//! Golden-fixture comparison: dump a test namespace in the fixtures' `keys` format and compare
//! it with a fixture's, after renaming the namespace and swapping the fixture's volatile values
//! (times, hosts) for this run's.

#![allow(dead_code)]

use redis::aio::MultiplexedConnection;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Every key of namespace `ns` (and keys that embed it, like the master lock), renamed to
/// namespace `resque`, as `{key: {type, ttl, value}}` (list order kept; sets sorted; hashes by
/// field; zsets `[member, score]` by score).
pub async fn dump(con: &mut MultiplexedConnection, ns: &str) -> BTreeMap<String, Value> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{ns}:*"))
        .query_async(con)
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for k in keys {
        let t: String = redis::cmd("TYPE").arg(&k).query_async(con).await.unwrap();
        let ttl: i64 = redis::cmd("TTL").arg(&k).query_async(con).await.unwrap();
        let value = match t.as_str() {
            "string" => {
                let v: String = redis::cmd("GET").arg(&k).query_async(con).await.unwrap();
                json!(v)
            }
            "list" => {
                let v: Vec<String> = redis::cmd("LRANGE")
                    .arg(&k)
                    .arg(0)
                    .arg(-1)
                    .query_async(con)
                    .await
                    .unwrap();
                json!(v)
            }
            "set" => {
                let mut v: Vec<String> = redis::cmd("SMEMBERS")
                    .arg(&k)
                    .query_async(con)
                    .await
                    .unwrap();
                v.sort();
                json!(v)
            }
            "hash" => {
                let v: BTreeMap<String, String> = redis::cmd("HGETALL")
                    .arg(&k)
                    .query_async(con)
                    .await
                    .unwrap();
                json!(v)
            }
            "zset" => {
                let v: Vec<(String, f64)> = redis::cmd("ZRANGE")
                    .arg(&k)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query_async(con)
                    .await
                    .unwrap();
                json!(v.iter().map(|(m, s)| json!([m, s])).collect::<Vec<_>>())
            }
            other => panic!("unexpected type {other} of {k}"),
        };
        out.insert(
            k.replace(&format!("{ns}:"), "resque:"),
            json!({"type": t, "ttl": ttl, "value": value}),
        );
    }
    out
}

/// A fixture's `keys` (or another key-state field) in [`dump`]'s shape: helper fields dropped,
/// zset scores as floats, and every `(from, to)` text replacement applied (volatile values).
pub fn expected(
    fixture: &Value,
    field: &str,
    swaps: &[(String, String)],
) -> BTreeMap<String, Value> {
    let mut text = fixture[field].to_string();
    for (from, to) in swaps {
        text = text.replace(from.as_str(), to.as_str());
    }
    let keys: Map<String, Value> = serde_json::from_str(&text).unwrap();
    keys.into_iter()
        .map(|(k, v)| {
            let t = v["type"].as_str().unwrap().to_string();
            let value = if t == "zset" {
                json!(v["value"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| json!([p[0], p[1].as_f64().unwrap()]))
                    .collect::<Vec<_>>())
            } else {
                v["value"].clone()
            };
            (k, json!({"type": t, "ttl": v["ttl"], "value": value}))
        })
        .collect()
}

/// Asserts the two states are equal, key by key, with a readable message.
pub fn assert_same(actual: &BTreeMap<String, Value>, expected: &BTreeMap<String, Value>) {
    let a: Vec<&String> = actual.keys().collect();
    let e: Vec<&String> = expected.keys().collect();
    assert_eq!(a, e, "key sets differ");
    for (k, v) in expected {
        assert_eq!(&actual[k], v, "key {k} differs");
    }
}

/// Sets a key's TTL field to `masked` in both states (TTLs count down).
pub fn mask_ttl(state: &mut BTreeMap<String, Value>, key: &str) {
    if let Some(v) = state.get_mut(key) {
        v["ttl"] = json!("masked");
    }
}
