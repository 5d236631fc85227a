//! [`Checked`]: writes that must happen together, as one script that checks every key's type
//! before writing anything (`checked_write.lua`). Used where Ruby would send a `MULTI` (an
//! enqueue's `SADD` + `RPUSH`, a registration, a delayed push): a `MULTI` runs its other
//! commands when one meets a key of the wrong type, leaving half a step behind; this refuses
//! the whole step with `WRONGTYPE <key> …` instead.

use redis::aio::ConnectionLike;
use redis::{FromRedisValue, RedisResult, ToRedisArgs};

/// Most arguments one write carries (Lua's `unpack` limit is about 8,000); longer pushes are
/// split into several writes of the same step.
const MAX_ARGS: usize = 1000;

/// A set of writes to send as one checked, atomic step.
#[derive(Debug, Default, Clone)]
pub(crate) struct Checked {
    /// Keys, each once.
    keys: Vec<String>,
    /// Per write: command, key index (1-based), arguments.
    writes: Vec<(&'static str, usize, Vec<Vec<u8>>)>,
}

impl Checked {
    /// No writes yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn key_index(&mut self, key: &str) -> usize {
        match self.keys.iter().position(|k| k == key) {
            Some(i) => i + 1,
            None => {
                self.keys.push(key.to_string());
                self.keys.len()
            }
        }
    }

    fn write(&mut self, cmd: &'static str, key: &str, args: Vec<Vec<u8>>) -> &mut Self {
        let k = self.key_index(key);
        self.writes.push((cmd, k, args));
        self
    }

    fn args<T: ToRedisArgs>(v: T) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        v.write_redis_args(&mut out);
        out
    }

    /// `SADD key members…`.
    pub(crate) fn sadd<T: ToRedisArgs>(&mut self, key: &str, members: T) -> &mut Self {
        self.write("SADD", key, Self::args(members))
    }

    /// `SREM key members…`.
    pub(crate) fn srem<T: ToRedisArgs>(&mut self, key: &str, members: T) -> &mut Self {
        self.write("SREM", key, Self::args(members))
    }

    /// `RPUSH key values…` (split into several writes when long).
    pub(crate) fn rpush<T: ToRedisArgs>(&mut self, key: &str, values: T) -> &mut Self {
        for chunk in Self::args(values).chunks(MAX_ARGS) {
            self.write("RPUSH", key, chunk.to_vec());
        }
        self
    }

    /// `LPUSH key values…`.
    pub(crate) fn lpush<T: ToRedisArgs>(&mut self, key: &str, values: T) -> &mut Self {
        self.write("LPUSH", key, Self::args(values))
    }

    /// `LREM key count value`.
    pub(crate) fn lrem<T: ToRedisArgs>(&mut self, key: &str, count: i64, value: T) -> &mut Self {
        let mut a = Self::args(count);
        a.extend(Self::args(value));
        self.write("LREM", key, a)
    }

    /// `ZADD key score member`.
    pub(crate) fn zadd<S: ToRedisArgs, M: ToRedisArgs>(
        &mut self,
        key: &str,
        score: S,
        member: M,
    ) -> &mut Self {
        let mut a = Self::args(score);
        a.extend(Self::args(member));
        self.write("ZADD", key, a)
    }

    /// `HSET key field value`.
    pub(crate) fn hset<F: ToRedisArgs, V: ToRedisArgs>(
        &mut self,
        key: &str,
        field: F,
        value: V,
    ) -> &mut Self {
        let mut a = Self::args(field);
        a.extend(Self::args(value));
        self.write("HSET", key, a)
    }

    /// `HDEL key fields…`.
    pub(crate) fn hdel<T: ToRedisArgs>(&mut self, key: &str, fields: T) -> &mut Self {
        self.write("HDEL", key, Self::args(fields))
    }

    /// `SET key value`.
    pub(crate) fn set<T: ToRedisArgs>(&mut self, key: &str, value: T) -> &mut Self {
        self.write("SET", key, Self::args(value))
    }

    /// `DEL key`.
    pub(crate) fn del(&mut self, key: &str) -> &mut Self {
        self.write("DEL", key, Vec::new())
    }

    /// Sends the writes; the replies of all writes, in order.
    pub(crate) async fn query<T: FromRedisValue, C: ConnectionLike + Send>(
        &self,
        con: &mut C,
    ) -> RedisResult<T> {
        super::CheckedWrite {
            keys: &self.keys,
            n: self.writes.len(),
            writes: super::Writes(&self.writes),
        }
        .call()
        .invoke_async(con)
        .await
    }

    /// Sends the writes, ignoring their replies.
    pub(crate) async fn run<C: ConnectionLike + Send>(&self, con: &mut C) -> RedisResult<()> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let _: redis::Value = self.query(con).await?;
        Ok(())
    }
}
