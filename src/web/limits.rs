//! Limits (`GET /limits`): flow-control limits from the plugged-in
//! [`super::sources::LimitsSource`] (issue 15). Without one, the page says there is none.

use super::ctx::Ctx;
use super::error::WebResult;
use super::layout::{num, page, Tab};
use super::state::App;
use axum::extract::State;
use axum::response::Html;
use maud::html;
use std::sync::Arc;

/// `GET /limits`.
pub(crate) async fn show(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin;
    let body = match &app.limits {
        None => html! {
            p.muted {
                "No flow-control limits are configured for this dashboard. Concurrency and rate "
                "limits (issue 15) appear here once their source is plugged in."
            }
        },
        Some(source) => {
            let rows = source.limits(admin).await?;
            html! {
                table {
                    thead { tr { th { "name" } th { "kind" } th { "limit" } th { "in use" } th.num { "waiting" } } }
                    tbody {
                        @for r in &rows { tr {
                            td.mono { (r.name) } td { (r.kind) } td { (r.limit) } td { (r.in_use) }
                            td.num { @if let Some(w) = r.waiting { (num(w)) } @else { "—" } }
                        } }
                        @if rows.is_empty() { tr { td colspan="5" .muted { "no limits" } } }
                    }
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
