//! The failure list's actions, all `POST` forms with the CSRF token:
//! * `failed/retry`, `failed/remove` (`id`, `at`): one entry by its stable id (Ruby's requeue,
//!   with `retried_at`; Ruby's remove, sentinel + `LREM`), found again by its bytes when the
//!   list moved ([`crate::admin::failure_scan`]);
//! * `failed/bulk` (`action` = retry | remove, the filter's fields, or `retried=1`): every
//!   entry the filter selects, in the whole list, oldest first, chunk by chunk;
//! * `failed/clear`: the entries present now (`LTRIM`; failures pushed meanwhile are kept).
//!
//! Each redirects back to the view it came from with a fixed message.

use super::ctx::{join_query, see_other, CheckedForm, Ctx, Params};
use super::error::{WebError, WebResult};
use super::failed::{filter_of, FILTER_KEYS};
use super::state::App;
use crate::admin::failure_scan::ById;
use crate::admin::Selector;
use axum::extract::State;
use axum::response::Response;
use std::sync::Arc;

/// The view a form came from (`back`: its query string), only its filter and position kept.
fn back_to(form: &Params) -> String {
    let back = Params::parse(form.get("back").unwrap_or("").as_bytes());
    let mut keep: Vec<&str> = FILTER_KEYS.to_vec();
    keep.push("before");
    back.keep(&keep)
}

fn message(outcome: &ById, done: &str) -> &'static str {
    match (outcome, done) {
        (ById::Done, "retried") => "retried&n=1",
        (ById::Done, _) => "removed&n=1",
        (ById::Gone, _) => "gone",
        (ById::Refused(_), _) => "refused",
    }
}

/// `POST /failed/retry`.
pub(crate) async fn retry(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    let hint = f.number("at")?.unwrap_or(0);
    let out = app.admin().retry_failure_id(f.id("id")?, hint).await?;
    let q = join_query(&back_to(&f), &format!("msg={}", message(&out, "retried")));
    Ok(see_other(&ctx, &format!("failed?{q}")))
}

/// `POST /failed/remove`.
pub(crate) async fn remove(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    let hint = f.number("at")?.unwrap_or(0);
    let out = app.admin().remove_failure_id(f.id("id")?, hint).await?;
    let q = join_query(&back_to(&f), &format!("msg={}", message(&out, "removed")));
    Ok(see_other(&ctx, &format!("failed?{q}")))
}

/// `POST /failed/bulk`.
pub(crate) async fn bulk(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    CheckedForm(f): CheckedForm,
) -> WebResult<Response> {
    let filter = filter_of(&f);
    let retried_only = f.get("retried") == Some("1");
    let (out, msg) = match (f.need("action")?, retried_only) {
        ("retry", false) => (app.admin().retry_matching(&filter).await?, "retried"),
        ("remove", false) => (app.admin().remove_matching(&filter).await?, "removed"),
        ("remove", true) => (
            app.admin().remove_failures(&Selector::Retried).await?,
            "removed",
        ),
        _ => return Err(WebError::BadRequest("action is retry or remove".into())),
    };
    // A retry notes each entry it skipped; a removal notes per chunk, so only retries count.
    let skipped = if msg == "retried" {
        out.skipped.len()
    } else {
        0
    };
    let q = join_query(
        &f.keep(FILTER_KEYS),
        &format!("msg={msg}&n={}&s={skipped}", out.done),
    );
    Ok(see_other(&ctx, &format!("failed?{q}")))
}

/// `POST /failed/clear`.
pub(crate) async fn clear(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    _f: CheckedForm,
) -> WebResult<Response> {
    let n = app.admin().clear_failures().await?;
    Ok(see_other(&ctx, &format!("failed?msg=removed&n={n}")))
}
