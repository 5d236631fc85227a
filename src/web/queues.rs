//! Queues (`GET /queues`, `GET /queue?name=`): every queue with its size, latency (age of the
//! oldest job, where the payload says when it was enqueued) and pause state; one queue's jobs
//! page by page; delete one job by its bytes, run a Jesque delayed member now, clear or remove
//! a queue, and pause or resume it when a per-queue pause source is plugged in
//! ([`super::sources::QueuePauses`]).

use super::ctx::{enc, join_query, query, see_other, CheckedForm, Ctx};
use super::error::{WebError, WebResult};
use super::layout::{age, button, num, page, pager, short, Tab};
use super::state::App;
use crate::admin::queue_jobs::Deleted;
use crate::admin::{QueueInfo, QueueKind};
use axum::extract::State;
use axum::response::{Html, Response};
use maud::html;
use std::collections::HashSet;
use std::sync::Arc;

/// Jobs a queue page shows.
const PER_PAGE: usize = 25;

/// `GET /queues[?q=substring]`.
pub(crate) async fn list(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let filter = ctx.query.get("q").map(str::to_lowercase);
    let mut scan = admin.queues_within(None, super::QUEUE_NAMES).await?;
    // Too many names to read them all: the filter is matched by Redis (as typed), which
    // returns only the matches, so 25 times as many names are looked at (`SSCAN MATCH`,
    // 1,000 a call: 50 calls).
    if let (false, Some(q)) = (scan.complete, ctx.query.get("q")) {
        scan = admin
            .queues_within(Some(q), 25 * super::QUEUE_NAMES)
            .await?;
    }
    let global_pause = admin.is_paused().await?;
    let all = &scan.queues;
    let queues: Vec<&QueueInfo> = all
        .iter()
        .filter(|q| {
            filter
                .as_deref()
                .is_none_or(|f| q.name.to_lowercase().contains(f))
        })
        .collect();
    let names: Vec<String> = queues.iter().map(|q| q.name.clone()).collect();
    let paused: HashSet<String> = match &app.pauses {
        Some(p) => p.paused(admin, &names).await?,
        None => HashSet::new(),
    };
    let pending: u64 = queues.iter().map(|q| q.pending.unwrap_or(q.size)).sum();
    let can_pause = app.pauses.is_some() && !ctx.read_only;
    let body = html! {
        form.filters method="get" action={ (ctx.base) "queues" } {
            label { "queue name contains" input type="search" name="q" value=[ctx.query.get("q")]; }
            button type="submit" { "Filter" }
            @if filter.is_some() { a href={ (ctx.base) "queues" } { "clear filter" } }
        }
        (super::layout::queues_partial(&ctx, &scan))
        p.muted {
            (queues.len()) " queues, " (num(pending)) " jobs pending"
            @if global_pause { " · " span.badge.paused { "all workers paused" } }
            @if app.pauses.is_none() { " · per-queue pause: not available (no pause source configured)" }
        }
        table {
            thead { tr {
                th { "queue" } th { "kind" } th.num { "size" } th.num { "due" }
                th.num { "latency (oldest job)" } th { "state" }
                @if can_pause { th { "" } }
            } }
            tbody {
                @for q in &queues {
                    tr {
                        td { a href={ (ctx.base) "queue?name=" (enc(&q.name)) } { (q.name) } }
                        td { (kind(&q.kind)) }
                        td.num { (num(q.size)) }
                        td.num { @if let Some(p) = q.pending { (num(p)) } @else { "—" } }
                        td.num { @if q.size == 0 { "—" } @else { (age(q.oldest_age_s)) } }
                        td data-queue-state=(q.name) {
                            @if paused.contains(&q.name) || global_pause { span.badge.paused { "paused" } }
                            @else { span.muted { "active" } }
                        }
                        @if can_pause {
                            td.nowrap {
                                @if paused.contains(&q.name) {
                                    (button(&ctx, "queue/pause", &[("name", &q.name), ("paused", "0"), ("back", "queues")], "Resume", "primary", None))
                                } @else {
                                    (button(&ctx, "queue/pause", &[("name", &q.name), ("paused", "1"), ("back", "queues")], "Pause", "", None))
                                }
                            }
                        }
                    }
                }
                @if queues.is_empty() { tr { td colspan="7" .muted { "no queues" } } }
            }
        }
        @if app.pauses.is_some() {
            p.muted { "Pause stops resq workers taking a queue's jobs (the jobs stay in it); Ruby, Jesque and node-resque workers do not look." }
        }
        p.muted { "Latency is known when a job says when it was enqueued (enqueued_at, ActiveJob); plain Resque payloads carry no time." }
    };
    Ok(page(
        &ctx,
        Tab::Queues,
        admin.keys().namespace(),
        "Queues",
        body,
    ))
}

fn kind(k: &QueueKind) -> String {
    match k {
        QueueKind::List => "list".into(),
        QueueKind::Zset => "jesque delayed".into(),
        QueueKind::Empty => "empty".into(),
        QueueKind::Other(t) => t.clone(),
    }
}

/// `GET /queue?name=…[&offset=N]`.
pub(crate) async fn show(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let name = ctx.query.need("name")?.to_string();
    let offset = ctx.query.number("offset")?.unwrap_or(0);
    let page_data = admin.queue_page(&name, offset, PER_PAGE).await?;
    let now = admin.now().await?;
    let zset = page_data.kind == "zset";
    let paused = match &app.pauses {
        Some(p) => Some(
            p.paused(admin, std::slice::from_ref(&name))
                .await?
                .contains(&name),
        ),
        None => None,
    };
    let keep = query(&[("name", &name)]);
    let back = query(&[("name", &name), ("offset", &offset.to_string())]);
    let body = html! {
        p {
            "Kind: " (if zset { "Jesque delayed (zset, due members are taken first)" } else { page_data.kind.as_str() })
            " · " (num(page_data.size as u64)) " jobs"
            @if let Some(true) = paused { " · " span.badge.paused { "paused" } }
        }
        div.actions {
            @if let Some(p) = paused {
                @if p {
                    (button(&ctx, "queue/pause", &[("name", &name), ("paused", "0")], "Resume queue", "primary", None))
                } @else {
                    (button(&ctx, "queue/pause", &[("name", &name), ("paused", "1")], "Pause queue", "", None))
                }
            }
            @if page_data.size > 0 {
                (button(&ctx, "queue/clear", &[("name", &name)], "Clear queue", "danger",
                    Some("Delete every job in this queue?")))
            }
            (button(&ctx, "queue/remove", &[("name", &name)], "Remove queue", "danger",
                Some("Delete this queue's jobs and remove it from the queue list (resque-web's remove)?")))
        }
        (pager(&ctx, "queue", &keep, offset, PER_PAGE, page_data.size))
        table {
            thead { tr {
                th.num { "#" } th { "class" } th { "args" }
                th { @if zset { "due" } @else { "enqueued" } }
                th { "" }
            } }
            tbody {
                @for j in &page_data.jobs {
                    @let at = j.index.to_string();
                    tr {
                        td.num { (j.index) }
                        td.mono { (j.class.as_deref().unwrap_or("(no class)")) }
                        td {
                            details {
                                summary.mono { (short(j.args.as_deref().unwrap_or(&j.raw), 90)) }
                                pre { (j.raw) }
                            }
                        }
                        td.nowrap {
                            @if let Some(d) = j.due {
                                (super::layout::when(d))
                                @if let Some(e) = j.every_s { br; span.muted { "every " (age(Some(e))) } }
                            } @else if let Some(t) = j.enqueued_at {
                                (age(Some(crate::admin::secs_between(t, now)))) " ago"
                            } @else { span.muted { "—" } }
                        }
                        td.nowrap {
                            @if zset {
                                (button(&ctx, "queue/run", &[("name", &name), ("id", &j.id), ("at", &at), ("back", &back)], "Run now", "primary", None))
                                " "
                            }
                            (button(&ctx, "queue/delete", &[("name", &name), ("id", &j.id), ("at", &at), ("back", &back)], "Delete", "danger", None))
                        }
                    }
                }
                @if page_data.jobs.is_empty() { tr { td colspan="5" .muted { "no jobs on this page" } } }
            }
        }
        (pager(&ctx, "queue", &keep, offset, PER_PAGE, page_data.size))
    };
    Ok(page(
        &ctx,
        Tab::Queues,
        admin.keys().namespace(),
        &format!("Queue {name}"),
        body,
    ))
}

/// Where to go back to after an action on a job: the queue page the form came from.
fn back_to(form: &super::ctx::Params, name: &str) -> String {
    let back = super::ctx::Params::parse(form.get("back").unwrap_or("").as_bytes());
    let kept = back.keep(&["offset"]);
    join_query(&query(&[("name", name)]), &kept)
}

/// `POST /queue/delete` (`name`, `id`, `at`): deletes that job by its bytes.
pub(crate) async fn delete(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    let name = f.need("name")?;
    let hint = f.number("at")?.unwrap_or(0);
    let done = app
        .admin()
        .delete_queued_job(name, f.id("id")?, hint)
        .await?;
    let msg = if done == Deleted::Done {
        "deleted"
    } else {
        "gone"
    };
    Ok(see_other(
        &ctx,
        &format!("queue?{}&msg={msg}", back_to(&f, name)),
    ))
}

/// `POST /queue/run` (`name`, `id`, `at`): makes a Jesque delayed member due now.
pub(crate) async fn run(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    let name = f.need("name")?;
    let hint = f.number("at")?.unwrap_or(0);
    let done = app
        .admin()
        .run_zset_member_now(name, f.id("id")?, hint)
        .await?;
    let msg = if done == Deleted::Done {
        "enqueued"
    } else {
        "gone"
    };
    Ok(see_other(
        &ctx,
        &format!("queue?{}&msg={msg}", back_to(&f, name)),
    ))
}

/// `POST /queue/clear` (`name`): deletes every job of the queue.
pub(crate) async fn clear(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    let name = f.need("name")?;
    let n = app.admin().clear_queue(name).await?;
    Ok(see_other(
        &ctx,
        &format!("queue?{}&msg=cleared&n={n}", query(&[("name", name)])),
    ))
}

/// `POST /queue/remove` (`name`): resque-web's remove queue.
pub(crate) async fn remove(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    let n = app.admin().remove_queue(f.need("name")?).await?;
    Ok(see_other(&ctx, &format!("queues?msg=cleared&n={n}")))
}

/// `POST /queue/pause` (`name`, `paused` = 1 or 0, `back` = `queues` to return to the list),
/// when a pause source is plugged in.
pub(crate) async fn pause(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    let Some(p) = &app.pauses else {
        return Err(WebError::NotFound(
            "per-queue pause is not available".into(),
        ));
    };
    let name = f.need("name")?;
    let paused = f.get("paused") == Some("1");
    p.set(&app.admin(), name, paused).await?;
    let msg = if paused { "paused" } else { "resumed" };
    if f.get("back") == Some("queues") {
        return Ok(see_other(&ctx, &format!("queues?msg={msg}")));
    }
    Ok(see_other(
        &ctx,
        &format!("queue?{}&msg={msg}", query(&[("name", name)])),
    ))
}
