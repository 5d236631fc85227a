//! Limits (`GET /limits`): flow-control limits from the plugged-in
//! [`super::sources::LimitsSource`] ([`super::sources::FleetLimits`] by default: every limit in
//! force with its capacity, use, held jobs, oldest held age and state), and a warning naming
//! the Ruby/Jesque/node-resque workers that poll a limited queue (they do not honour limits). Without a source, the page says there is none.

use super::ctx::Ctx;
use super::error::WebResult;
use super::layout::{age, num, page, Tab};
use super::state::App;
use axum::extract::State;
use axum::response::Html;
use maud::html;
use std::sync::Arc;

/// `GET /limits`.
pub(crate) async fn show(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let body = match &app.limits {
        None => html! {
            p.muted {
                "No flow-control limits source is configured for this dashboard."
            }
        },
        Some(source) => {
            let rows = source.limits(admin).await?;
            html! {
                @for r in rows.iter().filter(|r| !r.foreign_workers.is_empty()) {
                    p.flash.warn data-foreign-workers=(r.name) {
                        "Limit " strong { (r.name) } ": "
                        (r.foreign_workers.len()) " Ruby/Jesque/node-resque worker(s) poll a queue it covers "
                        "and do not honour it: "
                        span.mono { (r.foreign_workers.join(", ")) }
                    }
                }
                table {
                    thead { tr {
                        th { "name" } th { "kind" } th { "scope" } th { "setting" }
                        th.num { "capacity" } th.num { "in use" } th.num { "held" }
                        th.num { "oldest held" } th { "state" } th { "source" }
                    } }
                    tbody {
                        @for r in &rows { tr data-limit=(r.name) {
                            td.mono { (r.name) }
                            td { (r.kind) }
                            td.mono { (r.scope) @if r.partitions > 0 { br; span.muted { (r.partitions) " partitions in use" } }
                                @if r.partial { br; span.warn data-partial="partitions" { "stopped early: a page reads " (num(super::LIMIT_PARTS as u64)) " partitions at most; in use and held count those read" } } }
                            td.mono { (r.limit) }
                            td.num { @if let Some(c) = r.capacity { (num(c)) } @else { "—" } }
                            td.num data-in-use { (num(r.in_use)) }
                            td.num { (num(r.held)) }
                            td.num { @if r.oldest_held_secs.is_some() { (age(r.oldest_held_secs)) } @else { "—" } }
                            td { @if r.open { span.badge.completed { "open" } } @else { span.badge.paused { "closed" } } }
                            td { @if r.overridden { span.badge.ro { "override" } } @else { span.muted { "declared" } } }
                        } }
                        @if rows.is_empty() { tr { td colspan="10" .muted { "no limits" } } }
                    }
                }
                p.muted {
                    "In use: units running (concurrency) or starts in the current window (rate). "
                    "Held: jobs a limit keeps out of their queue until it has room. "
                    "Overrides: " code { "resq limits set" } " / " code { "resq limits clear" } "."
                }
            }
        }
    };
    Ok(page(
        &ctx,
        Tab::Limits,
        admin.keys().namespace(),
        "Limits",
        body,
    ))
}
