//! Jobs (`GET /jobs`, `GET /job?id=`): tracked jobs from the plugged-in
//! [`super::sources::JobsSource`] — by default [`super::sources::TrackedJobs`], resq's tracked
//! jobs and resque-status's statuses (the same records) — with a tab per state and its count,
//! filters by queue, class and tag (all in the URL), pages of 50 newest first, and a detail page
//! with progress, result, options, worker, attempts, times and history; **Cancel**
//! (`POST jobs/cancel`) for a job that has not finished: one not started never runs, a running
//! one is asked to stop.

use super::ctx::{enc, join_query, query, see_other, CheckedForm, Ctx, Params};
use super::error::{WebError, WebResult};
use super::layout::{button, num, page, pager, short, when, Tab};
use super::sources::{JobCounts, JobRow};
use super::state::App;
use crate::jobs::{JobFilter, JobId, JobStatus, State};
use axum::extract::State as AxState;
use axum::response::{Html, Response};
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use serde_json::Value;
use std::sync::Arc;

/// Jobs a page shows (resque-status's tab shows 50).
const PER_PAGE: usize = 50;

/// The query parameters that make up the list's view (kept by the tabs, the pager and a
/// Cancel's redirect).
const FILTER_KEYS: &[&str] = &["state", "queue", "class", "tag"];

/// The filter a query names; a `state` that is not one is a bad request.
fn filter_of(p: &Params) -> WebResult<JobFilter> {
    let state = match p.get("state") {
        None => None,
        Some(s) => Some(State::parse(s).ok_or_else(|| {
            WebError::BadRequest(format!(
                "state is one of {}",
                State::ALL.map(State::as_str).join(", ")
            ))
        })?),
    };
    let get = |k: &str| p.get(k).map(str::to_string);
    Ok(JobFilter {
        state,
        queue: get("queue"),
        class: get("class"),
        tag: get("tag"),
    })
}

/// `id` as a job id, or a bad request.
fn job_id(p: &Params) -> WebResult<JobId> {
    JobId::parse(p.need("id")?).ok_or_else(|| {
        WebError::BadRequest("id is not a job id (32 lowercase hex characters)".into())
    })
}

/// `GET /jobs[?state=&queue=&class=&tag=&offset=]`.
pub(crate) async fn list(AxState(app): AxState<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin;
    let ns = admin.keys().namespace();
    let Some(source) = &app.jobs else {
        let body = html! { p.muted { "No job-tracking source is configured." } };
        return Ok(page(&ctx, Tab::Jobs, ns, "Jobs", body));
    };
    let filter = filter_of(&ctx.query)?;
    let offset = ctx.query.number("offset")?.unwrap_or(0);
    let (counts, p) = tokio::try_join!(
        source.counts(admin),
        source.page(admin, &filter, offset, PER_PAGE + 1)
    )?;
    let more = p.rows.len() > PER_PAGE;
    let rows = &p.rows[..p.rows.len().min(PER_PAGE)];
    let view = ctx.query.keep(FILTER_KEYS);
    let back = join_query(&view, &offset_param(offset));
    let narrowed = filter.queue.is_some() || filter.class.is_some() || filter.tag.is_some();
    let body = html! {
        p.muted { "Tracked jobs (" (source.name()) "), newest first." }
        (tabs(&ctx, &filter, &counts))
        form.filters method="get" action={ (ctx.base) "jobs" } {
            @if let Some(s) = filter.state { input type="hidden" name="state" value=(s.as_str()); }
            label { "queue" input type="text" name="queue" value=[filter.queue.as_deref()]; }
            label { "class" input type="text" name="class" value=[filter.class.as_deref()]; }
            label { "tag" input type="text" name="tag" value=[filter.tag.as_deref()]; }
            button.primary type="submit" { "Filter" }
            @if narrowed {
                a href=(ctx.link(&format!("jobs?{}", query(&[("state", filter.state.map_or("", State::as_str))])))) {
                    "clear filters"
                }
            }
        }
        (scan_note(&p, rows.len(), offset))
        table {
            thead { tr {
                th { "id" } th { "state" } th { "class" } th { "queue" } th { "progress" }
                th.num { "attempts" } th { "created" } th { "finished" } th { "message" } th { "" }
            } }
            tbody {
                @for j in rows { (row(&ctx, j, &back)) }
                @if rows.is_empty() {
                    tr { td colspan="10" .muted {
                        @if offset > 0 { "No more jobs." } @else { "No tracked jobs match." }
                    } }
                }
            }
        }
        @if p.exact {
            (pager(&ctx, "jobs", &view, offset, PER_PAGE, usize::try_from(p.total).unwrap_or(usize::MAX)))
        } @else {
            (newer_older(&ctx, &view, offset, more))
        }
    };
    Ok(page(&ctx, Tab::Jobs, ns, "Jobs", body))
}

/// `offset=N`, or nothing for the first page.
fn offset_param(offset: usize) -> String {
    if offset == 0 {
        String::new()
    } else {
        format!("offset={offset}")
    }
}

/// A tab per state with its count, and "all"; each keeps the queue, class and tag filters.
fn tabs(ctx: &Ctx, filter: &JobFilter, counts: &JobCounts) -> Markup {
    let link = |state: Option<State>| {
        ctx.link(&format!(
            "jobs?{}",
            query(&[
                ("state", state.map_or("", State::as_str)),
                ("queue", filter.queue.as_deref().unwrap_or("")),
                ("class", filter.class.as_deref().unwrap_or("")),
                ("tag", filter.tag.as_deref().unwrap_or("")),
            ])
        ))
    };
    let indexed: u64 = counts.states.iter().map(|(_, n)| n).sum();
    html! {
        nav.tabs aria-label="states" {
            a.current[filter.state.is_none()] href=(link(None)) {
                "all " span.count { (num(counts.all)) }
            }
            @for (s, n) in &counts.states {
                a.current[filter.state == Some(*s)] href=(link(Some(*s))) {
                    span.badge.(s.as_str()) { (s.as_str()) } " " span.count { (num(*n)) }
                }
            }
        }
        @if counts.all > indexed {
            p.muted.small {
                "State counts come from resq's per-state indexes; "
                (num(counts.all - indexed))
                @if counts.all - indexed == 1 { " listed job is" } @else { " listed jobs are" }
                " in none (statuses only Ruby's resque-status has written, or records expired and not yet forgotten) and show under “all”."
            }
        }
    }
}

/// What the page covers.
fn scan_note(p: &super::sources::JobsPage, shown: usize, offset: usize) -> Markup {
    html! {
        p.scan {
            @if p.exact {
                (num(p.total)) " jobs. "
            } @else {
                (num(p.total)) " jobs in the index read; the other filters are applied while reading. "
            }
            @if shown > 0 { "Showing " (offset + 1) "–" (offset + shown) ", newest first." }
            @if p.truncated {
                " The scan stopped at its budget of index entries: narrow it by state or tag."
            }
        }
    }
}

/// "‹ newer" / "older ›" links, for a view whose total is not known exactly.
fn newer_older(ctx: &Ctx, view: &str, offset: usize, more: bool) -> Markup {
    let link = |off: usize| ctx.link(&format!("jobs?{}", join_query(view, &offset_param(off))));
    html! {
        @if offset > 0 || more {
            nav.pager {
                @if offset > 0 {
                    a href=(link(0)) { "« newest" }
                    a href=(link(offset.saturating_sub(PER_PAGE))) { "‹ newer" }
                }
                @if more { a href=(link(offset + PER_PAGE)) { "older ›" } }
            }
        }
    }
}

/// When the job was created: resq's enqueue time, else resque-status's `time`.
fn created(j: &JobStatus) -> Option<DateTime<Utc>> {
    j.enqueued_at
        .or_else(|| j.time.and_then(|t| DateTime::from_timestamp(t, 0)))
}

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

/// `t` in full, with its age.
fn at(t: Option<DateTime<Utc>>) -> Markup {
    match t {
        Some(t) => html! { (when(t)) " (" (ago(Some(t))) ")" },
        None => html! { "—" },
    }
}

fn state(r: &JobRow) -> Markup {
    let s = r.job.state.as_str();
    html! {
        span.badge.(s) { (s) }
        @if r.stop_requested { " " span.badge.killed { "stop asked" } }
    }
}

fn progress(j: &JobStatus) -> Markup {
    let pct = j.pct_complete.clamp(0.0, 100.0);
    html! {
        progress max="100" value=(format!("{pct:.0}")) { (format!("{pct:.0}")) "%" }
        " " (format!("{pct:.0}")) "%"
    }
}

/// The Cancel button, for a job that has not finished (`back`: the list view to return to,
/// empty to return to the job's page).
fn cancel(ctx: &Ctx, r: &JobRow, back: Option<&str>) -> Markup {
    if !r.cancellable() {
        return html! {};
    }
    let confirm = if r.job.state == State::Working {
        "Ask this running job to stop? It ends killed at its next progress update."
    } else {
        "Cancel this job? It has not started and will never run."
    };
    let id = r.job.id.as_str();
    let mut fields = vec![("id", id)];
    if let Some(b) = back {
        fields.push(("back", b));
        fields.push(("to", "list"));
    }
    button(
        ctx,
        "jobs/cancel",
        &fields,
        "Cancel",
        "danger",
        Some(confirm),
    )
}

/// The message of a row: the error of a failed job, else its last message.
fn message(j: &JobStatus) -> &str {
    j.error
        .as_deref()
        .filter(|_| j.state == State::Failed)
        .or(j.message.as_deref())
        .unwrap_or("")
}

fn row(ctx: &Ctx, r: &JobRow, back: &str) -> Markup {
    let j = &r.job;
    html! {
        tr {
            td.mono.nowrap { a href={ (ctx.base) "job?id=" (enc(j.id.as_str())) } title=(j.id.as_str()) { (short(j.id.as_str(), 13)) } }
            td.nowrap { (state(r)) }
            td.mono.nowrap title=[j.name.as_deref()] {
                // A status only resque-status wrote has no class: its name says what it is.
                @match (&j.class, &j.name) {
                    (Some(c), _) => (short(c, 40)),
                    (None, Some(n)) => (short(n, 40)),
                    (None, None) => "—",
                }
            }
            td.nowrap { (short(j.queue.as_deref().unwrap_or("—"), 30)) }
            td.nowrap { (progress(j)) }
            td.num { (j.attempts) }
            td.nowrap { (ago(created(j))) }
            td.nowrap { (ago(j.finished_at)) }
            td { (short(message(j), 100)) }
            td.nowrap { (cancel(ctx, r, Some(back))) }
        }
    }
}

/// A JSON value, indented.
fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// A JSON value as text: a string as it is, anything else as JSON.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `GET /job?id=…`.
pub(crate) async fn show(AxState(app): AxState<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin;
    let source = app
        .jobs
        .as_ref()
        .ok_or_else(|| WebError::NotFound("no job-tracking source".into()))?;
    let id = job_id(&ctx.query)?;
    let r = source
        .job(admin, &id)
        .await?
        .ok_or_else(|| WebError::NotFound(format!("no tracked job {id}")))?;
    let j = &r.job;
    let filter_link = |k: &str, v: &str| ctx.link(&format!("jobs?{}", query(&[(k, v)])));
    let body = html! {
        div.actions { (cancel(&ctx, &r, None)) a href={ (ctx.base) "jobs" } { "← all jobs" } }
        dl.kv {
            dt { "id" } dd.mono { (j.id.as_str()) }
            dt { "state" } dd { (state(&r)) }
            dt { "resque-status" } dd { span.badge.(j.status.as_str()) { (j.status) } }
            dt { "name" } dd.mono.wrap { (j.name.as_deref().unwrap_or("—")) }
            dt { "message" } dd.wrap { (j.message.as_deref().unwrap_or("—")) }
            dt { "progress" } dd {
                (progress(j))
                @if let (Some(n), Some(t)) = (j.num, j.total) { " (" (n) " of " (t) ")" }
            }
            dt { "class" } dd.mono {
                @if let Some(c) = &j.class { a href=(filter_link("class", c)) { (c) } } @else { "—" }
            }
            dt { "queue" } dd {
                @if let Some(q) = &j.queue {
                    a href=(filter_link("queue", q)) { (q) }
                    " · " a href={ (ctx.base) "queue?name=" (enc(q)) } { "queue page" }
                } @else { "—" }
            }
            dt { "worker" } dd.mono { (j.worker.as_deref().unwrap_or("—")) }
            dt { "attempts" } dd { (j.attempts) }
            dt { "tags" } dd {
                @if j.tags.is_empty() { "—" }
                @for (i, t) in j.tags.iter().enumerate() {
                    @if i > 0 { ", " }
                    a href=(filter_link("tag", t)) { (t) }
                }
            }
            dt { "job key" } dd.mono { (j.key.as_deref().unwrap_or("—")) }
            dt { "record" } dd.mono { (admin.keys().resque_status(j.id.as_str())) }
            dt { "created" } dd { (at(j.time.and_then(|t| DateTime::from_timestamp(t, 0)))) }
            dt { "enqueued" } dd { (at(j.enqueued_at)) }
            dt { "started" } dd { (at(j.started_at)) }
            dt { "finished" } dd { (at(j.finished_at)) }
            dt { "error" } dd.wrap { (j.error.as_deref().unwrap_or("—")) }
        }
        h2 { "Result" }
        @match &j.result {
            Some(v) => pre.result { (pretty(v)) },
            None => p.muted { "No result." },
        }
        h2 { "Options" }
        @match &j.options {
            Some(v) => pre.options { (pretty(v)) },
            None => p.muted { "No options." },
        }
        @if !j.custom.is_empty() {
            h2 { "Other fields" }
            dl.kv {
                @for (k, v) in &j.custom { dt { (k) } dd.mono.wrap { (pretty(v)) } }
            }
        }
        h2 { "History" }
        table.history {
            thead { tr { th { "time" } th { "event" } th { "details" } } }
            tbody {
                @for e in &j.history {
                    tr {
                        td.nowrap.mono { (e.at.map_or_else(|| "—".to_string(), |t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string())) }
                        td { span.badge.(e.event.as_str()) { (e.event) } }
                        td.mono.wrap {
                            @for (i, (k, v)) in e.fields.iter().enumerate() {
                                @if i > 0 { " · " }
                                span.muted { (k) "=" } (plain(v))
                            }
                        }
                    }
                }
                @if j.history.is_empty() {
                    tr { td colspan="3" .muted { "No history: a status resq has not moved (written by resque-status)." } }
                }
            }
        }
    };
    Ok(page(&ctx, Tab::Jobs, admin.keys().namespace(), "Job", body))
}

/// `POST /jobs/cancel` (`id`; `to=list` with `back`, the list's view, to return to it).
pub(crate) async fn cancel_job(
    AxState(app): AxState<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    let source = app
        .jobs
        .as_ref()
        .ok_or_else(|| WebError::NotFound("no job-tracking source".into()))?;
    let id = job_id(&f)?;
    let msg = match source.cancel(&app.admin, &id).await? {
        None => "nojob",
        Some(crate::jobs::Cancelled::Cancelled) => "cancelled",
        Some(crate::jobs::Cancelled::Killing) => "stopping",
        Some(crate::jobs::Cancelled::Finished(_)) => "finished",
    };
    if f.get("to") == Some("list") || msg == "nojob" {
        let back = Params::parse(f.get("back").unwrap_or("").as_bytes());
        let mut keep = FILTER_KEYS.to_vec();
        keep.push("offset");
        let q = join_query(&back.keep(&keep), &format!("msg={msg}"));
        return Ok(see_other(&ctx, &format!("jobs?{q}")));
    }
    Ok(see_other(
        &ctx,
        &format!("job?{}&msg={msg}", query(&[("id", id.as_str())])),
    ))
}
