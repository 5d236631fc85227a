//! Whether members a batch's report did not find in their queue are really gone: one a resq
//! worker took meanwhile says `working` by now (the reserve moves the job and writes its record
//! in one call), and one a flow-control limit holds is in that limit's held set, its record
//! still `queued` (docs/limits.md). Only the others were taken by a worker that does not count
//! them (or removed by hand). And whether members whose record says `working` still have a
//! registered worker.

use crate::conn::Conn;
use crate::jobs::JobId;
use crate::keys::Keys;
use redis::Value as RedisValue;
use std::collections::HashSet;

/// Held entries a report reads at most, over every held set.
const HELD_SCAN: isize = 100_000;

/// Partitions of one limit a report looks at.
const PARTS: usize = 1000;

/// `candidates` less those whose record no longer says `queued` and those a limit holds.
pub(super) async fn confirm_gone(
    con: &mut Conn,
    keys: &Keys,
    candidates: Vec<JobId>,
) -> Vec<JobId> {
    if candidates.is_empty() {
        return candidates;
    }
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for id in &candidates {
        pipe.cmd("HGET")
            .arg(keys.job_record(id.as_str()))
            .arg("state");
    }
    let states: Vec<RedisValue> = pipe.query_async(con).await.unwrap_or_default();
    let mut still: Vec<JobId> = candidates
        .into_iter()
        .zip(states)
        .filter(|(_, s)| {
            redis::from_redis_value::<Option<String>>(s.clone())
                .ok()
                .flatten()
                .as_deref()
                == Some("queued")
        })
        .map(|(id, _)| id)
        .collect();
    if still.is_empty() {
        return still;
    }
    let held = held_texts(con, keys).await;
    let held: HashSet<&str> = held.iter().flat_map(|h| resq_ids(h.as_bytes())).collect();
    still.retain(|id| !held.contains(id.as_str()));
    still
}

/// Of `working` (members whose record said `working`, with the worker it names), those whose
/// worker is not in `<ns>:workers` and whose record still says `working` for that worker.
pub(super) async fn confirm_orphaned(
    con: &mut Conn,
    keys: &Keys,
    working: Vec<(JobId, String)>,
) -> Vec<JobId> {
    if working.is_empty() {
        return Vec::new();
    }
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for (id, w) in &working {
        pipe.cmd("SISMEMBER").arg(keys.workers()).arg(w);
        pipe.cmd("HMGET")
            .arg(keys.job_record(id.as_str()))
            .arg("state")
            .arg("worker");
    }
    let replies: Vec<RedisValue> = pipe.query_async(con).await.unwrap_or_default();
    let mut replies = replies.into_iter();
    let mut out = Vec::new();
    for (id, w) in working {
        let (Some(registered), Some(now)) = (replies.next(), replies.next()) else {
            break;
        };
        let registered = redis::from_redis_value::<bool>(registered).unwrap_or(true);
        let now =
            redis::from_redis_value::<(Option<String>, Option<String>)>(now).unwrap_or_default();
        if !registered && now.0.as_deref() == Some("working") && now.1.as_deref() == Some(&w) {
            out.push(id);
        }
    }
    out
}

/// The `resq_id`s a payload's bytes carry (`"resq_id":"<32 hex>"`), each as it is written.
pub(super) fn resq_ids(item: &[u8]) -> impl Iterator<Item = &str> {
    const NEEDLE: &[u8] = b"\"resq_id\":\"";
    let mut at = 0;
    std::iter::from_fn(move || loop {
        let i = item
            .get(at..)?
            .windows(NEEDLE.len())
            .position(|w| w == NEEDLE)?;
        let start = at + i + NEEDLE.len();
        at = start;
        if let Some(id) = item
            .get(start..start + 32)
            .and_then(|b| std::str::from_utf8(b).ok())
        {
            return Some(id);
        }
    })
}

/// The texts of held jobs, every limit's held sets (a large payload kept in a list of its own,
/// `@<key>`, read from that list), up to [`HELD_SCAN`] entries.
async fn held_texts(con: &mut Conn, keys: &Keys) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for hash in [keys.limits_declared(), keys.limits_set()] {
        let n: Vec<String> = redis::cmd("HKEYS")
            .arg(hash)
            .query_async(con)
            .await
            .unwrap_or_default();
        names.extend(n);
    }
    names.sort();
    names.dedup();
    let mut sets = Vec::new();
    for name in &names {
        sets.push(keys.limit_held(name, None));
        let parts: Vec<String> = redis::cmd("SRANDMEMBER")
            .arg(keys.limit_parts(name))
            .arg(PARTS)
            .query_async(con)
            .await
            .unwrap_or_default();
        sets.extend(parts.iter().map(|p| keys.limit_held(name, Some(p))));
    }
    let mut texts = Vec::new();
    for set in sets {
        let left = HELD_SCAN - texts.len() as isize;
        if left <= 0 {
            break;
        }
        let entries: Vec<String> = redis::cmd("ZRANGE")
            .arg(&set)
            .arg(0)
            .arg(left - 1)
            .query_async(con)
            .await
            .unwrap_or_default();
        for e in entries {
            // A held job (its payload '@<key>' when large).
            let big = crate::scripts::texts::parse_held(e.as_bytes())
                .and_then(|m| m.payload.strip_prefix(b"@"))
                .and_then(|k| std::str::from_utf8(k).ok());
            match big {
                Some(list) => {
                    let big: Option<String> = redis::cmd("LINDEX")
                        .arg(list)
                        .arg(0)
                        .query_async(con)
                        .await
                        .unwrap_or_default();
                    texts.extend(big);
                }
                None => texts.push(e),
            }
        }
    }
    texts
}

#[cfg(test)]
mod tests {
    #[test]
    fn resq_ids_are_read_from_payloads() {
        let a = "ba69034b39c05d28a5403ac10e276e79";
        let p = format!(r#"{{"class":"A","args":["\"resq_id\":\"x"],"resq_id":"{a}"}}"#);
        let ids: Vec<&str> = super::resq_ids(p.as_bytes()).collect();
        assert!(ids.contains(&a), "{ids:?}");
        assert_eq!(super::resq_ids(b"{\"resq_id\":\"abc\"}").count(), 0);
    }
}
