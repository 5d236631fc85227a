//! The operator's side of split queues (`resq split`): declaring, changing and turning off a
//! split, each one call of `split_set.lua`, and listing the splits with their shards' sizes.
//!
//! Changing N loses nothing: the shards that leave the list are kept as `draining` (producers
//! stop using them, workers keep serving them); each run drops the draining shards it finds
//! empty once the declaration has not changed for [`crate::splits::DRAIN_GRACE_MS`] (longer
//! than any producer caches it), in the same atomic call.

use super::Admin;
use crate::error::Result;
use crate::splits::{Split, DRAIN_GRACE_MS};
use redis::AsyncCommands;
use serde::Serialize;

/// One shard and the jobs waiting in it.
#[derive(Debug, Clone, Serialize)]
pub struct ShardSize {
    /// The shard's queue name.
    pub name: String,
    /// Jobs in its list.
    pub jobs: u64,
}

/// A split queue as `resq split --show` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct SplitInfo {
    /// The logical queue.
    pub queue: String,
    /// Its shards now, shard k at index k, with their sizes.
    pub shards: Vec<ShardSize>,
    /// Shards of an earlier N still served until empty, with their sizes.
    pub draining: Vec<ShardSize>,
    /// Jobs in the queue itself (pushed by producers that do not split).
    pub unsplit: u64,
}

impl Admin {
    /// Splits `queue` into `n` shards (1..=1024), or turns its split off (`None`): the shards
    /// leaving the list drain. Returns the declaration as written (`None`: nothing is left).
    pub async fn set_split(&self, queue: &str, n: Option<u32>) -> Result<Option<Split>> {
        let shards = match n {
            Some(n) => crate::splits::shard_names(queue, n)?,
            None => {
                crate::splits::check_queue(queue)?;
                Vec::new()
            }
        };
        self.split_call(queue, Some(shards), DRAIN_GRACE_MS).await
    }

    /// Drops the draining shards of `queue` that are empty (once the grace period has passed
    /// since its last change); returns the declaration left.
    pub async fn tidy_split(&self, queue: &str) -> Result<Option<Split>> {
        self.split_call(queue, None, DRAIN_GRACE_MS).await
    }

    /// The split of `queue`, when it has one.
    pub async fn split_of(&self, queue: &str) -> Result<Option<Split>> {
        let v: Option<Vec<u8>> = self.con().hget(self.keys().splits(), queue).await?;
        Ok(v.and_then(|v| Split::parse(&v)))
    }

    /// Every split queue, sorted, with its shards' sizes.
    pub async fn splits(&self) -> Result<Vec<SplitInfo>> {
        let all: std::collections::HashMap<String, Vec<u8>> =
            self.con().hgetall(self.keys().splits()).await?;
        let mut out = Vec::new();
        for (queue, split) in crate::splits::parse_all(all) {
            out.push(self.split_sizes(queue, &split).await?);
        }
        out.sort_by(|a, b| a.queue.cmp(&b.queue));
        Ok(out)
    }

    /// `queue`'s split with its shards' sizes.
    pub async fn split_info(&self, queue: &str) -> Result<Option<SplitInfo>> {
        match self.split_of(queue).await? {
            Some(s) => Ok(Some(self.split_sizes(queue.to_string(), &s).await?)),
            None => Ok(None),
        }
    }

    async fn split_sizes(&self, queue: String, split: &Split) -> Result<SplitInfo> {
        let mut shards = Vec::new();
        for s in &split.shards {
            shards.push(ShardSize {
                name: s.clone(),
                jobs: self.len(s).await?,
            });
        }
        let mut draining = Vec::new();
        for s in &split.draining {
            draining.push(ShardSize {
                name: s.clone(),
                jobs: self.len(s).await?,
            });
        }
        let unsplit = self.len(&queue).await?;
        Ok(SplitInfo {
            queue,
            shards,
            draining,
            unsplit,
        })
    }

    /// Jobs in queue `name` (one command to its own slot; not a list: 0).
    async fn len(&self, name: &str) -> Result<u64> {
        match self.con().llen::<_, u64>(self.keys().queue(name)).await {
            Ok(n) => Ok(n),
            Err(e) if e.code() == Some("WRONGTYPE") => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    /// One `split_set` call: the draining shards found empty first (each `LLEN` to its own
    /// slot), then the change (`Some`) or only the drop (`None`).
    async fn split_call(
        &self,
        queue: &str,
        shards: Option<Vec<String>>,
        grace_ms: i64,
    ) -> Result<Option<Split>> {
        let current = self.split_of(queue).await?.unwrap_or_default();
        let mut empty = Vec::new();
        for s in &current.draining {
            // (A non-list never counts as empty: it is left for an operator to look at.)
            if let Ok(0) = self.con().llen::<_, u64>(self.keys().queue(s)).await {
                empty.push(s.clone());
            }
        }
        let set = shards.is_some();
        let text: String = crate::scripts::SplitSet {
            splits: self.keys().splits(),
            queue,
            set: if set { "1" } else { "0" },
            shards: serde_json::to_string(&shards.unwrap_or_default())?,
            empty: serde_json::to_string(&empty)?,
            changed: current.changed,
            // (Redis's clock: every operator's run compares against the same one.)
            now_ms: self.now().await?.timestamp_millis(),
            grace_ms,
        }
        .call()
        .invoke_async(&mut self.con())
        .await?;
        Ok(Split::parse(text.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;

    /// A draining shard is dropped only once it is empty and the grace period has passed
    /// since the declaration's last change; a split turned off is removed once every shard is.
    #[tokio::test]
    async fn draining_shards_are_dropped_only_when_empty_after_the_grace() {
        let ns = crate::testing::namespace("split_drop");
        let keys = Keys::new(ns.as_str());
        let admin = Admin::new(crate::testing::con().await, keys.clone());
        let three = crate::splits::shard_names("v", 3).unwrap();
        let two = crate::splits::shard_names("v", 2).unwrap();
        admin.set_split("v", Some(3)).await.unwrap();
        let _: () = admin
            .con()
            .rpush(keys.queue(&three[2]), "job")
            .await
            .unwrap();
        let s = admin.set_split("v", Some(2)).await.unwrap().unwrap();
        assert_eq!(s.shards, two);
        // (Names of 3 and of 2 shards differ in their tags: all three old ones drain.)
        assert_eq!(s.draining, three);
        // Within the grace: nothing dropped, empty or not.
        let s = admin.tidy_split("v").await.unwrap().unwrap();
        assert_eq!(s.draining, three);
        // Past it (grace 0): the empty ones go, the one holding a job stays.
        let s = admin.split_call("v", None, 0).await.unwrap().unwrap();
        assert_eq!(s.draining, [three[2].clone()]);
        let _: () = admin.con().del(keys.queue(&three[2])).await.unwrap();
        let s = admin.split_call("v", None, 0).await.unwrap().unwrap();
        assert!(s.draining.is_empty());
        assert_eq!(s.shards, two);
        // Off: every shard drains; once empty, the declaration is gone.
        let s = admin.set_split("v", None).await.unwrap().unwrap();
        assert_eq!((s.shards.len(), s.draining), (0, two.clone()));
        assert_eq!(admin.split_call("v", None, 0).await.unwrap(), None);
        assert_eq!(admin.split_of("v").await.unwrap(), None);
        // A field that is not a declaration is refused, and left as it was.
        let _: () = admin.con().hset(keys.splits(), "v", "nope").await.unwrap();
        assert!(admin.set_split("v", Some(2)).await.is_err());
        let v: String = admin.con().hget(keys.splits(), "v").await.unwrap();
        assert_eq!(v, "nope");
        assert!(matches!(
            admin.set_split("a:b", Some(2)).await,
            Err(crate::Error::Split(_))
        ));
    }
}
