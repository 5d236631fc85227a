//! The ActiveJob decoder and encoder against payloads real ActiveJob produced
//! (`fixtures/activejob/rails-{6.1,7.0,7.1,7.2}.json`, written by
//! `compat-tests/activejob/gen_fixtures.rb`; provenance in each file).
//!
//! Decoding: every case's wrapper payload must decode to the plain JSON, kept-as-is paths and
//! keywords flag that the generator computed from the Ruby values, with the metadata as
//! serialized. Encoding: Rust [`Arg`]s for the same Ruby values must serialize to the very
//! JSON ActiveJob wrote, key order included.

use crate::support;

use chrono::{DateTime, FixedOffset, NaiveDate, TimeZone, Utc};
use resq::activejob::{ActiveJob, Arg, DurationUnit, Key, Rails, WRAPPER_CLASS};
use resq::Payload;
use serde_json::{json, Map, Number, Value};

const FIXTURES: [(&str, Rails); 4] = [
    ("activejob/rails-6.1.json", Rails::V6_1),
    ("activejob/rails-7.0.json", Rails::V7_0),
    ("activejob/rails-7.1.json", Rails::V7_1),
    ("activejob/rails-7.2.json", Rails::V7_1),
];

/// (case name, payload text, parsed case) of a fixture, after checking its provenance.
fn cases(path: &str) -> Vec<(String, String, Value)> {
    let f = support::fixture(path);
    let prov = &f["provenance"];
    for k in ["rails", "source", "ruby", "command", "generated_at"] {
        assert!(prov[k].is_string(), "{path}: provenance lacks {k}");
    }
    let cases = f["cases"].as_array().expect("cases").clone();
    assert!(cases.len() >= 19, "{path}: {} cases", cases.len());
    cases
        .into_iter()
        .map(|c| {
            let name = c["name"].as_str().expect("name").to_string();
            let payload = c["payload"].as_str().expect("payload").to_string();
            (name, payload, c)
        })
        .collect()
}

fn job_data(payload: &str) -> Map<String, Value> {
    let v: Value = serde_json::from_str(payload).expect("payload JSON");
    v["args"][0].as_object().expect("job data").clone()
}

/// Canonical text (key order kept), so comparisons see order and number spelling.
fn text(v: &Value) -> String {
    serde_json::to_string(v).expect("json")
}

#[test]
fn decodes_every_case_of_real_activejob() {
    let mut checked = 0;
    for (path, _) in FIXTURES {
        for (name, payload, case) in cases(path) {
            let p = Payload::parse(payload.as_bytes()).expect("payload parses");
            assert_eq!(p.class(), WRAPPER_CLASS);
            let job = ActiveJob::from_payload(&p).unwrap_or_else(|e| panic!("{path} {name}: {e}"));
            assert_eq!(
                job.job_class(),
                case["job_class"].as_str().unwrap(),
                "{path} {name}"
            );
            assert_eq!(
                text(&Value::Array(job.arguments().to_vec())),
                text(&case["expected_args"]),
                "{path} {name}: decoded arguments"
            );
            let unknown: Vec<&str> = job.unknown().iter().map(|u| u.path.as_str()).collect();
            let want: Vec<&str> = case["expected_unknown"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            assert_eq!(unknown, want, "{path} {name}: kept-as-is paths");
            assert_eq!(
                job.has_keywords(),
                case["keywords"] == json!(true),
                "{path} {name}"
            );
            let data = job_data(&payload);
            assert_eq!(
                job.serialized_arguments(),
                data["arguments"].as_array().unwrap().as_slice()
            );
            let m = job.metadata();
            assert_eq!(
                m.job_id.as_deref(),
                data["job_id"].as_str(),
                "{path} {name}"
            );
            assert_eq!(
                m.queue_name.as_deref(),
                case["queue"].as_str(),
                "{path} {name}"
            );
            assert_eq!(m.timezone.as_deref(), data["timezone"].as_str());
            assert_eq!(m.locale.as_deref(), data["locale"].as_str());
            assert_eq!(m.enqueued_at.as_deref(), data["enqueued_at"].as_str());
            let enqueued = m.enqueued_at_time().expect("enqueued_at parses");
            assert!(
                enqueued.timestamp() > 1_700_000_000,
                "{path} {name}: {enqueued}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 79, "{checked} cases");
}

#[test]
fn metadata_of_a_retried_job_and_version_differences() {
    for (path, rails) in FIXTURES {
        let (_, payload, _) = cases(path)
            .into_iter()
            .find(|(n, _, _)| n == "retried_metadata")
            .expect("retried_metadata case");
        let job = ActiveJob::from_payload(&Payload::parse(payload.as_bytes()).unwrap()).unwrap();
        let m = job.metadata();
        assert_eq!(m.executions, 2, "{path}");
        assert_eq!(
            m.exception_executions.get("[RuntimeError]"),
            Some(&json!(2))
        );
        assert_eq!(m.provider_job_id.as_deref(), Some("provider-7"));
        assert_eq!(m.priority, Some(3));
        assert_eq!(m.locale.as_deref(), Some("de"));
        assert_eq!(m.timezone.as_deref(), Some("Eastern Time (US & Canada)"));
        let enqueued_at = m.enqueued_at.as_deref().unwrap();
        if rails < Rails::V7_1 {
            // `Time.now.utc.iso8601`, and no scheduled_at key at all.
            assert_eq!(
                enqueued_at.len(),
                "2026-11-21T19:15:33Z".len(),
                "{enqueued_at}"
            );
            assert_eq!(m.scheduled_at, None);
            assert!(!job.job_data().contains_key("scheduled_at"));
        } else {
            assert_eq!(
                enqueued_at.len(),
                "2026-11-21T19:15:33.123456789Z".len(),
                "{enqueued_at}"
            );
            let at = Utc.with_ymd_and_hms(2026, 11, 21, 19, 16, 33).unwrap()
                + chrono::Duration::milliseconds(500);
            assert_eq!(m.scheduled_at_time(), Some(at), "{path}");
        }
    }
}

fn fixed(s: &str) -> DateTime<FixedOffset> {
    DateTime::parse_from_rfc3339(s).expect("time")
}

fn n(s: &str) -> Number {
    serde_json::from_str(s).expect("number")
}

/// The Rust arguments for the Ruby values of `AJ.cases` (compat-tests/activejob/lib/aj.rb).
fn rust_args(name: &str) -> Option<Vec<Arg>> {
    let sym = Arg::symbol;
    Some(match name {
        "symbol" => vec![sym("sym"), Arg::Array(vec![sym("a"), sym("b")])],
        "symbol_keys" => vec![Arg::Hash {
            entries: vec![
                (Key::Sym("a".into()), json!(1).into()),
                (Key::Str("b".into()), json!(2).into()),
                (Key::Sym("c".into()), Arg::symbol_hash([("d", sym("e"))])),
            ],
            keywords: false,
        }],
        "string_keys" => vec![json!({"x": {"y": [1, {}]}}).into(), json!({}).into()],
        "indifferent" => vec![Arg::indifferent([
            ("x", json!(1).into()),
            ("y", json!([2]).into()),
        ])],
        "keywords" => vec![
            json!(1).into(),
            Arg::Hash {
                entries: vec![
                    (Key::Sym("b".into()), json!(3).into()),
                    (Key::Sym("c".into()), sym("x")),
                    (Key::Str("d".into()), json!(4).into()),
                ],
                keywords: true,
            },
        ],
        "time_utc" => vec![Arg::time_utc(
            Utc.with_ymd_and_hms(2026, 11, 21, 19, 15, 33).unwrap()
                + chrono::Duration::nanoseconds(123_456_789),
        )],
        "time_offset" => vec![
            Arg::time(fixed("2026-11-21T20:15:33+01:00")),
            Arg::time(fixed("2026-01-01T00:00:00-05:30")),
        ],
        "date_time" => vec![Arg::DateTime(fixed("2026-11-21T19:15:33.5+02:00"))],
        "time_with_zone" => vec![
            Arg::TimeWithZone {
                at: fixed("2026-11-21T14:15:33.123456789-05:00"),
                zone: "America/New_York".into(),
            },
            Arg::TimeWithZone {
                at: fixed("2026-06-01T00:00:00Z"),
                zone: "Etc/UTC".into(),
            },
        ],
        "date" => vec![
            Arg::date(NaiveDate::from_ymd_opt(2026, 11, 21)?),
            Arg::date(NaiveDate::from_ymd_opt(1999, 1, 2)?),
        ],
        "big_decimal" => vec![
            Arg::big_decimal("123.45678901234567890123456789"),
            Arg::big_decimal("-0.5"),
        ],
        "duration" => vec![
            Arg::Duration {
                seconds: n("3600"),
                parts: vec![(DurationUnit::Hours, n("1"))],
            },
            Arg::Duration {
                seconds: n("2629748.5"),
                parts: vec![
                    (DurationUnit::Months, n("1")),
                    (DurationUnit::Seconds, n("2.5")),
                ],
            },
            Arg::Duration {
                seconds: n("5400"),
                parts: vec![(DurationUnit::Minutes, n("90"))],
            },
        ],
        "module" => vec![
            Arg::module("EchoJob"),
            Arg::module("Comparable"),
            Arg::module("ActiveSupport::Duration"),
        ],
        "global_id" => vec![
            Arg::global_id("gid://resqapp/User/7"),
            Arg::Array(vec![Arg::global_id("gid://resqapp/User/8")]),
        ],
        "custom_serializer" => {
            let money = |a: i64, b: i64| Arg::Custom {
                serializer: "MoneySerializer".into(),
                fields: Map::from_iter([
                    ("numerator".to_string(), json!(a)),
                    ("denominator".to_string(), json!(b)),
                ]),
            };
            vec![
                money(1, 3),
                Arg::Hash {
                    entries: vec![(Key::Str("price".into()), money(5, 2))],
                    keywords: false,
                },
            ]
        }
        "range" => vec![
            Arg::range(json!(1), json!(10), false),
            Arg::range(
                Arg::date(NaiveDate::from_ymd_opt(2026, 1, 1)?),
                Arg::date(NaiveDate::from_ymd_opt(2026, 2, 1)?),
                true,
            ),
            Arg::range(json!(1), json!(null), false),
        ],
        _ => return None,
    })
}

#[test]
fn rust_args_serialize_exactly_as_activejob() {
    let mut checked = 0;
    for (path, rails) in FIXTURES {
        for (name, payload, _) in cases(path) {
            let Some(args) = rust_args(&name) else {
                continue;
            };
            let ours: Vec<Value> = args
                .iter()
                .map(|a| {
                    a.serialize(rails)
                        .unwrap_or_else(|e| panic!("{path} {name}: {e}"))
                })
                .collect();
            let data = job_data(&payload);
            assert_eq!(
                text(&Value::Array(ours)),
                text(&data["arguments"]),
                "{path} {name}"
            );
            checked += 1;
        }
    }
    // 15 cases in each of four fixtures, plus `range` in the three Rails 7 ones.
    assert_eq!(checked, 15 * 4 + 3);
}

#[test]
fn a_range_cannot_be_written_for_rails_61() {
    let e = Arg::range(json!(1), json!(2), false).serialize(Rails::V6_1);
    assert!(e.is_err());
}

/// Keyword arguments a caller may leave out: a struct read from the argument sequence, its
/// optional trailing field defaulted (what docs/activejob.md recommends over a tuple).
#[test]
fn optional_trailing_keywords_via_serde_defaults() {
    #[derive(serde::Deserialize, PartialEq, Debug)]
    struct Opts {
        notify: bool,
    }
    #[derive(serde::Deserialize, PartialEq, Debug)]
    struct Args(u64, #[serde(default)] Option<Opts>);
    let decode = |args: &[Value]| {
        ActiveJob::from_job_data(
            json!({"job_class": "A", "arguments": args})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap()
    };
    let without = decode(&[json!(7)]);
    let with = decode(&[
        json!(7),
        json!({"notify": true, "_aj_ruby2_keywords": ["notify"]}),
    ]);
    let parse = |j: &ActiveJob| -> Args {
        serde_json::from_value(Value::Array(j.arguments().to_vec())).unwrap()
    };
    assert_eq!(parse(&without), Args(7, None));
    assert_eq!(parse(&with), Args(7, Some(Opts { notify: true })));
}
