//! `resq job show`'s text: one tracked job's whole record, for people — state, where its record
//! is and of which kind, class, queue, worker, attempts, times, progress, result, error, tags,
//! job key, options, custom fields, fields that could not be read, its workflow (what it waits
//! for, its policy, batch, parent) and its history.

use crate::jobs::JobStatus;
use crate::workflows::JobWorkflow;
use chrono::{DateTime, Utc};
use serde_json::Value;

/// The label column's width.
const W: usize = 13;

/// `t` as `2026-11-24 08:00:01.000 UTC (5m12s ago)` (or `… (in 5m)` for a time to come).
fn at(now: DateTime<Utc>, t: Option<DateTime<Utc>>) -> String {
    match t {
        Some(t) => {
            let secs = (now - t).num_milliseconds() as f64 / 1000.0;
            let rel = if secs >= 0.0 {
                format!("{} ago", crate::human::age(Some(secs)))
            } else {
                format!("in {}", crate::human::age(Some(-secs)))
            };
            format!("{} ({rel})", t.format("%Y-%m-%d %H:%M:%S%.3f UTC"))
        }
        None => "-".into(),
    }
}

/// A JSON value as text: a string as it is, anything else as JSON.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `v` as indented JSON, its continuation lines indented by the label width.
fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v)
        .unwrap_or_else(|_| v.to_string())
        .replace('\n', &format!("\n{}", " ".repeat(W)))
}

/// A job's workflow, for people: the rows after its record's.
fn workflow(s: &JobStatus, wf: &JobWorkflow, now: DateTime<Utc>) -> Vec<String> {
    let pad = " ".repeat(W);
    let mut out = Vec::new();
    if wf.deps_total > 0 {
        let left = match wf.deps_left {
            Some(n) => format!("; its record counts {n} left"),
            None => String::new(),
        };
        let read = if wf.deps.len() < wf.deps_total {
            format!(" (the first {} read)", wf.deps.len())
        } else {
            String::new()
        };
        out.push(format!(
            "{:<W$}{} job{}, {} not ended{read}{left}",
            "waits for",
            wf.deps_total,
            if wf.deps_total == 1 { "" } else { "s" },
            wf.deps_unended,
        ));
        let width = wf.deps.iter().map(|d| d.id.len()).max().unwrap_or(0);
        for d in &wf.deps {
            let st = d
                .state
                .as_deref()
                .unwrap_or("(no record: ended, expired or purged)");
            let ended = if d.ended { "ended" } else { "not ended" };
            out.push(format!("{pad}{:<width$}  {st} ({ended})", d.id));
        }
        out.push(format!(
            "{:<W$}if one did not complete: {}",
            "policy",
            wf.if_dep_failed.as_deref().unwrap_or("run")
        ));
        if let Some(d) = &wf.dep_failed {
            out.push(format!("{:<W$}{d} did not complete", "dep failed"));
        }
        if wf.released_at.is_some() {
            out.push(format!("{:<W$}{}", "released", at(now, wf.released_at)));
        }
        if wf.stranded(s.state) {
            out.push(format!(
                "{pad}STRANDED: every job it waits for has ended, yet its record says waiting"
            ));
        }
    }
    if let Some(b) = &wf.batch {
        let phase = wf.batch_phase.as_deref().unwrap_or("gone: no such batch");
        out.push(format!("{:<W$}{b} ({phase})", "batch"));
    }
    if let Some(p) = &wf.parent {
        let st = wf.parent_state.as_deref().unwrap_or("no record");
        out.push(format!("{:<W$}{p} ({st})", "parent"));
    }
    if wf.waiters > 0 {
        out.push(format!(
            "{:<W$}{} job(s) wait for it",
            "waiters", wf.waiters
        ));
    }
    if wf.children > 0 {
        out.push(format!("{:<W$}{}", "children", wf.children));
    }
    for u in &wf.unreadable {
        out.push(format!("{:<W$}{u}", "unreadable"));
    }
    out
}

/// The whole record and its workflow, for people; `record` is the key it was read from.
pub(crate) fn show_with(
    s: &JobStatus,
    wf: Option<&JobWorkflow>,
    record: &str,
    now: DateTime<Utc>,
) -> String {
    let text = show(s, record, now);
    let Some(wf) = wf.filter(|w| !w.is_empty()) else {
        return text;
    };
    // The workflow goes before the history.
    let rows = workflow(s, wf, now).join("\n");
    match text.find("\nhistory") {
        Some(i) => format!("{}\n{rows}{}", &text[..i], &text[i..]),
        None => format!("{text}\n{rows}"),
    }
}

/// The whole record, for people; `record` is the key it was read from.
pub(crate) fn show(s: &JobStatus, record: &str, now: DateTime<Utc>) -> String {
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let progress = match (s.num, s.total) {
        (Some(n), Some(t)) => format!("{:.0}% ({n} of {t})", s.pct_complete),
        _ => format!("{:.0}%", s.pct_complete),
    };
    let state = if s.state_readable() {
        s.state.to_string()
    } else {
        "? (the record's state cannot be read: see unreadable)".to_string()
    };
    let kind = if s.statused {
        "resque-status's record, a JSON text"
    } else {
        "resq's own record, a hash"
    };
    let mut rows: Vec<(&str, String)> = vec![
        ("id", s.id.to_string()),
        ("state", state),
        ("status", format!("{} (resque-status)", s.status)),
        ("record", format!("{record} ({kind})")),
        ("name", opt(&s.name)),
        ("message", opt(&s.message)),
        ("progress", progress),
        ("class", opt(&s.class)),
        ("queue", opt(&s.queue)),
        ("worker", opt(&s.worker)),
        ("attempts", s.attempts.to_string()),
        (
            "tags",
            if s.tags.is_empty() {
                "-".into()
            } else {
                s.tags.join(", ")
            },
        ),
        ("job key", opt(&s.key)),
        (
            "stop asked",
            if s.stop_requested { "yes" } else { "-" }.into(),
        ),
        (
            "created",
            at(now, s.time.and_then(|t| DateTime::from_timestamp(t, 0))),
        ),
        ("enqueued", at(now, s.enqueued_at)),
        ("due", at(now, s.due_at)),
        ("started", at(now, s.started_at)),
        ("finished", at(now, s.finished_at)),
        ("error", opt(&s.error)),
        (
            "result",
            s.result.as_ref().map_or_else(|| "-".into(), pretty),
        ),
        (
            "options",
            s.options.as_ref().map_or_else(|| "-".into(), pretty),
        ),
    ];
    for (k, v) in &s.custom {
        rows.push((k.as_str(), pretty(v)));
    }
    if !s.unreadable.is_empty() {
        let bad: Vec<String> = s.unreadable.iter().map(|b| b.to_string()).collect();
        rows.push((
            "unreadable",
            format!(
                "{} (in {record})",
                bad.join(&format!("\n{}", " ".repeat(W)))
            ),
        ));
    }
    let mut out: Vec<String> = rows
        .into_iter()
        .map(|(k, v)| format!("{k:<W$}{v}"))
        .collect();
    if s.history.is_empty() {
        out.push(format!("{:<W$}-", "history"));
    } else {
        out.push("history".into());
        let width = s.history.iter().map(|e| e.event.len()).max().unwrap_or(0);
        for e in &s.history {
            let when = e.at.map_or_else(
                || "(no time)".to_string(),
                |t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string(),
            );
            let fields: Vec<String> = e
                .fields
                .iter()
                .map(|(k, v)| format!("{k}={}", plain(v)))
                .collect();
            out.push(
                format!("  {when}  {:<width$}  {}", e.event, fields.join(" "))
                    .trim_end()
                    .to_string(),
            );
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::JobId;

    #[test]
    fn a_record_with_bad_fields_shows_what_it_can() {
        let id = JobId::parse("ba69034b39c05d28a5403ac10e276e79").unwrap();
        let f = |k: &str, v: &[u8]| (k.to_string(), v.to_vec());
        let s = JobStatus::from_fields(
            &id,
            &[f("state", b"\xff"), f("class", b"A"), f("attempts", b"x")],
        );
        let out = show(&s, "ns:resq:job:ba69", Utc::now());
        assert!(out.contains("state        ? (the record's state"), "{out}");
        assert!(out.contains("class        A\n"), "{out}");
        assert!(
            out.contains("unreadable   state holds \"\u{fffd}\"\n             attempts holds \"x\" (in ns:resq:job:ba69)"),
            "{out}"
        );
        assert!(out.contains("record       ns:resq:job:ba69 (resq's own record, a hash)"));
    }
}
