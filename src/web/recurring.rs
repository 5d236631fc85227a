//! Recurring (`GET /recurring`): resque-scheduler's stored schedules (`persistent_schedules`,
//! what `resq schedule add` and `Resque.set_schedule(…, persist: true)` write) with when they
//! fire, their last and next firing; Enqueue now (`POST recurring/enqueue`, as resque-scheduler's
//! web "Queue now") and Delete (`POST recurring/delete`, its `remove_schedule`). Schedules a
//! Ruby scheduler loaded from its own config file are not in Redis: they show only as names
//! with a last firing, without actions.

use super::ctx::{see_other, CheckedForm, Ctx};
use super::error::WebResult;
use super::layout::{button, page, short, when, Tab};
use super::state::App;
use crate::scheduler::schedule::{self, Schedule};
use crate::scheduler::store;
use axum::extract::State;
use axum::response::{Html, Response};
use maud::html;
use serde_json::Value;
use std::sync::Arc;

/// `GET /recurring`.
pub(crate) async fn show(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let stored = admin.schedules().await?;
    let fired = admin.last_enqueued().await?;
    let unstored: Vec<&(String, String)> = fired
        .iter()
        .filter(|(n, _)| !stored.iter().any(|s| &s.name == n))
        .collect();
    let body = html! {
        p.muted { (stored.len()) " stored schedules (" code { "persistent_schedules" } ")." }
        table {
            thead { tr {
                th { "name" } th { "class" } th { "queue" } th { "args" } th { "when" }
                th { "last enqueued" } th { "next (resq)" } th { "" }
            } }
            tbody {
                @for s in &stored { (row(&ctx, s)) }
                @if stored.is_empty() { tr { td colspan="8" .muted { "no stored schedules" } } }
            }
        }
        @if !unstored.is_empty() {
            h2 { "Fired, but not stored in Redis" }
            p.muted { "Static schedules of a Ruby resque-scheduler (its config lives in that process)." }
            table {
                thead { tr { th { "name" } th { "last enqueued" } } }
                tbody { @for (n, t) in &unstored { tr { td.mono { (n) } td { (t) } } } }
            }
        }
    };
    Ok(page(
        &ctx,
        Tab::Recurring,
        admin.keys().namespace(),
        "Recurring schedules",
        body,
    ))
}

fn row(ctx: &Ctx, s: &store::StoredSchedule) -> maud::Markup {
    let (class, queue, args, fires, desc) = match &s.config {
        Ok(c) => {
            let text = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_string);
            let fires = match Schedule::from_config(&s.name, c, chrono_tz::UTC) {
                Ok(sch) => sch.describe_when(),
                Err(e) => format!("unreadable: {e}"),
            };
            (
                text("class").unwrap_or_else(|| s.name.clone()),
                text("queue").unwrap_or_default(),
                c.get("args").map(Value::to_string).unwrap_or_default(),
                fires,
                text("description"),
            )
        }
        Err(raw) => (
            String::new(),
            String::new(),
            short(raw, 60),
            "not a JSON object".into(),
            None,
        ),
    };
    html! {
        tr {
            td.mono { (s.name) @if let Some(d) = desc { br; span.muted { (d) } } }
            td.mono { (class) }
            td { (queue) }
            td.mono { (short(&args, 60)) }
            td { (fires) }
            td { (s.last_enqueued_at.as_deref().unwrap_or("—")) }
            td.nowrap { @match s.next_due.and_then(schedule::at) { Some(t) => (when(t)), None => "—" } }
            td.nowrap {
                (button(ctx, "recurring/enqueue", &[("name", &s.name)], "Enqueue now", "primary", None))
                " "
                (button(ctx, "recurring/delete", &[("name", &s.name)], "Delete", "danger",
                    Some("Delete this stored schedule? (A Ruby resque-scheduler reloads it as removed.)")))
            }
        }
    }
}

/// `POST /recurring/enqueue` (`name`).
pub(crate) async fn enqueue(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    app.admin()
        .enqueue_schedule_now(f.need("name")?, app.float_format)
        .await?;
    Ok(see_other(&ctx, "recurring?msg=enqueued"))
}

/// `POST /recurring/delete` (`name`).
pub(crate) async fn delete(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    let admin = app.admin();
    let mut con = admin.con();
    let gone = store::remove(&mut con, admin.keys(), f.need("name")?).await?;
    Ok(see_other(
        &ctx,
        if gone {
            "recurring?msg=deleted"
        } else {
            "recurring?msg=gone"
        },
    ))
}
