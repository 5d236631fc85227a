//! The failure list at scale: entries by stable id, filtered pages read newest first within a
//! bounded budget, bulk retry / remove of every entry a filter selects, and counts by class,
//! exception and queue.
//!
//! Nothing here reads the whole list at once: pages and scans read it in chunks
//! ([`SCAN_CHUNK`] entries, one `LRANGE` each), so memory stays flat however long it is. A
//! filtered page stops when it has its rows or when it has examined its budget of entries,
//! and says where it stopped, so the next page continues from there. Entries are matched on
//! their bytes first (an ASCII-lower-cased substring test) and only parsed when that cannot
//! decide; parsing borrows from the bytes and skips the backtrace.
//!
//! Retry and remove go through [`Admin::retry_rows`] and [`Admin::remove_rows`], whose scripts
//! find an entry again by its bytes if the list moved, so workers pushing failures meanwhile
//! never make an action touch the wrong entry.

use super::failures::{FailureRow, Outcome};
use super::list_ids;
use super::Admin;
use crate::error::Result;
use crate::wire::time;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Entries read per `LRANGE` by scans and bulk operations.
pub(crate) const SCAN_CHUNK: usize = 1_000;
/// How far below its last index an entry is looked for when acted on by id.
pub(crate) const LOCATE_BELOW: usize = 20_000;
/// How far above its last index an entry is looked for.
pub(crate) const LOCATE_ABOVE: usize = 200;
/// Distinct values kept per dimension by [`Admin::count_failures`]; the rest is counted
/// under [`OTHER`].
pub(crate) const MAX_GROUPS: usize = 500;
/// The group holding values past [`MAX_GROUPS`].
pub(crate) const OTHER: &str = "(other values)";
/// The group of entries without the field.
pub(crate) const NONE: &str = "(none)";

/// Which entries a view or a bulk action covers. Every part set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureFilter {
    /// Case-insensitive substring of the entry (its bytes, or its decoded class, exception,
    /// error, queue or worker).
    pub text: Option<String>,
    /// Exact payload class.
    pub class: Option<String>,
    /// Exact exception name.
    pub exception: Option<String>,
    /// Exact queue.
    pub queue: Option<String>,
}

/// The fields a filter looks at, borrowed from the entry's bytes where possible.
#[derive(Deserialize)]
struct Lite<'a> {
    /// The payload (its class and args).
    #[serde(borrow, default)]
    payload: Option<LitePayload<'a>>,
    /// Exception name.
    #[serde(borrow, default)]
    exception: Option<Cow<'a, str>>,
    /// Message.
    #[serde(borrow, default)]
    error: Option<Cow<'a, str>>,
    /// Queue.
    #[serde(borrow, default)]
    queue: Option<Cow<'a, str>>,
    /// Worker (a string, or whatever a peer wrote).
    #[serde(borrow, default)]
    worker: Option<&'a RawValue>,
}

/// The payload's class and args.
#[derive(Deserialize)]
struct LitePayload<'a> {
    /// Class name.
    #[serde(borrow, default)]
    class: Option<Cow<'a, str>>,
    /// Args, as written.
    #[serde(borrow, default)]
    args: Option<&'a RawValue>,
}

impl Lite<'_> {
    fn class(&self) -> Option<&str> {
        self.payload.as_ref().and_then(|p| p.class.as_deref())
    }
}

/// Whether `needle` is written the same by every JSON encoder (so a decoded field containing
/// it means the bytes contain it too): ASCII letters, digits, space and `_:.-`.
fn plain(needle: &str) -> bool {
    needle
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b' ' | b'_' | b':' | b'.' | b'-'))
}

/// A compiled filter.
struct Matcher<'f> {
    /// The filter.
    filter: &'f FailureFilter,
    /// `text`, lower-cased.
    text: Option<String>,
    /// Byte needles every match must contain (the plain exact values, and a plain `text`).
    required: Vec<memchr::memmem::Finder<'static>>,
    /// Whether `text` is plain, so the bytes alone decide it.
    text_plain: bool,
}

impl<'f> Matcher<'f> {
    fn new(filter: &'f FailureFilter) -> Self {
        let text = filter.text.as_ref().map(|t| t.to_lowercase());
        let text_plain = text.as_deref().is_some_and(plain);
        let mut required = Vec::new();
        if let (Some(t), true) = (&text, text_plain) {
            required.push(memchr::memmem::Finder::new(t.as_bytes()).into_owned());
        }
        for v in [&filter.class, &filter.exception, &filter.queue]
            .into_iter()
            .flatten()
        {
            if plain(v) {
                let lower = v.to_ascii_lowercase();
                required.push(memchr::memmem::Finder::new(lower.as_bytes()).into_owned());
            }
        }
        Matcher {
            filter,
            text,
            required,
            text_plain,
        }
    }

    fn matches(&self, raw: &[u8]) -> bool {
        let f = self.filter;
        if f.text.is_none() && f.class.is_none() && f.exception.is_none() && f.queue.is_none() {
            return true;
        }
        let lower = raw.to_ascii_lowercase();
        if self.required.iter().any(|n| n.find(&lower).is_none()) {
            return false;
        }
        let exact_fields = f.class.is_some() || f.exception.is_some() || f.queue.is_some();
        let text_by_bytes = match &self.text {
            None => true,
            Some(t) => self.text_plain || memchr::memmem::find(&lower, t.as_bytes()).is_some(),
        };
        if !exact_fields && text_by_bytes {
            return true;
        }
        let Ok(lite) = serde_json::from_slice::<Lite>(raw) else {
            return !exact_fields && text_by_bytes;
        };
        let same = |want: &Option<String>, got: Option<&str>| {
            want.as_deref().is_none_or(|w| got == Some(w))
        };
        if !same(&f.class, lite.class())
            || !same(&f.exception, lite.exception.as_deref())
            || !same(&f.queue, lite.queue.as_deref())
        {
            return false;
        }
        if text_by_bytes {
            return true;
        }
        let Some(t) = &self.text else { return true };
        // Decoded text of args and worker (escapes such as `\u00e9` undone).
        let decoded = |raw: Option<&RawValue>| {
            raw.and_then(|r| serde_json::from_str::<serde_json::Value>(r.get()).ok())
                .map(|v| v.to_string().to_lowercase())
        };
        let args = decoded(lite.payload.as_ref().and_then(|p| p.args));
        let worker = decoded(lite.worker);
        [
            lite.class(),
            lite.exception.as_deref(),
            lite.error.as_deref(),
            lite.queue.as_deref(),
        ]
        .into_iter()
        .flatten()
        .any(|field| field.to_lowercase().contains(t.as_str()))
            || [args, worker]
                .into_iter()
                .flatten()
                .any(|text| text.contains(t.as_str()))
    }
}

impl FailureFilter {
    /// Whether it selects every entry.
    pub fn is_empty(&self) -> bool {
        self.text.is_none()
            && self.class.is_none()
            && self.exception.is_none()
            && self.queue.is_none()
    }

    /// Whether the entry `raw` matches.
    pub fn matches(&self, raw: &[u8]) -> bool {
        Matcher::new(self).matches(raw)
    }
}

/// One page of a (filtered) view of the failure list, newest first.
#[derive(Debug, Clone)]
pub struct ScanPage {
    /// Matching entries, newest first.
    pub rows: Vec<FailureRow>,
    /// `LLEN` when the scan started.
    pub total: usize,
    /// The scan looked at indexes below this one.
    pub start: usize,
    /// The lowest index looked at (where the next page starts: `before = end`).
    pub end: usize,
    /// Entries looked at.
    pub scanned: usize,
    /// Whether the scan stopped because its budget ran out (and not because the page was full
    /// or the list's start was reached).
    pub budget_hit: bool,
}

impl ScanPage {
    /// Whether older entries remain to look at.
    pub fn more(&self) -> bool {
        self.end > 0
    }
}

/// Counts of the failure list by class, exception and queue.
#[derive(Debug, Clone, Default)]
pub struct FailureCounts {
    /// Entries counted.
    pub total: usize,
    /// Entries that are not a readable JSON object.
    pub unreadable: usize,
    /// `(class, count)`, largest first.
    pub by_class: Vec<(String, usize)>,
    /// `(exception, count)`, largest first.
    pub by_exception: Vec<(String, usize)>,
    /// `(queue, count)`, largest first.
    pub by_queue: Vec<(String, usize)>,
}

/// Outcome of an action on one entry by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ById {
    /// Done.
    Done,
    /// No entry with that id near where it was seen (removed, or retried: a retry rewrites
    /// the entry, which changes its id).
    Gone,
    /// Found, but it cannot be retried (why).
    Refused(String),
}

impl Admin {
    /// The failure entry with id `id`, looked for from index `hint`.
    pub async fn failure_by_id(&self, id: &str, hint: usize) -> Result<Option<FailureRow>> {
        let mut con = self.con();
        let found = list_ids::locate(
            &mut con,
            &self.keys().failed(),
            id,
            hint,
            LOCATE_BELOW,
            LOCATE_ABOVE,
        )
        .await?;
        Ok(found.map(|l| FailureRow::new(l.index, &l.bytes)))
    }

    /// Retries the entry with id `id` (Ruby's requeue: `retried_at` set in place, the job
    /// pushed onto its queue).
    pub async fn retry_failure_id(&self, id: &str, hint: usize) -> Result<ById> {
        let Some(row) = self.failure_by_id(id, hint).await? else {
            return Ok(ById::Gone);
        };
        let stamp = time::failed_at(self.now().await?);
        let out = self.retry_rows(std::slice::from_ref(&row), &stamp).await?;
        Ok(match (out.done, out.skipped.into_iter().next()) {
            (1.., _) => ById::Done,
            (0, Some(why)) if !why.contains("gone before") => ById::Refused(why),
            _ => ById::Gone,
        })
    }

    /// Removes the entry with id `id` (Ruby's remove: sentinel + `LREM`).
    pub async fn remove_failure_id(&self, id: &str, hint: usize) -> Result<ById> {
        let Some(row) = self.failure_by_id(id, hint).await? else {
            return Ok(ById::Gone);
        };
        Ok(match self.remove_rows(std::slice::from_ref(&row)).await? {
            0 => ById::Gone,
            _ => ById::Done,
        })
    }

    /// Up to `want` entries matching `filter`, newest first, among the entries below index
    /// `before` (the whole list when `None`), examining at most `budget` entries.
    pub async fn scan_failures(
        &self,
        filter: &FailureFilter,
        before: Option<usize>,
        want: usize,
        budget: usize,
    ) -> Result<ScanPage> {
        let total = self.failure_count().await?;
        let start = before.map_or(total, |b| b.min(total));
        let matcher = Matcher::new(filter);
        let chunk = if filter.is_empty() {
            want.max(1)
        } else {
            SCAN_CHUNK
        };
        let mut page = ScanPage {
            rows: Vec::new(),
            total,
            start,
            end: start,
            scanned: 0,
            budget_hit: false,
        };
        'scan: while page.end > 0 && page.rows.len() < want {
            if page.scanned >= budget {
                page.budget_hit = true;
                break;
            }
            let n = chunk.min(page.end).min(budget - page.scanned);
            let lo = page.end - n;
            let raws = self.list_range(lo, n).await?;
            // Fewer than asked: the list shrank meanwhile; what is there is still in order.
            for (k, raw) in raws.iter().enumerate().rev() {
                let index = lo + k;
                page.end = index;
                page.scanned += 1;
                if matcher.matches(raw) {
                    page.rows.push(FailureRow::new(index, raw));
                    if page.rows.len() >= want {
                        break 'scan;
                    }
                }
            }
            page.end = lo;
        }
        Ok(page)
    }

    /// Retries every entry `filter` selects, oldest first, in chunks.
    pub async fn retry_matching(&self, filter: &FailureFilter) -> Result<Outcome> {
        let stamp = time::failed_at(self.now().await?);
        let matcher = Matcher::new(filter);
        let mut out = Outcome::default();
        let mut offset = 0;
        loop {
            let raws = self.list_range(offset, SCAN_CHUNK).await?;
            if raws.is_empty() {
                break;
            }
            let rows: Vec<FailureRow> = raws
                .iter()
                .enumerate()
                .filter(|(_, raw)| matcher.matches(raw))
                .map(|(k, raw)| FailureRow::new(offset + k, raw))
                .collect();
            offset += raws.len();
            let chunk = self.retry_rows(&rows, &stamp).await?;
            out.done += chunk.done;
            out.skipped.extend(chunk.skipped);
        }
        Ok(out)
    }

    /// Removes every entry `filter` selects, in chunks. Entries pushed while it runs are
    /// removed too when they match.
    pub async fn remove_matching(&self, filter: &FailureFilter) -> Result<Outcome> {
        let matcher = Matcher::new(filter);
        let mut out = Outcome::default();
        let mut offset = 0;
        loop {
            let raws = self.list_range(offset, SCAN_CHUNK).await?;
            if raws.is_empty() {
                break;
            }
            let rows: Vec<FailureRow> = raws
                .iter()
                .enumerate()
                .filter(|(_, raw)| matcher.matches(raw))
                .map(|(k, raw)| FailureRow::new(offset + k, raw))
                .collect();
            let removed = self.remove_rows(&rows).await?;
            out.done += removed;
            if removed < rows.len() {
                out.skipped
                    .push(format!("{} gone before removal", rows.len() - removed));
            }
            // The chunk's kept entries now start at `offset`; the next chunk follows them.
            offset += raws.len() - removed;
        }
        Ok(out)
    }

    /// Counts the whole list by class, exception and queue, one chunk at a time; `progress`
    /// holds how many entries have been counted so far (for a caller showing it).
    pub async fn count_failures(&self, progress: &AtomicUsize) -> Result<FailureCounts> {
        let mut class: HashMap<String, usize> = HashMap::new();
        let mut exception: HashMap<String, usize> = HashMap::new();
        let mut queue: HashMap<String, usize> = HashMap::new();
        let mut out = FailureCounts::default();
        let mut offset = 0;
        loop {
            let raws = self.list_range(offset, SCAN_CHUNK).await?;
            if raws.is_empty() {
                break;
            }
            offset += raws.len();
            for raw in &raws {
                out.total += 1;
                let Ok(lite) = serde_json::from_slice::<Lite>(raw) else {
                    out.unreadable += 1;
                    continue;
                };
                bump(&mut class, lite.class());
                bump(&mut exception, lite.exception.as_deref());
                bump(&mut queue, lite.queue.as_deref());
            }
            progress.store(out.total, Ordering::Relaxed);
            // Let requests sharing this runtime thread go first between chunks.
            tokio::task::yield_now().await;
        }
        out.by_class = sorted(class);
        out.by_exception = sorted(exception);
        out.by_queue = sorted(queue);
        Ok(out)
    }

    /// Entries `offset .. offset + n` of the failure list, as bytes.
    async fn list_range(&self, offset: usize, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut con = self.con();
        Ok(redis::cmd("LRANGE")
            .arg(self.keys().failed())
            .arg(offset)
            .arg(offset + n - 1)
            .query_async(&mut con)
            .await?)
    }
}

/// The id of a failure row (see [`list_ids`]).
#[cfg(feature = "web")]
pub(crate) fn row_id(row: &FailureRow) -> String {
    list_ids::element_id(&row.raw)
}

fn bump(map: &mut HashMap<String, usize>, value: Option<&str>) {
    let key = value.unwrap_or(NONE);
    if let Some(n) = map.get_mut(key) {
        *n += 1;
    } else if map.len() < MAX_GROUPS {
        map.insert(key.to_string(), 1);
    } else {
        *map.entry(OTHER.to_string()).or_insert(0) += 1;
    }
}

fn sorted(map: HashMap<String, usize>) -> Vec<(String, usize)> {
    let mut v: Vec<(String, usize)> = map.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENTRY: &str = r#"{"failed_at":"2026/11/21 19:15:46 UTC","payload":{"class":"Mail::Send","args":[7,"caf\u00e9"]},"exception":"Net::ReadTimeout","error":"Net::ReadTimeout with #<TCPSocket:(closed)>","backtrace":["a.rb:1"],"worker":"box:1:mail","queue":"mail"}"#;

    fn f(text: Option<&str>, class: Option<&str>, exc: Option<&str>, q: Option<&str>) -> bool {
        FailureFilter {
            text: text.map(str::to_string),
            class: class.map(str::to_string),
            exception: exc.map(str::to_string),
            queue: q.map(str::to_string),
        }
        .matches(ENTRY.as_bytes())
    }

    #[test]
    fn text_matches_bytes_or_decoded_fields_case_insensitively() {
        assert!(f(None, None, None, None));
        assert!(f(Some("readtimeout"), None, None, None));
        assert!(f(Some("a.rb"), None, None, None), "backtrace bytes count");
        assert!(f(Some("café"), None, None, None), "decoded error/args text");
        assert!(f(Some("#<tcpsocket"), None, None, None));
        assert!(!f(Some("nothing like it"), None, None, None));
    }

    #[test]
    fn exact_fields_compare_decoded_values() {
        assert!(f(None, Some("Mail::Send"), None, None));
        assert!(!f(None, Some("Mail"), None, None), "exact, not a substring");
        assert!(!f(None, Some("mail::send"), None, None), "exact case");
        assert!(f(None, None, Some("Net::ReadTimeout"), Some("mail")));
        assert!(!f(None, None, None, Some("box")));
        assert!(f(Some("tcp"), Some("Mail::Send"), None, Some("mail")));
        assert!(!f(Some("tcp"), Some("Other"), None, None));
    }

    #[test]
    fn unreadable_entries_match_text_only() {
        let filter = FailureFilter {
            text: Some("garbage".into()),
            ..FailureFilter::default()
        };
        assert!(filter.matches(b"not json garbage"));
        let filter = FailureFilter {
            class: Some("garbage".into()),
            ..FailureFilter::default()
        };
        assert!(!filter.matches(b"not json garbage"));
    }

    #[test]
    fn groups_are_capped() {
        let mut m = HashMap::new();
        for i in 0..MAX_GROUPS + 3 {
            bump(&mut m, Some(&format!("c{i}")));
        }
        bump(&mut m, None);
        let v = sorted(m);
        assert_eq!(v[0], (OTHER.to_string(), 4));
        assert_eq!(v.len(), MAX_GROUPS + 1);
    }
}
