//! Jobs (`GET /jobs`, `GET /job?id=`): tracked jobs from the plugged-in
//! [`super::sources::JobsSource`] — by default resque-status's statuses (state, progress,
//! message, options and custom keys) — with Kill (`POST jobs/kill`) for queued and working
//! ones, as resque-status's own tab offers.

use super::ctx::{enc, query, see_other, CheckedForm, Ctx};
use super::error::{WebError, WebResult};
use super::layout::{button, num, page, pager, short, when, Tab};
use super::sources::JobRow;
use super::state::App;
use axum::extract::State;
use axum::response::{Html, Response};
use chrono::{TimeZone, Utc};
use maud::{html, Markup};
use std::sync::Arc;

/// Jobs a page shows (resque-status's tab shows 50).
const PER_PAGE: usize = 50;

/// `GET /jobs[?offset=N]`.
pub(crate) async fn list(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin;
    let Some(source) = &app.jobs else {
        let body = html! { p.muted { "No job-tracking source is configured." } };
        return Ok(page(
            &ctx,
            Tab::Jobs,
            admin.keys().namespace(),
            "Jobs",
            body,
        ));
    };
    let offset = ctx.query.number("offset")?.unwrap_or(0);
    let p = source.page(admin, offset, PER_PAGE).await?;
    let body = html! {
        p.muted { (num(p.total as u64)) " tracked jobs (" (source.name()) "), newest first." }
        (pager(&ctx, "jobs", "", offset, PER_PAGE, p.total))
        table {
            thead { tr {
                th { "id" } th { "name" } th { "status" } th { "created" }
                th { "% complete" } th { "message" } th { "" }
            } }
            tbody {
                @for j in &p.rows { (row(&ctx, j)) }
                @if p.rows.is_empty() { tr { td colspan="7" .muted { "no tracked jobs" } } }
            }
        }
        (pager(&ctx, "jobs", "", offset, PER_PAGE, p.total))
    };
    Ok(page(
        &ctx,
        Tab::Jobs,
        admin.keys().namespace(),
        "Jobs",
        body,
    ))
}

fn created(j: &JobRow) -> String {
    j.time
        .and_then(|t| Utc.timestamp_opt(t, 0).single())
        .map(when)
        .unwrap_or_else(|| "—".into())
}

fn state(j: &JobRow) -> Markup {
    let s = j.state.as_deref().unwrap_or("(expired)");
    html! {
        span.badge.(s) { (s) }
        @if j.kill_requested && j.killable { " " span.badge.killed { "kill asked" } }
    }
}

fn progress(j: &JobRow) -> Markup {
    html! {
        @if let Some(p) = j.progress {
            meter min="0" max="100" value=(format!("{p:.0}")) {} " " (format!("{p:.0}")) "%"
        }
    }
}

fn kill(ctx: &Ctx, j: &JobRow) -> Markup {
    html! {
        @if j.killable && !j.kill_requested {
            (button(ctx, "jobs/kill", &[("id", &j.id)], "Kill", "danger",
                Some("Ask this job to stop at its next progress update?")))
        }
    }
}

fn row(ctx: &Ctx, j: &JobRow) -> Markup {
    html! {
        tr {
            td.mono { a href={ (ctx.base) "job?id=" (enc(&j.id)) } { (short(&j.id, 12)) } }
            td.mono { (short(j.name.as_deref().unwrap_or(""), 70)) }
            td { (state(j)) }
            td.nowrap { (created(j)) }
            td.nowrap { (progress(j)) }
            td { (short(j.message.as_deref().unwrap_or(""), 100)) }
            td { (kill(ctx, j)) }
        }
    }
}

/// `GET /job?id=…`.
pub(crate) async fn show(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin;
    let source = app
        .jobs
        .as_ref()
        .ok_or_else(|| WebError::NotFound("no job-tracking source".into()))?;
    let id = ctx.query.need("id")?;
    let j = source
        .job(admin, id)
        .await?
        .ok_or_else(|| WebError::NotFound(format!("no tracked job {id}")))?;
    let body = html! {
        div.actions { (kill(&ctx, &j)) a href={ (ctx.base) "jobs" } { "← all jobs" } }
        dl.kv {
            dt { "id" } dd.mono { (j.id) }
            dt { "name" } dd.mono { (j.name.as_deref().unwrap_or("—")) }
            dt { "status" } dd { (state(&j)) }
            dt { "created" } dd { (created(&j)) }
            dt { "progress" } dd { (progress(&j)) }
            dt { "message" } dd { (j.message.as_deref().unwrap_or("—")) }
            @for (k, v) in &j.details { dt { (k) } dd.mono.wrap { (v) } }
        }
    };
    Ok(page(&ctx, Tab::Jobs, admin.keys().namespace(), "Job", body))
}

/// `POST /jobs/kill` (`id`).
pub(crate) async fn kill_job(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    let source = app
        .jobs
        .as_ref()
        .ok_or_else(|| WebError::NotFound("no job-tracking source".into()))?;
    let id = f.need("id")?;
    source.kill(&app.admin, id).await?;
    Ok(see_other(
        &ctx,
        &format!("job?{}&msg=killed", query(&[("id", id)])),
    ))
}
