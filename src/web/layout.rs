//! The page shell (head, tabs, flash message, footer) and the small pieces every page uses:
//! action buttons (a POST form carrying the CSRF token; nothing at all in read-only mode),
//! pagers, times and ages, shortened text.
//!
//! Everything goes through maud, which escapes every `(value)` in text and attributes; no
//! page writes unescaped text (there is no `PreEscaped` in the dashboard).

use super::ctx::Ctx;
use crate::human as output;
use axum::response::Html;
use chrono::{DateTime, Utc};
use maud::{html, Markup, DOCTYPE};

/// The tabs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tab {
    /// Counters and graphs.
    Overview,
    /// Queues.
    Queues,
    /// Workers.
    Workers,
    /// The failure list.
    Failed,
    /// resque-scheduler's delayed items.
    Delayed,
    /// Recurring schedules.
    Recurring,
    /// Tracked jobs.
    Jobs,
    /// Batches and the jobs waiting for others.
    Batches,
    /// Flow-control limits.
    Limits,
    /// Which classes of each queue this binary has handlers for.
    Coverage,
    /// Redis and Resque figures.
    Stats,
}

const TABS: &[(Tab, &str, &str)] = &[
    (Tab::Overview, "Overview", "overview"),
    (Tab::Queues, "Queues", "queues"),
    (Tab::Workers, "Workers", "workers"),
    (Tab::Failed, "Failed", "failed"),
    (Tab::Delayed, "Delayed", "delayed"),
    (Tab::Recurring, "Recurring", "recurring"),
    (Tab::Jobs, "Jobs", "jobs"),
    (Tab::Batches, "Batches", "batches"),
    (Tab::Limits, "Limits", "limits"),
    (Tab::Coverage, "Coverage", "coverage"),
    (Tab::Stats, "Stats", "stats"),
];

/// Asset URLs carry the version so a new binary's assets are fetched afresh.
const V: &str = env!("CARGO_PKG_VERSION");

/// A whole page.
pub(crate) fn page(
    ctx: &Ctx,
    tab: Tab,
    namespace: &str,
    title: &str,
    body: Markup,
) -> Html<String> {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · resq web" }
                link rel="icon" href={ (ctx.base) "assets/favicon.svg?v=" (V) } type="image/svg+xml";
                link rel="stylesheet" href={ (ctx.base) "assets/app.css?v=" (V) };
                script src={ (ctx.base) "assets/app.js?v=" (V) } defer {}
            }
            body {
                header.top {
                    a.brand href={ (ctx.base) "overview" } { "resq" }
                    span.ns title="namespace" { (namespace) }
                    @if ctx.read_only { span.badge.ro { "read-only" } }
                    nav {
                        @for (t, label, path) in TABS {
                            a.current[*t == tab] href={ (ctx.base) (path) } { (label) }
                        }
                    }
                }
                main {
                    h1 { (title) }
                    (flash(ctx))
                    (body)
                    (bad_names())
                }
                footer { "resq " (V) " · same Redis as resque-web, Jesque and node-resque" }
            }
        }
    };
    Html(markup.into_string())
}

/// What a page says when it read only part of `<ns>:queues` (`scan`).
pub(crate) fn queues_partial(ctx: &Ctx, scan: &crate::admin::queues::QueueScan) -> Markup {
    html! {
        @if !scan.complete {
            p.flash.warn data-partial="queues" {
                "Stopped early: about " (num(scan.examined as u64)) " of the " (num(scan.names))
                " names in the queue set were read (a page's budget), so counts here are of those. "
                a href={ (ctx.base) "queues" } { "Filter the queues by name" } " to see others."
            }
        }
    }
}

/// The names this request's reads found that are not UTF-8 ([`crate::admin::names`]): each
/// escaped, with the key that holds it. They are left out of the page's rows (no key can be
/// built from them); Resque, Jesque and node-resque never write such names.
fn bad_names() -> Markup {
    let seen = crate::admin::names::seen();
    html! {
        @if !seen.is_empty() {
            div.flash.warn data-bad-names {
                p { strong { "Names that are not UTF-8, left out above:" } }
                ul {
                    @for b in &seen {
                        li data-bad-name=(b.shown) { code { (b.shown) } " in " code { (b.key) } }
                    }
                }
            }
        }
    }
}

/// The message a redirect after a form asked for (`?msg=…&n=…&s=…`): fixed texts only, so a
/// crafted link cannot put words on the page.
pub(crate) fn flash(ctx: &Ctx) -> Markup {
    let n = ctx.query.get("n").and_then(|v| v.parse::<u64>().ok());
    let skipped = ctx.query.get("s").and_then(|v| v.parse::<u64>().ok());
    let count = |word: &str| match n {
        Some(1) => format!("1 {word}"),
        Some(n) => format!("{n} {word}s"),
        None => word.to_string(),
    };
    let (class, text) = match ctx.query.get("msg") {
        Some("retried") => ("ok", format!("Retried {}.", count("failure"))),
        Some("removed") => ("ok", format!("Removed {}.", count("failure"))),
        Some("cleared") => ("ok", format!("Cleared {}.", count("job"))),
        Some("deleted") => ("ok", "Deleted.".to_string()),
        Some("enqueued") => ("ok", "Enqueued.".to_string()),
        Some("cancelled") => ("ok", "Cancelled: the job had not started and will never run.".to_string()),
        Some("stopping") => ("ok", "Stop requested: the running job ends killed at its next progress update.".to_string()),
        Some("finished") => ("warn", "Nothing done: the job had already finished.".to_string()),
        Some("nojob") => ("warn", "Nothing done: there is no such tracked job (expired or purged).".to_string()),
        Some("paused") => ("ok", "Paused.".to_string()),
        Some("resumed") => ("ok", "Resumed.".to_string()),
        Some("gone") => (
            "warn",
            "Nothing done: it is not there any more (taken by a worker, moved, removed, or — a retried failure — rewritten with its retried_at).".to_string(),
        ),
        Some("refused") => (
            "warn",
            "Refused: this entry cannot be retried (it names no queue or its payload has no class).".to_string(),
        ),
        _ => return html! {},
    };
    html! {
        p.flash.(class) role="status" {
            (text)
            @if let Some(s) = skipped.filter(|s| *s > 0) {
                " " (s) " skipped (gone meanwhile, or not retryable)."
            }
            @if let Some(left) = settling(ctx) {
                " " (left)
            }
        }
    }
}

/// What a cancel left to the prune rounds (`&ends=…&trees=…`, numbers only), as `resq job
/// cancel` says it.
fn settling(ctx: &Ctx) -> Option<String> {
    let num = |k: &str| ctx.query.get(k).and_then(|v| v.parse::<u64>().ok());
    let (ends, trees) = (num("ends").unwrap_or(0), num("trees").unwrap_or(0));
    if ends == 0 && trees == 0 {
        return None;
    }
    let s = |n: u64| if n == 1 { "" } else { "s" };
    Some(format!(
        "Still settling: {ends} end{} (batch counts, waiting jobs) and the children of {trees} \
         job{}, past the bound of one call; each prune round goes on with them (every minute on \
         one resq process; `resq prune` runs one now).",
        s(ends),
        s(trees)
    ))
}

/// An action button: a POST form to route `action` with `fields`, the CSRF token and an
/// optional confirmation question. Empty in read-only mode.
pub(crate) fn button(
    ctx: &Ctx,
    action: &str,
    fields: &[(&str, &str)],
    label: &str,
    class: &str,
    confirm: Option<&str>,
) -> Markup {
    if ctx.read_only {
        return html! {};
    }
    html! {
        form.inline method="post" action={ (ctx.base) (action) } data-confirm=[confirm] {
            input type="hidden" name="_csrf" value=(ctx.csrf);
            @for (k, v) in fields {
                input type="hidden" name=(k) value=(v);
            }
            button.(class) type="submit" { (label) }
        }
    }
}

/// Previous / next links for an offset-paged view of `total` items, `per` a page.
pub(crate) fn pager(
    ctx: &Ctx,
    route: &str,
    keep: &str,
    offset: usize,
    per: usize,
    total: usize,
) -> Markup {
    let link = |off: usize| {
        let q = super::ctx::join_query(keep, &format!("offset={off}"));
        ctx.link(&format!("{route}?{q}"))
    };
    let last_page = total.saturating_sub(1) / per.max(1);
    let page = offset / per.max(1);
    html! {
        @if total > per {
            nav.pager {
                @if offset > 0 {
                    a href=(link(0)) { "« first" }
                    a href=(link(offset.saturating_sub(per))) { "‹ previous" }
                }
                span { "page " (page + 1) " of " (last_page + 1) " (" (total) ")" }
                @if offset + per < total {
                    a href=(link(offset + per)) { "next ›" }
                    a href=(link(last_page * per)) { "last »" }
                }
            }
        }
    }
}

/// A UTC time as `2026-11-21 19:15:33 UTC`.
pub(crate) fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// An age in seconds (`5m12s`), or `—` when unknown.
pub(crate) fn age(secs: Option<f64>) -> String {
    match secs {
        Some(s) => output::age(Some(s)),
        None => "—".to_string(),
    }
}

/// `s` cut to `max` characters on one line, with `…`.
pub(crate) fn short(s: &str, max: usize) -> String {
    output::short(s, max)
}

/// A number with thin thousands separators (`100 000`).
pub(crate) fn num(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_group_thousands() {
        assert_eq!(super::num(0), "0");
        assert_eq!(super::num(999), "999");
        assert_eq!(super::num(100_000), "100\u{202f}000");
        assert_eq!(super::num(1_234_567), "1\u{202f}234\u{202f}567");
    }
}
