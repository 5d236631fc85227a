//! track.lua's text functions against a real Redis and real Ruby: resque-status's `name`
//! (Ruby's `Hash#inspect`) for every JSON shape, and record edits that keep field order and
//! bytes as Ruby's `merge` does.

use crate::testing;
use redis::Script;

/// A script running one of track.lua's functions.
fn probe(body: &str) -> Script {
    Script::new(&format!(
        "{}\n{}\n{}\n{body}",
        include_str!("guard.lua"),
        include_str!("track.lua"),
        include_str!("limits.lua")
    ))
}

/// What Ruby 3.1 prints for `"#{class}(#{options.inspect unless options.empty?})"` with
/// options parsed from each JSON text (one per line), as resque-status builds `name`.
fn ruby_names(class: &str, options: &[String]) -> Vec<String> {
    let program = r##"
        require 'json'
        cls = ARGV[0]
        STDIN.each_line do |l|
          o = JSON.parse(l, quirks_mode: true)
          puts JSON.generate(["#{cls}(#{o.inspect unless o.respond_to?(:empty?) && o.empty?})"])
        end
    "##;
    let mut child = std::process::Command::new("ruby")
        .args(["-e", program, class])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("ruby (apt-get install ruby) is needed to check Ruby's inspect");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        for o in options {
            writeln!(stdin, "{o}").expect("write");
        }
    }
    let out = child.wait_with_output().expect("ruby");
    assert!(out.status.success(), "ruby failed");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| {
            let v: Vec<String> = serde_json::from_str(l).expect("json line");
            v[0].clone()
        })
        .collect()
}

#[tokio::test]
async fn names_are_rubys_hash_inspect() {
    let mut con = testing::con().await;
    let options: Vec<String> = [
        r#"{"num":10,"label":"ünïcødé ✓","sym":"val","nested":{"a":[1,2.5,null,true]}}"#,
        r#"{}"#,
        r#"{"case":"raise"}"#,
        r#"{"f":[0.1,1e20,1e15,1e16,1e14,123456789.123456789,-0.0,1.0E2,0.0001,1e-5,2.50,1e400]}"#,
        r#"{"big":123456789012345678901234567890,"neg":-42,"zero":-0}"#,
        r##"{"esc":"q\"b\\s/ \n\t\r\b\f \u0001 \u007f \u001b #{x} #$y #@z # {"}"##,
        r#"{"u":"\u00e9\u2028\u2029\ud83d\ude00 \ufdd0 \u200b €","k\u00e9y":[]}"#,
        r#"{ "spaced" : [ 1 , { "a" : null } ] , "e" : { } }"#,
        r#"[1,"two",3.0]"#,
        r#""just a string""#,
        r#"{"a":{"b":{"c":{"d":[[[]]]}}}}"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let expected = ruby_names("MyStatusJob", &options);
    assert_eq!(expected.len(), options.len(), "ruby named every case");
    let script = probe("return rb_name(ARGV[1], ARGV[2])");
    for (o, want) in options.iter().zip(&expected) {
        let got: String = script
            .arg("MyStatusJob")
            .arg(o)
            .invoke_async(&mut con)
            .await
            .expect("script");
        assert_eq!(&got, want, "options {o}");
    }
    // The name real resque-status wrote (fixture 02_working).
    let fixture = r#"{"num":10,"label":"ünïcødé ✓","sym":"val","nested":{"a":[1,2.5,null,true]}}"#;
    let got: String = script
        .arg("MyStatusJob")
        .arg(fixture)
        .invoke_async(&mut con)
        .await
        .expect("script");
    assert_eq!(
        got,
        r#"MyStatusJob({"num"=>10, "label"=>"ünïcødé ✓", "sym"=>"val", "nested"=>{"a"=>[1, 2.5, nil, true]}})"#
    );
}

#[tokio::test]
async fn merges_keep_rubys_order_and_bytes() {
    let mut con = testing::con().await;
    let script = probe(
        r#"
        local ms, close = json_members(ARGV[1])
        if not ms then return false end
        local ups = {}
        for i = 2, #ARGV, 2 do ups[#ups + 1] = { ARGV[i], ARGV[i + 1] } end
        return json_merge(ARGV[1], ms, close, ups)
    "#,
    );
    let cases: &[(&str, &[&str], &str)] = &[
        (
            r#"{"time":1795495079,"status":"queued","uuid":"u","options":{"a":"}{\"]"}}"#,
            &["status", r#""working""#, "name", r#""X()""#],
            r#"{"time":1795495079,"status":"working","uuid":"u","options":{"a":"}{\"]"},"name":"X()"}"#,
        ),
        (r#"{}"#, &["a", "1", "b", "2"], r#"{"a":1,"b":2}"#),
        (
            r#"{ "keep" : 1.50 , "x" : [1, 2] }"#,
            &["x", "3", "y", "true"],
            r#"{ "keep" : 1.50 , "x" : 3 ,"y":true}"#,
        ),
    ];
    for (text, ups, want) in cases {
        let mut inv = script.prepare_invoke();
        inv.arg(*text);
        for u in *ups {
            inv.arg(*u);
        }
        let got: Option<String> = inv.invoke_async(&mut con).await.expect("script");
        assert_eq!(got.as_deref(), Some(*want), "{text}");
    }
    for garbage in ["", "[1]", "{\"a\":1", "{\"a\" 1}", "{\"a\":1}x", "\"s\""] {
        let got: Option<String> = script
            .arg(garbage)
            .invoke_async(&mut con)
            .await
            .expect("script");
        assert_eq!(got, None, "{garbage:?} is not an object");
    }
}

#[tokio::test]
async fn the_fast_merge_writes_what_the_general_one_does() {
    let mut con = testing::con().await;
    // Returns {fast or false, general}.
    let script = probe(
        r#"
        local ms, close = json_members(ARGV[1])
        local ups = {}
        for i = 2, #ARGV, 2 do ups[#ups + 1] = { ARGV[i], ARGV[i + 1] } end
        return { json_merge_fast(ARGV[1], ups) or false, json_merge(ARGV[1], ms, close, ups) }
    "#,
    );
    let id = "0123456789abcdef0123456789abcdef";
    // Options and a name whose strings hold the patterns the fast path looks for.
    let opts = serde_json::json!({"a": "}{\"],\"name\":\"x"});
    let queued =
        format!(r#"{{"time":1795495079,"status":"queued","uuid":"{id}","options":{opts}}}"#);
    let name = serde_json::Value::String("X({\"a\"=>\"\\\",\\\"name\\\":\"})".to_string());
    let working = format!(
        r#"{{"time":1795495079.25,"status":"working","uuid":"{id}","options":[1,",\"name\":\""],"name":{name}}}"#
    );
    // (record, updates, whether the fast path applies)
    let cases: Vec<(String, Vec<&str>, bool)> = vec![
        (
            queued.clone(),
            vec!["status", r#""working""#, "name", r#""X()""#],
            true,
        ),
        (
            working.clone(),
            vec!["status", r#""completed""#, "message", r#""ok""#, "num", "3"],
            true,
        ),
        (
            working.clone(),
            vec!["status", r#""failed""#, "name", r#""Y""#],
            true,
        ),
        (
            queued.clone(),
            vec!["time", "1", "status", r#""working""#],
            false,
        ),
        (
            format!(r#"{{"time":1,"status":"queued","uuid":"{id}"}}"#),
            vec!["status", r#""working""#],
            false,
        ),
        (
            format!(r#"{{"time":1,"status":"queued","uuid":"{id}","options":{{}},"message":"m"}}"#),
            vec!["message", r#""n""#],
            false,
        ),
        (
            format!(r#"{{"time":1,"status":"queued","uuid":"{id}","options":{{"a":1}} }}"#),
            vec!["status", r#""working""#],
            true,
        ),
        // A resq-tracked job's record: no options, then a plain name (read without cjson).
        (
            format!(r#"{{"time":1,"status":"queued","uuid":"{id}","options":{{}}}}"#),
            vec!["status", r#""working""#, "name", r#""Noop""#],
            true,
        ),
        (
            format!(
                r#"{{"time":1,"status":"working","uuid":"{id}","options":{{}},"name":"Noop"}}"#
            ),
            vec!["status", r#""completed""#, "message", r#""Completed""#],
            true,
        ),
        (
            format!(
                r#"{{"time":1,"status":"working","uuid":"{id}","options":{{}},"name":"N\"o"}}"#
            ),
            vec!["status", r#""completed""#],
            true,
        ),
        (
            format!(
                r#"{{"time":1,"status":"working","uuid":"{id}","options":{{}},"name":"x","message":"m"}}"#
            ),
            vec!["message", r#""n""#],
            false,
        ),
    ];
    for (text, ups, fast) in cases {
        let mut inv = script.prepare_invoke();
        inv.arg(&text);
        for u in &ups {
            inv.arg(*u);
        }
        let (got_fast, general): (redis::Value, String) =
            inv.invoke_async(&mut con).await.expect("script");
        match got_fast {
            redis::Value::BulkString(b) => {
                assert!(fast, "fast path taken for {text}");
                assert_eq!(
                    String::from_utf8(b).expect("utf-8"),
                    general,
                    "{text} {ups:?}"
                );
            }
            _ => assert!(!fast, "fast path not taken for {text} {ups:?}"),
        }
    }
}

#[tokio::test]
async fn resq_s_field_goes_last() {
    let mut con = testing::con().await;
    let script = probe(
        r#"
        local ms, close = json_members(ARGV[1])
        local t = json_drop(ARGV[1], ms, close, 'resq')
        return t
    "#,
    );
    let cases: &[(&str, &str)] = &[
        (r#"{"a":1,"resq":{"s":"}"},"b":2}"#, r#"{"a":1,"b":2}"#),
        (r#"{"resq":{},"b":2}"#, r#"{"b":2}"#),
        (r#"{"a":1,"resq":[1]}"#, r#"{"a":1}"#),
        (r#"{"resq":1}"#, r#"{}"#),
        (r#"{ "a" : 1 , "resq" : 2 }"#, r#"{ "a" : 1 }"#),
        (r#"{"a":1}"#, r#"{"a":1}"#),
    ];
    for (text, want) in cases {
        let got: String = script.arg(*text).invoke_async(&mut con).await.unwrap();
        assert_eq!(&got, want, "{text}");
    }
}

#[tokio::test]
async fn a_status_moved_by_ruby_wins_over_a_stale_state() {
    let mut con = testing::con().await;
    let ns = format!("tracktest{}", std::process::id());
    let id = "0123456789abcdef0123456789abcdef";
    let key = format!("{ns}:status:{id}");
    // A resq-created record that a Ruby resque-status worker completed (it merged the record
    // and left `resq` as it was).
    let ruby = format!(
        r#"{{"time":1,"status":"completed","uuid":"{id}","options":{{}},"resq":{{"state":"queued","history":[]}},"name":"J()","message":"Completed at x"}}"#
    );
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg(&ruby)
        .query_async(&mut con)
        .await
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg(format!("{ns}:resq:jobs:queued"))
        .arg(1)
        .arg(id)
        .query_async(&mut con)
        .await
        .unwrap();
    let script = probe(
        r#"
        local text, ms, _, r = track_read(ARGV[1], ARGV[2])
        local extra, stale = track_extra(text, ms, r)
        local ok, why = track(ARGV[1], ARGV[2], { state = 'working', now_ms = 5000, now_s = 5,
          set = {}, no_event = true, only_if = { working = true } })
        return { extra.state, stale or '', why or '' }
    "#,
    );
    let got: Vec<String> = script
        .arg(format!("{ns}:"))
        .arg(id)
        .invoke_async(&mut con)
        .await
        .unwrap();
    assert_eq!(
        got,
        ["completed", "queued", "skip"],
        "a finished job is not moved"
    );
    // A transition that applies to a finished job (a retry from resque-web) moves `resq` last
    // and forgets the stale index entry.
    let script = probe(
        r#"
        return track(ARGV[1], ARGV[2], { state = 'working', now_ms = 5000, now_s = 5,
          set = {}, no_event = true })
    "#,
    );
    let prev: String = script
        .arg(format!("{ns}:"))
        .arg(id)
        .invoke_async(&mut con)
        .await
        .unwrap();
    assert_eq!(prev, "completed");
    let text: String = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(
        text.starts_with(&format!(
            r#"{{"time":1,"status":"working","uuid":"{id}","options":{{}},"name":"J()","message":"Completed at x","resq":{{"#
        )),
        "{text}"
    );
    let queued: Vec<String> = redis::cmd("ZRANGE")
        .arg(format!("{ns}:resq:jobs:queued"))
        .arg(0)
        .arg(-1)
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(queued.is_empty(), "{queued:?}");
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{ns}:*"))
        .query_async(&mut con)
        .await
        .unwrap();
    keys.sort();
    let _: () = redis::cmd("DEL")
        .arg(&keys)
        .query_async(&mut con)
        .await
        .unwrap();
}

/// A connection, a fresh prefix (`tag` and the process id), limit `pay`'s sum key and the
/// shares hash under it.
async fn limit_fixture(tag: &str) -> (crate::conn::Conn, String, String, String) {
    let con = testing::con().await;
    let p = format!("{tag}{}:", std::process::id());
    let h = format!("{p}resq:limit:pay:holders");
    let sharing = format!("{p}resq:sharing");
    (con, p, h, sharing)
}

/// Deletes `keys`.
async fn forget(con: &mut crate::conn::Conn, keys: &[&String]) {
    let () = redis::cmd("DEL")
        .arg(keys)
        .query_async(con)
        .await
        .expect("clean");
}

#[tokio::test]
async fn a_limit_sum_or_share_entry_that_is_unreadable_stops_a_share_before_any_write() {
    let (mut con, p, h, sharing) = limit_fixture("lim").await;
    // The error texts of limits_free (w1 holds a share of `pay`, whose sum is no integer),
    // limits_check of a job under `pay`, and limits_admit for w2 (whose entry is garbage); the
    // flush then writes what they changed, which is nothing.
    let script = probe(
        r#"
        local P = ARGV[1]
        shares_prefetch(P, { 'w1', 'w2', 'w3' })
        local _, free_err = limits_free(P, nil, 'w1')
        local ls = { { { name = 'pay', kind = 'concurrency', limit = 5 }, P .. 'resq:limit:pay', nil } }
        local _, check_err = limits_check(P, { defs = {} }, ls, 'Charge', 1)
        local admit_err = limits_admit(P, ls, 'Charge', 'w2', 1, 'seq')
        local short_err = limits_admit(P, ls, 'Charge', 'w3', 1, 'seq')
        local many_err = limits_admit(P, ls, 'Charge', 'w4', 1, 'seq')
        limits_flush(P)
        return { free_err or false, check_err or false, admit_err or false, short_err or false,
          many_err or false }
    "#,
    );
    let () = redis::pipe()
        .hset(&h, "__units", "x")
        .hset(&sharing, "w1", format!("1 {}:{h}", h.len()))
        .hset(&sharing, "w2", "two")
        .hset(&sharing, "w3", "1 999:cut short")
        .hset(&sharing, "w4", "1 1:x".repeat(1001))
        .query_async(&mut con)
        .await
        .expect("seed");
    let keys = vec![h.clone(), sharing.clone()];
    let before = dump(&mut con, &keys).await;
    let (free_err, check_err, admit_err, short_err, many_err): (
        String,
        String,
        String,
        String,
        String,
    ) = script.arg(&p).invoke_async(&mut con).await.expect("script");
    for e in [&free_err, &check_err] {
        assert!(e.contains("__units") && e.contains("NOTINTEGER"), "{e}");
    }
    assert!(
        admit_err.contains("BADSHARES") && admit_err.contains("field w2"),
        "{admit_err}"
    );
    assert!(
        short_err.contains("BADSHARES") && short_err.contains("cut short"),
        "{short_err}"
    );
    assert!(
        many_err.contains("BADSHARES") && many_err.contains("more than 1000 shares"),
        "{many_err}"
    );
    assert_eq!(dump(&mut con, &keys).await, before, "nothing was written");
    // The layout before shares moved into one hash (a set of ids) is refused the same way.
    let () = redis::pipe()
        .del(&sharing)
        .sadd(&sharing, "w1")
        .query_async(&mut con)
        .await
        .expect("seed");
    let before = dump(&mut con, &keys).await;
    let (free_err, _, admit_err, _, _): (String, String, String, String, String) =
        script.arg(&p).invoke_async(&mut con).await.expect("script");
    for e in [&free_err, &admit_err] {
        assert!(e.contains("WRONGTYPE") && e.contains("resq:sharing"), "{e}");
    }
    assert_eq!(dump(&mut con, &keys).await, before, "nothing was written");
    // A limit's sum, then its held set, of another type: returning w1's share is refused.
    let free_only = probe(
        r#"
        local _, e = limits_free(ARGV[1], nil, 'w1')
        limits_flush(ARGV[1])
        return e or false
    "#,
    );
    let held = format!("{p}resq:limit:pay:held");
    let keys = vec![h.clone(), sharing.clone(), held.clone()];
    for (bad, want) in [(&h, "hash"), (&held, "zset")] {
        forget(&mut con, &[&h, &sharing, &held]).await;
        let () = redis::pipe()
            .hset(&sharing, "w1", format!("1 {}:{h}", h.len()))
            .rpush(bad, "not-a-limit")
            .query_async(&mut con)
            .await
            .expect("seed");
        let before = dump(&mut con, &keys).await;
        let free_err: String = free_only
            .arg(&p)
            .invoke_async(&mut con)
            .await
            .expect("script");
        assert!(
            free_err.contains("WRONGTYPE")
                && free_err.contains(bad.as_str())
                && free_err.contains(want),
            "{free_err}"
        );
        assert_eq!(dump(&mut con, &keys).await, before, "nothing was written");
    }
    forget(&mut con, &[&h, &sharing, &held]).await;
}

/// The slots' share entries (sorted by slot) and limit `h`'s sum, as stored.
async fn written(
    con: &mut crate::conn::Conn,
    sharing: &str,
    h: &str,
) -> (Vec<(String, String)>, String) {
    let all: std::collections::BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(sharing)
        .query_async(con)
        .await
        .expect("sharing");
    let sum: String = redis::cmd("HGET")
        .arg(h)
        .arg("__units")
        .query_async(con)
        .await
        .expect("sum");
    (all.into_iter().collect(), sum)
}

/// Call `round` of a limits probe taking (prefix, holders key, round).
async fn round<T: redis::FromRedisValue>(
    script: &Script,
    con: &mut crate::conn::Conn,
    p: &str,
    h: &str,
    round: &str,
) -> T {
    script
        .arg(p)
        .arg(h)
        .arg(round)
        .invoke_async(con)
        .await
        .unwrap_or_else(|e| panic!("round {round}: {e}"))
}

#[tokio::test]
async fn shares_taken_and_returned_in_one_call_are_written_once_at_its_end() {
    let (mut con, p, h, sharing) = limit_fixture("flush").await;
    // Call 1: w1 and w2 take a share each (w2 a weight of 2). Call 2: w1 ends its job and
    // takes another, w2 ends its job and takes none, w3 takes one. Each call returns what it
    // read before flushing: the sum it saw at the end, and the keys as they were meanwhile.
    let script = probe(
        r#"
        local P, h, round = ARGV[1], ARGV[2], ARGV[3]
        local def = { name = 'pay', kind = 'concurrency', limit = 5, weights = { Big = 2 } }
        local function ls() return { { def, P .. 'resq:limit:pay', nil, h = h } } end
        local function admit(w, class)
          local x, e = limits_check(P, { defs = { def } }, ls(), class, 1)
          assert(x == nil and e == nil, 'admitted')
          assert(limits_admit(P, ls(), class, w, 1, 'seq') == nil, 'admit')
        end
        if round == '1' then
          admit('w1', 'Small')
          admit('w2', 'Big')
        else
          shares_prefetch(P, { 'w1', 'w2', 'w3' })
          assert(#limits_free(P, nil, 'w1') == 0, 'free w1')
          admit('w1', 'Small')
          assert(#limits_free(P, nil, 'w2') == 0, 'free w2')
          admit('w3', 'Small')
        end
        local seen = { limit_units(h), redis.call('HGET', h, '__units') or false,
          redis.call('HLEN', P .. 'resq:sharing') }
        limits_flush(P)
        return seen
    "#,
    );
    forget(&mut con, &[&h, &sharing]).await;
    let entry = |w: u32| format!("{w} {}:{h}", h.len());
    let (units, stored, listed): (i64, Option<String>, i64) =
        round(&script, &mut con, &p, &h, "1").await;
    assert_eq!(
        (units, stored, listed),
        (3, None, 0),
        "nothing written before the flush"
    );
    assert_eq!(
        written(&mut con, &sharing, &h).await,
        (
            vec![("w1".into(), entry(1)), ("w2".into(), entry(2))],
            "3".into()
        )
    );
    let (units, stored, listed): (i64, String, i64) = round(&script, &mut con, &p, &h, "2").await;
    assert_eq!((units, stored.as_str(), listed), (2, "3", 2));
    assert_eq!(
        written(&mut con, &sharing, &h).await,
        (
            vec![("w1".into(), entry(1)), ("w3".into(), entry(1))],
            "2".into()
        )
    );
    forget(&mut con, &[&h, &sharing]).await;
}

#[tokio::test]
async fn slots_holding_the_same_shares_keep_their_own_when_one_changes() {
    let (mut con, p, h, sharing) = limit_fixture("same").await;
    let tax = format!("{p}resq:limit:tax:k1:holders");
    let parts = format!("{p}resq:limit:tax:parts");
    // Round 1: w1, w2 and w3 take a share of `pay` each: three entries of the same text, which
    // round 2 reads as one list. There w1 also takes a share of `tax` for partition k1 (its
    // list grows, the general way), w3
    // returns its shares (only `pay`'s, whatever w1's list became), and w2 returns its share
    // and takes `pay` again in one step (limits_take), which leaves its entry as it was.
    let script = probe(
        r#"
        local P, h, round = ARGV[1], ARGV[2], ARGV[3]
        local pay = { name = 'pay', kind = 'concurrency', limit = 5 }
        local tax = { name = 'tax', kind = 'concurrency', limit = 5 }
        local L = { defs = { pay, tax } }
        local pays = { { pay, P .. 'resq:limit:pay', nil, h = h } }
        local taxes = { { tax, P .. 'resq:limit:tax:k1', 'k1' } }
        local function admit(w, ls)
          local x, e = limits_check(P, L, ls, 'Charge', 1)
          assert(x == nil and e == nil, 'admitted')
          assert(limits_admit(P, ls, 'Charge', w, 1, 'seq') == nil, 'admit')
        end
        if round == '1' then
          for _, w in ipairs({ 'w1', 'w2', 'w3' }) do admit(w, pays) end
        else
          shares_prefetch(P, { 'w1', 'w2', 'w3' })
          admit('w1', taxes)
          assert(#limits_free(P, L, 'w3') == 0, 'free w3')
          assert(#limits_free(P, L, 'w2') == 0, 'free w2')
          assert(limits_take(P, pays, 'Charge', 'w2') == true, 'take w2')
        end
        limits_flush(P)
        return redis.call('HGET', P .. 'resq:limit:tax:k1:holders', '__units') or false
    "#,
    );
    forget(&mut con, &[&h, &tax, &parts, &sharing]).await;
    let pay = |w: u32| format!("{w} {}:{h}", h.len());
    let taxed = format!("1 {}:{tax}", tax.len());
    let _: Option<String> = round(&script, &mut con, &p, &h, "1").await;
    let tax_sum: Option<String> = round(&script, &mut con, &p, &h, "2").await;
    assert_eq!(tax_sum.as_deref(), Some("1"), "w3 returned no share of tax");
    assert_eq!(
        written(&mut con, &sharing, &h).await,
        (
            vec![
                ("w1".into(), format!("{}{taxed}", pay(1))),
                ("w2".into(), pay(1))
            ],
            "2".into()
        )
    );
    forget(&mut con, &[&h, &tax, &parts, &sharing]).await;
}

#[tokio::test]
async fn a_call_of_thousands_of_slots_flushes_their_shares() {
    let (mut con, p, h, sharing) = limit_fixture("many").await;
    // 5,000 slots take a share in one call, then return it in another: 10,000 values for one
    // HSET, more than Lua's `unpack` can hand over at once.
    let script = probe(
        r#"
        local P, h, round = ARGV[1], ARGV[2], ARGV[3]
        local def = { name = 'pay', kind = 'concurrency', limit = 100000 }
        local ls = { { def, P .. 'resq:limit:pay', nil, h = h } }
        for i = 1, 5000 do
          if round == '1' then
            assert(limits_admit(P, ls, 'Charge', 'w' .. i, 1, 'seq') == nil, 'admit')
          else
            assert(#limits_free(P, nil, 'w' .. i) == 0, 'free')
          end
        end
        limits_flush(P)
        return { redis.call('HLEN', P .. 'resq:sharing'), redis.call('HGET', h, '__units') or false }
    "#,
    );
    let (listed, sum): (i64, Option<String>) = round(&script, &mut con, &p, &h, "1").await;
    assert_eq!((listed, sum.as_deref()), (5000, Some("5000")));
    let (listed, sum): (i64, Option<String>) = round(&script, &mut con, &p, &h, "2").await;
    assert_eq!((listed, sum), (0, None), "every share returned");
    forget(&mut con, &[&h, &sharing]).await;
}

#[tokio::test]
async fn a_resq_member_cjson_cannot_write_back_stops_the_transition_before_any_write() {
    let mut con = testing::con().await;
    let p = format!("inf{}:", std::process::id());
    let id = "0123456789abcdef0123456789abcdef";
    let key = format!("{p}status:{id}");
    // `1e999` decodes to infinity, which cjson refuses to encode.
    let record = format!(
        r#"{{"time":1,"status":"queued","uuid":"{id}","options":{{}},"resq":{{"state":"queued","attempts":1e999,"history":[]}}}}"#
    );
    let () = redis::cmd("SET")
        .arg(&key)
        .arg(&record)
        .query_async(&mut con)
        .await
        .expect("seed");
    let script = probe(
        r#"
        local ok, why = track(ARGV[1], ARGV[2], { state = 'working', now_ms = 5000, now_s = 5 })
        return { ok or false, why or false }
    "#,
    );
    let keys = vec![
        key.clone(),
        format!("{p}_statuses"),
        format!("{p}resq:jobs:queued"),
        format!("{p}resq:jobs:working"),
    ];
    let before = dump(&mut con, &keys).await;
    let (ok, why): (bool, String) = script
        .arg(&p)
        .arg(id)
        .invoke_async(&mut con)
        .await
        .expect("the script returns, it does not raise");
    assert!(!ok);
    assert!(why.starts_with("BADSTATUS"), "{why}");
    assert_eq!(dump(&mut con, &keys).await, before, "nothing was written");
}

/// Deletes `keys`, then writes `text` to the first (a record).
async fn reseed(con: &mut crate::conn::Conn, keys: &[String], text: &str) {
    forget(con, &keys.iter().collect::<Vec<_>>()).await;
    redis::cmd("SET")
        .arg(&keys[0])
        .arg(text)
        .query_async::<()>(con)
        .await
        .expect("seed");
}

/// `DUMP` of each key (None when absent).
async fn dump(con: &mut crate::conn::Conn, keys: &[String]) -> Vec<Option<Vec<u8>>> {
    let mut out = Vec::new();
    for k in keys {
        let v: Option<Vec<u8>> = redis::cmd("DUMP")
            .arg(k)
            .query_async(con)
            .await
            .expect("dump");
        out.push(v);
    }
    out
}

/// The fast lane of tracked jobs (track.lua's `track_fast`) against the general way: the same
/// start and completion applied to a record of the fast form (as `new_record` writes it at
/// enqueue) and to the same record written another way (a space after the first colon, which
/// only the general way reads), in two namespaces. Both records must decode to the same value
/// after each step, with the same TTL, and every index must hold the same members with the
/// same scores; the fast one must be the fast lane's exact text (proof that it ran).
#[tokio::test]
async fn the_fast_lane_writes_what_track_writes() {
    fast_and_general(&[], "", None).await;
    // Tags (a `]` in one: the lane finds their end by the text after them).
    fast_and_general(
        &["t1".to_string(), "x]y".to_string()],
        r#","tags":["t1","x]y"]"#,
        None,
    )
    .await;
    // resque-status jobs: made by Ruby's `create` (no resq member), and by resq's, whose
    // options hold what the lane looks for.
    let opts = r#"{"num":10,"label":"ünïcødé ✓","nested":{"a":[1,2.5,null,true]},"name":"x","resq":{"state":"working","queue":"q"}}"#;
    fast_and_general(&[], "", Some((opts, true))).await;
    fast_and_general(&["t1".to_string()], "", Some((opts, false))).await;
}

/// the_fast_lane_writes_what_track_writes for a job with `tags` (`tags_text`: their member as
/// resq's part of the record writes it), tracked through resq or (`statused`: its options'
/// JSON text, and whether Ruby's `create` made its record) a resque-status job.
async fn fast_and_general(tags: &[String], tags_text: &str, statused: Option<(&str, bool)>) {
    use crate::jobs::{record, Ending, JobId, State, TrackEnd};
    let mut con = testing::con().await;
    let pid = std::process::id();
    let (pa, pb) = (format!("fastA{pid}:"), format!("fastB{pid}:"));
    let id = JobId::parse("00112233445566778899aabbccddeeff").expect("id");
    let at = chrono::DateTime::from_timestamp_millis(1795495079123).expect("time");
    let resq = record::new_resq(State::Queued, "default", "Noop", tags, None, at, None);
    let options: Option<serde_json::Value> =
        statused.map(|(o, _)| serde_json::from_str(o).expect("options"));
    let fast_form = match statused {
        Some((o, true)) => format!(
            r#"{{"time":1795495079,"status":"queued","uuid":"{}","options":{o}}}"#,
            id.as_str()
        ),
        _ => record::new_record(
            &id,
            State::Queued,
            options.as_ref(),
            &resq,
            at,
            crate::client::FloatFormat::RubyJsonGem,
        ),
    };
    let raw = statused.map_or(String::new(), |(o, _)| {
        format!(r#"{{"class":"Noop","args":["{}",{o}]}}"#, id.as_str())
    });
    let other_form = fast_form.replacen("\"time\":", "\"time\": ", 1);
    // Start: returns which way ran ('fast' or 'general') and the general way's answer.
    let start = probe(
        r#"
        local P, id, worker, now_text, raw = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
        local v = redis.pcall('GET', P .. 'status:' .. id)
        local F = track_fast()
        F.defer()
        local parts
        if raw ~= '' then
          parts = F.queued_status(v, id, raw, cjson.decode(raw), 'default', 'Noop')
        else
          parts = F.queued(v, id, 'default', 'Noop')
        end
        if parts and F.start(P, id, parts, worker, now_text) then
          track_flush()
          return 'fast'
        end
        local text, ms, close, r = track_read(P, id, v)
        local extra, stale = track_extra(text, ms, r)
        local ok, why = track_started(P, id, { text, ms, close, extra, stale }, worker,
          'default', 'Noop', json_str(track_name(raw, 'Noop', raw ~= '')), tonumber(now_text))
        return 'general ' .. tostring(ok or why)
    "#,
    );
    // A completion spec (the worker's `done` lines), applied as the step applies it.
    let done = probe(
        r#"
        local F = track_fast()
        F.defer()
        local prev, why = track_spec(ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[3])
        track_flush()
        return tostring(prev or why)
    "#,
    );
    let keys = |p: &str| -> Vec<String> {
        [
            "status:",
            "resq:jobs:queued",
            "resq:jobs:working",
            "resq:jobs:completed",
            "resq:jobs:expiry",
            "_statuses",
        ]
        .iter()
        .map(|k| {
            if *k == "status:" {
                format!("{p}status:{}", id.as_str())
            } else {
                format!("{p}{k}")
            }
        })
        .collect()
    };
    async fn state(
        con: &mut crate::conn::Conn,
        keys: &[String],
    ) -> (serde_json::Value, i64, Vec<Vec<(String, String)>>) {
        let text: String = redis::cmd("GET")
            .arg(&keys[0])
            .query_async(con)
            .await
            .expect("record");
        let ttl: i64 = redis::cmd("TTL")
            .arg(&keys[0])
            .query_async(con)
            .await
            .expect("ttl");
        let mut zs = Vec::new();
        for k in &keys[1..] {
            let z: Vec<(String, String)> = redis::cmd("ZRANGE")
                .arg(k)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query_async(con)
                .await
                .expect("zrange");
            zs.push(z);
        }
        (
            serde_json::from_str(&text).expect("the record is JSON"),
            ttl,
            zs,
        )
    }
    for (p, text) in [(&pa, &fast_form), (&pb, &other_form)] {
        let ks = keys(p);
        reseed(&mut con, &ks, text).await;
        redis::cmd("ZADD")
            .arg(&ks[1])
            .arg(1795495079123i64)
            .arg(id.as_str())
            .query_async::<()>(&mut con)
            .await
            .expect("seed");
        redis::cmd("ZADD")
            .arg(&ks[5])
            .arg(1795495079)
            .arg(id.as_str())
            .query_async::<()>(&mut con)
            .await
            .expect("seed");
    }
    let worker = "host:41-3:default,low";
    let mut ways = Vec::new();
    for p in [&pa, &pb] {
        let way: String = start
            .arg(p)
            .arg(id.as_str())
            .arg(worker)
            .arg("1795495080456")
            .arg(&raw)
            .invoke_async(&mut con)
            .await
            .expect("start");
        ways.push(way);
    }
    assert_eq!(ways, ["fast", "general queued"]);
    let (a, b) = (
        state(&mut con, &keys(&pa)).await,
        state(&mut con, &keys(&pb)).await,
    );
    assert_eq!(a, b, "the same record and indexes after the start");
    let a_text: String = redis::cmd("GET")
        .arg(&keys(&pa)[0])
        .query_async(&mut con)
        .await
        .expect("get");
    if statused.is_none() {
        assert_eq!(
            a_text,
            format!(
                r#"{{"time":1795495079,"status":"working","uuid":"{id}","options":{{}},"name":"Noop","resq":{{"state":"working","queue":"default","class":"Noop","attempts":1,"enqueued_at":1795495079123{tags_text},"worker":"{worker}","started_at":1795495080456,"history":[{{"event":"enqueued","at":1795495079123}},{{"event":"started","at":1795495080456,"worker":"{worker}"}}]}}}}"#,
                id = id.as_str()
            ),
            "the fast lane's text"
        );
    } else {
        assert!(
            a_text.contains(
                r#","resq":{"state":"working","queue":"default","class":"Noop","attempts":1,"#
            ),
            "the fast lane wrote it: {a_text}"
        );
    }
    let end = TrackEnd {
        id: id.clone(),
        ending: Ending::Completed,
        result: Some(r#"{"rows":[1,2],"note":"a \"q\" \n"}"#.into()),
        ttl_secs: 3600,
    };
    let spec = end.spec(
        chrono::DateTime::from_timestamp_millis(1795495081000).expect("t"),
        None,
    );
    for p in [&pa, &pb] {
        let prev: String = done
            .arg(p)
            .arg(&spec)
            .arg("1795495081789")
            .invoke_async(&mut con)
            .await
            .expect("done");
        assert_eq!(prev, "working");
    }
    let (a, b) = (
        state(&mut con, &keys(&pa)).await,
        state(&mut con, &keys(&pb)).await,
    );
    assert_eq!(
        a, b,
        "the same record, TTL and indexes after the completion"
    );
    assert!(a.1 > 3500, "the finished record expires: {}", a.1);
    let a_text: String = redis::cmd("GET")
        .arg(&keys(&pa)[0])
        .query_async(&mut con)
        .await
        .expect("get");
    assert!(
        a_text.contains(
            r#","resq":{"state":"completed","queue":"default","class":"Noop","attempts":1,"#
        ),
        "the fast lane wrote it: {a_text}"
    );
    let all_keys = |ka: &[String], kb: &[String]| -> Vec<String> {
        ka.iter().chain(kb.iter()).cloned().collect()
    };
    if statused.is_some() || !tags.is_empty() {
        forget(
            &mut con,
            &all_keys(&keys(&pa), &keys(&pb)).iter().collect::<Vec<_>>(),
        )
        .await;
        return;
    }
    // A job finished by the fast lane and started again in the same call (its payload pushed
    // twice): the general way flushes the gathered index writes first, so the job is listed
    // as working only.
    let again = probe(
        r#"
        local P, id = ARGV[1], ARGV[2]
        local F = track_fast()
        F.defer()
        local v = redis.pcall('GET', P .. 'status:' .. id)
        local parts = F.queued(v, id, 'default', 'Noop')
        F.start(P, id, parts, 'w1', '1795495082000')
        track_spec(P, ARGV[3], 1795495083000, '1795495083000')
        local ok, why = track_started(P, id, nil, 'w2', 'default', 'Noop', json_str('Noop'), 1795495084000)
        track_flush()
        return tostring(ok or why)
    "#,
    );
    let ks = keys(&pa);
    reseed(&mut con, &ks, &fast_form).await;
    let prev: String = again
        .arg(&pa)
        .arg(id.as_str())
        .arg(&spec)
        .invoke_async(&mut con)
        .await
        .expect("again");
    assert_eq!(prev, "completed");
    let s = state(&mut con, &ks).await;
    assert_eq!(
        s.2[1],
        vec![(id.as_str().to_string(), "1795495084000".to_string())],
        "working"
    );
    assert!(
        s.2[0].is_empty() && s.2[2].is_empty(),
        "neither queued nor completed: {:?}",
        s.2
    );
    // Records the lane leaves to `track`: a job key, a tag JSON escapes, an escaped class,
    // another queue.
    let other = |tags: &[String], key: Option<&str>| {
        let r = record::new_resq(State::Queued, "default", "Noop", tags, key, at, None);
        record::new_record(
            &id,
            State::Queued,
            None,
            &r,
            at,
            crate::client::FloatFormat::RubyJsonGem,
        )
    };
    let with_key = other(tags, Some("k1"));
    let escaped_tag = other(&["q\"t".to_string()], None);
    let q = probe("return track_fast().queued(ARGV[1], ARGV[2], ARGV[3], ARGV[4]) and 1 or 0");
    for (text, queue, class, fast) in [
        (&fast_form, "default", "Noop", 1),
        (&with_key, "default", "Noop", 0),
        (&escaped_tag, "default", "Noop", 0),
        (&fast_form, "other", "Noop", 0),
        (&fast_form, "default", "No\"op", 0),
    ] {
        let got: i64 = q
            .arg(text)
            .arg(id.as_str())
            .arg(queue)
            .arg(class)
            .invoke_async(&mut con)
            .await
            .expect("q");
        assert_eq!(got, fast, "{text} {queue} {class}");
    }
    // A working record of the lane's shape whose options are not JSON: the lane refuses it,
    // and the general way reports it and writes nothing.
    let bad = format!(
        r#"{{"time":1,"status":"working","uuid":"{}","options":{{bad,"name":"Noop()","resq":{{"state":"working","queue":"default","class":"Noop","attempts":1,"worker":"w","started_at":5,"history":[{{"event":"started","at":5,"worker":"w"}}]}}}}"#,
        id.as_str()
    );
    reseed(&mut con, &ks, &bad).await;
    let why: String = done
        .arg(&pa)
        .arg(&spec)
        .arg("1795495081789")
        .invoke_async(&mut con)
        .await
        .expect("done");
    assert!(why.starts_with("BADSTATUS"), "{why}");
    let after: String = redis::cmd("GET")
        .arg(&ks[0])
        .query_async(&mut con)
        .await
        .expect("get");
    assert_eq!(after, bad, "nothing written");
    // A problem line names the job of either form of spec.
    let named = probe("return track_spec_id(ARGV[1])");
    for sp in [spec.clone(), crate::jobs::requeued_spec(&id)] {
        let got: String = named.arg(&sp).invoke_async(&mut con).await.expect("id");
        assert_eq!(got, id.as_str(), "{sp}");
    }
    forget(
        &mut con,
        &keys(&pa).iter().chain(keys(&pb).iter()).collect::<Vec<_>>(),
    )
    .await;
}

/// A completion's TTL out of what `SET … EX` takes (past Redis's range, a fraction, negative,
/// not a number) cannot make a script fail after its first write: it is kept as 100 years, or
/// as no expiry. A working record resque-status wrote takes the general way, which writes it
/// completed with the TTL.
#[tokio::test]
async fn a_ttl_out_of_range_is_clamped_before_any_write() {
    let mut con = testing::con().await;
    let ttls: Vec<i64> = probe(
        "return { track_ttl('99999999999999999999'), track_ttl('1.5'), track_ttl('-3'), \
         track_ttl('x'), track_ttl(nil), track_ttl(60) }",
    )
    .invoke_async(&mut con)
    .await
    .expect("track_ttl");
    assert_eq!(ttls, [3155760000, 1, 0, 0, 0, 60]);
    let p = format!("ttl{}:", std::process::id());
    let id = "0123456789abcdef0123456789abcdef";
    let spec = format!("done\n{id}\n99999999999999999999\n1795495081000\n\"m\"\n");
    // A working record as resque-status writes it (no resq member: the general way).
    let _: () = redis::cmd("SET")
        .arg(format!("{p}status:{id}"))
        .arg(format!(
            r#"{{"time":1795495079,"status":"working","uuid":"{id}","options":{{}}}}"#
        ))
        .query_async(&mut con)
        .await
        .expect("set");
    let prev: String = probe(
        "local a, b = track_spec(ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[3]) \
         return tostring(a) .. ' ' .. tostring(b)",
    )
    .arg(&p)
    .arg(&spec)
    .arg("1795495081789")
    .invoke_async(&mut con)
    .await
    .expect("the completion applies");
    assert_eq!(prev, "working nil");
    let ttl: i64 = redis::cmd("TTL")
        .arg(format!("{p}status:{id}"))
        .query_async(&mut con)
        .await
        .expect("ttl");
    assert!(ttl > 3_000_000_000, "kept 100 years: {ttl}");
}
