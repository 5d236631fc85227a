//! Overview (`GET /`, also `/overview`): the namespace's counters (live), processed/failed per second (live, drawn
//! by the script from [`super::api`]), history over hours or days from the samples of
//! [`crate::admin::history`], the largest queues, and the global pause switch.

use super::ctx::{enc, see_other, CheckedForm, Ctx};
use super::error::WebResult;
use super::graph;
use super::layout::{age, button, num, page, Tab};
use super::state::App;
use crate::admin::history::{self, Resolution};
use axum::extract::State;
use axum::response::{Html, Response};
use maud::html;
use std::sync::Arc;

/// A history range the overview offers.
struct Range {
    /// Its query value.
    key: &'static str,
    /// Its label.
    label: &'static str,
    /// Sample resolution.
    res: Resolution,
    /// Steps shown.
    steps: usize,
}

const RANGES: &[Range] = &[
    Range {
        key: "1h",
        label: "last hour",
        res: Resolution::Minute,
        steps: 60,
    },
    Range {
        key: "24h",
        label: "24 hours",
        res: Resolution::Minute,
        steps: 1440,
    },
    Range {
        key: "7d",
        label: "7 days",
        res: Resolution::Hour,
        steps: 168,
    },
    Range {
        key: "30d",
        label: "30 days",
        res: Resolution::Hour,
        steps: 720,
    },
    Range {
        key: "90d",
        label: "90 days",
        res: Resolution::Hour,
        steps: 2160,
    },
];

/// `GET /`.
pub(crate) async fn show(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let range = RANGES
        .iter()
        .find(|r| Some(r.key) == ctx.query.get("range"))
        .unwrap_or(&RANGES[1]);
    let now = admin.now().await?;
    let (info, scan) = admin.info_within(super::QUEUE_NAMES).await?;
    let mut queues = scan.queues.clone();
    queues.sort_by(|a, b| b.size.cmp(&a.size).then_with(|| a.name.cmp(&b.name)));
    queues.truncate(10);
    let mut con = admin.con();
    let samples = history::read(
        &mut con,
        admin.keys(),
        range.res,
        now.timestamp_millis(),
        range.steps,
    )
    .await?;
    let rates = history::rates(&samples, range.res);
    let (points, group) = graph::downsample(&rates);
    let unit = match (range.res, group) {
        (Resolution::Minute, 1) => "jobs/min".to_string(),
        (Resolution::Minute, g) => format!("jobs/min, {g}-minute averages"),
        (Resolution::Hour, 1) => "jobs/hour".to_string(),
        (Resolution::Hour, g) => format!("jobs/hour, {g}-hour averages"),
    };
    let from = format!("{} ago", range.label);
    let body = html! {
        div #live data-src={ (ctx.base) "api/live" } data-every="2000" {
            div.cards {
                div.card { div.v data-live="processed" { (num(info.processed)) } div.k { "processed (stat:processed)" } }
                div.card { div.v.bad data-live="failed" { (num(info.failed)) } div.k { "failed (stat:failed)" } }
                div.card {
                    div.v { a href={ (ctx.base) "failed" } data-live="failed_entries" { (num(info.failed_entries)) } }
                    div.k { "in the failure list" }
                }
                div.card { div.v { (num(info.pending)) } div.k { "pending in " (info.queues) " queues" } }
                div.card { div.v { (info.working) " / " (info.workers) } div.k { "workers busy" } }
                div.card { div.v { (num(info.delayed_timestamps)) } div.k { "delayed timestamps" } }
                div.card {
                    div.v { @if info.paused { span.badge.paused { "paused" } } @else { "running" } }
                    div.k { "all workers (pause-all-workers)" }
                    @if info.paused {
                        (button(&ctx, "resume", &[], "Resume", "primary", None))
                    } @else {
                        (button(&ctx, "pause", &[], "Pause all", "danger",
                            Some("Pause every Ruby and resq worker of this namespace?")))
                    }
                }
            }
            h2 {
                "Now: " span data-rate="processed" { "…" } " processed/s, "
                span data-rate="failed" { "…" } " failed/s "
                span.muted data-live-status { "" }
            }
            (graph::live_chart())
        }
        h2 { "History" }
        p.ranges {
            @for r in RANGES {
                a.current[r.key == range.key] href={ (ctx.base) "overview?range=" (r.key) } { (r.label) }
            }
            span.muted { "from samples of stat:processed / stat:failed kept in Redis" }
        }
        (graph::chart(&points, &unit, &from, "now"))
        h2 { "Largest queues" }
        (super::layout::queues_partial(&ctx, &scan))
        table {
            thead { tr { th { "queue" } th.num { "size" } th.num { "oldest job" } } }
            tbody {
                @for q in &queues {
                    tr {
                        td { a href={ (ctx.base) "queue?name=" (enc(&q.name)) } { (q.name) } }
                        td.num { (num(q.pending.unwrap_or(q.size))) }
                        td.num { @if q.size == 0 { "—" } @else { (age(q.oldest_age_s)) } }
                    }
                }
                @if queues.is_empty() { tr { td colspan="3" .muted { "no queues" } } }
            }
        }
        p { a href={ (ctx.base) "queues" } { "all " (info.queues) " queues →" } }
    };
    Ok(page(
        &ctx,
        Tab::Overview,
        admin.keys().namespace(),
        "Overview",
        body,
    ))
}

/// `POST /pause`: sets `<ns>:pause-all-workers`.
pub(crate) async fn pause(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    _f: CheckedForm,
) -> WebResult<Response> {
    app.admin().pause().await?;
    Ok(see_other(&ctx, "overview?msg=paused"))
}

/// `POST /resume`: deletes `<ns>:pause-all-workers`.
pub(crate) async fn resume(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    _f: CheckedForm,
) -> WebResult<Response> {
    app.admin().resume().await?;
    Ok(see_other(&ctx, "overview?msg=resumed"))
}
