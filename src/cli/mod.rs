//! The `resq` command line, as a library so a service's own binary gets the whole CLI with
//! its handlers: `fn main() -> ExitCode { resq::cli::run(my_registry()) }` (docs/cli.md).
//!
//! Global flags: `--url` (`REDIS_URL`), `--namespace` (`RESQUE_NAMESPACE`), `--json`.
//! One module per command group; each is a thin layer over [`crate::admin`], [`crate::client`]
//! or `crate::worker`:
//! * `show` — `info`, `queues`, `workers`, `delayed list`, `prune`, `pause`, `resume`;
//! * `failed` — `failed list|show|retry|remove|clear`;
//! * `enqueue` — `enqueue` (with `--track`), and `enqueue_file` — `enqueue --file`;
//!   `work` — `work`; `top` — `top`; `web` — `web`;
//! * `jobs` — `jobs`, `jobs purge`, `job show|wait|cancel` (tracked jobs);
//! * `batch` — `batch create|show`, `batches`; `enqueue_flow` — `enqueue --track`'s workflow
//!   flags (`--after`, `--if-dep-failed`, `--parent`, `--batch`);
//! * `limits` — `limits list|set|clear` (flow control);
//! * `coverage` — `coverage`: the classes each queue gets and which have no handler here;
//! * `pause` — `pause`, `resume`: every worker (`show`'s), or `--queue` queues;
//! * `schedule` — `scheduler`, `schedule list|add|remove`;
//! * `split` — `split`: split queues (declare, change N, turn off, show);
//! * `output` — tables, JSON and durations.

pub(crate) mod batch;
pub(crate) mod coverage;
pub(crate) mod enqueue;
pub(crate) mod enqueue_file;
pub(crate) mod enqueue_flow;
pub(crate) mod failed;
pub(crate) mod job_show;
pub(crate) mod jobs;
pub(crate) mod limits;
pub(crate) mod output;
pub(crate) mod pause;
pub(crate) mod schedule;
pub(crate) mod show;
pub(crate) mod split;
#[cfg(feature = "top")]
pub(crate) mod top;
#[cfg(feature = "web")]
pub(crate) mod web;
pub(crate) mod work;

use crate::admin::Admin;
use crate::conn::RedisOptions;
use crate::error::Result;
use crate::registry::Registry;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
use std::process::ExitCode;

/// The whole command line.
#[derive(Parser, Debug)]
#[command(
    name = "resq",
    version,
    about = "Resque-compatible worker runtime and tools"
)]
pub(crate) struct Cli {
    /// Where and which namespace.
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Print JSON instead of tables.
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,
    /// The command.
    #[command(subcommand)]
    pub cmd: Command,
}

/// `--url` and `--namespace`, accepted before or after the command.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Global options")]
pub(crate) struct ConnArgs {
    /// Redis URL (`redis://`, `rediss://`, `redis+sentinel://`, `redis+cluster://`); its
    /// value is never shown.
    #[arg(long = "url", env = "REDIS_URL", hide_env_values = true, default_value = crate::settings::DEFAULT_REDIS_URL, global = true)]
    pub url: String,
    /// Key prefix, used verbatim (`myapp:jobs` → `myapp:jobs:queue:x`).
    #[arg(long, env = "RESQUE_NAMESPACE", default_value = crate::settings::DEFAULT_NAMESPACE, global = true)]
    pub namespace: String,
    /// Seconds each Redis call may wait for its reply before the command fails saying so
    /// (every command but `work` and `scheduler`, whose own timeouts apply).
    #[arg(
        long,
        env = "RESQ_REDIS_TIMEOUT",
        default_value = "5",
        value_name = "SECS",
        global = true
    )]
    pub redis_timeout: String,
}

/// Every command.
#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Run a worker process for this binary's handlers.
    Work(work::WorkArgs),
    /// Enqueue a job (`--track`: with an id, printed), or one per line of a file (`--file`).
    Enqueue(enqueue::EnqueueArgs),
    /// Counters and totals.
    Info,
    /// Queues: size and age of the oldest job.
    Queues,
    /// Registered workers (Ruby, Jesque, node-resque, goworker, resq).
    Workers,
    /// The failure list.
    #[command(subcommand)]
    Failed(failed::FailedCmd),
    /// Delayed jobs.
    #[command(subcommand)]
    Delayed(show::DelayedCmd),
    /// Remove dead workers now (Ruby's rules and lock).
    Prune(show::PruneArgs),
    /// Tracked jobs: the count of each state and a page of jobs, newest first; `jobs purge`.
    Jobs(jobs::JobsArgs),
    /// One tracked job by id: show, wait for it (exit status says how it ended), cancel.
    #[command(subcommand)]
    Job(jobs::JobCmd),
    /// Batches of tracked jobs with callbacks: create one from a file of jobs, show one.
    #[command(subcommand)]
    Batch(batch::BatchCmd),
    /// Batches, newest first: counts, state, times.
    Batches(batch::BatchesArgs),
    /// Per queue, the job classes a live namespace sends it and which have no handler in this
    /// binary (queued, failed, delayed and recurring jobs; Ruby plugin keys resq does not
    /// reproduce): "can this binary take the queue yet?".
    Coverage(coverage::CoverageArgs),
    /// Flow-control limits: what each is doing, operators' overrides.
    #[command(subcommand)]
    Limits(limits::LimitsCmd),
    /// Set `<ns>:pause-all-workers`: every worker stops taking jobs; with `--queue`, only
    /// that queue, for resq workers.
    Pause(pause::PauseArgs),
    /// Clear `<ns>:pause-all-workers`; with `--queue`, resume that queue.
    Resume(pause::PauseArgs),
    /// Split a queue into N shards, each in a hash slot of its own (docs/cluster.md), change
    /// N (the old shards drain), turn it off, or show the splits.
    Split(split::SplitArgs),
    /// Live view of queues, workers and rates.
    #[cfg(feature = "top")]
    Top(top::TopArgs),
    /// Serve the web dashboard (queues, workers, failures, schedules, graphs).
    #[cfg(feature = "web")]
    Web(web::WebArgs),
    /// Run the scheduler (delayed and recurring jobs; resque-scheduler's master lock).
    Scheduler(schedule::SchedulerArgs),
    /// Stored recurring schedules (resque-scheduler's persistent_schedules).
    #[command(subcommand)]
    Schedule(schedule::ScheduleCmd),
}

/// Parses the process's arguments and runs the command with `registry`'s handlers (used by
/// `resq work`). Sets up logging (`RESQ_LOG_FORMAT`, `RUST_LOG`) and resq's tokio runtime
/// ([`crate::runtime::build`]: one worker thread unless `TOKIO_WORKER_THREADS` says otherwise;
/// two for `web`).
pub fn run(registry: Registry) -> ExitCode {
    run_from(std::env::args_os(), registry)
}

/// [`run`] with explicit arguments (the first is the program name).
pub fn run_from<I, T>(args: I, registry: Registry) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    crate::logging::init_from_env();
    let cli = command()
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m))
        .unwrap_or_else(|e| e.exit());
    if !matches!(cli.cmd, Command::Work(_)) {
        quiet_on_closed_stdout();
    }
    // The dashboard serves requests side by side: one's own work never holds up the next.
    #[cfg(feature = "web")]
    let threads = if matches!(cli.cmd, Command::Web(_)) {
        2
    } else {
        1
    };
    #[cfg(not(feature = "web"))]
    let threads = 1;
    let rt = match crate::runtime::build_with(threads) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = rt.block_on(execute(cli, registry));
    // The spans of this run (a worker's last jobs, an enqueue's send) leave before it ends.
    #[cfg(feature = "otel")]
    crate::otel::flush();
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}{}", timeout_hint(&e));
            ExitCode::FAILURE
        }
    }
}

/// What to add to an error that is a Redis call timing out: where the bound comes from.
fn timeout_hint(e: &crate::Error) -> &'static str {
    match e {
        crate::Error::Redis(r) if r.is_timeout() => {
            " (each Redis call waits at most --redis-timeout seconds, RESQ_REDIS_TIMEOUT; 5 by \
             default)"
        }
        _ => "",
    }
}

/// Ends the process quietly with status 141, as a Unix tool that SIGPIPE ends, once standard
/// output is a pipe whose reader has gone (`resq jobs | head -1`): Rust ignores SIGPIPE, so the
/// write fails instead, and `println!` panics on a failed write. Any other panic goes on to
/// the hook that was there. Not for `work`, whose output is logs.
fn quiet_on_closed_stdout() {
    let next = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("os error 32") {
            std::process::exit(141);
        }
        next(info)
    }));
}

/// The command line's definition, its help showing an environment variable's value only when
/// the variable is set (clap would print `[env: QUEUES=]` for an unset one) and never
/// `REDIS_URL`'s (it may hold a password).
pub fn command() -> clap::Command {
    show_env_values_when_set(Cli::command())
}

/// Hides the value of every environment-backed argument whose variable is unset, here and in
/// every subcommand.
fn show_env_values_when_set(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        let unset = a.get_env().is_some_and(|v| std::env::var_os(v).is_none());
        if unset {
            a.hide_env_values(true)
        } else {
            a
        }
    })
    .mut_subcommands(show_env_values_when_set)
}

/// The hint printed (to stderr) when a command finds no Resque data under the namespace.
fn empty_namespace_hint(url: &str, namespace: &str) -> String {
    format!(
        "hint: no Resque data under namespace {namespace:?} at {} (no queues, workers, stats, \
         failures, schedules, tracked jobs, limits or paused queues); is RESQUE_NAMESPACE \
         (--namespace) right?",
        crate::conn::Redacted(url)
    )
}

/// Where a command works: `--url`, `--namespace`, the connection settings beyond the URL from
/// the environment (`REDIS_TLS_*`, `RESQ_CLUSTER`, `RESQ_WAIT_*`) and `--redis-timeout`.
pub(crate) struct Target {
    /// The Redis URL.
    pub url: String,
    /// The namespace.
    pub namespace: String,
    /// Connection settings beyond the URL (without the bound: what a long-running command,
    /// `scheduler`, takes).
    pub redis: RedisOptions,
    /// `--redis-timeout`: how long each Redis call of a handle made here may wait.
    pub timeout: std::time::Duration,
}

impl Target {
    /// The connection settings of the handles made here: [`Target::redis`] with the bound.
    fn bounded(&self) -> RedisOptions {
        let mut o = self.redis.clone();
        o.response_timeout = Some(self.timeout);
        o
    }

    /// An admin handle on the target.
    pub(crate) async fn admin(&self) -> Result<Admin> {
        Admin::connect_with(&self.url, &self.namespace, &self.bounded()).await
    }

    /// A client on the target.
    pub(crate) async fn client(&self) -> Result<crate::Client> {
        crate::Client::connect_with(&self.url, &self.namespace, &self.bounded()).await
    }

    /// A connection to the target's Redis, with the namespace's keys as the deployment lays
    /// them out (spread on a cluster namespace without a hash tag).
    pub(crate) async fn con_keys(&self) -> Result<(crate::conn::Conn, crate::keys::Keys)> {
        crate::conn::Endpoint::connect_namespace(&self.url, &self.namespace, &self.bounded()).await
    }
}

/// `--redis-timeout`: a positive number of seconds.
fn redis_timeout(text: &str) -> Result<std::time::Duration> {
    let d = crate::settings::parse_secs("--redis-timeout (RESQ_REDIS_TIMEOUT)", text)?;
    if d.is_zero() {
        return Err(crate::Error::Config {
            var: "--redis-timeout (RESQ_REDIS_TIMEOUT)",
            message: format!("{text:?}: must be more than 0 seconds"),
        });
    }
    Ok(d)
}

/// Runs a parsed command; the process's exit status (`job wait` has its own codes).
pub(crate) async fn execute(cli: Cli, registry: Registry) -> Result<ExitCode> {
    let Cli { conn, json, cmd } = cli;
    let target = Target {
        url: conn.url.clone(),
        namespace: conn.namespace.clone(),
        redis: RedisOptions::from_env()?,
        timeout: redis_timeout(&conn.redis_timeout)?,
    };
    match cmd {
        Command::Job(j) => jobs::job(&target, j, json).await,
        cmd => run_command(&conn, &target, cmd, json, registry)
            .await
            .map(|()| ExitCode::SUCCESS),
    }
}

/// Runs a command whose success is exit status 0.
async fn run_command(
    conn: &ConnArgs,
    target: &Target,
    cmd: Command,
    json: bool,
    registry: Registry,
) -> Result<()> {
    let (url, ns) = (conn.url.as_str(), conn.namespace.as_str());
    match cmd {
        Command::Work(w) => work::run(url, ns, w, registry).await,
        Command::Enqueue(e) => enqueue::run(target, e, json).await,
        Command::Batch(b) => batch::run(target, b, json).await,
        Command::Scheduler(s) => schedule::run_scheduler(target, s).await,
        Command::Schedule(s) => {
            let list = matches!(s, schedule::ScheduleCmd::List);
            let admin = target.admin().await?;
            if list && !admin.has_data().await? {
                eprintln!("{}", empty_namespace_hint(url, ns));
            }
            schedule::run_schedule(target, s, json).await?;
            if list && !json {
                let status = admin.scheduler_status(&lock_prefix()).await?;
                println!("scheduler: {}", status.describe());
            }
            Ok(())
        }
        #[cfg(feature = "web")]
        Command::Web(w) => web::run(target, w, registry).await,
        cmd => {
            let admin = target.admin().await?;
            if !admin.has_data().await? {
                eprintln!("{}", empty_namespace_hint(url, ns));
            }
            match cmd {
                Command::Info => show::info(&admin, json, &lock_prefix()).await,
                Command::Queues => show::queues(&admin, json).await,
                Command::Workers => show::workers(&admin, json).await,
                Command::Failed(f) => failed::run(&admin, f, json).await,
                Command::Delayed(d) => show::delayed(&admin, d, json).await,
                Command::Prune(p) => show::prune(&admin, p, json).await,
                Command::Pause(p) => pause::pause(&admin, p, true, json).await,
                Command::Resume(p) => pause::pause(&admin, p, false, json).await,
                Command::Split(a) => split::run(&admin, a, json).await,
                Command::Limits(l) => limits::run(&admin, l, json).await,
                Command::Jobs(j) => jobs::jobs(&admin, j, json).await,
                Command::Batches(b) => batch::list(&admin, b, json).await,
                Command::Coverage(c) => coverage::run(&admin, &registry, c, json).await,
                #[cfg(feature = "top")]
                Command::Top(t) => top::run(&admin, url, t).await,
                Command::Work(_)
                | Command::Enqueue(_)
                | Command::Batch(_)
                | Command::Scheduler(_)
                | Command::Schedule(_)
                | Command::Job(_) => Ok(()),
                #[cfg(feature = "web")]
                Command::Web(_) => Ok(()),
            }
        }
    }
}

/// resque-scheduler's `RESQUE_SCHEDULER_MASTER_LOCK_PREFIX` (empty when unset): part of the
/// master lock's key.
fn lock_prefix() -> String {
    std::env::var("RESQUE_SCHEDULER_MASTER_LOCK_PREFIX").unwrap_or_default()
}
