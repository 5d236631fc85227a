//! Stats (`GET /stats`): `Resque.info`'s figures (with `stat:failed` and the failure list's
//! length side by side, since Ruby and Jesque report different ones) and Redis `INFO`, section
//! by section.

use super::ctx::Ctx;
use super::error::WebResult;
use super::layout::{num, page, Tab};
use super::state::App;
use axum::extract::State;
use axum::response::Html;
use maud::html;
use std::sync::Arc;

/// `GET /stats`.
pub(crate) async fn show(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let (info, scan) = admin.info_within(super::QUEUE_NAMES).await?;
    let redis = admin.redis_info().await?;
    let figures: Vec<(&str, String)> = vec![
        ("namespace", info.namespace.clone()),
        ("pending", num(info.pending)),
        ("processed (stat:processed)", num(info.processed)),
        ("failed (stat:failed, Jesque's figure)", num(info.failed)),
        (
            "failed (LLEN failed, resque-web's figure)",
            num(info.failed_entries),
        ),
        ("queues", info.queues.to_string()),
        ("workers", info.workers.to_string()),
        ("working", info.working.to_string()),
        (
            "paused (pause-all-workers)",
            if info.paused { "yes" } else { "no" }.to_string(),
        ),
        ("delayed timestamps", num(info.delayed_timestamps)),
    ];
    let body = html! {
        (super::layout::queues_partial(&ctx, &scan))
        div.cols {
            section {
                h2 { "Resque" }
                table { tbody { @for (k, v) in &figures { tr { th { (k) } td.num { (v) } } } } }
            }
            @for (section, fields) in &redis {
                section {
                    h2 { "Redis " (section) }
                    table { tbody { @for (k, v) in fields { tr { th { (k) } td.wrap { (v) } } } } }
                }
            }
        }
    };
    Ok(page(
        &ctx,
        Tab::Stats,
        admin.keys().namespace(),
        "Stats",
        body,
    ))
}
