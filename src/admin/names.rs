//! Names read from Redis as bytes: a queue name, worker id, schedule name, limit partition or
//! index entry that is not UTF-8 never fails a reader. It is left out of what the reader
//! returns (no key can be built from it), and noted — shown escaped (`bad\xff`) with the key
//! that holds it — for whoever collects notes around the call ([`collect`]: each dashboard
//! request does, and its page lists them), else logged.

use std::cell::RefCell;
use std::future::Future;

/// A name that could not be read as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadName {
    /// The key that holds it.
    pub key: String,
    /// The name, its invalid bytes escaped (`\xff`).
    pub shown: String,
}

tokio::task_local! {
    /// The notes of the task collecting them.
    static NOTES: RefCell<Vec<BadName>>;
}

/// Notes kept per collecting task at most (the rest are counted in the log only).
const MAX_NOTES: usize = 100;

/// `bytes` as text, each byte that is not part of valid UTF-8 written `\xNN`.
pub(crate) fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Notes that `key` holds `raw`, a name that is not UTF-8.
pub(crate) fn note(key: &str, raw: &[u8]) {
    let bad = BadName {
        key: key.to_string(),
        shown: escape(raw),
    };
    let kept = NOTES.try_with(|n| {
        let mut n = n.borrow_mut();
        if n.len() < MAX_NOTES && !n.contains(&bad) {
            n.push(bad.clone());
        }
    });
    if kept.is_err() {
        warn_once(&bad.key, &bad.shown, "a name that is not UTF-8, left out");
    }
}

/// Logs that `key` holds `name` (as shown), left out for `why`, once per process: a reader that
/// runs again and again (a worker re-reading `<ns>:queues`) says it once. (Up to 1,000 names
/// remembered.)
pub(crate) fn warn_once(key: &str, name: &str, why: &str) {
    static LOGGED: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
    let mut logged = LOGGED.lock().unwrap_or_else(|p| p.into_inner());
    let entry = (key.to_string(), name.to_string());
    if logged.contains(&entry) {
        return;
    }
    if logged.len() < 1000 {
        logged.push(entry);
    }
    tracing::warn!(key = %key, name = %name, "{why}");
}

/// The names of `raw` that are UTF-8 (in order); each other one is noted with `key`.
pub(crate) fn decode(key: &str, raw: Vec<Vec<u8>>) -> Vec<String> {
    raw.into_iter().filter_map(|b| text(key, b)).collect()
}

/// `raw` as text, or `None` (noted with `key`) when it is not UTF-8.
pub(crate) fn text(key: &str, raw: Vec<u8>) -> Option<String> {
    match String::from_utf8(raw) {
        Ok(s) => Some(s),
        Err(e) => {
            note(key, e.as_bytes());
            None
        }
    }
}

/// `(name, score)` pairs (a sorted set read `WITHSCORES`) whose name is UTF-8; each other one
/// noted with `key`.
pub(crate) fn decode_scored(key: &str, raw: Vec<(Vec<u8>, f64)>) -> Vec<(String, f64)> {
    raw.into_iter()
        .filter_map(|(b, s)| text(key, b).map(|t| (t, s)))
        .collect()
}

/// A hash's `(field, value)` pairs whose field is UTF-8 (each other one noted with `key`),
/// the values as text (invalid bytes replaced: display only).
pub(crate) fn decode_hash(
    key: &str,
    raw: Vec<(Vec<u8>, Vec<u8>)>,
) -> std::collections::HashMap<String, String> {
    raw.into_iter()
        .filter_map(|(f, v)| text(key, f).map(|f| (f, String::from_utf8_lossy(&v).into_owned())))
        .collect()
}

/// `SMEMBERS key`: the members that are UTF-8 (each other one noted).
pub(crate) async fn smembers<C>(con: &mut C, key: &str) -> redis::RedisResult<Vec<String>>
where
    C: redis::aio::ConnectionLike + Send,
{
    let raw: Vec<Vec<u8>> = redis::cmd("SMEMBERS").arg(key).query_async(con).await?;
    Ok(decode(key, raw))
}

/// Runs `f`, collecting the notes made while it runs (in its task).
#[cfg_attr(not(feature = "web"), allow(dead_code))]
pub(crate) async fn collect<F: Future>(f: F) -> F::Output {
    NOTES.scope(RefCell::new(Vec::new()), f).await
}

/// The notes collected so far by the current [`collect`] (none outside one).
#[cfg_attr(not(feature = "web"), allow(dead_code))]
pub(crate) fn seen() -> Vec<BadName> {
    NOTES.try_with(|n| n.borrow().clone()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_only_the_invalid_bytes() {
        assert_eq!(escape(b"bad\xff\xfe"), "bad\\xff\\xfe");
        assert_eq!(escape("héllo".as_bytes()), "héllo");
    }

    #[tokio::test]
    async fn notes_are_collected_per_scope() {
        let got = collect(async {
            let v = decode("ns:queues", vec![b"ok".to_vec(), b"b\xffd".to_vec()]);
            assert_eq!(v, vec!["ok".to_string()]);
            seen()
        })
        .await;
        assert_eq!(
            got,
            vec![BadName {
                key: "ns:queues".into(),
                shown: "b\\xffd".into()
            }]
        );
        assert!(seen().is_empty());
    }
}
