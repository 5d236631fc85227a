//! Shared by the admin, CLI and metrics tests: loading a golden fixture's whole key dump into a
//! test namespace, byte for byte.

#![allow(dead_code)]

use redis::aio::MultiplexedConnection;
use serde_json::Value;

/// Writes every key of `dump` (a fixture's `keys` or `keys_before`) whose name starts with
/// `<from>:` under `<to>:` instead, with the exact values.
pub async fn load_keys(con: &mut MultiplexedConnection, dump: &Value, from: &str, to: &str) {
    let keys = dump.as_object().expect("keys object");
    for (name, v) in keys {
        let Some(rest) = name.strip_prefix(&format!("{from}:")) else {
            continue;
        };
        let key = format!("{to}:{rest}");
        let value = &v["value"];
        let mut cmd;
        match v["type"].as_str().expect("type") {
            "string" => {
                cmd = redis::cmd("SET");
                cmd.arg(&key).arg(value.as_str().expect("string"));
            }
            "list" => {
                cmd = redis::cmd("RPUSH");
                cmd.arg(&key);
                for e in value.as_array().expect("list") {
                    cmd.arg(e.as_str().expect("element"));
                }
            }
            "set" => {
                cmd = redis::cmd("SADD");
                cmd.arg(&key);
                for e in value.as_array().expect("set") {
                    cmd.arg(e.as_str().expect("member"));
                }
            }
            "hash" => {
                cmd = redis::cmd("HSET");
                cmd.arg(&key);
                for (f, e) in value.as_object().expect("hash") {
                    cmd.arg(f).arg(e.as_str().expect("field value"));
                }
            }
            "zset" => {
                cmd = redis::cmd("ZADD");
                cmd.arg(&key);
                for pair in value.as_array().expect("zset") {
                    cmd.arg(pair[1].as_f64().expect("score"))
                        .arg(pair[0].as_str().expect("member"));
                }
            }
            other => panic!("fixture key {name} has unexpected type {other}"),
        }
        let () = cmd.query_async(con).await.expect("load fixture key");
    }
}

/// Loads fixture `path`'s `field` (`keys` or `keys_before`) into namespace `to`.
pub async fn load_fixture(
    con: &mut MultiplexedConnection,
    path: &str,
    field: &str,
    to: &str,
) -> Value {
    let f = crate::support::fixture(path);
    let from = f["namespace"].as_str().unwrap_or("resque").to_string();
    load_keys(con, &f[field], &from, to).await;
    f
}

/// A fixture list's elements under `<ns>:<logical>`.
pub fn fixture_list(f: &Value, field: &str, logical: &str) -> Vec<String> {
    let ns = f["namespace"].as_str().unwrap_or("resque");
    f[field][format!("{ns}:{logical}")]["value"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}
