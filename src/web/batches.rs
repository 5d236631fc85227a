//! Batches (`GET /batches`, `GET /batch?id=`) and the jobs waiting for others
//! (`GET /waiting`): workflows ([`crate::workflows`], docs/workflows.md) on the dashboard.
//!
//! * the list: batches newest first, 25 a page, each with its description, phase, a bar of
//!   succeeded / failed / pending members, its counts and times;
//! * one batch: its counts and times, what holds it up ([`crate::admin::Admin::batch_report`]:
//!   unfinished members by state, members a worker of another runtime took — the batch is then
//!   stuck, said in a warning naming those workers), and its members page by page (`SSCAN`
//!   cursor in the URL), each a link to its job's page (a child batch to its own);
//! * waiting jobs: `<ns>:resq:jobs:waiting`, longest waiting first, each with its dependencies
//!   and their states, what a failed one means for it, and its batch.
//!
//! Read-only pages: nothing here changes Redis (a job is cancelled from its own page).

use super::ctx::{enc, Ctx};
use super::error::{WebError, WebResult};
use super::layout::{num, page, pager, short, when, Tab};
use super::state::App;
use crate::workflows::{BatchId, BatchStatus};
use axum::extract::State;
use axum::response::Html;
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use std::sync::Arc;

/// Batches a page lists.
const PER_PAGE: usize = 25;
/// Members a batch's page asks `SSCAN` for at a time.
const MEMBERS_PER_PAGE: usize = 50;
/// Waiting jobs a page lists.
const WAITING_PER_PAGE: usize = 50;

/// `5m12s ago` with the exact time as a tooltip, or `—`.
fn ago(t: Option<DateTime<Utc>>) -> Markup {
    match t {
        Some(t) => {
            let secs = (Utc::now() - t).num_milliseconds() as f64 / 1000.0;
            html! { span title=(when(t)) { (super::layout::age(Some(secs))) " ago" } }
        }
        None => html! { "—" },
    }
}

/// A state or phase badge.
fn badge(s: &str) -> Markup {
    html! { span.badge.(s) { (s) } }
}

/// The bar of a batch's members: succeeded, failed for good, attempted or still pending (an
/// SVG drawn from attributes: the CSP allows no inline style).
fn bar(b: &BatchStatus) -> Markup {
    let total = b.total.max(1) as f64;
    let part = |n: u64| n as f64 / total * 100.0;
    let ok = part(b.succeeded);
    let bad = part(b.failed.min(b.total.saturating_sub(b.succeeded)));
    // Attempted but not (yet) succeeded nor failed for good: retrying.
    let attempted = b.total.saturating_sub(b.pending);
    let retrying = part(attempted.saturating_sub(b.succeeded + b.failed));
    let label = format!(
        "{} succeeded, {} failed, {} pending of {}",
        b.succeeded, b.failed, b.pending, b.total
    );
    html! {
        svg.bar viewBox="0 0 100 10" preserveAspectRatio="none" role="img" aria-label=(label) {
            title { (label) }
            rect.pending x="0" y="0" width="100" height="10" {}
            rect.ok x="0" y="0" width=(format!("{ok:.2}")) height="10" {}
            rect.bad x=(format!("{ok:.2}")) y="0" width=(format!("{bad:.2}")) height="10" {}
            rect.retrying x=(format!("{:.2}", ok + bad)) y="0" width=(format!("{retrying:.2}")) height="10" {}
        }
    }
}

/// The two views of the Batches tab, with their counts.
fn views(ctx: &Ctx, current: &str, batches: u64, waiting: u64) -> Markup {
    html! {
        nav.tabs aria-label="workflows" {
            a.current[current == "batches"] href=(ctx.link("batches")) {
                "batches " span.count { (num(batches)) }
            }
            a.current[current == "waiting"] href=(ctx.link("waiting")) {
                "waiting jobs " span.count { (num(waiting)) }
            }
        }
    }
}

/// `GET /batches[?offset=N]`.
pub(crate) async fn list(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let offset = ctx.query.number("offset")?.unwrap_or(0);
    let ((rows, total), (_, waiting)) =
        tokio::try_join!(admin.batches(offset, PER_PAGE), admin.waiting_jobs(0, 0))?;
    let body = html! {
        (views(&ctx, "batches", total, waiting))
        p.muted {
            "Batches of tracked jobs, newest first. A batch is "
            strong { "complete" } " once every member has been attempted, "
            strong { "succeeded" } " once every member completed, "
            strong { "failed" } " when complete with members that failed for good."
        }
        (pager(&ctx, "batches", "", offset, PER_PAGE, usize::try_from(total).unwrap_or(usize::MAX)))
        table.batches {
            thead { tr {
                th { "id" } th { "description" } th { "state" } th { "progress" }
                th.num { "total" } th.num { "pending" } th.num { "succeeded" } th.num { "failed" }
                th { "created" } th { "complete" } th { "success" } th { "death" }
            } }
            tbody {
                @for b in &rows {
                    tr data-batch=(b.id.as_str()) {
                        td.mono.nowrap { a href={ (ctx.base) "batch?id=" (enc(b.id.as_str())) } title=(b.id.as_str()) { (short(b.id.as_str(), 13)) } }
                        td { (short(b.description.as_deref().unwrap_or(""), 60)) }
                        td.nowrap { (badge(b.phase())) }
                        td.nowrap { (bar(b)) }
                        td.num data-total { (num(b.total)) }
                        td.num data-pending { (num(b.pending)) }
                        td.num data-succeeded { (num(b.succeeded)) }
                        td.num data-failed { (num(b.failed)) }
                        td.nowrap { (ago(b.created_at)) }
                        td.nowrap { (ago(b.complete_at)) }
                        td.nowrap { (ago(b.success_at)) }
                        td.nowrap { (ago(b.death_at)) }
                    }
                }
                @if rows.is_empty() {
                    tr { td colspan="12" .muted {
                        @if offset > 0 { "No more batches." } @else { "No batches." }
                    } }
                }
            }
        }
        (pager(&ctx, "batches", "", offset, PER_PAGE, usize::try_from(total).unwrap_or(usize::MAX)))
    };
    Ok(page(
        &ctx,
        Tab::Batches,
        admin.keys().namespace(),
        "Batches",
        body,
    ))
}

/// `GET /batch?id=…[&cursor=N]`.
pub(crate) async fn show(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let id = BatchId::parse(ctx.query.need("id")?).ok_or_else(|| {
        WebError::BadRequest("id is not a batch id (32 lowercase hex characters)".into())
    })?;
    let cursor = ctx
        .query
        .get("cursor")
        .map(|c| {
            c.parse::<u64>()
                .map_err(|_| WebError::BadRequest("cursor must be a whole number".into()))
        })
        .transpose()?
        .unwrap_or(0);
    let r = admin
        .batch_report(&id)
        .await?
        .ok_or_else(|| WebError::NotFound(format!("no batch {id}")))?;
    let (members, next) = admin.batch_members(&id, cursor, MEMBERS_PER_PAGE).await?;
    let s = &r.status;
    // A batch still staging has its queued members outside their queues, as it should.
    let stuck = s.state != "staging" && !r.gone.is_empty();
    let job_link = |j: &str| ctx.link(&format!("job?id={}", enc(j)));
    let batch_link = |b: &str| ctx.link(&format!("batch?id={}", enc(b)));
    let body = html! {
        div.actions { a href=(ctx.link("batches")) { "← all batches" } }
        @if s.state == "staging" {
            p.flash.warn data-staging {
                "Staging: its creator stopped before making it visible. Its members are in no "
                "queue and never run; a parent batch counts it as a member that never ends."
            }
        }
        @if stuck {
            div.flash.warn data-stuck {
                p {
                    strong { "Stuck: " }
                    (r.gone.len()) @if r.gone.len() == 1 { " member is" } @else { " members are" }
                    " no longer in their queue while their record says queued. A worker of another "
                    "runtime (Ruby, Java, Node) took them, or someone removed them; resq cannot see "
                    "how they ended: the next prune round (each resq worker's, every 60 s) ends "
                    "them failed, and the batch counts them."
                }
                p.mono { @for (i, g) in r.gone.iter().take(20).enumerate() {
                    @if i > 0 { ", " } a href=(job_link(g.as_str())) { (g.as_str()) }
                } }
            }
        }
        @if !r.orphaned.is_empty() {
            div.flash.warn data-orphaned {
                p {
                    (r.orphaned.len()) @if r.orphaned.len() == 1 { " member says" } @else { " members say" }
                    " working for a worker that is gone: the next prune round ends them failed, and "
                    "counts them in the batch once."
                }
                p.mono { @for (i, g) in r.orphaned.iter().take(20).enumerate() {
                    @if i > 0 { ", " } a href=(job_link(g.as_str())) { (g.as_str()) }
                } }
            }
        }
        @if !r.foreign_workers.is_empty() {
            div.flash.warn data-foreign-workers {
                p {
                    @if !stuck {
                        "Workers of another runtime poll the queues of this batch's unfinished members; "
                        "a member one of them takes is never counted and the batch then waits for ever: "
                    } @else {
                        "Workers of another runtime polling those queues: "
                    }
                    span.mono { (r.foreign_workers.join(", ")) }
                }
                p.small { "Keep a batch's members on queues only resq workers poll (docs/workflows.md, “Mixed fleets”)." }
            }
        }
        dl.kv {
            dt { "id" } dd.mono { (s.id.as_str()) }
            dt { "description" } dd.wrap { (s.description.as_deref().unwrap_or("—")) }
            dt { "state" } dd { (badge(s.phase())) }
            dt { "progress" } dd { (bar(s)) }
            dt { "total" } dd data-total { (num(s.total)) }
            dt { "pending" } dd data-pending { (num(s.pending)) " not attempted yet" }
            dt { "succeeded" } dd data-succeeded { (num(s.succeeded)) }
            dt { "failed" } dd data-failed { (num(s.failed)) " for good" }
            dt { "parent" } dd.mono {
                @if let Some(p) = &s.parent { a href=(batch_link(p.as_str())) { (p.as_str()) } } @else { "—" }
            }
            dt { "callbacks' queue" } dd { (s.queue.as_deref().unwrap_or("—")) }
            dt { "created" } dd { (ago(s.created_at)) }
            dt { "complete" } dd { (ago(s.complete_at)) }
            dt { "success" } dd { (ago(s.success_at)) }
            dt { "death" } dd { (ago(s.death_at)) }
        }
        h2 { "Unfinished members" }
        @if r.unfinished.is_empty() {
            p.muted { "None: every member has ended." }
        } @else {
            table.unfinished {
                thead { tr { th { "state" } th.num { "members" } th { "some of them" } } }
                tbody { @for (state, n, ids) in &r.unfinished { tr {
                    td { (badge(state)) }
                    td.num { (num(*n)) }
                    td.mono { @for (i, j) in ids.iter().enumerate() {
                        @if i > 0 { ", " } a href=(job_link(j.as_str())) { (short(j.as_str(), 13)) }
                    } }
                } } }
            }
        }
        @if !r.complete { p.muted.small data-partial="members" {
            "Members read: " (r.members_read) " of " (r.members_total) " (a report reads 100,000 at most; "
            code { "resq batch show " (id.as_str()) " --from " (r.next_cursor) } " reads on)."
        } }
        @if r.unchecked > 0 { p.muted.small { (r.unchecked) " queued members were not looked for in their queue (a report reads 200,000 queue entries at most)." } }
        h2 { "Members" }
        table.members {
            thead { tr {
                th { "id" } th { "state" } th { "class" } th { "queue" } th.num { "attempts" }
                th { "ended" } th { "error" }
            } }
            tbody {
                @for m in &members { tr {
                    td.mono.nowrap {
                        @if m.child_batch {
                            "batch " a href=(batch_link(&m.id)) title=(m.id) { (short(&m.id, 13)) }
                        } @else {
                            a href=(job_link(&m.id)) title=(m.id) { (short(&m.id, 13)) }
                        }
                    }
                    td { @match &m.state { Some(st) => (badge(st)), None => span.muted { "no record" } } }
                    td.mono { (m.class.as_deref().unwrap_or("—")) }
                    td { (m.queue.as_deref().unwrap_or("—")) }
                    td.num { @if m.child_batch { "—" } @else { (m.attempts) } }
                    td.nowrap { (ago(m.ended_at)) }
                    td { (short(m.error.as_deref().unwrap_or(""), 100)) }
                } }
                @if members.is_empty() { tr { td colspan="7" .muted { "No more members." } } }
            }
        }
        @if cursor != 0 || next != 0 {
            nav.pager {
                @if cursor != 0 { a href=(batch_link(s.id.as_str())) { "« first" } }
                @if next != 0 {
                    a href=(ctx.link(&format!("batch?id={}&cursor={next}", enc(s.id.as_str())))) { "more ›" }
                }
            }
        }
    };
    Ok(page(
        &ctx,
        Tab::Batches,
        admin.keys().namespace(),
        "Batch",
        body,
    ))
}

/// `GET /waiting[?offset=N]`.
pub(crate) async fn waiting(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let offset = ctx.query.number("offset")?.unwrap_or(0);
    let ((jobs, total), (_, batches)) = tokio::try_join!(
        admin.waiting_jobs(offset, WAITING_PER_PAGE),
        admin.batches(0, 0)
    )?;
    let job_link = |j: &str| ctx.link(&format!("job?id={}", enc(j)));
    let body = html! {
        (views(&ctx, "waiting", batches, total))
        p.muted {
            "Jobs waiting for others to end (" code { "--after" } ", " code { "Track::after" } "), "
            "longest waiting first. Each is queued once every dependency has completed, failed, "
            "been killed or cancelled — or, when one did not complete and it said so, ends failed "
            "or cancelled without running."
        }
        (pager(&ctx, "waiting", "", offset, WAITING_PER_PAGE, usize::try_from(total).unwrap_or(usize::MAX)))
        table.waiting {
            thead { tr {
                th { "id" } th { "class" } th { "queue" } th { "waiting since" }
                th { "dependencies" } th.num { "left" } th { "if one failed" } th { "batch" }
            } }
            tbody {
                @for j in &jobs { tr data-waiting=(j.id.as_str()) {
                    td.mono.nowrap {
                        a href=(job_link(j.id.as_str())) title=(j.id.as_str()) { (short(j.id.as_str(), 13)) }
                        @if !j.still_waiting { " " span.badge { "released" } }
                    }
                    td.mono { (j.class.as_deref().unwrap_or("—")) }
                    td { (j.queue.as_deref().unwrap_or("—")) }
                    td.nowrap { (ago(j.since)) }
                    td.mono {
                        @for (d, st) in &j.deps {
                            div.dep {
                                a href=(job_link(d)) title=(d) { (short(d, 13)) } " "
                                @match st { Some(st) => (badge(st)), None => span.muted { "no record" } }
                            }
                        }
                        @if j.deps_total > j.deps.len() {
                            div.muted { "… and " (j.deps_total - j.deps.len()) " more" }
                        }
                    }
                    td.num { (j.deps_left) " of " (j.deps_total) }
                    td {
                        (j.if_dep_failed.as_deref().unwrap_or("run"))
                        @if let Some(f) = &j.dep_failed {
                            br; span.small.err { "dependency " a href=(job_link(f)) { (short(f, 13)) } " did not complete" }
                        }
                    }
                    td.mono { @if let Some(b) = &j.batch {
                        a href=(ctx.link(&format!("batch?id={}", enc(b)))) title=(b) { (short(b, 13)) }
                    } @else { "—" } }
                } }
                @if jobs.is_empty() {
                    tr { td colspan="8" .muted {
                        @if offset > 0 { "No more waiting jobs." } @else { "No job is waiting for others." }
                    } }
                }
            }
        }
        (pager(&ctx, "waiting", "", offset, WAITING_PER_PAGE, usize::try_from(total).unwrap_or(usize::MAX)))
    };
    Ok(page(
        &ctx,
        Tab::Batches,
        admin.keys().namespace(),
        "Waiting jobs",
        body,
    ))
}
