//! Failed (`GET /failed`, `GET /failure?id=`): the failure list newest first, filtered by a
//! substring and by exact class, exception or queue (every filter is in the URL, so a view
//! can be bookmarked), counts grouped by class, exception or queue, and one entry whole.
//!
//! Unfiltered, a page is one `LRANGE` of its 25 entries. Filtered, a page examines entries
//! newest first until it has 25 matches or has examined its budget ([`super::WebConfig`]'s
//! `search_budget`, 20,000 by default), then says how far it got; "older" continues from
//! there (`before=`). Counts come from [`super::counts`]. Actions name entries by id
//! ([`super::failed_actions`]).

use super::counts::Counts;
use super::ctx::{enc, join_query, query, Ctx, Params};
use super::error::{WebError, WebResult};
use super::layout::{button, num, page, short, Tab};
use super::state::App;
use crate::admin::failure_scan::{row_id, FailureFilter, OTHER};
use crate::admin::FailureRow;
use axum::extract::State;
use axum::response::Html;
use maud::{html, Markup};
use serde_json::Value;
use std::sync::Arc;

/// Entries a page shows.
pub(crate) const PER_PAGE: usize = 25;
/// The query parameters that make up a filter.
pub(crate) const FILTER_KEYS: &[&str] = &["q", "class", "exception", "queue"];

/// The filter a query or form names.
pub(crate) fn filter_of(p: &Params) -> FailureFilter {
    let get = |k: &str| p.get(k).map(str::to_string);
    FailureFilter {
        text: get("q"),
        class: get("class"),
        exception: get("exception"),
        queue: get("queue"),
    }
}

/// `GET /failed[?q=&class=&exception=&queue=&before=&group=]`.
pub(crate) async fn list(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let filter = filter_of(&ctx.query);
    let filters = ctx.query.keep(FILTER_KEYS);
    let group = match ctx.query.get("group") {
        None => None,
        Some(g @ ("class" | "exception" | "queue")) => Some(g),
        Some(_) => {
            return Err(WebError::BadRequest(
                "group is class, exception or queue".into(),
            ))
        }
    };
    let before = ctx.query.number("before")?;
    let scan = admin
        .scan_failures(&filter, before, PER_PAGE, app.search_budget)
        .await?;
    let counts = match group {
        Some(_) => Some(app.counts.get(admin).await),
        None => None,
    };
    let mut retry = filter_fields(&filter);
    let mut remove = retry.clone();
    retry.push(("action", "retry"));
    remove.push(("action", "remove"));
    let back = join_query(
        &filters,
        &before.map(|b| format!("before={b}")).unwrap_or_default(),
    );
    let body = html! {
        form.filters method="get" action={ (ctx.base) "failed" } {
            label { "search (any text)" input type="search" name="q" value=[ctx.query.get("q")]; }
            label { "class" input type="text" name="class" value=[ctx.query.get("class")]; }
            label { "exception" input type="text" name="exception" value=[ctx.query.get("exception")]; }
            label { "queue" input type="text" name="queue" value=[ctx.query.get("queue")]; }
            button.primary type="submit" { "Filter" }
            @if !filter.is_empty() { a href={ (ctx.base) "failed" } { "clear filters" } }
        }
        p.ranges {
            "Group by: "
            @for g in ["class", "exception", "queue"] {
                a.current[group == Some(g)] href={ (ctx.base) "failed?group=" (g) } { (g) }
            }
            @if group.is_some() { a href={ (ctx.base) "failed" } { "list" } }
        }
        @if let (Some(g), Some(c)) = (group, &counts) { (groups(&ctx, g, c)) }
        div.actions {
            @if filter.is_empty() {
                @if scan.total > 0 {
                    (button(&ctx, "failed/bulk", &[("action", "retry")], "Retry all", "primary",
                        Some("Retry every failure in the list?")))
                    (button(&ctx, "failed/clear", &[], "Clear all", "danger",
                        Some("Remove every failure now in the list? (Failures pushed meanwhile are kept.)")))
                    (button(&ctx, "failed/bulk", &[("action", "remove"), ("retried", "1")], "Clear retried", "danger",
                        Some("Remove every failure that was already retried?")))
                }
            } @else {
                (button(&ctx, "failed/bulk", &retry, "Retry all matching", "primary",
                    Some("Retry every failure matching this filter (the whole list, not only this page)?")))
                (button(&ctx, "failed/bulk", &remove, "Remove all matching", "danger",
                    Some("Remove every failure matching this filter (the whole list, not only this page)?")))
            }
        }
        (scan_note(&ctx, &filters, &filter, &scan))
        table {
            thead { tr {
                th.num { "#" } th { "failed at" } th { "class" } th { "queue" }
                th { "exception" } th { "args" } th { "" }
            } }
            tbody {
                @for row in &scan.rows { (row_html(&ctx, row, &back)) }
                @if scan.rows.is_empty() {
                    tr { td colspan="7" .muted {
                        @if scan.total == 0 { "The failure list is empty." }
                        @else { "No matching failures in the entries examined." }
                    } }
                }
            }
        }
        (older(&ctx, &filters, &scan))
    };
    Ok(page(
        &ctx,
        Tab::Failed,
        admin.keys().namespace(),
        "Failed jobs",
        body,
    ))
}

/// The filter as form fields for the bulk buttons.
fn filter_fields(f: &FailureFilter) -> Vec<(&'static str, &str)> {
    let mut v = Vec::new();
    for (k, val) in [
        ("q", &f.text),
        ("class", &f.class),
        ("exception", &f.exception),
        ("queue", &f.queue),
    ] {
        if let Some(val) = val {
            v.push((k, val.as_str()));
        }
    }
    v
}

/// What the page looked at.
fn scan_note(
    ctx: &Ctx,
    filters: &str,
    filter: &FailureFilter,
    scan: &crate::admin::failure_scan::ScanPage,
) -> Markup {
    let newest = ctx.link(&format!("failed?{filters}"));
    html! {
        p.scan {
            (num(scan.total as u64)) " entries in the failure list. "
            @if scan.total > 0 {
                @if filter.is_empty() {
                    "Showing #" (scan.end) "–#" (scan.start.saturating_sub(1)) ", newest first."
                } @else if scan.scanned == 0 {
                    "Nothing older to examine."
                } @else {
                    "Examined " (num(scan.scanned as u64)) " entries (#" (scan.end) "–#" (scan.start.saturating_sub(1)) "), "
                    (scan.rows.len()) " matching shown."
                    @if scan.budget_hit {
                        " Stopped at the search budget of " (num(scan.scanned as u64)) " entries: use “search older” to continue."
                    }
                }
                @if scan.start < scan.total { " " a href=(newest) { "back to the newest" } }
            }
        }
    }
}

/// The "older" link.
fn older(ctx: &Ctx, filters: &str, scan: &crate::admin::failure_scan::ScanPage) -> Markup {
    html! {
        @if scan.more() {
            nav.pager {
                a href=(ctx.link(&format!("failed?{}", join_query(filters, &format!("before={}", scan.end))))) {
                    @if scan.budget_hit { "search older entries ›" } @else { "older ›" }
                }
            }
        }
    }
}

/// One row of the list.
fn row_html(ctx: &Ctx, row: &FailureRow, back: &str) -> Markup {
    let id = row_id(row);
    let at = row.index.to_string();
    let e = row.entry.as_ref();
    let field = |f: fn(&crate::wire::failure::FailureEntry) -> Option<&String>| {
        e.and_then(f).map(String::as_str).unwrap_or("")
    };
    let args = e
        .and_then(|e| e.payload.as_ref())
        .and_then(|p| p.get("args"))
        .map(Value::to_string)
        .unwrap_or_default();
    let detail = ctx.link(&format!("failure?{}", query(&[("id", &id), ("at", &at)])));
    html! {
        tr {
            td.num { a href=(detail) title={ "id " (id) } { (row.index) } }
            td.nowrap {
                (field(|e| e.failed_at.as_ref()))
                @if let Some(r) = e.and_then(|e| e.retried_at.as_ref()) {
                    br; span.badge.completed title={ "retried at " (r) } { "retried" }
                }
            }
            td.mono { @match &row.class {
                Some(c) => a href=(ctx.link(&format!("failed?class={}", enc(c)))) { (c) },
                None => span.muted { @if e.is_none() { "(unreadable entry)" } @else { "(no class)" } },
            } }
            td { @let q = field(|e| e.queue.as_ref()); @if !q.is_empty() {
                a href=(ctx.link(&format!("failed?queue={}", enc(q)))) { (q) }
            } }
            td {
                @let x = field(|e| e.exception.as_ref());
                @if !x.is_empty() { a.mono href=(ctx.link(&format!("failed?exception={}", enc(x)))) { (x) } }
                br;
                span.err { (short(field(|e| e.error.as_ref()), 140)) }
                @if e.is_none() { span.mono { (short(&row.raw_text(), 140)) } }
            }
            td.mono { (short(&args, 60)) }
            td.nowrap {
                a href=(detail) { "show" } " "
                (button(ctx, "failed/retry", &[("id", &id), ("at", &at), ("back", back)], "Retry", "primary", None))
                " "
                (button(ctx, "failed/remove", &[("id", &id), ("at", &at), ("back", back)], "Remove", "danger", None))
            }
        }
    }
}

/// The group table.
fn groups(ctx: &Ctx, group: &str, counts: &Counts) -> Markup {
    match counts {
        Counts::Counting(done) => html! {
            p.scan { "Counting the failure list… " (num(*done as u64)) " entries so far. Reload in a moment." }
        },
        Counts::Failed(e) => html! { p.err { "Counting failed: " (e) } },
        Counts::Ready(c, age) => {
            let rows = match group {
                "class" => &c.by_class,
                "exception" => &c.by_exception,
                _ => &c.by_queue,
            };
            html! {
                p.scan {
                    "Counts over all " (num(c.total as u64)) " entries, as of "
                    (age.as_secs()) " s ago"
                    @if c.unreadable > 0 { " (" (c.unreadable) " unreadable)" }
                    "."
                }
                table {
                    thead { tr { th { (group) } th.num { "failures" } } }
                    tbody {
                        @for (value, n) in rows.iter().take(200) {
                            tr {
                                td.mono {
                                    @if value == OTHER || value.starts_with('(') { span.muted { (value) } }
                                    @else { a href=(ctx.link(&format!("failed?{}", query(&[(group, value)])))) { (value) } }
                                }
                                td.num { (num(*n as u64)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /failure?id=…&at=…`: one entry, whole.
pub(crate) async fn show(State(app): State<Arc<App>>, ctx: Ctx) -> WebResult<Html<String>> {
    let admin = &app.admin();
    let id = ctx.query.id("id")?;
    let hint = ctx.query.number("at")?.unwrap_or(0);
    let row = admin.failure_by_id(id, hint).await?.ok_or_else(|| {
        WebError::NotFound(
            "no failure entry with this id near where it was (removed, or retried: a retry rewrites the entry)".into(),
        )
    })?;
    let at = row.index.to_string();
    let value: Option<Value> = serde_json::from_slice(&row.raw).ok();
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let e = row.entry.as_ref();
    let backtrace: Vec<String> = match e.and_then(|e| e.backtrace.as_ref()) {
        Some(Value::Array(lines)) => lines
            .iter()
            .map(|l| {
                l.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| l.to_string())
            })
            .collect(),
        Some(Value::String(s)) => s.lines().map(str::to_string).collect(),
        _ => Vec::new(),
    };
    let body = html! {
        div.actions {
            (button(&ctx, "failed/retry", &[("id", id), ("at", &at)], "Retry", "primary", None))
            (button(&ctx, "failed/remove", &[("id", id), ("at", &at)], "Remove", "danger", None))
            a href={ (ctx.base) "failed" } { "← all failures" }
        }
        dl.kv {
            dt { "index" } dd { (row.index) " " span.muted { "(id " (row_id(&row)) ")" } }
            @if let Some(e) = e {
                dt { "failed at" } dd { (e.failed_at.as_deref().unwrap_or("—")) }
                @if let Some(r) = &e.retried_at { dt { "retried at" } dd { (r) } }
                dt { "class" } dd.mono { (row.class.as_deref().unwrap_or("—")) }
                dt { "queue" } dd { (e.queue.as_deref().unwrap_or("—")) }
                dt { "worker" } dd.mono { (e.worker.as_ref().map(|w| w.as_str().map(str::to_string).unwrap_or_else(|| w.to_string())).unwrap_or_default()) }
                dt { "exception" } dd.mono { (e.exception.as_deref().unwrap_or("—")) }
                dt { "error" } dd.err { (e.error.as_deref().unwrap_or("")) }
            }
        }
        @if let Some(p) = e.and_then(|e| e.payload.as_ref()) { h2 { "Payload" } pre { (pretty(p)) } }
        @if !backtrace.is_empty() { h2 { "Backtrace" } pre { @for l in &backtrace { (l) "\n" } } }
        h2 { "Entry as stored" }
        pre { @if let Some(v) = &value { (pretty(v)) } @else { (row.raw_text()) } }
    };
    Ok(page(
        &ctx,
        Tab::Failed,
        admin.keys().namespace(),
        "Failure",
        body,
    ))
}
