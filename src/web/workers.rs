//! Workers (`GET /workers`): every registered worker grouped by host, with its runtime (Ruby,
//! Jesque, node-resque, goworker or resq, as [`crate::admin::workers`] tells them apart),
//! queues, state, current job, how long it has run, heartbeat age and counts. `?busy=1` shows
//! only busy workers. A page reads at most [`PAGE`] worker ids (SSCAN order, sorted within the
//! page; `?from=<cursor>` goes on), so its cost does not grow with the fleet.

use super::ctx::Ctx;
use super::error::WebResult;
use super::layout::{age, num, page, short, Tab};
use super::state::App;
use crate::admin::{WorkerInfo, WorkerState};
use axum::extract::State;
use axum::response::Html;
use maud::html;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Worker ids a page reads at most.
pub(crate) const PAGE: usize = 500;

/// `GET /workers[?busy=1][&from=<cursor>]`.
pub(crate) async fn show(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let from: u64 = ctx
        .query
        .get("from")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (workers, next, registered) = admin.workers_within(from, PAGE).await?;
    let busy_only = ctx.query.get("busy") == Some("1");
    let total = workers.len();
    let busy = workers
        .iter()
        .filter(|w| w.state == WorkerState::Busy)
        .count();
    let mut hosts: BTreeMap<&str, Vec<&WorkerInfo>> = BTreeMap::new();
    for w in workers
        .iter()
        .filter(|w| !busy_only || w.state == WorkerState::Busy)
    {
        hosts.entry(w.host.as_str()).or_default().push(w);
    }
    for list in hosts.values_mut() {
        // Busy first, longest-running first, then by id.
        list.sort_by(|a, b| {
            let run = |w: &WorkerInfo| w.job.as_ref().and_then(|j| j.running_for_s).unwrap_or(-1.0);
            (a.state != WorkerState::Busy)
                .cmp(&(b.state != WorkerState::Busy))
                .then(run(b).total_cmp(&run(a)))
                .then(a.id.cmp(&b.id))
        });
    }
    let body = html! {
        p {
            (total) " workers on " (hosts.len()) " hosts, " (busy) " busy · "
            @if busy_only { a href={ (ctx.base) "workers" } { "show all" } }
            @else { a href={ (ctx.base) "workers?busy=1" } { "only busy" } }
            @if next != 0 || from != 0 {
                br;
                span.warn data-partial="workers" {
                    "stopped early: a page reads " (PAGE) " of the " (num(registered)) " registered workers "
                }
                @if from != 0 { a href={ (ctx.base) "workers" @if busy_only { "?busy=1" } } { "« first" } " " }
                @if next != 0 {
                    a href={ (ctx.base) "workers?from=" (next) @if busy_only { "&busy=1" } } { "next ›" }
                }
            }
        }
        @for (host, list) in &hosts {
            section.host {
                h2 { (host) " " span.muted { "(" (list.len()) ")" } }
                table {
                    thead { tr {
                        th { "worker" } th { "runtime" } th { "queues" } th { "state" }
                        th { "job" } th.num { "running" } th.num { "heartbeat" }
                        th.num { "processed" } th.num { "failed" }
                    } }
                    tbody {
                        @for w in list {
                            tr {
                                td.mono.wrap title=(w.id) { (w.pid) }
                                td { span.badge { (w.runtime) } }
                                td.mono { (short(&w.queues.join(","), 40)) }
                                td { span.badge.(state(w.state)) { (state(w.state)) } }
                                td {
                                    @if let Some(j) = &w.job {
                                        span.mono { (j.class.as_deref().unwrap_or("(no class)")) }
                                        @if let Some(q) = &j.queue { span.muted { " on " (q) } }
                                        br;
                                        span.mono.muted { (short(&j.args.to_string(), 80)) }
                                    }
                                }
                                td.num { (age(w.job.as_ref().and_then(|j| j.running_for_s))) }
                                td.num { @if w.heartbeat.is_some() { (age(w.heartbeat_age_s)) } @else { span.muted { "none" } } }
                                td.num { (num(w.processed)) }
                                td.num { (num(w.failed)) }
                            }
                            @if !w.notes.is_empty() {
                                tr { td colspan="9" .muted { "note: " (w.notes.join("; ")) } }
                            }
                        }
                    }
                }
            }
        }
        @if hosts.is_empty() { p.muted { "no workers registered" } }
        p.muted { "Heartbeat: none for peers that write none (Jesque). Runtime is read from the id and records." }
    };
    Ok(page(
        &ctx,
        Tab::Workers,
        admin.keys().namespace(),
        "Workers",
        body,
    ))
}

fn state(s: WorkerState) -> &'static str {
    match s {
        WorkerState::Idle => "idle",
        WorkerState::Busy => "busy",
        WorkerState::Paused => "paused",
    }
}
