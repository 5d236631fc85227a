//! Delayed (`GET /delayed`): resque-scheduler's delayed items, earliest timestamp first, page
//! by page, each with Run now and Delete (`POST delayed/run`, `delayed/delete`: one item by its
//! id, see [`crate::admin::delayed_ops`]); and the Jesque delayed queues, which live in zsets
//! and are handled on their queue's page.

use super::ctx::{enc, query, see_other, CheckedForm, Ctx, Params};
use super::error::{WebError, WebResult};
use super::layout::{age, button, num, page, pager, short, when, Tab};
use super::state::App;
use crate::admin::delayed_ops::{DelayedAction, Taken};
use crate::admin::QueueKind;
use axum::extract::State;
use axum::response::{Html, Response};
use maud::html;
use std::sync::Arc;

/// Timestamps a page shows.
const PER_PAGE: usize = 20;
/// Items shown per timestamp.
const PER_BUCKET: usize = 10;

/// `GET /delayed[?offset=N]`.
pub(crate) async fn show(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let offset = ctx.query.number("offset")?.unwrap_or(0);
    let p = admin.delayed_page(offset, PER_PAGE, PER_BUCKET).await?;
    let now = admin.now().await?;
    let scan = admin.queues_within(None, super::QUEUE_NAMES).await?;
    let jesque: Vec<_> = scan
        .queues
        .iter()
        .filter(|q| q.kind == QueueKind::Zset)
        .cloned()
        .collect();
    let back = offset.to_string();
    let body = html! {
        (super::layout::queues_partial(&ctx, &scan))
        p.muted { (num(p.timestamps as u64)) " timestamps with delayed items (resque-scheduler's delayed_queue_schedule)." }
        (pager(&ctx, "delayed", "", offset, PER_PAGE, p.timestamps))
        table {
            thead { tr { th { "due" } th { "class" } th { "queue" } th { "args" } th { "" } } }
            tbody {
                @for b in &p.buckets {
                    @let ts = b.ts.to_string();
                    @for item in &b.items {
                        @let at = item.index.to_string();
                        tr {
                            td.nowrap {
                                @if let Some(t) = b.at {
                                    (when(t)) br;
                                    span.muted { @let s = crate::admin::secs_between(t, now);
                                        @if s >= 0.0 { "due " (age(Some(s))) " ago" } @else { "in " (age(Some(-s))) } }
                                } @else { (b.ts) }
                            }
                            td.mono { (item.class.as_deref().unwrap_or("(no class)")) }
                            td { (item.queue.as_deref().unwrap_or("—")) }
                            td { details { summary.mono { (short(item.args.as_deref().unwrap_or(&item.raw), 80)) } pre { (item.raw) } } }
                            td.nowrap {
                                (button(&ctx, "delayed/run", &[("ts", &ts), ("id", &item.id), ("at", &at), ("offset", &back)], "Run now", "primary", None))
                                " "
                                (button(&ctx, "delayed/delete", &[("ts", &ts), ("id", &item.id), ("at", &at), ("offset", &back)], "Delete", "danger", None))
                            }
                        }
                    }
                    @if b.size > b.items.len() {
                        tr { td colspan="5" .muted { "… and " (num((b.size - b.items.len()) as u64)) " more items due at this time" } }
                    }
                }
                @if p.buckets.is_empty() { tr { td colspan="5" .muted { "no delayed items" } } }
            }
        }
        (pager(&ctx, "delayed", "", offset, PER_PAGE, p.timestamps))
        @if !jesque.is_empty() {
            h2 { "Jesque delayed queues" }
            table {
                thead { tr { th { "queue" } th.num { "members" } th.num { "due now" } } }
                tbody { @for q in &jesque { tr {
                    td { a href={ (ctx.base) "queue?name=" (enc(&q.name)) } { (q.name) } }
                    td.num { (num(q.size)) }
                    td.num { (num(q.pending.unwrap_or(0))) }
                } } }
            }
        }
    };
    Ok(page(
        &ctx,
        Tab::Delayed,
        admin.keys().namespace(),
        "Delayed jobs",
        body,
    ))
}

async fn act(app: &App, ctx: &Ctx, f: &Params, action: DelayedAction) -> WebResult<Response> {
    let ts: i64 = f
        .need("ts")?
        .parse()
        .map_err(|_| WebError::BadRequest("ts must be a timestamp".into()))?;
    let hint = f.number("at")?.unwrap_or(0);
    let taken = app
        .admin()
        .delayed_act(ts, f.id("id")?, hint, action, app.float_format)
        .await?;
    let msg = match (taken, action) {
        (Taken::Gone, _) => "gone",
        (Taken::Done, DelayedAction::RunNow) => "enqueued",
        (Taken::Done, DelayedAction::Delete) => "deleted",
    };
    let offset = f.number("offset")?.unwrap_or(0).to_string();
    Ok(see_other(
        ctx,
        &format!("delayed?{}&msg={msg}", query(&[("offset", &offset)])),
    ))
}

/// `POST /delayed/run` (`ts`, `id`, `at`): enqueues the item now.
pub(crate) async fn run(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    act(&app, &ctx, &f, DelayedAction::RunNow).await
}

/// `POST /delayed/delete` (`ts`, `id`, `at`): deletes the item.
pub(crate) async fn delete(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    act(&app, &ctx, &f, DelayedAction::Delete).await
}
