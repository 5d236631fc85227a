//! Split queues: one logical queue served as N physical Resque queues (its shards), each in a
//! hash slot of its own, so that on a Redis Cluster namespace without a tag the shards spread
//! over the masters (docs/cluster.md, "Split queues").
//!
//! The one naming rule ([`shard_name`]), the declaration stored in `<ns>:resq:splits`
//! ([`Split`]), the choice of a shard from a shard key ([`shard_index`]: CRC-32/IEEE, as Ruby's
//! `Zlib.crc32` and Java's `java.util.zip.CRC32`), and the check of a queue name that may be
//! split. The producer's cache is `client::splits`; the worker's resolution `worker::fetch`;
//! the operator's command `resq split`.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The most shards a queue may be split into.
pub const MAX_SHARDS: u32 = 1024;

/// Characters a split queue's name may not hold (the shard names' own separators, and the
/// queue-list separator).
const RESERVED: &[char] = &['{', '}', ',', ':', '~'];

/// Why a split was refused (before anything was written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// The queue's name holds a character the shard names use, or is empty.
    #[error("queue {queue:?} cannot be split: {why}")]
    BadName {
        /// The queue.
        queue: String,
        /// What is wrong with it.
        why: String,
    },
    /// N is out of range.
    #[error("a queue is split into 1 to {MAX_SHARDS} shards, not {0}")]
    ShardCount(u32),
}

/// A split queue's declaration: the value of its field in `<ns>:resq:splits` (JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Split {
    /// The shards producers use now, shard k at index k.
    #[serde(default)]
    pub shards: Vec<String>,
    /// Shards of an earlier N (or of a split turned off): producers no longer use them,
    /// workers serve them until they are empty and dropped.
    #[serde(default)]
    pub draining: Vec<String>,
    /// When the declaration last changed (epoch ms): a draining shard is dropped only once it
    /// is empty and this is older than [`DRAIN_GRACE_MS`].
    #[serde(default)]
    pub changed: i64,
}

/// How long after a change a draining shard may be dropped (when empty): longer than any
/// producer keeps its cache of the declaration (5 s for resq's `Client`; the Ruby recipe reads it
/// on every push or at most every 5 s).
pub const DRAIN_GRACE_MS: i64 = 30_000;

impl Split {
    /// Every shard a worker of this queue serves: the current ones, then the draining ones.
    pub fn served(&self) -> impl Iterator<Item = &String> {
        self.shards.iter().chain(self.draining.iter())
    }

    /// Reads a declaration; `None` when it is not one (a worker then serves the queue as
    /// unsplit, and a producer pushes to the queue itself).
    pub(crate) fn parse(bytes: &[u8]) -> Option<Split> {
        serde_json::from_slice(bytes).ok()
    }
}

/// Reads every declaration of `<ns>:resq:splits` (an `HGETALL`), leaving out the ones that
/// cannot be read.
pub(crate) fn parse_all(fields: HashMap<String, Vec<u8>>) -> HashMap<String, Split> {
    fields
        .into_iter()
        .filter_map(|(q, v)| Split::parse(&v).map(|s| (q, s)))
        .collect()
}

/// Refuses a queue that cannot be split: empty, or holding `{ } , : ~` or a control
/// character.
pub fn check_queue(queue: &str) -> Result<(), SplitError> {
    let bad = |why: String| SplitError::BadName {
        queue: queue.to_string(),
        why,
    };
    if queue.is_empty() {
        return Err(bad("the name is empty".into()));
    }
    if let Some(c) = queue
        .chars()
        .find(|c| RESERVED.contains(c) || c.is_control())
    {
        return Err(bad(format!(
            "its name holds {c:?} (a split queue's name has none of {{ }} , : ~ nor a control \
             character: the shards' names use them)"
        )));
    }
    Ok(())
}

/// The name of shard `k` of `n` of queue `q`: `<q>~<k>{<tag>}`, the tag putting its list
/// `<ns>:queue:<q>~<k>{<tag>}` in slot ⌊(2k+1)·16384/(2n)⌋, the middle of the k-th of n
/// equal ranges of slots (so the shards of a tag-less cluster namespace spread over the
/// masters, which own contiguous ranges). The one place the rule is written.
pub fn shard_name(q: &str, k: u32, n: u32) -> String {
    let n = u64::from(n.max(1));
    let target = (2 * u64::from(k) + 1) * u64::from(crate::keys::SLOTS) / (2 * n);
    let tag = crate::keys::slot_tag(u16::try_from(target).unwrap_or(0));
    format!("{q}~{k}{{{tag}}}")
}

/// The `n` shards of `q`, shard 0 first; refuses a name or an `n` that cannot be split.
pub fn shard_names(q: &str, n: u32) -> Result<Vec<String>, SplitError> {
    check_queue(q)?;
    if n == 0 || n > MAX_SHARDS {
        return Err(SplitError::ShardCount(n));
    }
    Ok((0..n).map(|k| shard_name(q, k, n)).collect())
}

/// Whether `name` is named as a shard of `q` (whatever its N): `<q>~<digits>{<tag>}`.
pub(crate) fn is_shard_of(name: &str, q: &str) -> bool {
    let Some(rest) = name.strip_prefix(q).and_then(|r| r.strip_prefix('~')) else {
        return false;
    };
    let Some((k, tag)) = rest.split_once('{') else {
        return false;
    };
    !k.is_empty()
        && k.bytes().all(|b| b.is_ascii_digit())
        && tag
            .strip_suffix('}')
            .is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// A worker's queue list with its split queues expanded: each split queue `q` of `names`
/// becomes `q`, its shards, its draining shards and any member of `known` (`<ns>:queues`) named
/// as one of its shards (a job put back onto a shard already dropped), in that order, as one
/// group of equal priority (the returned ranges, which the fetch rotates between calls).
/// With `fold`, a name that is a shard of a split queue stands for that queue (a wildcard's
/// matches); a name given twice is kept at its first place.
pub(crate) fn expand(
    names: &[String],
    splits: &HashMap<String, Split>,
    known: &[String],
    fold: bool,
) -> (Vec<String>, Vec<std::ops::Range<usize>>) {
    let declared: HashMap<&str, &str> = splits
        .iter()
        .flat_map(|(q, s)| s.served().map(move |x| (x.as_str(), q.as_str())))
        .collect();
    let owner = |n: &str| -> Option<&str> {
        declared.get(n).copied().or_else(|| {
            // (Only a name with `~` can be a shard.)
            n.contains('~')
                .then(|| splits.keys().find(|q| is_shard_of(n, q)))
                .flatten()
                .map(String::as_str)
        })
    };
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    let mut groups = Vec::new();
    let push = |out: &mut Vec<String>, n: &str| {
        if !out.iter().any(|x| x == n) {
            out.push(n.to_string());
        }
    };
    for n in names {
        let q = match (fold, splits.contains_key(n)) {
            (_, true) => n.as_str(),
            (true, false) => owner(n).unwrap_or(n),
            (false, false) => n.as_str(),
        };
        let Some(split) = splits.get(q) else {
            push(&mut out, n);
            continue;
        };
        if out.iter().any(|x| x == q) {
            continue;
        }
        let start = out.len();
        push(&mut out, q);
        // (A name written by hand with a control character is not served: queues.rs.)
        for s in split.served().filter(|s| crate::queues::servable(s)) {
            push(&mut out, s);
        }
        let mut strays: Vec<&String> = known.iter().filter(|k| is_shard_of(k, q)).collect();
        strays.sort();
        for s in strays {
            push(&mut out, s);
        }
        if out.len() - start > 1 {
            groups.push(start..out.len());
        }
    }
    (out, groups)
}

/// The shard (0..n) a job with shard key `key` goes to: CRC-32/IEEE of its bytes mod `n`.
pub fn shard_index(key: &[u8], n: usize) -> usize {
    // (u32 → usize is lossless on every platform resq builds for.)
    (crc32(key) as usize) % n.max(1)
}

/// CRC-32/IEEE (reflected, polynomial 0xEDB88320, initial and final XOR 0xFFFFFFFF): Ruby's
/// `Zlib.crc32`, Java's `CRC32`, zlib's `crc32`.
pub fn crc32(bytes: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    });
    !bytes
        .iter()
        .fold(!0u32, |c, b| table[usize::from((c as u8) ^ b)] ^ (c >> 8))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{hash_slot, Keys};

    #[test]
    fn shard_keys_land_in_their_target_slots() {
        for ns in ["resque", "app:jobs"] {
            let keys = Keys::new(ns);
            for n in [1u32, 2, 3, 7, 16, 1024] {
                let names = shard_names("video", n).unwrap();
                assert_eq!(names.len(), n as usize);
                for (k, name) in names.iter().enumerate() {
                    let target = (2 * k as u64 + 1) * 16384 / (2 * u64::from(n));
                    assert_eq!(
                        u64::from(hash_slot(keys.queue(name).as_bytes())),
                        target,
                        "{ns} {name} of {n}"
                    );
                    assert!(is_shard_of(name, "video"), "{name}");
                    check_queue(name).unwrap_err();
                }
            }
        }
        // Three shards: one in each third of the slots (a 3-master cluster's ranges).
        let slots: Vec<u16> = shard_names("q", 3)
            .unwrap()
            .iter()
            .map(|s| hash_slot(Keys::new("resque").queue(s).as_bytes()))
            .collect();
        assert_eq!(slots, [2730, 8192, 13653]);
    }

    #[test]
    fn names_and_counts_are_checked() {
        for q in ["", "a{b", "a}b", "a,b", "a:b", "a~b", "a\tb"] {
            assert!(
                matches!(shard_names(q, 2), Err(SplitError::BadName { .. })),
                "{q:?}"
            );
        }
        assert_eq!(shard_names("q", 0), Err(SplitError::ShardCount(0)));
        assert_eq!(shard_names("q", 1025), Err(SplitError::ShardCount(1025)));
        assert!(!is_shard_of("q~1{ab}", "qq"));
        assert!(!is_shard_of("q~{ab}", "q"));
        assert!(!is_shard_of("q~1{}", "q"));
        assert!(!is_shard_of("q~1{ab}x", "q"));
    }

    #[test]
    fn crc32_is_zlibs() {
        // Zlib.crc32("") / ("123456789") / ("user-42"), as Ruby and Java print them.
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
        assert_eq!(shard_index(b"123456789", 4), (0xCBF4_3926u32 % 4) as usize);
    }

    #[test]
    fn a_split_queue_expands_to_a_group_of_its_shards() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut splits = HashMap::new();
        splits.insert(
            "v".to_string(),
            Split {
                shards: names(&["v~0{a}", "v~1{b}"]),
                draining: names(&["v~2{c}"]),
                changed: 0,
            },
        );
        let known = names(&["v~0{a}", "v~9{z}", "w"]);
        let (out, groups) = expand(&names(&["hi", "v", "lo"]), &splits, &known, false);
        assert_eq!(
            out,
            names(&["hi", "v", "v~0{a}", "v~1{b}", "v~2{c}", "v~9{z}", "lo"])
        );
        assert_eq!(groups, vec![std::ops::Range { start: 1, end: 6 }]);
        // A wildcard's matches: the shards stand for their queue.
        let (out, groups) = expand(&known, &splits, &known, true);
        assert_eq!(
            out,
            names(&["v", "v~0{a}", "v~1{b}", "v~2{c}", "v~9{z}", "w"])
        );
        assert_eq!(groups, vec![std::ops::Range { start: 0, end: 5 }]);
        // Named explicitly in a static list, a shard is only itself.
        let (out, groups) = expand(&names(&["v~1{b}"]), &splits, &[], false);
        assert_eq!((out, groups), (names(&["v~1{b}"]), vec![]));
        // Nothing split: the list as it was.
        let (out, groups) = expand(&names(&["a", "b"]), &HashMap::new(), &[], true);
        assert_eq!((out, groups), (names(&["a", "b"]), vec![]));
    }

    #[test]
    fn declarations_read_back() {
        let s = Split {
            shards: vec!["a".into()],
            draining: vec!["b".into()],
            changed: 5,
        };
        let text = serde_json::to_vec(&s).unwrap();
        assert_eq!(Split::parse(&text), Some(s.clone()));
        assert_eq!(
            Split::parse(br#"{"shards":["a"],"draining":[]}"#).map(|s| s.shards),
            Some(vec!["a".to_string()])
        );
        assert_eq!(Split::parse(b"not json"), None);
        assert_eq!(s.served().count(), 2);
    }
}
