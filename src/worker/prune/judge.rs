//! How a pruner judges a worker: its record read as Ruby's `unregister_worker` reads it, its
//! heartbeat's time, whether its process is alive.

use super::*;

/// A worker record, judged the way Ruby's `unregister_worker` reads it.
pub(super) enum Judged {
    /// No job (no record, or Ruby's empty `{}`).
    Idle,
    /// Ruby's pruner would raise on it: leave it alone.
    Refused(&'static str),
    /// A job, with the class named in Ruby's message.
    Job {
        /// Queue and payload bytes.
        held: HeldJob,
        /// `payload.class`, or Ruby's `<Unknown Job>`.
        class: String,
    },
}

#[derive(Deserialize)]
pub(super) struct PayloadClass {
    #[serde(default)]
    class: Option<Value>,
}

pub(super) fn judge_record(bytes: &[u8]) -> Judged {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Judged::Refused("worker record is not UTF-8 (Ruby's pruner fails on it)");
    };
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return Judged::Refused("worker record is not JSON (Ruby's pruner fails on it)");
    };
    match &value {
        Value::Object(m) if m.is_empty() => return Judged::Idle,
        Value::Object(_) => {}
        _ => {
            return Judged::Refused(
                "worker record is not a JSON object (Ruby's pruner fails on it)",
            )
        }
    }
    let Some(held) = HeldJob::from_record(bytes) else {
        return Judged::Refused(
            "worker record has no object payload or no string queue (Ruby's pruner fails on it)",
        );
    };
    let class = serde_json::from_str::<PayloadClass>(&held.payload)
        .ok()
        .and_then(|p| p.class)
        .map(|c| match c {
            Value::String(s) => s,
            Value::Null => "<Unknown Job>".to_string(),
            other => other.to_string(),
        })
        .unwrap_or_else(|| "<Unknown Job>".to_string());
    Judged::Job { held, class }
}

/// The pid of a resq/Jesque-style pid field `<pid>-<k>`.
pub(super) fn slot_pid(field: &str) -> Option<u32> {
    let (pid, slot) = field.split_once('-')?;
    if slot.is_empty() || !slot.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Whether process `pid` exists on this machine. Only Linux can tell (through `/proc`);
/// elsewhere every process counts as alive, so the dead-local rule never fires.
pub(super) fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        std::path::Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}

/// The instant a heartbeat text stands for, read as Ruby's `Time.parse` reads it, or later:
/// `None` for text Ruby rejects or reads differently (bare digits: epoch seconds crash Ruby,
/// `20261121` is a date to Ruby) and for text resq cannot read. Text without an explicit zone
/// is taken at the latest instant any zone could mean (UTC−12), because Ruby reads it in the
/// pruner's local zone.
pub(super) fn heartbeat_instant(text: &str) -> Option<DateTime<Utc>> {
    let s = text.trim();
    if s.is_empty() || s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let t = time::parse_any(s)?;
    if has_explicit_zone(s) {
        Some(t)
    } else {
        t.checked_add_signed(chrono::Duration::hours(12))
    }
}

/// Whether `s` is one of the shapes whose zone both Ruby and resq read the same way.
pub(super) fn has_explicit_zone(s: &str) -> bool {
    if DateTime::parse_from_rfc3339(s).is_ok() {
        return true;
    }
    for f in [
        "%Y-%m-%dT%H:%M:%S%.f%z",
        "%Y-%m-%d %H:%M:%S%.f %z",
        "%Y/%m/%d %H:%M:%S %z",
    ] {
        if DateTime::<FixedOffset>::parse_from_str(s, f).is_ok() {
            return true;
        }
    }
    let fields: Vec<&str> = s.split_whitespace().collect();
    fields.len() == 3 && matches!(fields[2], "UTC" | "GMT")
}

/// Ruby's rule: `(now - Time.parse(hb)).to_i > prune_after`, with `now` Redis `TIME` in whole
/// seconds. `to_i` truncates toward zero, so this holds once the difference reaches
/// `prune_after + 1` s exactly.
pub(crate) fn expired(heartbeat: &str, now: DateTime<Utc>, prune_after: Duration) -> bool {
    let Some(t) = heartbeat_instant(heartbeat) else {
        return false;
    };
    let now_whole = now.timestamp();
    let diff_us = now_whole
        .saturating_mul(1_000_000)
        .saturating_sub(t.timestamp_micros());
    let limit_us = (prune_after.as_secs() as i64 + 1).saturating_mul(1_000_000);
    diff_us >= limit_us
}
