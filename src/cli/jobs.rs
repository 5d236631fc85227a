//! `resq jobs`, `resq jobs purge`, `resq job show|wait|cancel`: tracked jobs ([`crate::jobs`])
//! from the command line — a page of records with the count of each state and where to go on
//! (`--from`), one record whole (`job_show.rs`), waiting for one to finish (with exit codes a
//! script can branch on), cancelling one, and purging finished ones.
//!
//! `job wait` exits 0 when the job completed, 1 when it failed, was killed or cancelled, 2 when
//! it had not finished by `--timeout`, 3 when there is no such job, 4 when it could not be
//! asked (a malformed id or timeout, Redis unreachable).

use super::output::{age, json, short, table};
use crate::admin::Admin;
use crate::error::{Error, Result};
use crate::jobs::{Cancelled, JobFilter, JobId, JobPage, JobPosition, JobStatus, State};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand, ValueEnum};
use std::process::ExitCode;
use std::time::Duration;

/// `job wait`'s exit code: the job completed.
pub(crate) const WAIT_COMPLETED: u8 = 0;
/// `job wait`'s exit code: the job failed, was killed or was cancelled.
pub(crate) const WAIT_UNSUCCESSFUL: u8 = 1;
/// `job wait`'s exit code: the job had not finished by the timeout.
pub(crate) const WAIT_TIMED_OUT: u8 = 2;
/// `job wait`'s exit code: no such job (never tracked, expired or purged).
pub(crate) const WAIT_UNKNOWN: u8 = 3;
/// `job wait`'s exit code: the wait could not be done (a malformed id or timeout, Redis).
pub(crate) const WAIT_ERROR: u8 = 4;

/// The longest `--timeout` of `job wait` (30 days).
const MAX_WAIT: Duration = Duration::from_secs(30 * 24 * 3600);

/// A job state, as `--state` takes it (no doc per value, so `--help` lists them on one line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StateArg {
    Queued,
    Scheduled,
    Waiting,
    Working,
    Retrying,
    Completed,
    Failed,
    Killed,
    Cancelled,
}

impl StateArg {
    fn state(self) -> State {
        match self {
            StateArg::Queued => State::Queued,
            StateArg::Scheduled => State::Scheduled,
            StateArg::Waiting => State::Waiting,
            StateArg::Working => State::Working,
            StateArg::Retrying => State::Retrying,
            StateArg::Completed => State::Completed,
            StateArg::Failed => State::Failed,
            StateArg::Killed => State::Killed,
            StateArg::Cancelled => State::Cancelled,
        }
    }
}

/// `resq jobs [filters] | resq jobs purge …`.
#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct JobsArgs {
    /// `purge`; without it, the list.
    #[command(subcommand)]
    pub cmd: Option<JobsCmd>,
    /// The list's filters and position.
    #[command(flatten)]
    pub list: ListArgs,
}

/// `resq jobs`'s filters: each narrows the list.
#[derive(Args, Debug, Clone)]
pub(crate) struct ListArgs {
    /// Only jobs in this state.
    #[arg(long, value_enum)]
    pub state: Option<StateArg>,
    /// Only jobs of this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only jobs of this class.
    #[arg(long)]
    pub class: Option<String>,
    /// Only jobs with this tag.
    #[arg(long)]
    pub tag: Option<String>,
    /// At most this many jobs.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Skip this many matching jobs first (within the 20,000 entries a call looks at).
    #[arg(long, default_value_t = 0, conflicts_with = "from")]
    pub offset: usize,
    /// Go on from this position: the `next` a page printed (`--from completed:…`).
    #[arg(long, value_name = "POSITION")]
    pub from: Option<String>,
}

/// `resq jobs …`.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum JobsCmd {
    /// Delete finished jobs' records (completed, failed, killed, cancelled) and forget expired
    /// ones.
    Purge(PurgeArgs),
}

/// `resq jobs purge [--state S] [--older-than D]`.
#[derive(Args, Debug, Clone)]
pub(crate) struct PurgeArgs {
    /// Only jobs in this final state (default: every final state).
    #[arg(long, value_enum)]
    pub state: Option<StateArg>,
    /// Only jobs that finished at least this long ago: seconds, or with s, m, h or d
    /// (`90`, `15m`, `7d`); 0 purges every finished job.
    #[arg(long, default_value = "0")]
    pub older_than: String,
}

/// `resq job …`: one tracked job, by id (32 lowercase hex characters).
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum JobCmd {
    /// The whole record: state, progress, result, options, times, history.
    Show {
        /// The job's id.
        id: String,
    },
    /// Wait for the job to finish and print how it ended. Exit status: 0 completed, 1 failed,
    /// killed or cancelled, 2 not finished by --timeout, 3 no such job, 4 could not wait.
    Wait {
        /// The job's id.
        id: String,
        /// Give up after this long: seconds, or with s, m, h or d (`90`, `15m`).
        // A value that starts with '-' is taken as the value (and refused with 4, as any bad
        // timeout is), not as an unknown option, which clap would end with 2: "not finished".
        #[arg(long, default_value = "60", allow_hyphen_values = true)]
        timeout: String,
    },
    /// Cancel the job: one that has not started never runs; a running one is asked to stop.
    Cancel {
        /// The job's id.
        id: String,
    },
}

/// `s` as a job id, or an error naming the argument.
fn job_id(s: &str) -> Result<JobId> {
    JobId::parse(s).ok_or_else(|| Error::Config {
        var: "ID",
        message: format!("{s:?} is not a job id (32 lowercase hex characters)"),
    })
}

/// A duration as the CLI takes it: seconds (`90`, `0.5`) or with a unit (`90s`, `15m`, `2h`,
/// `7d`); `var` names the flag in errors.
pub(crate) fn parse_span(var: &'static str, v: &str) -> Result<Duration> {
    let t = v.trim().to_ascii_lowercase();
    let (number, unit) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1.0),
        Some((i, 'm')) => (&t[..i], 60.0),
        Some((i, 'h')) => (&t[..i], 3600.0),
        Some((i, 'd')) => (&t[..i], 86_400.0),
        _ => (t.as_str(), 1.0),
    };
    let bad = || Error::Config {
        var,
        message: format!(
            "{v:?} is not a duration (seconds, or a number with s, m, h or d: 90, 15m, 7d)"
        ),
    };
    let n: f64 = number.trim().parse().map_err(|_| bad())?;
    if !n.is_finite() || n < 0.0 {
        return Err(bad());
    }
    Duration::try_from_secs_f64(n * unit).map_err(|_| bad())
}

/// The error for an id that names no record.
fn unknown(admin_ns: &str, id: &JobId) -> Error {
    Error::Config {
        var: "ID",
        message: format!(
            "no tracked job {id} in namespace {admin_ns:?} (never tracked, expired or purged)"
        ),
    }
}

/// Runs `resq jobs …` (the list, or `purge`).
pub(crate) async fn jobs(admin: &Admin, a: JobsArgs, as_json: bool) -> Result<()> {
    match a.cmd {
        Some(JobsCmd::Purge(p)) => purge(admin, p, as_json).await,
        None => list(admin, a.list, as_json).await,
    }
}

async fn list(admin: &Admin, a: ListArgs, as_json: bool) -> Result<()> {
    let filter = JobFilter {
        state: a.state.map(StateArg::state),
        queue: a.queue.clone(),
        class: a.class.clone(),
        tag: a.tag.clone(),
    };
    let page = match &a.from {
        Some(p) => {
            let from: JobPosition = p.parse().map_err(|e: Error| Error::Config {
                var: "--from",
                message: match e {
                    Error::Rejected(m) => m,
                    e => e.to_string(),
                },
            })?;
            admin
                .jobs_from(&filter, &from, a.limit)
                .await
                .map_err(|e| match e {
                    Error::Rejected(m) => Error::Config {
                        var: "--from",
                        message: m,
                    },
                    e => e,
                })?
        }
        None => admin.jobs(&filter, a.offset, a.limit).await?,
    };
    if as_json {
        return json(&page);
    }
    let counts = admin.job_counts().await?;
    println!("{}", counts_line(&counts));
    let now = Utc::now();
    let rows = page.jobs.iter().map(|j| {
        vec![
            j.id.to_string(),
            state_text(j),
            j.class.clone().unwrap_or_else(|| "-".into()),
            j.queue.clone().unwrap_or_else(|| "-".into()),
            format!("{:.0}%", j.pct_complete),
            j.attempts.to_string(),
            created(j).map_or_else(|| "-".into(), |t| since(now, t)),
            j.finished_at.map_or_else(|| "-".into(), |t| since(now, t)),
            short(
                j.error
                    .as_deref()
                    .filter(|_| j.state == State::Failed)
                    .or(j.message.as_deref())
                    .unwrap_or(""),
                50,
            ),
        ]
    });
    println!(
        "{}",
        table(
            &[
                "ID", "STATE", "CLASS", "QUEUE", "PROGRESS", "ATTEMPTS", "AGE", "FINISHED",
                "MESSAGE"
            ],
            rows
        )
    );
    println!("{}", footer(&page));
    for why in &page.unreadable {
        println!("unreadable: {why}");
    }
    Ok(())
}

/// A row's state: `stop asked` marks a job asked to stop that runs still.
fn state_text(j: &JobStatus) -> String {
    if j.stop_requested {
        format!("{} (stop asked)", j.state)
    } else {
        j.state.to_string()
    }
}

/// `jobs: 3 queued · 0 scheduled · …`, every state counted.
fn counts_line(counts: &[(State, u64)]) -> String {
    let parts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    format!("jobs: {}", parts.join(" · "))
}

/// What the page covers and where the listing goes on, after the table.
fn footer(page: &JobPage) -> String {
    let mut s = match page.total {
        Some(t) => format!("({} shown of {t}", page.jobs.len()),
        None => format!("({} shown", page.jobs.len()),
    };
    match &page.next {
        Some(p) if page.truncated => s.push_str(&format!(
            "; stopped after looking at 20,000 entries: go on with --from {p}, or narrow the \
             list with --state, --queue or --tag"
        )),
        Some(p) => s.push_str(&format!("; next: --from {p}")),
        None => s.push_str("; the end"),
    }
    s.push(')');
    s
}

/// When the job was created: resq's enqueue time, else resque-status's `time`.
fn created(j: &JobStatus) -> Option<DateTime<Utc>> {
    j.enqueued_at
        .or_else(|| j.time.and_then(|t| DateTime::from_timestamp(t, 0)))
}

/// The age of `t` at `now`.
fn since(now: DateTime<Utc>, t: DateTime<Utc>) -> String {
    age(Some((now - t).num_milliseconds() as f64 / 1000.0))
}

async fn purge(admin: &Admin, p: PurgeArgs, as_json: bool) -> Result<()> {
    let older = parse_span("--older-than", &p.older_than)?;
    let state = p.state.map(StateArg::state);
    if let Some(s) = state.filter(|s| !s.is_final()) {
        return Err(Error::Config {
            var: "--state",
            message: format!(
                "only finished jobs can be purged (completed, failed, killed, cancelled); \
                 {s} jobs have not finished (`resq job cancel ID` cancels one)"
            ),
        });
    }
    let n = admin.purge_jobs(state, older).await?;
    if as_json {
        return json(&serde_json::json!({ "purged": n }));
    }
    println!("purged {n} job{}", if n == 1 { "" } else { "s" });
    Ok(())
}

/// Runs `resq job …`; its exit code.
pub(crate) async fn job(target: &super::Target, cmd: JobCmd, as_json: bool) -> Result<ExitCode> {
    match cmd {
        JobCmd::Show { id } => {
            let id = job_id(&id)?;
            let admin = target.admin().await?;
            let s = admin
                .job(&id)
                .await?
                .ok_or_else(|| unknown(&target.namespace, &id))?;
            let wf = if s.statused {
                None
            } else {
                admin.job_workflow(&id).await?
            };
            if as_json {
                let mut v = serde_json::to_value(&s).map_err(|e| Error::Protocol(e.to_string()))?;
                if let Some(o) = v.as_object_mut() {
                    let w =
                        serde_json::to_value(&wf).map_err(|e| Error::Protocol(e.to_string()))?;
                    o.insert("workflow".into(), w);
                }
                json(&v)?;
            } else {
                let record = if s.statused {
                    admin.keys().resque_status(id.as_str())
                } else {
                    admin.keys().job_record(id.as_str())
                };
                println!(
                    "{}",
                    super::job_show::show_with(&s, wf.as_ref(), &record, Utc::now())
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        JobCmd::Wait { id, timeout } => match wait(target, &id, &timeout, as_json).await {
            Ok(code) => Ok(ExitCode::from(code)),
            Err(e) => {
                eprintln!("error: {e}");
                Ok(ExitCode::from(WAIT_ERROR))
            }
        },
        JobCmd::Cancel { id } => {
            let id = job_id(&id)?;
            let admin = target.admin().await?;
            if admin.job(&id).await?.is_none() {
                return Err(unknown(&target.namespace, &id));
            }
            let (out, settling) = admin.cancel_job_settling(&id).await?;
            let (outcome, state) = match out {
                Cancelled::Cancelled => ("cancelled", State::Cancelled),
                Cancelled::Killing => ("stopping", State::Working),
                Cancelled::Finished(s) => ("finished", s),
            };
            if as_json {
                json(&serde_json::json!({
                    "id": id, "outcome": outcome, "state": state, "settling": settling
                }))?;
            } else {
                match out {
                    Cancelled::Cancelled => {
                        println!("cancelled {id}: it had not started and will never run")
                    }
                    Cancelled::Killing => println!(
                        "asked {id} to stop: it is running and ends killed at its next progress \
                         update"
                    ),
                    Cancelled::Finished(s) => {
                        println!("{id} had already finished ({s}); nothing changed")
                    }
                }
                if !settling.is_empty() {
                    println!(
                        "still settling: {} end{} (batch counts, waiting jobs) and the children \
                         of {} job{}, past the bound of one call; each prune round goes on \
                         with them (every minute on one resq process; `resq prune` runs one \
                         now). Watch: `resq jobs --state cancelled`",
                        settling.ends,
                        if settling.ends == 1 { "" } else { "s" },
                        settling.jobs,
                        if settling.jobs == 1 { "" } else { "s" },
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `job wait`: the exit code, having printed how the job ended (or stood).
async fn wait(target: &super::Target, id: &str, timeout: &str, as_json: bool) -> Result<u8> {
    let id = job_id(id)?;
    let timeout = parse_span("--timeout", timeout)?;
    if timeout > MAX_WAIT {
        return Err(Error::Config {
            var: "--timeout",
            message: format!("at most {} seconds (30 days)", MAX_WAIT.as_secs()),
        });
    }
    let client = target.client().await?;
    let Some(s) = client.wait(&id, timeout).await? else {
        eprintln!("error: {}", unknown(&target.namespace, &id));
        return Ok(WAIT_UNKNOWN);
    };
    if !s.state_readable() {
        let bad: Vec<String> = s.unreadable.iter().map(|b| b.to_string()).collect();
        eprintln!(
            "error: the record of job {id} has no state to read ({}; `resq job show {id}` shows \
             the rest)",
            bad.join(", ")
        );
        return Ok(WAIT_ERROR);
    }
    let code = match s.state {
        State::Completed => WAIT_COMPLETED,
        st if st.is_final() => WAIT_UNSUCCESSFUL,
        _ => WAIT_TIMED_OUT,
    };
    if as_json {
        json(&s)?;
        return Ok(code);
    }
    match s.state {
        State::Completed => {
            println!("completed");
            if let Some(r) = &s.result {
                println!("result: {r}");
            }
        }
        State::Failed => println!(
            "failed: {}",
            s.error
                .as_deref()
                .or(s.message.as_deref())
                .unwrap_or("(no error recorded)")
        ),
        st if st.is_final() => match (&s.message, s.finished_at) {
            (Some(m), _) => println!("{st}: {m}"),
            (None, Some(t)) => println!("{st} at {}", t.format("%Y-%m-%d %H:%M:%S%.3f UTC")),
            (None, None) => println!("{st}"),
        },
        st => println!(
            "still {st} after {} (not finished)",
            crate::human::duration(timeout.as_secs_f64())
        ),
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_take_seconds_and_units() {
        assert_eq!(parse_span("x", "0").unwrap(), Duration::ZERO);
        assert_eq!(parse_span("x", "90").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_span("x", "1.5s").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_span("x", "15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_span("x", "2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(
            parse_span("x", " 7D ").unwrap(),
            Duration::from_secs(604_800)
        );
        for bad in ["", "-1", "abc", "5w", "m", "nan", "inf", "1e400"] {
            let e = parse_span("--older-than", bad).unwrap_err().to_string();
            assert!(e.starts_with("--older-than: "), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_ids_name_the_argument() {
        let e = job_id("ABC").unwrap_err().to_string();
        assert_eq!(
            e,
            r#"ID: "ABC" is not a job id (32 lowercase hex characters)"#
        );
        assert!(job_id("ba69034b39c05d28a5403ac10e276e79").is_ok());
    }

    #[test]
    fn counts_lines() {
        let c = [(State::Queued, 3), (State::Working, 0), (State::Failed, 2)];
        assert_eq!(counts_line(&c), "jobs: 3 queued · 0 working · 2 failed");
    }
}
