//! Concurrency limits on a spread cluster namespace (`docs/cluster.md`): which limits can be
//! enforced there, and a holder's share of one, kept in the limit's own slot.
//!
//! A step call on a spread namespace touches one hash slot (its queue's), so it cannot read a
//! limit's keys. There a concurrency limit on a queue (its split queue's shards count as the
//! queue) is held as shares: `<ns>:resq:limit:<name>:shares` is a hash, holder → units, where a
//! holder is one process's group of slots serving one queue, named by its first slot's id. A
//! group takes units before the call that reserves with them (`limit_share.lua`: granted only
//! while the sum of the shares stays within the limit), and gives back those its jobs no
//! longer hold (crate::worker::step::gate). A dead process's shares are removed by the pruner
//! once its slots are judged dead.
//!
//! A concurrency limit on a class (with or without a queue) is held the same way, one holder per
//! process, a unit taken after the pop and before the handler runs
//! (crate::worker::class_gate).
//!
//! Not built there, and refused with the spread error: keyed (partitioned) limits, rate and
//! time-window limits, weights and priorities, and two limits on one queue or one class.

use super::{Kind, Limit};
use crate::keys::Keys;
use redis::aio::ConnectionLike;
use redis::RedisResult;

/// Why `l` cannot be enforced on a spread namespace (`None`: it can).
pub(crate) fn unsupported(l: &Limit) -> Option<String> {
    let why = if !matches!(l.kind, Kind::Concurrency { .. }) {
        "it is not a concurrency limit"
    } else if l.key.is_some() {
        "it is keyed (a limit per value of a key)"
    } else if !l.weights.is_empty() || !l.priority.is_empty() {
        "it has weights or priorities"
    } else {
        return None;
    };
    Some(format!("limit {:?}: {why}", l.name))
}

/// The queue limit (no class) covering the jobs of queue `q` among `limits` (all of them
/// supported): one on `q` itself, or on the queue `q` is a shard of. Two of them is an error.
pub(crate) fn for_queue<'a>(limits: &'a [Limit], q: &str) -> Result<Option<&'a Limit>, String> {
    let mut on = limits.iter().filter(|l| {
        l.class.is_none()
            && l.queue
                .as_deref()
                .is_some_and(|lq| lq == q || crate::splits::is_shard_of(q, lq))
    });
    let first = on.next();
    match on.next() {
        Some(second) => Err(format!(
            "queue {q:?} has two limits ({:?} and {:?})",
            first.map(|l| l.name.as_str()).unwrap_or_default(),
            second.name
        )),
        None => Ok(first),
    }
}

/// The class limits among `limits` (all of them supported); two on one class is an error.
pub(crate) fn class_limits(limits: &[Limit]) -> Result<Vec<&Limit>, String> {
    let on: Vec<&Limit> = limits.iter().filter(|l| l.class.is_some()).collect();
    for (i, a) in on.iter().enumerate() {
        if let Some(b) = on[i + 1..].iter().find(|b| b.class == a.class) {
            return Err(format!(
                "class {:?} has two limits ({:?} and {:?})",
                a.class.as_deref().unwrap_or_default(),
                a.name,
                b.name
            ));
        }
    }
    Ok(on)
}

/// The capacity of a concurrency limit (0 for another kind).
pub(crate) fn capacity(l: &Limit) -> u32 {
    match l.kind {
        Kind::Concurrency { limit } => limit,
        _ => 0,
    }
}

/// Sets `holder`'s share of limit `name` to `have` units plus as many of `want` more as fit
/// under `capacity` beside the other holders' shares; returns how many were granted
/// (`limit_share.lua`, one key).
pub(crate) async fn share<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    name: &str,
    holder: &str,
    have: usize,
    want: usize,
    capacity: u32,
) -> RedisResult<usize> {
    crate::scripts::LimitShare {
        shares: keys.limit_shares(name),
        holder,
        have,
        want,
        capacity,
    }
    .call()
    .invoke_async(con)
    .await
}

/// The share keys of the concurrency limits stored now (what the pruner removes a dead
/// holder from); a hash that cannot be read counts as empty.
pub(crate) async fn share_keys<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
) -> RedisResult<Vec<String>> {
    let stored = match super::store::read(con, keys).await {
        Ok(s) => s,
        Err(crate::Error::Redis(e)) => return Err(e),
        Err(_) => return Ok(Vec::new()),
    };
    let (limits, _) = super::store::merge_bytes(
        stored.declared.unwrap_or_default(),
        stored.set.unwrap_or_default(),
    );
    Ok(limits
        .iter()
        .filter(|l| matches!(l.kind, Kind::Concurrency { .. }))
        .map(|l| keys.limit_shares(&l.name))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_concurrency_limit_is_supported() {
        assert_eq!(unsupported(&Limit::concurrency("a", 5).queue("q")), None);
        assert_eq!(unsupported(&Limit::concurrency("a", 5).class("C")), None);
        assert_eq!(
            unsupported(&Limit::concurrency("a", 5).queue("q").class("C")),
            None
        );
        for l in [
            Limit::concurrency("a", 5).queue("q").key("{args.0}"),
            Limit::concurrency("a", 5).class("C").key("{args.0}"),
            Limit::concurrency("a", 5).queue("q").weight("C", 2),
            Limit::concurrency("a", 5).queue("q").priority("C", 9),
            Limit::rate("a", 5, std::time::Duration::from_secs(1)).queue("q"),
        ] {
            assert!(unsupported(&l).is_some(), "{l:?}");
        }
    }

    #[test]
    fn a_queue_limit_covers_its_shards() {
        let limits = vec![Limit::concurrency("v", 5).queue("video")];
        let shard = crate::splits::shard_name("video", 1, 3);
        assert_eq!(for_queue(&limits, &shard).unwrap().unwrap().name, "v");
        assert_eq!(for_queue(&limits, "video").unwrap().unwrap().name, "v");
        assert!(for_queue(&limits, "videos").unwrap().is_none());
        let two = vec![
            Limit::concurrency("v", 5).queue("video"),
            Limit::concurrency("w", 5).queue("video"),
        ];
        assert!(for_queue(&two, "video").is_err());
        let class = vec![Limit::concurrency("c", 5).queue("video").class("C")];
        assert!(
            for_queue(&class, "video").unwrap().is_none(),
            "a class limit"
        );
        assert_eq!(class_limits(&class).unwrap().len(), 1);
        let two = vec![
            Limit::concurrency("c", 5).class("C"),
            Limit::concurrency("d", 5).class("C"),
        ];
        assert!(class_limits(&two).is_err());
    }

    /// `limit_share.lua` against a real Redis: grants what fits beside the other holders,
    /// writes what the holder holds (a lost reply is corrected by the next call), and refuses
    /// a key of another type or a value that is no number before any write.
    #[tokio::test]
    async fn a_share_is_granted_within_the_limit_and_a_bad_key_is_refused_unwritten() {
        use redis::AsyncCommands;
        let mut con = crate::testing::con().await;
        let keys = Keys::new(crate::testing::namespace("share"));
        let key = keys.limit_shares("five");
        let take = |con: &mut crate::conn::Conn, holder: &'static str, have, want| {
            let (mut con, keys) = (con.clone(), keys.clone());
            async move { share(&mut con, &keys, "five", holder, have, want, 5).await }
        };
        assert_eq!(take(&mut con, "a", 0, 3).await.unwrap(), 3);
        assert_eq!(take(&mut con, "b", 0, 4).await.unwrap(), 2, "5 - 3");
        assert_eq!(take(&mut con, "b", 2, 1).await.unwrap(), 0, "full");
        // "a" says again what it holds (its last reply lost): nothing more, nothing less.
        assert_eq!(take(&mut con, "a", 3, 0).await.unwrap(), 0);
        let all: std::collections::BTreeMap<String, u32> = con.hgetall(&key).await.unwrap();
        assert_eq!(all, [("a".into(), 3), ("b".into(), 2)].into());
        // Giving back: "a" holds 1 now; "b" gets the room.
        assert_eq!(take(&mut con, "a", 1, 0).await.unwrap(), 0);
        assert_eq!(take(&mut con, "b", 2, 5).await.unwrap(), 2);
        assert_eq!(take(&mut con, "a", 0, 0).await.unwrap(), 0);
        let all: std::collections::BTreeMap<String, u32> = con.hgetall(&key).await.unwrap();
        assert_eq!(all, [("b".into(), 4)].into(), "a holder at 0 is removed");
        // A value that is no number: refused, nothing written.
        let _: () = con.hset(&key, "c", "x").await.unwrap();
        let e = take(&mut con, "a", 0, 1).await.unwrap_err();
        assert!(e.to_string().contains("BADSHARE"), "{e}");
        let all: std::collections::BTreeMap<String, String> = con.hgetall(&key).await.unwrap();
        assert_eq!(all.len(), 2, "{all:?}");
        // A key of another type: refused naming it, nothing written.
        let _: () = con.del(&key).await.unwrap();
        let _: () = con.set(&key, "s").await.unwrap();
        let e = take(&mut con, "a", 0, 1).await.unwrap_err();
        assert!(e.to_string().contains(&key), "{e}");
        let v: String = con.get(&key).await.unwrap();
        assert_eq!(v, "s");
    }
}
