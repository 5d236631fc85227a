//! `resq batch create|show` and `resq batches`: workflows ([`crate::workflows`],
//! docs/workflows.md) from the command line (`enqueue_flow` has `resq enqueue --track`'s
//! workflow flags).
//!
//! `batch create` reads one job per line (as `enqueue --file` does), checks every line before
//! anything is written, then creates the batch in one [`crate::Client::create_batch`].
//! `batch show` prints a batch's counts and what holds it up ([`Admin::batch_report`]),
//! saying plainly when a member was taken by a worker that does not count it.

use super::output::{age, json, short, table};
use crate::admin::Admin;
use crate::error::{Error, Result};
use crate::jobs::JobId;
use crate::workflows::{Batch, BatchId, BatchReport, BatchStatus};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::{json, Value};

/// `resq batch …`.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum BatchCmd {
    /// Create a batch from a file of jobs, one `{"class":…,"args":[…]}` per line; prints its id.
    Create(CreateArgs),
    /// A batch's counts, times and what holds it up (unfinished members by state, members a
    /// worker of another runtime took).
    Show {
        /// The batch's id.
        id: String,
        /// Go on reading its members from this cursor (the `--from` a report of a batch of
        /// more than 100,000 members printed).
        #[arg(long, value_name = "CURSOR")]
        from: Option<u64>,
    },
    /// Remove a batch whose creation stopped before it was made visible (state `staging`):
    /// its members' records and staged payloads (which otherwise expire a day after the last
    /// part was staged). A parent batch stops counting it. Refused for any other batch.
    Discard {
        /// The batch's id.
        id: String,
    },
}

/// `resq batch create --jobs-file F [--queue Q] [--on-complete CLASS:JSON_ARRAY] …`.
#[derive(Args, Debug, Clone)]
pub(crate) struct CreateArgs {
    /// Queue of the lines that name none, and of the callbacks.
    #[arg(long, default_value = "default")]
    pub queue: String,
    /// One job per line of F (`-`: standard input): `{"class":…,"args":[…]}` and an optional
    /// `"queue"`; blank lines are skipped. Every line is checked first: one bad line and
    /// nothing is created (exit 1).
    #[arg(long, value_name = "F")]
    pub jobs_file: String,
    /// Enqueued once every member has been attempted (its first run ended, or it ended without
    /// running): `CLASS:JSON_ARRAY`, e.g. `Notify:["done",7]`; `CLASS` alone: no args.
    #[arg(long, value_name = "CLASS:JSON_ARRAY")]
    pub on_complete: Option<String>,
    /// Enqueued once every member has completed (may never fire): `CLASS:JSON_ARRAY`.
    #[arg(long, value_name = "CLASS:JSON_ARRAY")]
    pub on_success: Option<String>,
    /// Enqueued once, at the first member that failed for good (retries exhausted, killed,
    /// cancelled): `CLASS:JSON_ARRAY`.
    #[arg(long, value_name = "CLASS:JSON_ARRAY")]
    pub on_death: Option<String>,
    /// What the batch is for (shown by `batches` and `batch show`).
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
    /// Make it a member of batch BATCH (which must not have ended): the parent counts it as one.
    #[arg(long, value_name = "BATCH")]
    pub parent: Option<BatchId>,
}

/// `resq batches [--limit N] [--offset N]`.
#[derive(Args, Debug, Clone)]
pub(crate) struct BatchesArgs {
    /// At most this many batches.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Skip this many (newest) first.
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
}

/// A callback spec: `CLASS` or `CLASS:JSON_ARRAY` (`Notify`, `Notify:["done",7]`,
/// `Mailer::Digest:[1]`): the class and its args. A class is one or more names joined by `::`,
/// each non-empty, without spaces, quotes, brackets, braces, commas or a single `:`; the first
/// `:` that is not part of a `::` starts the args, a JSON array. Anything else is refused,
/// naming the bad part — never read as a class name that drops the args.
pub(crate) fn callback(flag: &'static str, text: &str) -> Result<(String, Vec<Value>)> {
    let bad = |why: String| Error::Config {
        var: flag,
        message: format!(
            "{text:?}: {why} (CLASS or CLASS:JSON_ARRAY, e.g. Notify or Notify:[\"done\",7])"
        ),
    };
    let b = text.as_bytes();
    let mut split = None;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b':' {
            if b.get(i + 1) == Some(&b':') {
                i += 2;
                continue;
            }
            split = Some(i);
            break;
        }
        i += 1;
    }
    let (class, args) = match split {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    if class.is_empty() {
        return Err(bad("no class name before the args".into()));
    }
    for part in class.split("::") {
        if part.is_empty() {
            return Err(bad(format!(
                "the class name {class:?} has an empty part (a `::` at its start or end, or `:::`)"
            )));
        }
        if let Some(c) = part
            .chars()
            .find(|c| c.is_whitespace() || c.is_control() || "[]{}\"',:".contains(*c))
        {
            let hint = if c == '[' {
                ": args go after a ':' (CLASS:[…])"
            } else {
                ""
            };
            return Err(bad(format!("the class name {class:?} holds {c:?}{hint}")));
        }
    }
    let args = match args {
        None => Vec::new(),
        Some("") => {
            return Err(bad(
                "nothing after ':' (a JSON array, or no ':' for no args)".into(),
            ))
        }
        Some(a) => match serde_json::from_str::<Value>(a) {
            Ok(Value::Array(v)) => v.into_iter().map(super::enqueue::as_typed_value).collect(),
            Ok(_) => {
                return Err(bad(format!(
                    "the args {a:?} after ':' are not a JSON array"
                )))
            }
            Err(e) => return Err(bad(format!("the args {a:?} after ':' are not JSON ({e})"))),
        },
    };
    Ok((class.to_string(), args))
}

/// Runs `resq batch …`.
pub(crate) async fn run(target: &super::Target, cmd: BatchCmd, as_json: bool) -> Result<()> {
    match cmd {
        BatchCmd::Create(a) => create(target, a, as_json).await,
        BatchCmd::Discard { id } => discard(target, &id, as_json).await,
        BatchCmd::Show { id, from } => {
            let id = batch_id(&id)?;
            let admin = target.admin().await?;
            let report = admin
                .batch_report_from(&id, from.unwrap_or(0))
                .await?
                .ok_or_else(|| Error::Config {
                    var: "ID",
                    message: format!("no batch {id} in namespace {:?}", target.namespace),
                })?;
            if as_json {
                json(&report_json(&report))
            } else {
                println!("{}", show(&report, Utc::now()));
                Ok(())
            }
        }
    }
}

/// Runs `resq batch discard ID`.
async fn discard(target: &super::Target, id: &str, as_json: bool) -> Result<()> {
    let id = batch_id(id)?;
    let admin = target.admin().await?;
    let n = admin.discard_batch(&id).await.map_err(|e| match &e {
        Error::Redis(r) if matches!(r.code(), Some("NOBATCH") | Some("NOTSTAGING")) => {
            Error::Config {
                var: "ID",
                message: format!(
                    "{id}: {} (namespace {:?}); nothing was removed",
                    r.detail().unwrap_or("cannot be discarded"),
                    target.namespace
                ),
            }
        }
        _ => e,
    })?;
    if as_json {
        return json(&json!({ "discarded": id, "members": n }));
    }
    println!(
        "discarded batch {id}: {n} staged member{} removed",
        if n == 1 { "" } else { "s" }
    );
    Ok(())
}

/// `s` as a batch id, or an error naming the argument.
fn batch_id(s: &str) -> Result<BatchId> {
    BatchId::parse(s).ok_or_else(|| Error::Config {
        var: "ID",
        message: format!("{s:?} is not a batch id (32 lowercase hex characters)"),
    })
}

async fn create(target: &super::Target, a: CreateArgs, as_json: bool) -> Result<()> {
    crate::client::validate(&a.queue, "-").map_err(|e| Error::Config {
        var: "--queue",
        message: format!(
            "{:?}: {}",
            a.queue,
            e.to_string().trim_start_matches("rejected: ")
        ),
    })?;
    let mut batch = Batch::new().callback_queue(&a.queue);
    if let Some(d) = &a.description {
        batch = batch.description(d);
    }
    if let Some(p) = &a.parent {
        batch = batch.parent(p.clone());
    }
    if let Some(c) = &a.on_complete {
        let (class, args) = callback("--on-complete", c)?;
        batch = batch.on_complete(class, args);
    }
    if let Some(c) = &a.on_success {
        let (class, args) = callback("--on-success", c)?;
        batch = batch.on_success(class, args);
    }
    if let Some(c) = &a.on_death {
        let (class, args) = callback("--on-death", c)?;
        batch = batch.on_death(class, args);
    }
    let file = if a.jobs_file == "-" {
        "standard input"
    } else {
        a.jobs_file.as_str()
    };
    let (lines, mut bad) = super::enqueue_file::read_jobs(&a.jobs_file, "--jobs-file", &a.queue)?;
    let counted = lines.len() + bad.len();
    for (n, job) in &lines {
        if let Err(e) = crate::client::validate(&job.queue, &job.class) {
            bad.push((*n, e.to_string()));
        }
    }
    bad.sort_by_key(|(n, _)| *n);
    if !bad.is_empty() {
        for (n, why) in &bad {
            eprintln!("line {n}: {why}");
        }
        return Err(Error::Config {
            var: "--jobs-file",
            message: format!(
                "{file}: {} of {} lines are not jobs (listed above); nothing was created",
                bad.len(),
                counted
            ),
        });
    }
    if lines.is_empty() {
        return Err(Error::Config {
            var: "--jobs-file",
            message: format!("{file} holds no job; nothing was created"),
        });
    }
    for (_, job) in lines {
        batch = batch.job(job.queue, job.class, job.args);
    }
    let client = target.client().await?;
    let (id, jobs) = client.create_batch(batch).await.map_err(|e| match &e {
        Error::Redis(r) if matches!(r.code(), Some("NOBATCH") | Some("CLOSED")) => Error::Config {
            var: "--parent",
            message: format!(
                "{}: {} (namespace {:?}); nothing was created",
                a.parent.as_ref().map_or("", BatchId::as_str),
                r.detail().unwrap_or("not a batch that can take members"),
                target.namespace
            ),
        },
        _ => e,
    })?;
    if as_json {
        return json(&json!({ "id": id, "jobs": jobs }));
    }
    println!("{id}");
    eprintln!(
        "created batch {id}: {} job{} (`resq batch show {id}`)",
        jobs.len(),
        if jobs.len() == 1 { "" } else { "s" }
    );
    Ok(())
}

/// A batch as `batches --json` lists it: its status and its phase.
#[derive(Serialize)]
struct Listed<'a> {
    #[serde(flatten)]
    status: &'a BatchStatus,
    phase: &'static str,
}

/// Runs `resq batches`.
pub(crate) async fn list(admin: &Admin, a: BatchesArgs, as_json: bool) -> Result<()> {
    let (batches, total) = admin.batches(a.offset, a.limit).await?;
    if as_json {
        let listed: Vec<Listed<'_>> = batches
            .iter()
            .map(|s| Listed {
                status: s,
                phase: s.phase(),
            })
            .collect();
        return json(&json!({ "batches": listed, "total": total }));
    }
    let now = Utc::now();
    let rows = batches.iter().map(|b| {
        vec![
            b.id.to_string(),
            b.phase().to_string(),
            b.total.to_string(),
            b.pending.to_string(),
            b.succeeded.to_string(),
            b.failed.to_string(),
            ago(now, b.created_at),
            ago(now, b.complete_at),
            ago(now, b.success_at),
            ago(now, b.death_at),
            short(b.description.as_deref().unwrap_or(""), 40),
        ]
    });
    println!(
        "{}",
        table(
            &[
                "ID",
                "STATE",
                "TOTAL",
                "PENDING",
                "SUCCEEDED",
                "FAILED",
                "CREATED",
                "COMPLETE",
                "SUCCESS",
                "DEATH",
                "DESCRIPTION"
            ],
            rows
        )
    );
    let mut footer = format!("({} shown of {total} batches, newest first", batches.len());
    if a.limit > 0 && (a.offset + a.limit) < usize::try_from(total).unwrap_or(usize::MAX) {
        footer.push_str(&format!("; next: --offset {}", a.offset + a.limit));
    }
    footer.push(')');
    println!("{footer}");
    for b in &batches {
        for why in &b.unreadable {
            println!("unreadable: {}: {why}", b.id);
        }
    }
    Ok(())
}

/// `t`'s age at `now` (`5m12s ago`), or `-`.
fn ago(now: DateTime<Utc>, t: Option<DateTime<Utc>>) -> String {
    match t {
        Some(t) => format!(
            "{} ago",
            age(Some((now - t).num_milliseconds() as f64 / 1000.0))
        ),
        None => "-".into(),
    }
}

/// `t` in full with its age, or `-`.
fn at(now: DateTime<Utc>, t: Option<DateTime<Utc>>) -> String {
    match t {
        Some(t) => format!(
            "{} ({})",
            t.format("%Y-%m-%d %H:%M:%S%.3f UTC"),
            ago(now, Some(t))
        ),
        None => "-".into(),
    }
}

/// `batch show --json`.
fn report_json(r: &BatchReport) -> Value {
    json!({
        "batch": Listed { status: &r.status, phase: r.status.phase() },
        "unfinished": r.unfinished.iter().map(|(state, n, ids)| {
            json!({ "state": state, "count": n, "ids": ids })
        }).collect::<Vec<_>>(),
        "gone": r.gone,
        "orphaned": r.orphaned,
        "foreign_workers": r.foreign_workers,
        "stuck": stuck(r),
        "sampled": !r.complete,
        "members_total": r.members_total,
        "members_read": r.members_read,
        "unchecked": r.unchecked,
        "next_cursor": r.next_cursor,
    })
}

/// Whether members of the (visible) batch are gone from their queue (a foreign worker took
/// them) or say working for a worker that is gone. A batch still staging has every queued
/// member outside its queue, as it should.
fn stuck(r: &BatchReport) -> bool {
    r.status.state != "staging" && (!r.gone.is_empty() || !r.orphaned.is_empty())
}

/// `ids` a line each, indented, every one of them.
fn id_lines(ids: &[JobId]) -> Vec<String> {
    ids.iter().map(|i| format!("    {i}")).collect()
}

/// What the batch's report says, for people.
pub(crate) fn show(r: &BatchReport, now: DateTime<Utc>) -> String {
    const W: usize = 13;
    let s = &r.status;
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let rows: Vec<(&str, String)> = vec![
        ("id", s.id.to_string()),
        ("description", opt(&s.description)),
        ("state", s.phase().to_string()),
        ("total", s.total.to_string()),
        ("pending", format!("{} (not attempted yet)", s.pending)),
        ("succeeded", s.succeeded.to_string()),
        ("failed", format!("{} (for good)", s.failed)),
        (
            "parent",
            s.parent.as_ref().map_or("-".into(), |p| p.to_string()),
        ),
        ("callbacks", format!("queue {}", opt(&s.queue))),
        ("created", at(now, s.created_at)),
        ("complete", at(now, s.complete_at)),
        ("success", at(now, s.success_at)),
        ("death", at(now, s.death_at)),
    ];
    let mut rows = rows;
    if !s.unreadable.is_empty() {
        rows.push(("unreadable", s.unreadable.join("; ")));
    }
    let mut out: Vec<String> = rows
        .into_iter()
        .map(|(k, v)| format!("{k:<W$}{v}"))
        .collect();
    if r.unfinished.is_empty() {
        out.push(format!("{:<W$}none", "unfinished"));
    } else {
        out.push("unfinished members".into());
        for (state, n, ids) in &r.unfinished {
            let more = if *n > ids.len() as u64 { ", …" } else { "" };
            let ids: Vec<&str> = ids.iter().map(JobId::as_str).collect();
            out.push(format!("  {state:<11}{n:>6}  {}{more}", ids.join(", ")));
        }
    }
    let more = if r.next_cursor != 0 {
        format!(
            " (a report reads up to 100,000: the others with `resq batch show {} --from {}`)",
            s.id, r.next_cursor
        )
    } else if !r.complete {
        " (the rest of the members were read by the reports before this one)".to_string()
    } else {
        String::new()
    };
    out.push(format!(
        "{:<W$}{} of {} members{more}",
        "read", r.members_read, r.members_total,
    ));
    if r.unchecked > 0 {
        out.push(format!(
            "{:<W$}{} queued member{} not looked for: {} queue is longer than a report reads",
            "unchecked",
            r.unchecked,
            if r.unchecked == 1 { "" } else { "s" },
            if r.unchecked == 1 { "its" } else { "their" },
        ));
    }
    if r.status.state == "staging" {
        out.push(String::new());
        out.push(format!(
            "STAGING: its creator stopped before making it visible (or is still creating it): \
             its members are in no queue and never run; a parent batch counts it as a member \
             that has not ended. What was staged expires a day after the last part was staged; \
             `resq batch discard {}` removes it now.",
            r.status.id
        ));
    }
    if r.status.state != "staging" && !r.orphaned.is_empty() {
        let n = r.orphaned.len();
        out.push(String::new());
        out.push(format!(
            "STUCK: {n} member{} working for a worker that is no longer registered (it died, or \
             another runtime pruned it): nothing will end {}:",
            if n == 1 {
                " says it is"
            } else {
                "s say they are"
            },
            if n == 1 { "it" } else { "them" },
        ));
        out.extend(id_lines(&r.orphaned));
    }
    if r.status.state != "staging" && !r.gone.is_empty() {
        let n = r.gone.len();
        out.push(String::new());
        out.push(format!(
            "STUCK: {n} member{} no longer in {} queue while {} record says queued: a worker of \
             another runtime (Ruby, Java, Node) took {}, or someone removed {}. resq cannot see \
             how {} ended: the next prune round (each resq worker's, every 60 s, or `resq \
             prune`) ends {} failed, and the batch counts {}.",
            if n == 1 { " is" } else { "s are" },
            if n == 1 { "its" } else { "their" },
            if n == 1 { "its" } else { "their" },
            if n == 1 { "it" } else { "them" },
            if n == 1 { "it" } else { "them" },
            if n == 1 { "it" } else { "they" },
            if n == 1 { "it" } else { "them" },
            if n == 1 { "it" } else { "them" },
        ));
        out.push("  gone:".into());
        out.extend(id_lines(&r.gone));
    }
    if !r.foreign_workers.is_empty() {
        if !stuck(r) {
            out.push(String::new());
            out.push(
                "WARNING: workers of another runtime poll the queues of this batch's unfinished \
                 members; a member one of them takes is never counted and the batch then waits \
                 for ever:"
                    .into(),
            );
        } else {
            out.push("  foreign workers polling those queues:".into());
        }
        for w in &r.foreign_workers {
            out.push(format!("    {w}"));
        }
    }
    if stuck(r) || !r.foreign_workers.is_empty() {
        out.push(
            "  Keep a batch's members on queues only resq workers poll (docs/workflows.md, \
             \"Mixed fleets\")."
                .into(),
        );
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callbacks_read_class_and_args() {
        let (c, a) = callback("--on-success", r#"Notify:["done",7]"#).unwrap();
        assert_eq!((c.as_str(), a), ("Notify", vec![json!("done"), json!(7)]));
        let (c, a) = callback("--on-success", "Mailer::Digest:[1.50]").unwrap();
        assert_eq!((c.as_str(), a), ("Mailer::Digest", vec![json!(1.5)]));
        let (c, a) = callback("--on-success", "Mailer::Digest").unwrap();
        assert_eq!((c.as_str(), a.len()), ("Mailer::Digest", 0));
        let (c, a) = callback("--on-success", r#"Tag:["a:b"]"#).unwrap();
        assert_eq!((c.as_str(), a), ("Tag", vec![json!("a:b")]));
        for (bad, says) in [
            ("", "no class name"),
            (":[1]", "no class name"),
            ("Notify:", "nothing after ':'"),
            ("Notify:7", "not a JSON array"),
            ("Notify:[1", "not JSON"),
            ("Two words:[]", "holds ' '"),
            ("N:{}", "not a JSON array"),
            (r#"Notify["done",7]"#, "args go after a ':'"),
            ("Notify:::[1]", "empty part"),
            ("Notify::", "empty part"),
            ("::Notify", "empty part"),
            ("A::B:C:[1]", "not JSON"),
        ] {
            let e = callback("--on-death", bad).unwrap_err().to_string();
            assert!(e.starts_with("--on-death: "), "{bad}: {e}");
            assert!(e.contains("CLASS:JSON_ARRAY"), "{bad}: {e}");
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
