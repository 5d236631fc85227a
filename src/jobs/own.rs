//! resq's own record of a tracked job, `<ns>:resq:job:<id>`: a hash whose fields the moves of
//! the job write (the library's `record.lua` names them), read into a [`JobStatus`]. Any bytes
//! in any field read: a field that does not hold what it should is left out and named in
//! [`JobStatus::unreadable`], never an error.

use super::state::{number, pct, BadField, Event, JobStatus, State};
use super::JobId;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

/// The fields of a record, by name.
struct Fields<'a> {
    all: &'a [(String, Vec<u8>)],
    bad: Vec<BadField>,
}

impl<'a> Fields<'a> {
    fn raw(&self, k: &str) -> Option<&'a [u8]> {
        self.all
            .iter()
            .find(|(f, _)| f == k)
            .map(|(_, v)| v.as_slice())
    }

    /// A text field (lossy when it is not UTF-8, which is named).
    fn text(&mut self, k: &str) -> Option<String> {
        let v = self.raw(k)?;
        match std::str::from_utf8(v) {
            Ok(t) => Some(t.to_string()),
            Err(_) => {
                self.bad.push(BadField::new(k, v));
                Some(String::from_utf8_lossy(v).into_owned())
            }
        }
    }

    /// A time field (epoch ms).
    fn ms(&mut self, k: &str) -> Option<DateTime<Utc>> {
        let v = self.raw(k)?;
        let t = std::str::from_utf8(v)
            .ok()
            .and_then(|t| t.trim().parse::<f64>().ok())
            .filter(|n| n.is_finite())
            .and_then(|n| DateTime::from_timestamp_millis(n as i64));
        if t.is_none() {
            self.bad.push(BadField::new(k, v));
        }
        t
    }

    /// A JSON field (a text that is no JSON reads as that text, and is named).
    fn json(&mut self, k: &str) -> Option<Value> {
        let v = self.raw(k)?;
        match serde_json::from_slice::<Value>(v) {
            Ok(j) => Some(j),
            Err(_) => {
                self.bad.push(BadField::new(k, v));
                Some(Value::String(String::from_utf8_lossy(v).into_owned()))
            }
        }
    }

    /// A progress number (JSON: a number, a numeric string or null).
    fn progress(&mut self, k: &str) -> Option<f64> {
        let v = self.json(k)?;
        match number(&v) {
            Ok(n) => n,
            Err(()) => {
                let raw = self.raw(k).unwrap_or_default();
                if !self.bad.iter().any(|b| b.field == k) {
                    self.bad.push(BadField::new(k, raw));
                }
                None
            }
        }
    }
}

impl JobStatus {
    /// resq's own record of job `id`, from its hash fields (any bytes: a field that does not
    /// read as what it should is left out and named in [`JobStatus::unreadable`], never an
    /// error).
    pub fn from_fields(id: &JobId, fields: &[(String, Vec<u8>)]) -> JobStatus {
        let mut f = Fields {
            all: fields,
            bad: Vec::new(),
        };
        let state = match f.raw("state") {
            None => {
                f.bad.push(BadField::absent("state"));
                None
            }
            Some(v) => {
                let s = std::str::from_utf8(v).ok().and_then(State::parse);
                if s.is_none() {
                    f.bad.push(BadField::new("state", v));
                }
                s
            }
        }
        .unwrap_or(State::Queued);
        let status = state.resque_status().to_string();
        let num = f.progress("p.num");
        let total = f.progress("p.total");
        let message = f.json("p.message").and_then(|m| match m {
            Value::String(s) => Some(s),
            Value::Null => None,
            other => Some(other.to_string()),
        });
        let custom = fields
            .iter()
            .filter_map(|(k, v)| {
                let k = k.strip_prefix("p.")?;
                if ["num", "total", "message"].contains(&k) {
                    return None;
                }
                let t = String::from_utf8_lossy(v).into_owned();
                Some((
                    k.to_string(),
                    serde_json::from_str(&t).unwrap_or(Value::String(t)),
                ))
            })
            .collect();
        let class = f.text("class");
        let enqueued_at = f.ms("enqueued_at");
        let attempts = f.raw("attempts").and_then(|v| {
            let n = std::str::from_utf8(v)
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok());
            if n.is_none() {
                f.bad.push(BadField::new("attempts", v));
            }
            n
        });
        let stop_requested = f.ms("kill").is_some() && !state.is_final();
        let history = history(fields, &mut f.bad);
        JobStatus {
            id: id.clone(),
            state,
            statused: false,
            name: class.clone(),
            message,
            num,
            total,
            pct_complete: pct(&status, num, total),
            time: enqueued_at.map(|t| t.timestamp()),
            options: None,
            result: f.json("result"),
            queue: f.text("queue"),
            class,
            worker: f.text("worker"),
            attempts: attempts.unwrap_or(0),
            tags: f
                .text("tags")
                .map(|t| t.split_whitespace().map(String::from).collect())
                .unwrap_or_default(),
            key: f.text("key").filter(|k| !k.is_empty()),
            enqueued_at,
            due_at: f.ms("due_at"),
            started_at: f.ms("started_at"),
            finished_at: f.ms("ended_at"),
            error: f.text("error"),
            stop_requested,
            history,
            custom,
            status,
            unreadable: f.bad,
        }
    }
}

/// A record's history, from its fields (`enqueued_at`, `a<n>.moved`, `a<n>.start`, `a<n>.end`,
/// `cancelled_at`), oldest first; fields that do not read are added to `bad`. The enqueue is
/// `scheduled` for a job enqueued with a delay (moved before its first attempt, or due and
/// not started yet).
fn history(fields: &[(String, Vec<u8>)], bad: &mut Vec<BadField>) -> Vec<Event> {
    let has = |k: &str| fields.iter().any(|(f, _)| f == k);
    let delayed = has("a1.moved") || (has("due_at") && !has("a1.start"));
    let mut out: Vec<(i64, usize, Event)> = Vec::new();
    let mut push = |ms: i64, order: usize, event: &str, extra: Map<String, Value>| {
        out.push((
            ms,
            order,
            Event {
                event: event.to_string(),
                at: DateTime::from_timestamp_millis(ms),
                fields: extra,
            },
        ));
    };
    let first = |t: &str| {
        t.split(' ')
            .next()
            .and_then(|x| x.trim().parse::<i64>().ok())
    };
    for (f, v) in fields {
        let t = String::from_utf8_lossy(v);
        let mut extra = Map::new();
        let (ms, order, event) = if f == "enqueued_at" {
            (
                first(&t),
                0,
                if delayed { "scheduled" } else { "enqueued" }.to_string(),
            )
        } else if f == "cancelled_at" {
            (first(&t), usize::MAX, "cancelled".to_string())
        } else if let Some((n, what)) = f.strip_prefix('a').and_then(|r| r.split_once('.')) {
            let Ok(n) = n.parse::<usize>() else { continue };
            match what {
                "moved" => (first(&t), n * 3, "moved".to_string()),
                "start" => {
                    let mut parts = t.splitn(2, ' ');
                    let ms = parts.next().and_then(|x| x.parse::<i64>().ok());
                    if let Some(w) = parts.next() {
                        extra.insert("worker".into(), Value::String(w.to_string()));
                    }
                    (ms, n * 3 + 1, "started".to_string())
                }
                "end" => {
                    let mut parts = t.splitn(3, ' ');
                    let event = parts.next().unwrap_or("").to_string();
                    let ms = parts.next().and_then(|x| x.parse::<i64>().ok());
                    if let Some(e) = parts.next() {
                        extra.insert("error".into(), Value::String(e.to_string()));
                    }
                    (ms, n * 3 + 2, event)
                }
                _ => continue,
            }
        } else {
            continue;
        };
        match ms {
            Some(ms) if !event.is_empty() => push(ms, order, &event, extra),
            // `enqueued_at` and `cancelled_at` are named once, by the fields they are.
            _ if f == "enqueued_at" || f == "cancelled_at" => {}
            _ => bad.push(BadField::new(f, v)),
        }
    }
    out.sort_by_key(|(ms, order, _)| (*ms, *order));
    out.into_iter().map(|(_, _, e)| e).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(k: &str, v: &[u8]) -> (String, Vec<u8>) {
        (k.to_string(), v.to_vec())
    }

    #[test]
    fn reads_resqs_own_records_whatever_their_fields_hold() {
        let id = JobId::parse("ba69034b39c05d28a5403ac10e276e79").unwrap();
        let fields = vec![
            f("state", b"retrying"),
            f("class", b"Export"),
            f("queue", b"q"),
            f("enqueued_at", b"1795495079000"),
            f("due_at", b"1795495090000"),
            f("attempts", b"2"),
            f("tags", b"a b"),
            f("a1.start", b"1795495079100 host~resq:1-0:q"),
            f("a1.end", b"retrying 1795495079200 boom: it broke"),
            f("a2.moved", b"1795495079900"),
            f("a2.start", b"1795495080000 host~resq:1-0:q"),
            f("p.num", b"3"),
            f("p.total", b"4"),
            f("p.message", b"\"half\""),
            f("p.rows", b"[1,2]"),
            f("result", b"{\"ok\":true}"),
            f("kill", b"1795495080100"),
        ];
        let s = JobStatus::from_fields(&id, &fields);
        assert_eq!(s.state, State::Retrying);
        assert!(!s.statused && s.stop_requested);
        assert_eq!(s.attempts, 2);
        assert_eq!(s.tags, ["a", "b"]);
        assert_eq!(s.num, Some(3.0));
        assert_eq!(s.message.as_deref(), Some("half"));
        assert_eq!(s.custom["rows"], serde_json::json!([1, 2]));
        assert_eq!(s.result, Some(serde_json::json!({"ok": true})));
        assert_eq!(s.due_at.map(|t| t.timestamp()), Some(1795495090));
        assert!(s.unreadable.is_empty(), "{:?}", s.unreadable);
        let events: Vec<&str> = s.history.iter().map(|e| e.event.as_str()).collect();
        assert_eq!(
            events,
            ["enqueued", "started", "retrying", "moved", "started"]
        );
        assert_eq!(s.history[2].fields["error"], "boom: it broke");
    }

    #[test]
    fn a_delayed_enqueue_is_scheduled() {
        let id = JobId::new();
        let fields = vec![
            f("state", b"completed"),
            f("enqueued_at", b"1000"),
            f("due_at", b"5000"),
            f("a1.moved", b"5001"),
            f("a1.start", b"5002 w"),
            f("a1.end", b"completed 5003"),
        ];
        let s = JobStatus::from_fields(&id, &fields);
        let events: Vec<&str> = s.history.iter().map(|e| e.event.as_str()).collect();
        assert_eq!(events, ["scheduled", "moved", "started", "completed"]);
        assert!(!s.stop_requested);
    }

    #[test]
    fn garbage_in_any_field_is_named_never_an_error() {
        let id = JobId::new();
        let junk = vec![
            f("state", b"\xff"),
            f("attempts", b"-1"),
            f("a1.end", b"x"),
            f("class", b"Ex\xfeport"),
            f("p.num", b"null"),
            f("p.total", b"[1]"),
            f("result", b"{not json"),
            f("enqueued_at", b"yesterday"),
        ];
        let s = JobStatus::from_fields(&id, &junk);
        assert_eq!(s.state, State::Queued);
        assert!(!s.state_readable());
        assert_eq!(s.attempts, 0);
        assert!(s.history.is_empty());
        assert_eq!(s.num, None);
        assert_eq!(s.class.as_deref(), Some("Ex\u{fffd}port"));
        assert_eq!(s.result, Some(Value::String("{not json".into())));
        let mut bad: Vec<&str> = s.unreadable.iter().map(|b| b.field.as_str()).collect();
        bad.sort();
        assert_eq!(
            bad,
            [
                "a1.end",
                "attempts",
                "class",
                "enqueued_at",
                "p.total",
                "result",
                "state"
            ]
        );
        // No state at all.
        let s = JobStatus::from_fields(&id, &[f("class", b"A")]);
        assert!(!s.state_readable());
        assert_eq!(s.unreadable[0].to_string(), "state holds (absent)");
    }
}
