//! The read-side commands and the small switches: `info`, `queues`, `workers`,
//! `delayed list`, `prune`, `pause`, `resume`.

use super::output::{age, duration, json, short, table};
use crate::admin::{Admin, QueueKind, WorkerState};
use crate::error::Result;
use clap::{Args, Subcommand};
use std::time::Duration;

/// `resq info`, with whether a scheduler holds the master lock (`lock_prefix`: resque-scheduler's
/// `RESQUE_SCHEDULER_MASTER_LOCK_PREFIX`).
pub(crate) async fn info(admin: &Admin, as_json: bool, lock_prefix: &str) -> Result<()> {
    let i = admin.info().await?;
    let scheduler = admin.scheduler_status(lock_prefix).await?;
    if as_json {
        /// `info`'s fields and the scheduler's status, as one object.
        #[derive(serde::Serialize)]
        struct InfoOut<'a> {
            #[serde(flatten)]
            info: &'a crate::admin::Info,
            scheduler: &'a crate::admin::SchedulerStatus,
        }
        return json(&InfoOut {
            info: &i,
            scheduler: &scheduler,
        });
    }
    let rows = vec![
        ("namespace", i.namespace.clone()),
        ("processed", i.processed.to_string()),
        ("failed (stat)", i.failed.to_string()),
        ("failed entries", i.failed_entries.to_string()),
        ("queues", i.queues.to_string()),
        ("pending", i.pending.to_string()),
        ("workers", format!("{} ({} working)", i.workers, i.working)),
        ("paused", if i.paused { "yes" } else { "no" }.to_string()),
        ("delayed timestamps", i.delayed_timestamps.to_string()),
        ("scheduler", scheduler.describe()),
    ];
    for (k, v) in rows {
        println!("{k:<20}{v}");
    }
    Ok(())
}

/// `resq queues`.
pub(crate) async fn queues(admin: &Admin, as_json: bool) -> Result<()> {
    let qs = admin.queues().await?;
    if as_json {
        return json(&qs);
    }
    let rows = qs.iter().map(|q| {
        vec![
            q.name.clone(),
            match &q.kind {
                QueueKind::List => "list".to_string(),
                QueueKind::Zset => "jesque-delayed".to_string(),
                QueueKind::Empty => "empty".to_string(),
                QueueKind::Other(t) => t.clone(),
            },
            q.size.to_string(),
            q.pending
                .map(|p| p.to_string())
                .unwrap_or_else(|| "-".into()),
            if q.size == 0 {
                "-".to_string()
            } else {
                age(q.oldest_age_s)
            },
        ]
    });
    println!(
        "{}",
        table(&["QUEUE", "KIND", "SIZE", "DUE", "OLDEST"], rows)
    );
    Ok(())
}

/// `resq workers`.
pub(crate) async fn workers(admin: &Admin, as_json: bool) -> Result<()> {
    let ws = admin.workers().await?;
    if as_json {
        return json(&ws);
    }
    let rows = ws.iter().map(|w| {
        let (class, running) = match &w.job {
            Some(j) => (
                j.class.clone().unwrap_or_else(|| "?".into()),
                age(j.running_for_s),
            ),
            None => ("-".into(), "-".into()),
        };
        vec![
            w.host.clone(),
            w.pid.clone(),
            short(&w.queues.join(","), 30),
            w.runtime.to_string(),
            match w.state {
                WorkerState::Idle => "idle",
                WorkerState::Busy => "busy",
                WorkerState::Paused => "paused",
            }
            .to_string(),
            class,
            running,
            w.started.clone().unwrap_or_else(|| "-".into()),
            w.heartbeat
                .as_ref()
                .map(|_| age(w.heartbeat_age_s))
                .unwrap_or_else(|| "none".into()),
            w.processed.to_string(),
            w.failed.to_string(),
        ]
    });
    println!(
        "{}",
        table(
            &[
                "HOST",
                "PID",
                "QUEUES",
                "RUNTIME",
                "STATE",
                "JOB",
                "RUNNING",
                "STARTED",
                "HEARTBEAT",
                "PROCESSED",
                "FAILED"
            ],
            rows
        )
    );
    for w in &ws {
        for n in &w.notes {
            eprintln!("note: {}: {n}", w.id);
        }
    }
    Ok(())
}

/// `resq delayed …`.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum DelayedCmd {
    /// Delayed items (resque-scheduler buckets and Jesque delayed queues), earliest first.
    List {
        /// At most this many items.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

/// Runs `resq delayed …`.
pub(crate) async fn delayed(admin: &Admin, cmd: DelayedCmd, as_json: bool) -> Result<()> {
    let DelayedCmd::List { limit } = cmd;
    let items = admin.delayed(limit).await?;
    if as_json {
        return json(&items);
    }
    let now = admin.now().await?;
    let rows = items.iter().map(|i| {
        vec![
            i.at.map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
                .unwrap_or_else(|| "?".into()),
            i.at.map(|t| duration(-crate::admin::secs_between(t, now)))
                .unwrap_or_default(),
            match i.source {
                crate::admin::delayed::DelayedSource::Scheduler => "scheduler",
                crate::admin::delayed::DelayedSource::Jesque => "jesque",
            }
            .to_string(),
            i.queue.clone().unwrap_or_else(|| "-".into()),
            i.class.clone().unwrap_or_else(|| "?".into()),
            short(&i.args.to_string(), 40),
            i.every_s.map(duration).unwrap_or_else(|| "-".into()),
        ]
    });
    println!(
        "{}",
        table(
            &["AT", "DUE", "SOURCE", "QUEUE", "CLASS", "ARGS", "EVERY"],
            rows
        )
    );
    Ok(())
}

/// `resq prune [--prune-after S] [--at-least-once]`.
#[derive(Args, Debug, Clone)]
pub(crate) struct PruneArgs {
    /// Heartbeat age after which a worker is dead (Ruby's prune_interval; at least 300).
    #[arg(long, env = "RESQ_PRUNE_AFTER", default_value_t = 300)]
    pub prune_after: u64,
    /// Put jobs of dead workers back on their queue instead of recording failures.
    #[arg(long, env = "RESQ_AT_LEAST_ONCE", value_parser = clap::builder::BoolishValueParser::new())]
    pub at_least_once: bool,
}

/// Runs `resq prune`.
pub(crate) async fn prune(admin: &Admin, a: PruneArgs, as_json: bool) -> Result<()> {
    let out = admin
        .prune(Duration::from_secs(a.prune_after), a.at_least_once)
        .await?;
    if as_json {
        return json(&out);
    }
    if !out.locked {
        println!("another process is pruning (the lock is held); nothing done");
        return Ok(());
    }
    if out.pruned.is_empty() {
        println!("no dead workers");
    }
    for p in &out.pruned {
        println!("pruned {} ({}, job {})", p.id, p.reason, p.job);
    }
    for (id, why) in &out.skipped {
        println!("left {id}: {why}");
    }
    Ok(())
}

/// `resq pause` / `resq resume`.
pub(crate) async fn pause(admin: &Admin, paused: bool, as_json: bool) -> Result<()> {
    if paused {
        admin.pause().await?;
    } else {
        admin.resume().await?;
    }
    if as_json {
        return json(&serde_json::json!({ "paused": paused }));
    }
    println!(
        "{}: {}",
        admin.keys().pause_all_workers(),
        if paused {
            "set, workers take no new jobs"
        } else {
            "cleared, workers resume"
        }
    );
    Ok(())
}
