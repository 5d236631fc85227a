//! Stable ids for the elements of Resque's lists (failure entries, queued jobs, delayed
//! items): the first 16 hex digits of the SHA1 of the element's bytes.
//!
//! An index alone names whatever sits there *now*, which is how resque-web's retry and remove
//! hit the wrong job when the list moves (resque#1172, #1293). An id names the bytes; the index
//! where they were seen is only a hint for finding them fast ([`locate`]). Two elements with
//! the same bytes share an id, and acting on either is the same act.

use crate::error::Result;
use redis::aio::ConnectionLike;
use redis::Script;
use std::sync::LazyLock;

static LOCATE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("list_locate.lua")));

/// Hex digits in an id.
pub const ID_LEN: usize = 16;

/// The id of an element: the first 16 hex digits of the SHA1 of its bytes.
pub fn element_id(bytes: &[u8]) -> String {
    let mut hex = sha1_smol::Sha1::from(bytes).digest().to_string();
    hex.truncate(ID_LEN);
    hex
}

/// Whether `s` has an id's shape (16 lowercase hex digits).
pub fn is_id(s: &str) -> bool {
    s.len() == ID_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// An element found by its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// Its index when found.
    pub index: usize,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Finds the element of list `key` whose id is `id`, looking at `hint` first, then up to
/// `below` elements below it (nearest first) and `above` elements above it, in one script run
/// by Redis. `None` when it is not in that window (gone, or moved further than the window).
pub async fn locate<C: ConnectionLike + Send>(
    con: &mut C,
    key: &str,
    id: &str,
    hint: usize,
    below: usize,
    above: usize,
) -> Result<Option<Located>> {
    let found: Option<(i64, Vec<u8>)> = LOCATE
        .key(key)
        .arg(id)
        .arg(hint)
        .arg(below)
        .arg(above)
        .invoke_async(con)
        .await?;
    Ok(found.and_then(|(index, bytes)| {
        usize::try_from(index)
            .ok()
            .map(|index| Located { index, bytes })
    }))
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
