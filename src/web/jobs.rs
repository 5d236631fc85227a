//! Jobs (`GET /jobs`, `GET /job?id=`): tracked jobs from the plugged-in
//! [`super::sources::JobsSource`] — by default [`super::sources::TrackedJobs`], resq's tracked
//! jobs and resque-status's statuses — with a tab per state and its count, filters by queue,
//! class and tag (all in the URL), pages of 50 that go on from where the last one ended
//! (`from=`, any depth), and a detail page with progress, result, options, worker, attempts,
//! times and history; **Cancel** (`POST jobs/cancel`) for a job that has not finished: one not
//! started never runs, a running one is asked to stop.

use super::ctx::{enc, join_query, query, see_other, CheckedForm, Ctx, Params};
use super::error::{WebError, WebResult};
use super::layout::{button, num, page, short, when, Tab};
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

/// The query parameters that say where in the list a page starts.
const PLACE_KEYS: &[&str] = &["from", "offset"];

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

/// `GET /jobs[?state=&queue=&class=&tag=&from=|offset=]`.
pub(crate) async fn list(AxState(app): AxState<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let ns = admin.keys().namespace();
    let Some(source) = &app.jobs else {
        let body = html! { p.muted { "No job-tracking source is configured." } };
        return Ok(page(&ctx, Tab::Jobs, ns, "Jobs", body));
    };
    let filter = filter_of(&ctx.query)?;
    let offset = ctx.query.number("offset")?.unwrap_or(0);
    let from = ctx.query.get("from");
    let (counts, p) = tokio::try_join!(
        source.counts(admin),
        source.page(admin, &filter, from, offset, PER_PAGE)
    )
    .map_err(|e| match e {
        crate::Error::Rejected(m) => WebError::BadRequest(format!("from: {m}")),
        e => e.into(),
    })?;
    let view = ctx.query.keep(FILTER_KEYS);
    let mut here = FILTER_KEYS.to_vec();
    here.extend_from_slice(PLACE_KEYS);
    let back = ctx.query.keep(&here);
    let narrowed = filter.queue.is_some() || filter.class.is_some() || filter.tag.is_some();
    let deeper = from.is_some() || offset > 0;
    let rows = &p.rows;
    let body = html! {
        p.muted { "Tracked jobs (" (source.name()) ")." }
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
        (scan_note(&p, rows.len(), deeper))
        table {
            thead { tr {
                th { "id" } th { "state" } th { "class" } th { "queue" } th { "progress" }
                th.num { "attempts" } th { "created" } th { "finished" } th { "message" } th { "" }
            } }
            tbody {
                @for j in rows { (row(&ctx, j, &back)) }
                @if rows.is_empty() {
                    tr { td colspan="10" .muted {
                        @if deeper { "No more jobs." } @else { "No tracked jobs match." }
                    } }
                }
            }
        }
        @if !p.unreadable.is_empty() {
            div.unreadable {
                p.muted.small { "Records that could not be read, left out:" }
                ul { @for why in &p.unreadable { li.mono.small { (why) } } }
            }
        }
        (next_links(&ctx, &view, deeper, p.next.as_deref()))
    };
    Ok(page(&ctx, Tab::Jobs, ns, "Jobs", body))
}

/// A tab per state with its count (when counted), and "all"; each keeps the queue, class and
/// tag filters.
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
    let count = |s: State| counts.states.iter().find(|(c, _)| *c == s).map(|(_, n)| *n);
    html! {
        nav.tabs aria-label="states" {
            a.current[filter.state.is_none()] href=(link(None)) { "all" }
            @for s in State::ALL {
                a.current[filter.state == Some(s)] href=(link(Some(s))) {
                    span.badge.(s.as_str()) { (s.as_str()) }
                    @if let Some(n) = count(s) { " " span.count { (num(n)) } }
                }
            }
        }
        @if counts.partial {
            p.flash.warn data-partial="counts" {
                "Stopped early: queued, scheduled and working count the jobs of the first "
                (num(super::JOBS_BUDGET as u64 / 4)) " queue names, held sets, delayed timestamps and worker ids read, not all of them."
            }
        }
        p.muted.small {
            "Counts: queued, scheduled and working are the jobs in the queues (and held by limits), "
            "in the delayed set (retries too) and on the workers, tracked or not; waiting and the "
            "finished states count resq's own tracked jobs (resque-status jobs are listed, not counted)."
        }
    }
}

/// What the page covers.
fn scan_note(p: &super::sources::JobsPage, shown: usize, deeper: bool) -> Markup {
    html! {
        p.scan {
            @if let Some(t) = p.total { (num(t)) " jobs. " }
            @if shown > 0 {
                "Showing " (shown) @if deeper { " more" } ", in the listing's order (docs/jobs.md)."
            }
            @if p.truncated {
                " The page stopped after looking at its budget of entries: go on with “next”, or narrow it by state, queue or tag."
            }
        }
    }
}

/// "« first" / "next ›" links: the next page starts where this one ended.
fn next_links(ctx: &Ctx, view: &str, deeper: bool, next: Option<&str>) -> Markup {
    let first = ctx.link(&format!("jobs?{view}"));
    html! {
        @if deeper || next.is_some() {
            nav.pager {
                @if deeper { a href=(first) { "« first" } }
                @if let Some(n) = next {
                    a href=(ctx.link(&format!("jobs?{}", join_query(view, &query(&[("from", n)]))))) { "next ›" }
                }
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

/// A job's state badge; on its own page (`one`), `?` when its record's state cannot be read (a
/// list shows the state it was listed in).
fn state(r: &JobRow, one: bool) -> Markup {
    let s = r.job.state.as_str();
    html! {
        @if !one || r.job.state_readable() {
            span.badge.(s) { (s) }
        } @else {
            span.badge title="the record's state cannot be read" { "?" }
        }
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
            td.nowrap { (state(r, false)) }
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

/// The page of job `id` whose record cannot be read (`why` names its key and what it holds).
fn unreadable(ctx: &Ctx, admin: &crate::admin::Admin, id: &JobId, why: &str) -> Html<String> {
    let body = html! {
        div.actions { a href={ (ctx.base) "jobs" } { "← all jobs" } }
        p.flash.warn data-unreadable {
            strong { "Job " code { (id.as_str()) } " cannot be read: " } (why)
        }
    };
    page(ctx, Tab::Jobs, admin.keys().namespace(), "Job", body)
}

/// `GET /job?id=…`.
pub(crate) async fn show(AxState(app): AxState<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let source = app
        .jobs
        .as_ref()
        .ok_or_else(|| WebError::NotFound("no job-tracking source".into()))?;
    let id = job_id(&ctx.query)?;
    let r = match source.job(admin, &id).await {
        Ok(r) => r.ok_or_else(|| WebError::NotFound(format!("no tracked job {id}")))?,
        // A record that is no record (not JSON, a key of another type): named, not fatal.
        Err(crate::Error::Protocol(why)) => return Ok(unreadable(&ctx, admin, &id, &why)),
        Err(e) => return Err(e.into()),
    };
    let j = &r.job;
    let filter_link = |k: &str, v: &str| ctx.link(&format!("jobs?{}", query(&[(k, v)])));
    let body = html! {
        div.actions { (cancel(&ctx, &r, None)) a href={ (ctx.base) "jobs" } { "← all jobs" } }
        dl.kv {
            dt { "id" } dd.mono { (j.id.as_str()) }
            dt { "state" } dd { (state(&r, true)) }
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
            dt { "record" } dd.mono {
                @if j.statused {
                    (admin.keys().resque_status(j.id.as_str())) span.muted { " (resque-status's record, a JSON text)" }
                } @else {
                    (admin.keys().job_record(j.id.as_str())) span.muted { " (resq's own record, a hash)" }
                }
            }
            dt { "created" } dd { (at(j.time.and_then(|t| DateTime::from_timestamp(t, 0)))) }
            dt { "enqueued" } dd { (at(j.enqueued_at)) }
            dt { "due" } dd { (at(j.due_at)) }
            dt { "started" } dd { (at(j.started_at)) }
            dt { "finished" } dd { (at(j.finished_at)) }
            dt { "error" } dd.wrap { (j.error.as_deref().unwrap_or("—")) }
            @if !j.unreadable.is_empty() {
                dt { "unreadable" } dd.mono.wrap {
                    @for (i, b) in j.unreadable.iter().enumerate() {
                        @if i > 0 { br; }
                        (b.to_string())
                    }
                }
            }
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
                    tr { td colspan="3" .muted {
                        @if j.statused { "No history: resque-status's record keeps none." } @else { "No history." }
                    } }
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
    let out = source.cancel_settling(&app.admin(), &id).await?;
    let msg = match out.as_ref().map(|(c, _)| c) {
        None => "nojob",
        Some(crate::jobs::Cancelled::Cancelled) => "cancelled",
        Some(crate::jobs::Cancelled::Killing) => "stopping",
        Some(crate::jobs::Cancelled::Finished(_)) => "finished",
    };
    // (What the cancel left to the prune rounds, said on the page it returns to.)
    let mut msg = format!("msg={msg}");
    if let Some((_, left)) = out.as_ref().filter(|(_, left)| !left.is_empty()) {
        msg.push_str(&format!("&ends={}&trees={}", left.ends, left.jobs));
    }
    if f.get("to") == Some("list") || out.is_none() {
        let back = Params::parse(f.get("back").unwrap_or("").as_bytes());
        let mut keep = FILTER_KEYS.to_vec();
        keep.extend_from_slice(PLACE_KEYS);
        let q = join_query(&back.keep(&keep), &msg);
        return Ok(see_other(&ctx, &format!("jobs?{q}")));
    }
    Ok(see_other(
        &ctx,
        &format!("job?{}&{msg}", query(&[("id", id.as_str())])),
    ))
}
