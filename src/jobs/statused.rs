//! A resque-status job's record, `<ns>:status:<id>`: resque-status's own JSON text (which Ruby
//! reads and writes too), read into a [`JobStatus`]. A member that does not hold what
//! resque-status writes there is left out and named in [`JobStatus::unreadable`].

use super::state::{number, pct, BadField, JobStatus, State};
use super::JobId;
use serde_json::{Map, Value};

/// Members of a resque-status record that [`JobStatus`] reads itself.
const KNOWN: &[&str] = &[
    "time", "status", "uuid", "options", "name", "num", "total", "message", "result",
];

impl JobStatus {
    /// A resque-status record's text for job `id`; `None` when it is not a JSON object.
    pub fn parse(id: &JobId, text: &str) -> Option<JobStatus> {
        let obj: Map<String, Value> = serde_json::from_str(text).ok()?;
        let mut bad = Vec::new();
        let member = |k: &str| (k.to_string(), obj.get(k).cloned());
        let bad_member = |k: &str, v: &Value| BadField::new(k, v.to_string().as_bytes());
        let (state, status) = match member("status") {
            (_, Some(Value::String(s))) => match s.as_str() {
                "queued" => (Some(State::Queued), s),
                "working" => (Some(State::Working), s),
                "completed" => (Some(State::Completed), s),
                "failed" => (Some(State::Failed), s),
                "killed" => (Some(State::Killed), s),
                _ => {
                    bad.push(bad_member("status", &Value::String(s.clone())));
                    (None, s)
                }
            },
            (k, Some(v)) => {
                bad.push(bad_member(&k, &v));
                (None, String::new())
            }
            (k, None) => {
                bad.push(BadField::absent(&k));
                (None, String::new())
            }
        };
        let mut num_of = |k: &str| match obj.get(k) {
            None => None,
            Some(v) => number(v).unwrap_or_else(|()| {
                bad.push(bad_member(k, v));
                None
            }),
        };
        let num = num_of("num");
        let total = num_of("total");
        let time = match obj.get("time") {
            None | Some(Value::Null) => None,
            Some(v) => {
                let t = number(v).ok().flatten();
                if t.is_none() {
                    bad.push(bad_member("time", v));
                }
                t.map(|t| t as i64)
            }
        };
        let mut text_of = |k: &str| match obj.get(k) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => {
                bad.push(bad_member(k, v));
                Some(v.to_string())
            }
        };
        let name = text_of("name");
        let message = text_of("message");
        let custom = obj
            .iter()
            .filter(|(k, _)| !KNOWN.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let state = state.unwrap_or(State::Queued);
        let status = if status.is_empty() {
            state.resque_status().to_string()
        } else {
            status
        };
        Some(JobStatus {
            id: id.clone(),
            state,
            statused: true,
            message,
            num,
            total,
            pct_complete: pct(&status, num, total),
            time,
            options: obj.get("options").filter(|o| !o.is_null()).cloned(),
            result: obj.get("result").cloned(),
            queue: None,
            class: name
                .as_deref()
                .and_then(|n| n.split('(').next())
                .filter(|c| !c.is_empty())
                .map(String::from),
            name,
            worker: None,
            attempts: 0,
            tags: Vec::new(),
            key: None,
            enqueued_at: None,
            due_at: None,
            started_at: None,
            finished_at: None,
            error: None,
            stop_requested: false,
            history: Vec::new(),
            custom,
            status,
            unreadable: bad,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_resque_status_records() {
        let id = JobId::parse("ba69034b39c05d28a5403ac10e276e79").unwrap();
        let ruby = r#"{"time":1795495079,"status":"working","uuid":"ba69034b39c05d28a5403ac10e276e79","options":{"num":10},"name":"MyStatusJob({\"num\"=>10})","num":3,"total":10,"message":"msg","custom_key":"v"}"#;
        let s = JobStatus::parse(&id, ruby).unwrap();
        assert_eq!(s.state, State::Working);
        assert!(s.statused && s.unreadable.is_empty());
        assert_eq!(s.pct_complete, 30.0);
        assert_eq!(s.time, Some(1795495079));
        assert_eq!(s.class.as_deref(), Some("MyStatusJob"));
        assert_eq!(s.custom["custom_key"], "v");
        assert!(JobStatus::parse(&id, "[1]").is_none());
        assert!(JobStatus::parse(&id, "null").is_none());
        let killed = r#"{"time":1,"status":"killed"}"#;
        assert_eq!(JobStatus::parse(&id, killed).unwrap().state, State::Killed);
    }

    #[test]
    fn members_that_hold_the_wrong_thing_are_named() {
        let id = JobId::new();
        let s = JobStatus::parse(
            &id,
            r#"{"time":"soon","status":null,"num":"x","total":null,"name":5,"message":null}"#,
        )
        .unwrap();
        assert!(!s.state_readable());
        assert_eq!((s.num, s.total, s.time), (None, None, None));
        assert_eq!(s.name.as_deref(), Some("5"));
        let bad: Vec<String> = s.unreadable.iter().map(|b| b.to_string()).collect();
        assert_eq!(
            bad,
            [
                "status holds \"null\"",
                "num holds \"\\\"x\\\"\"",
                "time holds \"\\\"soon\\\"\"",
                "name holds \"5\""
            ]
        );
        let s = JobStatus::parse(&id, r#"{"status":"lost"}"#).unwrap();
        assert!(!s.state_readable());
        assert_eq!(s.status, "lost");
    }
}
