//! `resq coverage`: per queue, the job classes a live namespace sends it and which of them this
//! binary has no handler for, plus Ruby plugin keys resq does not reproduce (docs/migration.md).

use super::output::{json, table};
use crate::admin::Admin;
use crate::coverage::{report, Budget, Coverage, Source};
use crate::error::Result;
use crate::registry::Registry;
use clap::Args;

/// `resq coverage` arguments.
#[derive(Args, Debug)]
pub(crate) struct CoverageArgs {
    /// Only this queue (repeatable); without it, every queue in `<ns>:queues`.
    #[arg(long = "queue", value_name = "QUEUE")]
    pub queues: Vec<String>,
    /// Jobs read from the head of each queue at most (also the newest failures and the
    /// earliest delayed items read, each in all).
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub sample: usize,
    /// Queue names read from `<ns>:queues` at most.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_queues: usize,
    /// Keyspace entries the search for Ruby plugin keys visits at most (SCAN calls of 1000;
    /// 0: no search).
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub scan_keys: usize,
}

/// Runs `resq coverage` against `registry`'s handlers.
pub(crate) async fn run(
    admin: &Admin,
    registry: &Registry,
    args: CoverageArgs,
    as_json: bool,
) -> Result<()> {
    let budget = Budget {
        per_queue: args.sample.max(1),
        queues: args.max_queues.max(1),
        scan_keys: args.scan_keys,
    };
    let cov = report(admin, registry, &args.queues, budget).await?;
    if as_json {
        return json(&cov);
    }
    print!("{}", render(&cov, registry.classes().len()));
    Ok(())
}

/// The report as text.
fn render(cov: &Coverage, handlers: usize) -> String {
    let mut out = String::new();
    if cov.queues.is_empty() {
        out.push_str("no queues, failures, delayed jobs or schedules found\n");
    }
    for q in &cov.queues {
        let verdict = if q.ready {
            "ready: every class seen has a handler here".to_string()
        } else {
            let missing: Vec<&str> = q
                .classes
                .iter()
                .filter(|c| !c.handled)
                .map(|c| c.class.as_str())
                .collect();
            let mut why = format!("NOT ready: no handler for {}", missing.join(", "));
            if q.unreadable > 0 {
                why.push_str(&format!("; {} payloads without a class", q.unreadable));
            }
            why
        };
        out.push_str(&format!(
            "queue {} ({}, {} jobs, {} read) — {verdict}\n",
            q.queue, q.kind, q.size, q.read
        ));
        let rows = q.classes.iter().map(|c| {
            vec![
                if c.activejob {
                    format!("{} (ActiveJob)", c.class)
                } else {
                    c.class.clone()
                },
                c.jobs.to_string(),
                c.seen_in
                    .iter()
                    .map(|s| match s {
                        Source::Queued => "queued",
                        Source::Failed => "failed",
                        Source::Delayed => "delayed",
                        Source::Recurring => "recurring",
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                if c.handled { "yes" } else { "MISSING" }.to_string(),
            ]
        });
        for line in table(&["CLASS", "JOBS", "SEEN IN", "HANDLER"], rows).lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    if !cov.plugins.is_empty() {
        out.push_str("Ruby plugin keys resq does not reproduce:\n");
        let rows = cov.plugins.iter().map(|p| {
            vec![
                p.plugin.to_string(),
                p.keys.to_string(),
                p.example.clone(),
                p.instead.to_string(),
            ]
        });
        for line in table(&["PLUGIN", "KEYS", "EXAMPLE", "IN RESQ"], rows).lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    let r = &cov.read;
    let all = |complete: bool| {
        if complete {
            "all"
        } else {
            "stopped at the budget"
        }
    };
    out.push_str(&format!(
        "read: {} queue names ({}), {} queued jobs, {} of {} failures (newest), {} delayed \
         items (earliest), {} schedules, {} keys scanned for plugins ({}); {handlers} \
         handlers in this binary\n",
        r.queue_names,
        all(r.queue_names_complete),
        r.jobs,
        r.failures,
        r.failures_total,
        r.delayed,
        r.schedules,
        r.keys_scanned,
        all(r.scan_complete),
    ));
    out
}
