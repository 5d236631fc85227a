//! One set of rules for a valid payload (docs/architecture.md, "A valid payload"), applied wherever a
//! payload is judged: the library's (payload.lua's `Pay.classify`, through `FCALL
//! payload_judge` on a real Redis), the worker's decoder (`Payload::parse`) and the claimed
//! path's check (`claim::check`) give the same verdict for the same bytes. The library may
//! leave a payload to the worker ('claim': too large, too unusual or ambiguous for it to read
//! within its budget), never give another verdict. The corpus: `fixtures/payloads/corpus.tsv`,
//! every payload of `fixtures/malformed/`, the ActiveJob captures' payloads and the Jesque
//! captures' queued jobs.

use crate::testing;
use crate::wire::Payload;
use crate::worker::claim;
use crate::worker::step::{CHARS_CHECKED_IN_REDIS, CHECKED_IN_REDIS};
use std::path::{Path, PathBuf};

/// One entry: where it comes from, its bytes, and the verdict it must get (when known).
struct Entry {
    name: String,
    bytes: Vec<u8>,
    valid: Option<bool>,
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn corpus() -> Vec<Entry> {
    let mut out = Vec::new();
    let text = std::fs::read_to_string(fixtures().join("payloads/corpus.tsv")).expect("corpus");
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut f = line.splitn(3, '\t');
        let (v, name, b) = (f.next(), f.next(), f.next());
        let (Some(v), Some(name), Some(b)) = (v, name, b) else {
            panic!("corpus.tsv: a line without three fields: {line}");
        };
        let bytes = b
            .strip_prefix("hex:")
            .map_or_else(|| b.as_bytes().to_vec(), hex);
        assert!(v == "job" || v == "malformed", "corpus.tsv: verdict {v}");
        out.push(Entry {
            name: format!("corpus.tsv {name}"),
            bytes,
            valid: Some(v == "job"),
        });
    }
    let dir = fixtures().join("malformed");
    let tsv = std::fs::read_to_string(dir.join("EXPECTED.tsv")).expect("EXPECTED.tsv");
    for line in tsv.lines().filter(|l| !l.starts_with('#')) {
        let (file, exception) = line.split_once('\t').expect("two fields");
        out.push(Entry {
            name: format!("malformed/{file}"),
            bytes: std::fs::read(dir.join(file)).expect("a fixture"),
            valid: Some(exception != "Resq::MalformedPayload"),
        });
    }
    for rails in ["6.1", "7.0", "7.1", "7.2"] {
        let path = fixtures().join(format!("activejob/rails-{rails}.json"));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("capture")).expect("json");
        for c in v["cases"].as_array().expect("cases") {
            out.push(Entry {
                name: format!("activejob rails-{rails} {}", c["name"]),
                bytes: c["payload"].as_str().expect("payload").as_bytes().to_vec(),
                valid: Some(true),
            });
        }
    }
    for e in std::fs::read_dir(fixtures().join("jesque")).expect("jesque") {
        let path = e.expect("entry").path();
        if path.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("capture")).expect("json");
        for (key, k) in v["keys"].as_object().into_iter().flatten() {
            if !key.contains(":queue:") || k["type"] != "list" {
                continue;
            }
            for item in k["value"].as_array().into_iter().flatten() {
                out.push(Entry {
                    name: format!("jesque {} {key}", path.display()),
                    bytes: item.as_str().expect("text").as_bytes().to_vec(),
                    valid: Some(true),
                });
            }
        }
    }
    out
}

#[tokio::test]
async fn the_library_and_the_worker_judge_every_payload_alike() {
    let mut con = testing::con().await;
    let entries = corpus();
    assert!(entries.len() > 100, "a corpus of {} entries", entries.len());
    let mut problems = Vec::new();
    let (mut claimed, mut judged) = (0, 0);
    for e in &entries {
        // The worker's two judges.
        let decoded = Payload::parse(&e.bytes);
        let checked = claim::check(e.bytes.clone());
        if decoded.is_ok() != checked.is_ok() {
            problems.push(format!(
                "{}: the decoder says {:?}, the claimed path {:?}",
                e.name,
                decoded.as_ref().err(),
                checked.as_ref().err().map(|(w, _)| w)
            ));
        }
        let rust = decoded.is_ok();
        if e.valid.is_some_and(|v| v != rust) {
            problems.push(format!(
                "{}: the corpus says {}, the worker {:?}",
                e.name,
                if e.valid == Some(true) {
                    "job"
                } else {
                    "malformed"
                },
                decoded.as_ref().err()
            ));
        }
        // The library's, with the step's budgets (and no size limit: size is not a rule of
        // validity).
        let (verdict, why): (String, String) = crate::scripts::PayloadJudge {
            payload: e.bytes.as_slice(),
            small: CHECKED_IN_REDIS,
            chars: CHARS_CHECKED_IN_REDIS,
            max: usize::MAX / 2,
        }
        .call()
        .invoke_async(&mut con)
        .await
        .expect("payload_judge");
        match verdict.as_str() {
            "claim" => claimed += 1,
            "job" | "malformed" => {
                judged += 1;
                if (verdict == "job") != rust {
                    problems.push(format!(
                        "{}: the library says {verdict} ({why}), the worker {:?}",
                        e.name,
                        decoded.as_ref().err()
                    ));
                }
            }
            other => problems.push(format!("{}: the library says {other}", e.name)),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Most of the corpus is judged by the library itself, not left to the worker.
    assert!(judged > 2 * claimed, "{judged} judged, {claimed} claimed");
}
