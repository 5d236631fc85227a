//! Coverage (`GET /coverage`, `?queue=Q` for one): per queue, the job classes the namespace
//! sends it and whether the binary serving the dashboard has a handler for each — the
//! migration report of `resq coverage` ([`crate::coverage`], docs/migration.md), read within a
//! page's budget. A dashboard embedded without a registry says so.

use super::ctx::Ctx;
use super::error::WebResult;
use super::layout::{num, page, Tab};
use super::state::App;
use crate::coverage::{report, Budget, Source};
use axum::extract::State;
use axum::response::Html;
use maud::html;
use std::sync::Arc;

/// What one page reads at most: every queue (up to 200 names) a little, or one queue more.
const ALL: Budget = Budget {
    per_queue: 100,
    queues: 200,
    scan_keys: 10_000,
};
const ONE: Budget = Budget {
    per_queue: 1_000,
    queues: 1,
    scan_keys: 10_000,
};

/// `GET /coverage`.
pub(crate) async fn show(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let title = "Coverage";
    let Some(registry) = &app.registry else {
        let body = html! {
            p.muted {
                "This dashboard was started without handlers to compare with. Serve it from your "
                "own binary (" code { "resq::cli::run(registry)" } ", then its " code { "web" }
                " command) to see which classes of each queue it has no handler for "
                "(docs/migration.md)."
            }
        };
        return Ok(page(
            &ctx,
            Tab::Coverage,
            admin.keys().namespace(),
            title,
            body,
        ));
    };
    let only: Vec<String> = ctx
        .query
        .get("queue")
        .map(str::to_string)
        .into_iter()
        .collect();
    let budget = if only.is_empty() { ALL } else { ONE };
    let cov = report(admin, registry, &only, budget).await?;
    let r = &cov.read;
    let body = html! {
        p.muted {
            "Handlers in this binary: " (registry.classes().len()) ". "
            "Read: " (num(r.queue_names)) " queue names"
            @if !r.queue_names_complete { span.warn data-partial="queues" { " (stopped early: a page reads " (ALL.queues) "; filter by queue)" } }
            ", up to " (budget.per_queue) " jobs from the head of each queue, "
            (num(r.failures)) " of " (num(r.failures_total)) " failures (the newest), "
            (num(r.delayed)) " delayed items (the earliest), " (num(r.schedules)) " schedules, "
            (num(r.keys_scanned)) " keys scanned for plugins"
            @if !r.scan_complete { span.warn data-partial="scan" { " (stopped early)" } }
            ". " code { "resq coverage" } " reads more (docs/migration.md)."
        }
        @for q in &cov.queues {
            section data-queue=(q.queue) {
                h2 {
                    a href=(ctx.link(&format!("coverage?{}", super::ctx::query(&[("queue", &q.queue)])))) { (q.queue) }
                    " "
                    @if q.ready { span.badge.completed data-ready="yes" { "ready" } }
                    @else { span.badge.failed data-ready="no" { "not ready" } }
                }
                p.muted { (q.kind) ", " (num(q.size)) " jobs, " (num(q.read)) " read"
                    @if q.unreadable > 0 { ", " (num(q.unreadable)) " payloads without a class" } }
                table {
                    thead { tr { th { "class" } th.num { "jobs" } th { "seen in" } th { "handler here" } } }
                    tbody {
                        @for c in &q.classes { tr data-class=(c.class) {
                            td.mono { (c.class) @if c.activejob { " " span.muted { "(ActiveJob)" } } }
                            td.num { (num(c.jobs)) }
                            td { (c.seen_in.iter().map(|s| match s {
                                Source::Queued => "queued",
                                Source::Failed => "failed",
                                Source::Delayed => "delayed",
                                Source::Recurring => "recurring",
                            }).collect::<Vec<_>>().join(", ")) }
                            td { @if c.handled { "yes" } @else { span.warn data-missing { "missing" } } }
                        } }
                        @if q.classes.is_empty() { tr { td colspan="4" .muted { "nothing seen" } } }
                    }
                }
            }
        }
        @if cov.queues.is_empty() { p.muted { "No queues, failures, delayed jobs or schedules." } }
        @if !cov.plugins.is_empty() {
            h2 { "Ruby plugin keys resq does not reproduce" }
            table {
                thead { tr { th { "plugin" } th.num { "keys" } th { "example" } th { "in resq" } } }
                tbody { @for p in &cov.plugins { tr data-plugin=(p.plugin) {
                    td { (p.plugin) } td.num { (num(p.keys)) } td.mono { (p.example) } td { (p.instead) }
                } } }
            }
        }
    };
    Ok(page(
        &ctx,
        Tab::Coverage,
        admin.keys().namespace(),
        title,
        body,
    ))
}
