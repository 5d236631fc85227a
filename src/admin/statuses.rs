//! resque-status's job statuses, read as its web tab reads them, and its kill switch.
//!
//! Layout (resque-status 0.5.0; anchors §1, fixtures `resque-status/`): `<ns>:_statuses` is a
//! ZSET of uuids scored by creation time (epoch s), `<ns>:status:<uuid>` the JSON status
//! (`time`, `status` ∈ queued|working|completed|failed|killed, `uuid`, `options`, `name`,
//! `message`, `num`, `total`, and any keys the job added), `<ns>:_kill` the SET of uuids asked
//! to stop. A page is `ZREVRANGE` (newest first) plus one `MGET`, as resque-status's own tab
//! does; percent complete is computed as it computes it (completed 100, queued 0, otherwise
//! `num / total`); only queued and working jobs are killable, and killing is `SADD _kill`
//! (the job stops at its next `at`/`tick`).

use super::Admin;
use crate::error::Result;
use serde_json::{Map, Value};

/// One status.
#[derive(Debug, Clone)]
pub struct StatusRow {
    /// The uuid.
    pub uuid: String,
    /// Creation time (epoch s): the status's `time`, or the zset score when it has none.
    pub time: Option<i64>,
    /// `status`, or `None` when the status key is gone (expired) or unreadable.
    pub status: Option<String>,
    /// `name`.
    pub name: Option<String>,
    /// `message`.
    pub message: Option<String>,
    /// Percent complete, as resque-status computes it.
    pub pct_complete: Option<f64>,
    /// Whether it may be killed (queued or working).
    pub killable: bool,
    /// Whether its uuid is in `_kill`.
    pub kill_requested: bool,
    /// The other fields (options, num, total, custom keys), as JSON.
    pub extra: Map<String, Value>,
}

/// A page of statuses, newest first.
#[derive(Debug, Clone)]
pub struct StatusPage {
    /// Members of `_statuses`.
    pub total: usize,
    /// The rows.
    pub rows: Vec<StatusRow>,
}

impl Admin {
    /// Statuses `offset .. offset + limit`, newest first.
    pub async fn statuses(&self, offset: usize, limit: usize) -> Result<StatusPage> {
        let mut con = self.con();
        let k = self.keys();
        let (total, members): (usize, Vec<(String, f64)>) = redis::pipe()
            .zcard(k.resque_statuses())
            .zrevrange_withscores(
                k.resque_statuses(),
                offset as isize,
                (offset + limit.max(1) - 1) as isize,
            )
            .query_async(&mut con)
            .await?;
        let rows = self.status_rows(members).await?;
        Ok(StatusPage { total, rows })
    }

    /// The status of `uuid`, if it is listed or stored.
    pub async fn status(&self, uuid: &str) -> Result<Option<StatusRow>> {
        let mut con = self.con();
        let score: Option<f64> = redis::cmd("ZSCORE")
            .arg(self.keys().resque_statuses())
            .arg(uuid)
            .query_async(&mut con)
            .await?;
        let mut rows = self
            .status_rows(vec![(uuid.to_string(), score.unwrap_or(f64::NAN))])
            .await?;
        Ok(rows.pop().filter(|r| score.is_some() || r.status.is_some()))
    }

    /// Asks job `uuid` to stop (`SADD <ns>:_kill`), as resque-status's `Hash.kill` does.
    /// Returns whether it was newly asked.
    pub async fn kill_status(&self, uuid: &str) -> Result<bool> {
        let mut con = self.con();
        let n: i64 = redis::cmd("SADD")
            .arg(self.keys().resque_status_kill())
            .arg(uuid)
            .query_async(&mut con)
            .await?;
        Ok(n > 0)
    }

    async fn status_rows(&self, members: Vec<(String, f64)>) -> Result<Vec<StatusRow>> {
        if members.is_empty() {
            return Ok(Vec::new());
        }
        let mut con = self.con();
        let k = self.keys();
        let keys: Vec<String> = members.iter().map(|(u, _)| k.resque_status(u)).collect();
        let mut kill = redis::cmd("SMISMEMBER");
        kill.arg(k.resque_status_kill());
        for (u, _) in &members {
            kill.arg(u);
        }
        let (values, killed): (Vec<Option<String>>, Vec<bool>) = redis::pipe()
            .cmd("MGET")
            .arg(&keys)
            .add_command(kill)
            .query_async(&mut con)
            .await?;
        Ok(members
            .into_iter()
            .zip(values)
            .enumerate()
            .map(|(i, ((uuid, score), value))| {
                let mut row = read(uuid, value.as_deref());
                if row.time.is_none() && score.is_finite() {
                    row.time = Some(score as i64);
                }
                row.kill_requested = killed.get(i).copied().unwrap_or(false);
                row
            })
            .collect())
    }
}

/// A status row from its stored JSON (`None`: key gone).
pub(crate) fn read(uuid: String, json: Option<&str>) -> StatusRow {
    let mut obj = json
        .and_then(|j| serde_json::from_str::<Value>(j).ok())
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default();
    let mut take = |name: &str| obj.remove(name);
    let as_text = |v: Option<Value>| match v {
        Some(Value::String(s)) => Some(s),
        Some(Value::Null) | None => None,
        Some(other) => Some(other.to_string()),
    };
    let time = take("time").and_then(|v| v.as_f64()).map(|t| t as i64);
    let status = as_text(take("status"));
    let name = as_text(take("name"));
    let message = as_text(take("message"));
    take("uuid");
    let num = obj.get("num").and_then(Value::as_f64);
    let total = obj.get("total").and_then(Value::as_f64);
    let pct_complete = match status.as_deref() {
        Some("completed") => Some(100.0),
        Some("queued") => Some(0.0),
        Some(_) => match (num, total) {
            (Some(n), Some(t)) if t > 0.0 => Some((n / t * 100.0).clamp(0.0, 100.0)),
            _ => None,
        },
        None => None,
    };
    let killable = matches!(status.as_deref(), Some("queued" | "working"));
    StatusRow {
        uuid,
        time,
        status,
        name,
        message,
        pct_complete,
        killable,
        kill_requested: false,
        extra: obj,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_working_status_as_resque_status_does() {
        // fixtures/resque-status/02_working.json
        let json = r#"{"time":1795495079,"status":"working","uuid":"ba69034b39c05d28a5403ac10e276e79","options":{"num":10},"name":"MyStatusJob({\"num\"=>10})","num":3,"total":10,"message":"msg"}"#;
        let r = read("ba69034b39c05d28a5403ac10e276e79".into(), Some(json));
        assert_eq!(r.status.as_deref(), Some("working"));
        assert_eq!(r.pct_complete, Some(30.0));
        assert!(r.killable);
        assert_eq!(r.time, Some(1_795_495_079));
        assert_eq!(r.message.as_deref(), Some("msg"));
        assert!(r.extra.contains_key("options"));
        assert!(!r.extra.contains_key("uuid"));
    }

    #[test]
    fn terminal_and_missing_statuses() {
        let r = read(
            "u".into(),
            Some(r#"{"status":"completed","message":"done"}"#),
        );
        assert_eq!(r.pct_complete, Some(100.0));
        assert!(!r.killable);
        let r = read("u".into(), None);
        assert_eq!(r.status, None);
        assert!(!r.killable);
        let r = read("u".into(), Some(r#"{"status":"failed","num":1,"total":0}"#));
        assert_eq!(r.pct_complete, None);
    }
}
