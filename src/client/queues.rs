//! Looking at and removing queued jobs, with Ruby Resque's semantics: `Resque.queues`,
//! `Resque.size`, `Resque.peek`, `Resque.remove_queue`, `Resque::Job.destroy` and
//! `Resque.dequeue`.

use super::{encode, Client};
use crate::error::Result;
use redis::AsyncCommands;
use serde_json::Value;

impl Client {
    /// Names in `<ns>:queues`, sorted (`Resque.queues`); a name that is not UTF-8 is left out
    /// (and logged).
    pub async fn queues(&self) -> Result<Vec<String>> {
        let mut v = crate::admin::names::smembers(&mut self.con(), &self.keys.queues()).await?;
        v.sort();
        Ok(v)
    }

    /// Jobs waiting in `queue` (`LLEN`; for a Jesque zset queue, its `ZCARD`).
    pub async fn size(&self, queue: &str) -> Result<u64> {
        let key = self.keys.queue(queue);
        let mut con = self.con();
        match con.llen::<_, u64>(&key).await {
            Ok(n) => Ok(n),
            Err(e) if e.code() == Some("WRONGTYPE") => Ok(con.zcard(&key).await?),
            Err(e) => Err(e.into()),
        }
    }

    /// Up to `count` raw payloads of `queue` from index `start` (`Resque.peek`), head first.
    pub async fn peek(&self, queue: &str, start: isize, count: isize) -> Result<Vec<String>> {
        if count <= 0 {
            return Ok(Vec::new());
        }
        Ok(self
            .con()
            .lrange(self.keys.queue(queue), start, start + count - 1)
            .await?)
    }

    /// Deletes `queue` and its jobs (`Resque.remove_queue`: `SREM queues` + `DEL`, one checked
    /// step; on a spread namespace, where the two keys are in different slots, the two
    /// commands in Ruby's order).
    pub async fn remove_queue(&self, queue: &str) -> Result<()> {
        if self.keys.is_spread() {
            let mut con = self.con();
            let _: i64 = con.srem(self.keys.queues(), queue).await?;
            let _: i64 = con.del(self.keys.queue(queue)).await?;
            return Ok(());
        }
        crate::scripts::Checked::new()
            .srem(&self.keys.queues(), queue)
            .del(&self.keys.queue(queue))
            .run(&mut self.con())
            .await?;
        Ok(())
    }

    /// Removes jobs of `class` from `queue` as `Resque::Job.destroy` does, and returns how
    /// many: with `args`, one `LREM 0` of the exact bytes Ruby would encode (so only
    /// byte-identical payloads match: no Jesque `vars`, no extra fields, no other key order);
    /// without, every payload whose decoded `class` equals `class`, each removed by its exact
    /// bytes. Payloads that are not JSON are left alone (Ruby would raise on them).
    pub async fn destroy(&self, queue: &str, class: &str, args: Option<&[Value]>) -> Result<u64> {
        let key = self.keys.queue(queue);
        let mut con = self.con();
        if let Some(args) = args {
            let json = encode::resque_payload(class, args, self.float_format);
            return Ok(con.lrem(&key, 0, json).await?);
        }
        let all: Vec<Vec<u8>> = con.lrange(&key, 0, -1).await?;
        let mut matching: Vec<Vec<u8>> = Vec::new();
        for raw in all {
            let is_class = serde_json::from_slice::<Value>(&raw)
                .ok()
                .and_then(|v| v.get("class").and_then(Value::as_str).map(|c| c == class))
                .unwrap_or(false);
            if is_class && !matching.contains(&raw) {
                matching.push(raw);
            }
        }
        if matching.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for raw in &matching {
            pipe.lrem(&key, 0, raw.as_slice());
        }
        let counts: Vec<u64> = pipe.query_async(&mut con).await?;
        Ok(counts.iter().sum())
    }

    /// `Resque.dequeue(klass, *args)` on `queue`: the same as [`Client::destroy`] (Ruby adds
    /// only its dequeue hooks, which run in Ruby).
    pub async fn dequeue(&self, queue: &str, class: &str, args: Option<&[Value]>) -> Result<u64> {
        self.destroy(queue, class, args).await
    }
}
