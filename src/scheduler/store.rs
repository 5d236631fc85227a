//! The stored schedules, as resque-scheduler's `set_schedule(…, persist: true)` and
//! `remove_schedule` keep them: `HSET`/`HDEL <ns>:persistent_schedules <name>` plus `SADD
//! <ns>:schedules_changed <name>` (so a Ruby master reloads it), one MULTI each (one command
//! after the other on a namespace spread over a Redis Cluster's slots). What
//! `resq schedule list|add|remove` uses.

use super::schedule::Schedule;
use crate::conn::Conn;
use crate::error::{Error, Result};
use crate::keys::Keys;
use chrono_tz::Tz;
use redis::AsyncCommands;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// One stored schedule, for listing.
#[derive(Debug, Clone)]
pub struct StoredSchedule {
    /// Its name.
    pub name: String,
    /// The config as stored (or the text, when it is not a JSON object).
    pub config: Result<Map<String, Value>, String>,
    /// Next due time (epoch s) from resq's fire token, if resq has seen it.
    pub next_due: Option<i64>,
    /// resque-scheduler's `last_enqueued_at` for it.
    pub last_enqueued_at: Option<String>,
}

/// The fields of a new schedule, written in the order resque-scheduler's docs show
/// (`class, queue, args, cron|every, description`).
#[derive(Debug, Clone, Default)]
pub struct NewSchedule {
    /// Job class.
    pub class: String,
    /// Queue.
    pub queue: String,
    /// Positional args.
    pub args: Vec<Value>,
    /// Cron expression (with an optional zone name at the end).
    pub cron: Option<String>,
    /// rufus duration.
    pub every: Option<String>,
    /// Free text.
    pub description: Option<String>,
}

impl NewSchedule {
    /// The stored config object.
    pub fn to_config(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("class".into(), Value::String(self.class.clone()));
        m.insert("queue".into(), Value::String(self.queue.clone()));
        m.insert("args".into(), Value::Array(self.args.clone()));
        if let Some(c) = &self.cron {
            m.insert("cron".into(), Value::String(c.clone()));
        }
        if let Some(e) = &self.every {
            m.insert("every".into(), Value::String(e.clone()));
        }
        if let Some(d) = &self.description {
            m.insert("description".into(), Value::String(d.clone()));
        }
        m
    }
}

/// Every stored schedule, sorted by name.
pub(crate) async fn list<C: redis::aio::ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
) -> Result<Vec<StoredSchedule>> {
    type Raw = Vec<(Vec<u8>, Vec<u8>)>;
    let (stored, tokens, last): (Raw, Raw, Raw) = redis::pipe()
        .hgetall(keys.persistent_schedules())
        .hgetall(keys.schedule_next())
        .hgetall(keys.last_enqueued_at())
        .query_async(con)
        .await?;
    use crate::admin::names::decode_hash;
    let stored = decode_hash(&keys.persistent_schedules(), stored);
    let tokens: HashMap<String, String> = decode_hash(&keys.schedule_next(), tokens);
    let last: HashMap<String, String> = decode_hash(&keys.last_enqueued_at(), last);
    let mut v: Vec<StoredSchedule> = stored
        .into_iter()
        .map(|(name, text)| StoredSchedule {
            config: serde_json::from_str(&text).map_err(|_| text),
            next_due: tokens
                .get(&name)
                .and_then(|t| crate::scripts::texts::parse_schedule_token(t))
                .map(|(due, _)| due),
            last_enqueued_at: last.get(&name).cloned(),
            name,
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(v)
}

/// Stores (or replaces) schedule `name` after checking it parses, and marks it changed.
pub(crate) async fn add(
    con: &mut Conn,
    keys: &Keys,
    name: &str,
    config: &Map<String, Value>,
    default_tz: Tz,
) -> Result<()> {
    if name.is_empty() {
        return Err(Error::Rejected("a schedule needs a name".into()));
    }
    Schedule::from_config(name, config, default_tz)
        .map_err(|e| Error::Rejected(format!("schedule {name}: {e}")))?;
    if !matches!(config.get("queue"), Some(Value::String(q)) if !q.is_empty()) {
        return Err(Error::Rejected(format!(
            "schedule {name}: a queue is required (resq cannot read a Ruby class's @queue)"
        )));
    }
    let text = Value::Object(config.clone()).to_string();
    if keys.is_spread() {
        // Two slots: the schedule first, then the mark that makes schedulers reload it.
        let _: i64 = con.hset(keys.persistent_schedules(), name, &text).await?;
        let _: i64 = con.sadd(keys.schedules_changed(), name).await?;
        return Ok(());
    }
    crate::scripts::Checked::new()
        .hset(&keys.persistent_schedules(), name, text.as_str())
        .sadd(&keys.schedules_changed(), name)
        .run(con)
        .await?;
    Ok(())
}

/// Removes schedule `name` (and resq's token for it); whether it existed.
pub(crate) async fn remove(con: &mut Conn, keys: &Keys, name: &str) -> Result<bool> {
    if keys.is_spread() {
        // Three slots: the schedule, the mark, then resq's token (a token left by a crash is
        // dropped by the next tick, as any token without its schedule).
        let n: u64 = con.hdel(keys.persistent_schedules(), name).await?;
        let _: i64 = con.sadd(keys.schedules_changed(), name).await?;
        let _: i64 = con.hdel(keys.schedule_next(), name).await?;
        return Ok(n > 0);
    }
    let (n, _, _): (u64, u64, u64) = crate::scripts::Checked::new()
        .hdel(&keys.persistent_schedules(), name)
        .sadd(&keys.schedules_changed(), name)
        .hdel(&keys.schedule_next(), name)
        .query(con)
        .await?;
    Ok(n > 0)
}

/// The stored config of `name`, if any.
pub(crate) async fn get(con: &mut Conn, keys: &Keys, name: &str) -> Result<Option<String>> {
    Ok(con.hget(keys.persistent_schedules(), name).await?)
}
