//! Which keys each function touches without declaring them — what Redis Cluster cannot route
//! and Dragonfly refuses. Each scenario of the corruption harness (tests.rs) is run once,
//! untouched, under `MONITOR`: every command a function runs (`[0 lua]` lines, right after
//! their `FCALL`) is asked for its keys (`COMMAND GETKEYS`), and a key not among the call's
//! KEYS is undeclared. The functions in [`DECLARED`] must touch none; the others are reported.

use super::*;
use futures::StreamExt;
use std::collections::{BTreeMap, BTreeSet};

/// Functions whose every key is declared in these scenarios (they must stay so). The others
/// build keys from data only Lua reads (a record's id, a batch's queues, a limit's partition;
/// docs/architecture.md, "Keys a function builds itself").
const DECLARED: &[&str] = &[
    "batch_stage",
    "checked_write",
    "delayed_take",
    "failed_mark",
    "failed_remove",
    "failed_retry",
    "fire_schedule",
    "jesque_enqueue",
    "job_progress",
    "move_delayed",
    "promote",
    "requeue",
    "scheduler_poll",
    "split_set",
    "unclaim",
    "unique_enqueue",
];

/// The arguments of one `MONITOR` line (`<time> [<db> <client>] "arg" "arg" …`), unquoted.
fn monitor_args(line: &str) -> (bool, Vec<Vec<u8>>) {
    let lua = line.contains(" lua] ");
    let Some(start) = line.find("] ") else {
        return (lua, Vec::new());
    };
    let b = &line.as_bytes()[start + 2..];
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'"' {
            i += 1;
            continue;
        }
        i += 1;
        let mut arg = Vec::new();
        while i < b.len() && b[i] != b'"' {
            if b[i] == b'\\' && i + 1 < b.len() {
                i += 1;
                match b[i] {
                    b'n' => arg.push(b'\n'),
                    b'r' => arg.push(b'\r'),
                    b't' => arg.push(b'\t'),
                    b'a' => arg.push(7),
                    b'b' => arg.push(8),
                    b'x' if i + 2 < b.len() => {
                        let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("00");
                        arg.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                        i += 2;
                    }
                    c => arg.push(c),
                }
            } else {
                arg.push(b[i]);
            }
            i += 1;
        }
        out.push(arg);
        i += 1;
    }
    (lua, out)
}

/// The keys of one command, as the server sees them (none when it takes none).
async fn keys_of(con: &mut Conn, args: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut c = redis::cmd("COMMAND");
    c.arg("GETKEYS");
    for a in args {
        c.arg(a.as_slice());
    }
    c.query_async(con).await.unwrap_or_default()
}

/// Per function run by `s`, the undeclared keys it touched (namespace written `<ns>`).
async fn undeclared(s: &Scenario) -> BTreeMap<String, BTreeSet<String>> {
    let mut con = testing::con().await;
    let ns = testing::namespace(s.name);
    let keys = Keys::new(&ns);
    (s.setup)(con.clone(), keys.clone()).await;
    let client = redis::Client::open(testing::url()).expect("url");
    let mon = client.get_async_monitor().await.expect("MONITOR");
    let mut lines = mon.into_on_message::<String>();
    let _ = (s.run)(con.clone(), keys.clone()).await;
    let marker = format!("{ns}-declared-done");
    let _: String = redis::cmd("ECHO")
        .arg(&marker)
        .query_async(&mut con)
        .await
        .expect("ECHO");
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let line = tokio::time::timeout_at(deadline, lines.next())
            .await
            .expect("the marker within 60 s")
            .expect("the monitor stream");
        if line.contains(&marker) {
            break;
        }
        seen.push(line);
    }
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // The call being read: its function and its declared keys (None: not one of ours).
    let mut call: Option<(String, Vec<Vec<u8>>)> = None;
    for line in &seen {
        let (lua, args) = monitor_args(line);
        if !lua {
            call = None;
            let is_ours = args
                .first()
                .is_some_and(|a| a.eq_ignore_ascii_case(b"FCALL"))
                && args
                    .iter()
                    .any(|a| a.windows(ns.len()).any(|w| w == ns.as_bytes()));
            if is_ours && args.len() >= 3 {
                let name = String::from_utf8_lossy(&args[1]).to_string();
                let short = name.splitn(3, '_').nth(2).unwrap_or(&name).to_string();
                let n: usize = std::str::from_utf8(&args[2])
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0);
                let declared = args[3..(3 + n).min(args.len())].to_vec();
                out.entry(short.clone()).or_default();
                call = Some((short, declared));
            }
            continue;
        }
        let Some((short, declared)) = &call else {
            continue;
        };
        for k in keys_of(&mut con, &args).await {
            if !declared.contains(&k) {
                let k = String::from_utf8_lossy(&k).replace(&ns, "<ns>");
                out.entry(short.clone()).or_default().insert(k);
            }
        }
    }
    out
}

#[tokio::test]
async fn every_key_a_declared_function_touches_is_declared() {
    let mut all: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in every_scenario() {
        for (f, ks) in undeclared(&s).await {
            all.entry(f).or_default().extend(ks);
        }
    }
    let report: Vec<String> = all
        .iter()
        .map(|(f, ks)| format!("{f}: {} undeclared {ks:?}", ks.len()))
        .collect();
    eprintln!("{}", report.join("\n"));
    for f in DECLARED {
        let ks = all.get(*f).unwrap_or_else(|| panic!("{f} did not run"));
        assert!(ks.is_empty(), "{f} touches undeclared keys: {ks:?}");
    }
}
