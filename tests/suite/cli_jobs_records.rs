//! `resq jobs` and `resq job show|wait|cancel` (issue 28) against records that are no records
//! — keys of another type, texts that are no JSON object, hash fields that hold the wrong thing
//! — which each command names with their key while the listing goes on; and `resq jobs --from`
//! past 20,000 entries.

use crate::support;

use redis::AsyncCommands;
use resq::jobs::{JobId, Track};
use resq::Client;
use serde_json::json;
use std::process::Output;

use support::cli::{json_of, resq, stderr, stdout};
use support::Keys;

fn code(o: &Output) -> i32 {
    o.status.code().expect("an exit code")
}

/// Runs `resq`, which must succeed; its standard output.
async fn ok(ns: &str, args: &[&str]) -> String {
    stdout(&support::cli::ok(ns, args).await)
}

async fn client(ns: &str) -> Client {
    Client::connect(&support::url(), ns).await.expect("client")
}

/// The ids listed in `jobs` output (lines starting with an id).
fn listed(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| JobId::parse(w).is_some())
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn a_record_that_is_no_record_is_named_not_hidden() {
    let ns = support::namespace("cjgarbage");
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    // resque-status's record: a text that is no JSON object.
    let id = JobId::new();
    let key = k.resque_status(id.as_str());
    for garbage in ["garbage {", "[1,2,3]", "\"text\"", "null"] {
        let _: () = con.set(&key, garbage).await.unwrap();
        let out = resq(&ns, &["job", "show", id.as_str()]).await;
        assert_eq!(code(&out), 1, "{garbage}");
        assert!(
            stderr(&out).contains(&format!("{key} holds"))
                && stderr(&out).contains("not a resque-status record"),
            "{garbage}: {}",
            stderr(&out)
        );
        let out = resq(&ns, &["job", "wait", id.as_str(), "--timeout", "0"]).await;
        assert_eq!(code(&out), 4, "{garbage}: {}", stderr(&out));
        let err = client(&ns).await.status(&id).await.unwrap_err();
        assert!(
            err.to_string().contains("not a resque-status record"),
            "{err}"
        );
    }
    // resq's own record: a key of another type.
    let own = JobId::new();
    let rkey = k.job_record(own.as_str());
    let _: () = con.rpush(&rkey, "x").await.unwrap();
    for args in [
        vec!["job", "show", own.as_str()],
        vec!["job", "cancel", own.as_str()],
    ] {
        let out = resq(&ns, &args).await;
        assert_eq!(code(&out), 1, "{args:?}");
        assert!(stderr(&out).contains(&rkey), "{args:?}: {}", stderr(&out));
    }
    let out = resq(&ns, &["job", "wait", own.as_str(), "--timeout", "0"]).await;
    assert_eq!(code(&out), 4);
    assert!(
        stderr(&out).contains(&format!("{rkey} holds a list, not a record (a hash)")),
        "{}",
        stderr(&out)
    );
    // A hash whose state is no state (nor UTF-8), whose fields hold JSON null and wrong types:
    // shown as far as it reads, the fields named with the key.
    let odd = JobId::new();
    let okey = k.job_record(odd.as_str());
    let () = redis::pipe()
        .hset(&okey, "state", b"\xff".as_slice())
        .hset(&okey, "class", "Odd")
        .hset(&okey, "p.num", "null")
        .hset(&okey, "attempts", "many")
        .query_async(&mut con)
        .await
        .unwrap();
    let out = ok(&ns, &["job", "show", odd.as_str()]).await;
    assert!(
        out.contains("state        ? (the record's state cannot be read"),
        "{out}"
    );
    assert!(out.contains("class        Odd\n"), "{out}");
    assert!(
        out.contains("unreadable   state holds \"\u{fffd}\"\n             attempts holds \"many\""),
        "{out}"
    );
    assert!(out.contains(&format!("(in {okey})")), "{out}");
    let out = resq(&ns, &["job", "wait", odd.as_str(), "--timeout", "0"]).await;
    assert_eq!(code(&out), 4);
    assert!(
        stderr(&out).contains("has no state to read"),
        "{}",
        stderr(&out)
    );
    // Listed among good ones: the listing goes on and names them.
    let good = client(&ns)
        .await
        .enqueue_class_tracked("q", "Good", &[], Track::new().tag("t"))
        .await
        .unwrap();
    for (i, id) in [&own, &odd, &id].into_iter().enumerate() {
        let _: () = con.zadd(k.job_tag("t"), id.as_str(), i).await.unwrap();
    }
    let _: () = con.zadd(k.job_tag("t"), good.as_str(), 9).await.unwrap();
    let out = ok(&ns, &["jobs", "--tag", "t"]).await;
    assert_eq!(listed(&out), [good.to_string()], "{out}");
    for key in [&rkey, &okey, &key] {
        assert!(
            out.lines()
                .any(|l| l.starts_with("unreadable: ") && l.contains(key.as_str())),
            "{key}: {out}"
        );
    }
    let v = json_of(&ns, &["jobs", "--tag", "t"]).await;
    assert_eq!(v["unreadable"].as_array().map(Vec::len), Some(3), "{v}");
}

#[tokio::test]
async fn jobs_go_on_past_twenty_thousand_entries() {
    // 20,050 finished jobs of resq's own, written as the library writes them; the oldest is
    // the only `Rare` one.
    let ns = support::namespace("cjdeep");
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    let ids: Vec<String> = (0..20_050).map(|_| JobId::new().to_string()).collect();
    for (c, chunk) in ids.chunks(2500).enumerate() {
        let mut p = redis::pipe();
        for (i, id) in chunk.iter().enumerate() {
            let at = c * 2500 + i;
            let class = if at == 0 { "Rare" } else { "Bulk" };
            p.hset_multiple(
                k.job_record(id),
                &[("state", "completed"), ("class", class)],
            )
            .ignore()
            .zadd(k.job_state("completed"), id, at + 1)
            .ignore();
        }
        let () = p.query_async(&mut con).await.unwrap();
    }
    let args = [
        "jobs",
        "--state",
        "completed",
        "--class",
        "Rare",
        "--limit",
        "5",
    ];
    let out = ok(&ns, &args).await;
    assert!(listed(&out).is_empty(), "{out}");
    let from = out
        .split("go on with --from ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap_or_else(|| panic!("no position: {out}"))
        .to_string();
    assert!(
        out.contains("stopped after looking at 20,000 entries"),
        "{out}"
    );
    let mut more = args.to_vec();
    more.extend(["--from", from.as_str()]);
    let out = ok(&ns, &more).await;
    assert_eq!(listed(&out), [ids[0].clone()], "{out}");
    assert!(out.contains("(1 shown; the end)"), "{out}");
    let v = json_of(&ns, &args).await;
    // A position that is none, or another listing's, is refused naming --from.
    for (from, why) in [
        ("nowhere", "--from: \"nowhere\" is not a position"),
        (
            "workers",
            "--from: position workers is not one of this listing's",
        ),
    ] {
        let out = resq(&ns, &["jobs", "--state", "completed", "--from", from]).await;
        assert_eq!(code(&out), 1);
        assert!(stderr(&out).contains(why), "{}", stderr(&out));
    }
    assert_eq!(
        (v["truncated"].clone(), v["next"].clone()),
        (json!(true), json!(from))
    );
    // Past the 20,000th newest by --offset: the page stops, and --from goes on from there.
    let out = ok(
        &ns,
        &[
            "jobs",
            "--state",
            "completed",
            "--offset",
            "20040",
            "--limit",
            "3",
        ],
    )
    .await;
    let from = out
        .split("go on with --from ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap_or_else(|| panic!("no position: {out}"))
        .to_string();
    let out = ok(
        &ns,
        &[
            "jobs",
            "--state",
            "completed",
            "--limit",
            "3",
            "--from",
            &from,
        ],
    )
    .await;
    // Newest first: the 20,001st newest is the 50th written.
    assert_eq!(
        listed(&out),
        [ids[49].clone(), ids[48].clone(), ids[47].clone()],
        "{out}"
    );
}
