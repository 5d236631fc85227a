//! Stable ids for the elements of Resque's lists (failure entries, queued jobs, delayed
//! items): the first 16 hex digits of the SHA1 of the element's bytes.
//!
//! An index alone names whatever sits there *now*, which is how resque-web's retry and remove
//! hit the wrong job when the list moves (resque#1172, #1293). An id names the bytes; the index
//! where they were seen is only a hint for finding them fast ([`locate`]). Two elements with
//! the same bytes share an id, and acting on either is the same act.

use crate::error::Result;
use redis::aio::ConnectionLike;

/// Elements read per `LRANGE` while looking for an id.
const CHUNK: usize = 256;

/// Hex digits in an id.
pub(crate) const ID_LEN: usize = 16;

/// The id of an element: the first 16 hex digits of the SHA1 of its bytes.
pub fn element_id(bytes: &[u8]) -> String {
    let mut hex = sha1_smol::Sha1::from(bytes).digest().to_string();
    hex.truncate(ID_LEN);
    hex
}

/// Whether `s` has an id's shape (16 lowercase hex digits).
#[cfg(any(test, feature = "web"))]
pub(crate) fn is_id(s: &str) -> bool {
    s.len() == ID_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// An element found by its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Located {
    /// Its index when found.
    pub index: usize,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Finds the element of list `key` whose id is `id`, looking at `hint` first, then up to
/// `below` elements below it (nearest first) and `above` elements above it. `None` when it is
/// not in that window (gone, or moved further than the window).
///
/// Elements of Resque's lists only move toward the head (earlier ones removed or popped, new
/// ones pushed at the tail), hence the search order. The window is read in chunks of [`CHUNK`]
/// with `LRANGE` and hashed here, never inside Redis: Redis does no work over the elements'
/// bytes beyond sending them. The index found is a hint too: every change by id goes through a
/// script that checks the bytes at the index and finds them again by their bytes if they moved.
pub(crate) async fn locate<C: ConnectionLike + Send>(
    con: &mut C,
    key: &str,
    id: &str,
    hint: usize,
    below: usize,
    above: usize,
) -> Result<Option<Located>> {
    let at: Option<Vec<u8>> = redis::cmd("LINDEX")
        .arg(key)
        .arg(hint)
        .query_async(con)
        .await?;
    if let Some(bytes) = at.filter(|b| element_id(b) == id) {
        return Ok(Some(Located { index: hint, bytes }));
    }
    let lo = hint.saturating_sub(below);
    let mut top = hint;
    while top > lo {
        let bottom = top.saturating_sub(CHUNK).max(lo);
        let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(key)
            .arg(bottom)
            .arg(top - 1)
            .query_async(con)
            .await?;
        if let Some(j) = items.iter().rposition(|b| element_id(b) == id) {
            let bytes = items.into_iter().nth(j).unwrap_or_default();
            return Ok(Some(Located {
                index: bottom + j,
                bytes,
            }));
        }
        top = bottom;
    }
    let mut start = hint + 1;
    let end = hint + above;
    while start <= end {
        let stop = (start + CHUNK - 1).min(end);
        let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(key)
            .arg(start)
            .arg(stop)
            .query_async(con)
            .await?;
        let n = items.len();
        if let Some(j) = items.iter().position(|b| element_id(b) == id) {
            let bytes = items.into_iter().nth(j).unwrap_or_default();
            return Ok(Some(Located {
                index: start + j,
                bytes,
            }));
        }
        if n < stop - start + 1 {
            break;
        }
        start = stop + 1;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_sha1_prefixes() {
        // sha1("abc") = a9993e364706816aba3e25717850c26c9cd0d89d
        assert_eq!(element_id(b"abc"), "a9993e364706816a");
        assert!(is_id("a9993e364706816a"));
        assert!(!is_id("A9993E364706816A"));
        assert!(!is_id("a9993e36"));
        assert!(!is_id("a9993e364706816g"));
    }
}
