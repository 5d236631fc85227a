//! The scheduler's commands:
//! * `resq scheduler` — run the scheduler standalone until INT/TERM/QUIT;
//! * `resq schedule list|add|remove` — the stored recurring schedules.

use super::{output, Target};
use crate::error::{Error, Result};
use crate::scheduler::schedule::{self, at, Schedule};
use crate::scheduler::store::{self, NewSchedule};
use crate::scheduler::{Scheduler, SchedulerConfig};
use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::Value;

/// `resq scheduler [--interval SECS]`.
#[derive(Args, Debug, Clone)]
pub(crate) struct SchedulerArgs {
    /// Poll period in seconds (`RESQ_SCHEDULER_INTERVAL`, default 1).
    #[arg(long, env = "RESQ_SCHEDULER_INTERVAL")]
    pub interval: Option<String>,
    /// Do not fire recurring schedules (move delayed jobs only).
    #[arg(long)]
    pub no_recurring: bool,
}

/// `resq schedule …`.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum ScheduleCmd {
    /// Stored recurring schedules, with their next and last fire.
    List,
    /// Store (or replace) a recurring schedule.
    Add(AddArgs),
    /// Remove a stored schedule.
    Remove {
        /// Schedule name.
        name: String,
    },
}

/// `resq schedule add NAME (--cron EXPR | --every DUR) --queue Q [--class C] [ARG_JSON …]`.
#[derive(Args, Debug, Clone)]
pub(crate) struct AddArgs {
    /// Schedule name (also the class when --class is not given).
    pub name: String,
    /// Cron expression: 5 fields, or 6 with seconds first, then an optional zone name.
    #[arg(long, conflicts_with = "every", required_unless_present = "every")]
    pub cron: Option<String>,
    /// Period: `30s`, `1h30m`, `2d` …
    #[arg(long)]
    pub every: Option<String>,
    /// Queue the job goes to.
    #[arg(long)]
    pub queue: String,
    /// Job class (default: the name).
    #[arg(long)]
    pub class: Option<String>,
    /// Free text shown by resque-web.
    #[arg(long)]
    pub description: Option<String>,
    /// Positional args, each one JSON value (negative numbers such as `-7` are values, not flags).
    #[arg(allow_negative_numbers = true)]
    pub args: Vec<String>,
}

/// Runs `resq scheduler` until a signal.
pub(crate) async fn run_scheduler(target: &Target, a: SchedulerArgs) -> Result<()> {
    let mut cfg = SchedulerConfig::from_env()?;
    cfg.redis_url = crate::conn::parse_url(&target.url, &target.redis)?;
    cfg.namespace = target.namespace.clone();
    cfg.redis = target.redis.clone();
    if let Some(i) = &a.interval {
        cfg.interval = crate::settings::parse_secs("RESQ_SCHEDULER_INTERVAL", i)?;
    }
    cfg.recurring = !a.no_recurring;
    let scheduler = Scheduler::connect(cfg).await?;
    eprintln!(
        "scheduler {} on {}",
        scheduler.lock().value,
        scheduler.lock().key
    );
    let (tx, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(scheduler.run(rx));
    wait_for_signal().await?;
    let _ = tx.send(true);
    let _ = task.await;
    Ok(())
}

async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut quit = signal(SignalKind::quit())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = quit.recv() => {}
    }
    Ok(())
}

/// One row of `resq schedule list`.
#[derive(Serialize)]
struct Row {
    name: String,
    when: String,
    class: String,
    queue: String,
    next: Option<String>,
    last_enqueued_at: Option<String>,
    config: Value,
}

/// Runs `resq schedule …`.
pub(crate) async fn run_schedule(target: &Target, cmd: ScheduleCmd, json: bool) -> Result<()> {
    let (mut con, keys) = target.con_keys().await?;
    let tz = SchedulerConfig::from_env()?.time_zone;
    match cmd {
        ScheduleCmd::List => {
            let rows: Vec<Row> = store::list(&mut con.clone(), &keys)
                .await?
                .into_iter()
                .map(|s| {
                    let (config, when, class, queue) = match &s.config {
                        Ok(c) => {
                            let when = Schedule::from_config(&s.name, c, tz)
                                .map(|x| x.describe_when())
                                .unwrap_or_else(|e| format!("invalid: {e}"));
                            let get =
                                |k: &str| c.get(k).and_then(Value::as_str).map(str::to_string);
                            (
                                Value::Object(c.clone()),
                                when,
                                get("class").unwrap_or_else(|| s.name.clone()),
                                get("queue").unwrap_or_default(),
                            )
                        }
                        Err(text) => (
                            Value::String(text.clone()),
                            "invalid JSON".into(),
                            String::new(),
                            String::new(),
                        ),
                    };
                    Row {
                        next: s.next_due.and_then(at).map(|t| t.to_rfc3339()),
                        last_enqueued_at: s.last_enqueued_at.clone(),
                        name: s.name,
                        when,
                        class,
                        queue,
                        config,
                    }
                })
                .collect();
            if json {
                return output::json(&rows);
            }
            let table = output::table(
                &["NAME", "WHEN", "CLASS", "QUEUE", "NEXT", "LAST ENQUEUED"],
                rows.iter().map(|r| {
                    vec![
                        r.name.clone(),
                        r.when.clone(),
                        r.class.clone(),
                        r.queue.clone(),
                        r.next.clone().unwrap_or_else(|| "-".into()),
                        r.last_enqueued_at.clone().unwrap_or_else(|| "-".into()),
                    ]
                }),
            );
            println!("{table}");
            Ok(())
        }
        ScheduleCmd::Add(a) => {
            let args: Vec<Value> = a
                .args
                .iter()
                .map(|s| {
                    serde_json::from_str(s).map_err(|e| Error::Config {
                        var: "ARG_JSON",
                        message: format!(
                            "argument {s:?} is not JSON ({e}); quote strings: '\"text\"'"
                        ),
                    })
                })
                .collect::<Result<_>>()?;
            if let Some(every) = &a.every {
                schedule::parse_duration(every).map_err(Error::Rejected)?;
            }
            let spec = NewSchedule {
                class: a.class.clone().unwrap_or_else(|| a.name.clone()),
                queue: a.queue.clone(),
                args,
                cron: a.cron.clone(),
                every: a.every.clone(),
                description: a.description.clone(),
            };
            store::add(&mut con, &keys, &a.name, &spec.to_config(), tz).await?;
            if json {
                output::json(&serde_json::json!({"added": a.name}))
            } else {
                println!("schedule {} stored", a.name);
                Ok(())
            }
        }
        ScheduleCmd::Remove { name } => {
            let existed = store::remove(&mut con, &keys, &name).await?;
            if json {
                return output::json(&serde_json::json!({"removed": existed, "name": name}));
            }
            if existed {
                println!("schedule {name} removed");
                Ok(())
            } else {
                Err(Error::Rejected(format!("no stored schedule named {name}")))
            }
        }
    }
}
