//! Where limits are kept and what the scripts are given: declarations (`<ns>:resq:limits`,
//! written by workers from their registry) overlaid by operators' overrides
//! (`<ns>:resq:limits:set`), and the JSON the scripts read (the definitions, plus whether each
//! time window is open now and when it next opens).
//!
//! [`read`] reads both hashes and says, per hash, why one cannot be read (a key of another
//! type), and per definition, why one does not parse, each naming its key: a worker's cache
//! (`cache.rs`) then keeps what it last read of that hash or that definition in force, so a
//! broken key never lifts a limit.

use super::{parse_window, Kind, Limit};
use crate::admin::Admin;
use crate::conn::Conn;
use crate::error::Result;
use crate::keys::Keys;
use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The scripts' JSON of the limits stored now, for a script run outside a worker's cache
/// (pruning): what can be read ([`read`], a hash that cannot be read counting as empty); `""`
/// when Redis cannot be read at all, so the script returns shares as for no limit in force.
pub(crate) async fn load_json<C: redis::aio::ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
) -> String {
    match read(con, keys).await {
        Ok(stored) => {
            let texts = |r: Result<Texts, String>| r.unwrap_or_default();
            let (limits, _) = merge_bytes(texts(stored.declared), texts(stored.set));
            script_json(&limits, Utc::now())
        }
        Err(_) => String::new(),
    }
}

/// The definitions of one hash: name → stored text (bytes, so one field that is not UTF-8
/// does not make the whole hash unreadable).
pub(crate) type Texts = BTreeMap<Vec<u8>, Vec<u8>>;

/// What [`read`] found in the two hashes: each hash's definitions, or why it cannot be read
/// (naming its key: `WRONGTYPE at <ns>:resq:limits:set: …`).
#[derive(Debug)]
pub(crate) struct Stored {
    /// `<ns>:resq:limits`.
    pub declared: Result<Texts, String>,
    /// `<ns>:resq:limits:set`.
    pub set: Result<Texts, String>,
}

/// Reads both hashes in one round trip; a hash that cannot be read (a key of another type, a
/// refused permission) is said so in [`Stored`], without failing the other. An error is
/// returned only when Redis cannot be read at all (a dropped connection, a timeout).
pub(crate) async fn read<C: redis::aio::ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
) -> Result<Stored> {
    let (dk, sk) = (keys.limits_declared(), keys.limits_set());
    let mut replies: Vec<redis::RedisResult<Texts>> = redis::pipe()
        .ignore_errors()
        .hgetall(&dk)
        .hgetall(&sk)
        .query_async(con)
        .await?;
    let said = |key: &str, r: Option<redis::RedisResult<Texts>>| match r {
        Some(Ok(t)) => Ok(t),
        Some(Err(e)) => Err(naming(key, &e)),
        None => Err(format!("{key}: no reply")),
    };
    let set = said(&sk, replies.pop());
    let declared = said(&dk, replies.pop());
    Ok(Stored { declared, set })
}

/// `e` in words, naming `key` (a reply that does not name it is prefixed with it).
fn naming(key: &str, e: &redis::RedisError) -> String {
    let d = crate::conn::errors::describe_here(e);
    if d.contains(key) {
        d
    } else {
        format!("{key}: {d}")
    }
}

/// One stored definition read from its text: the limit, or why it cannot be applied.
pub(crate) fn parse(name: &str, text: &[u8]) -> std::result::Result<Limit, String> {
    let l = serde_json::from_slice::<Limit>(text).map_err(|e| e.to_string())?;
    l.validate().map_err(|e| e.to_string())?;
    if l.name != name {
        return Err(format!("stored under {name:?} but named {:?}", l.name));
    }
    Ok(l)
}

/// The limits in force: declarations overlaid by overrides (by name), sorted by name, and the
/// stored texts that could not be read (`name: why`).
pub(crate) async fn load<C: redis::aio::ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
) -> Result<(Vec<Limit>, Vec<String>)> {
    let (declared, set): (BTreeMap<String, String>, BTreeMap<String, String>) = redis::pipe()
        .hgetall(keys.limits_declared())
        .hgetall(keys.limits_set())
        .query_async(con)
        .await?;
    Ok(merge(declared, set))
}

/// The stored declarations overlaid by the stored overrides (name → JSON text each), as
/// [`load`] returns them.
pub(crate) fn merge(
    declared: BTreeMap<String, String>,
    set: BTreeMap<String, String>,
) -> (Vec<Limit>, Vec<String>) {
    let bytes = |m: BTreeMap<String, String>| -> Texts {
        m.into_iter()
            .map(|(k, v)| (k.into_bytes(), v.into_bytes()))
            .collect()
    };
    merge_bytes(bytes(declared), bytes(set))
}

/// [`merge`] of texts as [`read`] returns them.
pub(crate) fn merge_bytes(declared: Texts, set: Texts) -> (Vec<Limit>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut problems = Vec::new();
    for (name, text) in declared.into_iter().chain(set) {
        let name = String::from_utf8_lossy(&name).into_owned();
        match parse(&name, &text) {
            Ok(l) => {
                out.insert(name, l);
            }
            Err(why) => problems.push(format!("{name}: {why}")),
        }
    }
    (out.into_values().collect(), problems)
}

/// Writes a worker's declarations (each replaces the stored declaration of its name;
/// declarations of other services are left alone).
pub(crate) async fn declare(con: &mut Conn, keys: &Keys, limits: &[Limit]) -> Result<()> {
    if limits.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for l in limits {
        l.validate()?;
        pipe.hset(keys.limits_declared(), &l.name, serde_json::to_string(l)?)
            .ignore();
    }
    pipe.query_async::<()>(con).await?;
    Ok(())
}

/// The JSON the scripts read (limits.lua): the definitions and each window's state at `now`.
pub(crate) fn script_json(limits: &[Limit], now: DateTime<Utc>) -> String {
    if limits.is_empty() {
        return String::new();
    }
    let mut open = Map::new();
    let defs: Vec<Value> = limits
        .iter()
        .map(|l| {
            let (limit, interval, sliding) = match &l.kind {
                Kind::Concurrency { limit } => (*limit, 0, false),
                Kind::Rate {
                    limit,
                    interval_ms,
                    sliding,
                } => (*limit, *interval_ms, *sliding),
                Kind::Window { .. } => {
                    let (is_open, next) = window_state(l, now);
                    open.insert(
                        l.name.clone(),
                        json!({"open": is_open, "next": next.map(|t| t.timestamp_millis())}),
                    );
                    (0, 0, false)
                }
            };
            // Only what applies: the scripts read an absent field as the default (no queue, no
            // class, no key, no weights or priorities), and every call decodes this text.
            let mut d = Map::new();
            d.insert("name".into(), json!(l.name));
            d.insert("kind".into(), json!(l.kind.name()));
            d.insert("limit".into(), json!(limit));
            if matches!(l.kind, Kind::Rate { .. }) {
                d.insert("interval_ms".into(), json!(interval));
                d.insert("sliding".into(), json!(sliding));
            }
            for (field, v) in [("queue", &l.queue), ("class", &l.class), ("key", &l.key)] {
                if let Some(v) = v {
                    d.insert(field.into(), json!(v));
                }
            }
            if !l.weights.is_empty() {
                d.insert("weights".into(), json!(l.weights));
            }
            if !l.priority.is_empty() {
                d.insert("priority".into(), json!(l.priority));
            }
            Value::Object(d)
        })
        .collect();
    json!({"defs": defs, "open": open}).to_string()
}

/// Whether the windows of `l` are open at `now`, and when they next open (or, when open, when
/// they next close) — `None` when never.
pub(crate) fn window_state(l: &Limit, now: DateTime<Utc>) -> (bool, Option<DateTime<Utc>>) {
    let Kind::Window { windows, tz } = &l.kind else {
        return (true, None);
    };
    let Ok(tz) = tz.parse::<chrono_tz::Tz>() else {
        return (true, None);
    };
    let parsed: Vec<_> = windows
        .iter()
        .filter_map(|w| parse_window(w).ok())
        .collect();
    let local = now.with_timezone(&tz);
    let minute = local.hour() * 60 + local.minute();
    let applies =
        |days: &Vec<chrono::Weekday>, wd: chrono::Weekday| days.is_empty() || days.contains(&wd);
    let open = parsed
        .iter()
        .any(|(days, from, to)| applies(days, local.weekday()) && (*from..*to).contains(&minute));
    // The next boundary: for a closed limit its next opening, for an open one its closing.
    let mut next: Option<DateTime<Utc>> = None;
    for day in 0..8 {
        let date = local.date_naive() + chrono::Days::new(day);
        for (days, from, to) in &parsed {
            if !applies(days, date.weekday()) {
                continue;
            }
            let edge = if open { *to } else { *from };
            let t = date
                .and_hms_opt(0, 0, 0)
                .map(|d| d + chrono::Duration::minutes(i64::from(edge)));
            let Some(t) = t.and_then(|t| tz.from_local_datetime(&t).earliest()) else {
                continue;
            };
            let t = t.with_timezone(&Utc);
            if t > now && next.is_none_or(|n| t < n) {
                next = Some(t);
            }
        }
    }
    (open, next)
}

impl Admin {
    /// The limits in force (declared by workers, overridden with [`Admin::set_limit`]).
    pub async fn limits(&self) -> Result<Vec<Limit>> {
        Ok(load(&mut self.con(), self.keys()).await?.0)
    }

    /// The stored definitions that cannot be read, each naming its key: a hash of another type
    /// (`WRONGTYPE at <ns>:resq:limits:set: …`), or a definition that does not parse. A worker
    /// keeps what it last read of it in force; a worker that never read it does not apply it
    /// (docs/limits.md, "Bad input"). `resq limits list` prints them as warnings.
    pub async fn limit_problems(&self) -> Result<Vec<String>> {
        let stored = read(&mut self.con(), self.keys()).await?;
        let mut out = Vec::new();
        for (key, r) in [
            (self.keys().limits_declared(), stored.declared),
            (self.keys().limits_set(), stored.set),
        ] {
            match r {
                Err(why) => out.push(why),
                Ok(texts) => {
                    for (name, text) in texts {
                        let name = String::from_utf8_lossy(&name);
                        if let Err(why) = parse(&name, &text) {
                            out.push(format!("limit {name:?} in {key} cannot be read ({why})"));
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Sets `limit` fleet-wide, over any declaration of its name, until
    /// [`Admin::clear_limit`]; workers apply it within a reserve or two. When it changes what
    /// the limit holds (its queue, class, key, weights, priorities or kind), the jobs it held
    /// go back to their queues (1,000 in this call, the rest within seconds), where they are
    /// judged again under the new definition.
    pub async fn set_limit(&self, limit: &Limit) -> Result<()> {
        crate::error::not_spread(self.keys(), "limits")?;
        limit.validate()?;
        self.change_limit(&limit.name, Some(limit), false).await?;
        Ok(())
    }

    /// Removes the override of limit `name` (its declaration, if any, applies again), or with
    /// `declaration` also the declaration (until a worker declaring it starts). Returns whether
    /// anything was removed. The jobs a limit no longer in force held, or held where the
    /// declaration does not, go back to their queues as with [`Admin::set_limit`].
    pub async fn clear_limit(&self, name: &str, declaration: bool) -> Result<bool> {
        crate::error::not_spread(self.keys(), "limits")?;
        Ok(self.change_limit(name, None, declaration).await? > 0)
    }

    /// Writes the override of `name` (`None`: removes it, and with `declaration` the
    /// declaration too) in one step with the re-judging of its held jobs when what it holds
    /// changes (limits_set.lua). Returns how many definitions were removed.
    async fn change_limit(
        &self,
        name: &str,
        limit: Option<&Limit>,
        declaration: bool,
    ) -> Result<u64> {
        let keys = self.keys();
        let mut con = self.con();
        let (declared, set): (Option<String>, Option<String>) = redis::pipe()
            .hget(keys.limits_declared(), name)
            .hget(keys.limits_set(), name)
            .query_async(&mut con)
            .await?;
        let parsed = |t: &Option<String>| t.as_deref().and_then(|t| parse(name, t.as_bytes()).ok());
        let before = parsed(&set).or_else(|| parsed(&declared));
        let after = match limit {
            Some(l) => Some(l.clone()),
            None if declaration => None,
            None => parsed(&declared),
        };
        let rejudge = match (&before, &after) {
            (Some(b), Some(a)) => !b.holds_alike(a),
            (Some(_), None) => true,
            // A definition that could not be read held jobs that no reading can judge.
            (None, _) => set.is_some() || declared.is_some(),
        };
        let text = match limit {
            Some(l) => serde_json::to_string(l)?,
            None => String::new(),
        };
        let (removed, _moved, _pending): (u64, u64, u64) = crate::scripts::LimitsSet {
            set: keys.limits_set(),
            declared: keys.limits_declared(),
            rejudge: keys.limits_rejudge(),
            prefix: keys.prefix(),
            name,
            text,
            declaration: if declaration { "1" } else { "0" },
            rejudge_held: if rejudge { "1" } else { "0" },
            budget: 1000,
            now_ms: chrono::Utc::now().timestamp_millis(),
        }
        .call()
        .invoke_async(&mut con)
        .await?;
        Ok(removed)
    }

    /// Pauses (or resumes) `queue` for every resq process: its jobs stay in it, untaken. Ruby,
    /// Jesque and node-resque workers do not look (docs/limits.md).
    pub async fn pause_queue(&self, queue: &str, paused: bool) -> Result<()> {
        let cmd = if paused { "SADD" } else { "SREM" };
        let _: () = redis::cmd(cmd)
            .arg(self.keys().paused_queues())
            .arg(queue)
            .query_async(&mut self.con())
            .await?;
        Ok(())
    }

    /// The queues paused with [`Admin::pause_queue`], sorted.
    pub async fn paused_queues(&self) -> Result<Vec<String>> {
        let mut v: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.keys().paused_queues())
            .query_async(&mut self.con())
            .await?;
        v.sort();
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::TimeWindow;

    #[test]
    fn windows_know_when_they_open_and_close() {
        let l = Limit::window(
            "office",
            vec![TimeWindow {
                days: vec!["mon".into(), "tue".into()],
                from: "09:00".into(),
                to: "17:00".into(),
            }],
            "Europe/Paris",
        )
        .class("A");
        // Monday 2026-11-23 07:30 UTC = 08:30 in Paris: closed, opens at 08:00 UTC.
        let t = Utc.with_ymd_and_hms(2026, 11, 23, 7, 30, 0).unwrap();
        let (open, next) = window_state(&l, t);
        assert!(!open);
        assert_eq!(
            next,
            Some(Utc.with_ymd_and_hms(2026, 11, 23, 8, 0, 0).unwrap())
        );
        // 12:00 UTC: open until 16:00 UTC.
        let t = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
        assert_eq!(
            window_state(&l, t),
            (
                true,
                Some(Utc.with_ymd_and_hms(2026, 11, 23, 16, 0, 0).unwrap())
            )
        );
        // Tuesday evening: next is Monday.
        let t = Utc.with_ymd_and_hms(2026, 11, 24, 20, 0, 0).unwrap();
        assert_eq!(
            window_state(&l, t),
            (
                false,
                Some(Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap())
            )
        );
        let j: Value = serde_json::from_str(&script_json(&[l], t)).unwrap();
        assert_eq!(j["open"]["office"]["open"], false);
    }
}
