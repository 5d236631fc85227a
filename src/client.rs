//! Enqueueing jobs: Ruby Resque's form (`{"class","args"}`, byte-identical to Ruby's encoding)
//! and Jesque's (`{"class","args","vars"}`), with Resque's command sequence (`SADD <ns>:queues`
//! + `RPUSH <ns>:queue:<q>`, one MULTI).

use crate::conn::Conn;
use crate::error::Result;
use crate::keys::Keys;
use crate::wire::payload;
use serde_json::{Map, Value};

/// A producer bound to one Redis and namespace.
#[derive(Clone)]
pub struct Client {
    /// Shared connection.
    con: Conn,
    /// Key names.
    keys: Keys,
}

impl Client {
    /// Connects to `url` for namespace `namespace`.
    pub async fn connect(url: &str, namespace: &str) -> Result<Self> {
        Ok(Client {
            con: crate::conn::Endpoint::open(url)?.connect().await?,
            keys: Keys::new(namespace),
        })
    }

    /// The key names in use.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// A clone of the connection, for callers that need raw commands.
    pub fn connection(&self) -> Conn {
        self.con.clone()
    }

    /// Enqueues `class` with positional `args` onto `queue`, as `Resque.enqueue_to` does.
    pub async fn enqueue_to(&self, queue: &str, class: &str, args: &[Value]) -> Result<()> {
        self.push_raw(queue, &payload::encode_resque(class, args))
            .await
    }

    /// Enqueues a Jesque-form job (`vars` = named args).
    pub async fn enqueue_jesque(
        &self,
        queue: &str,
        class: &str,
        args: Option<&[Value]>,
        vars: Option<&Map<String, Value>>,
    ) -> Result<()> {
        self.push_raw(queue, &payload::encode_jesque(class, args, vars))
            .await
    }

    /// Pushes an already-encoded payload, as `Resque.push` does.
    pub async fn push_raw(&self, queue: &str, json: &str) -> Result<()> {
        let mut con = self.con.clone();
        let _: () = redis::pipe()
            .atomic()
            .sadd(self.keys.queues(), queue)
            .ignore()
            .rpush(self.keys.queue(queue), json)
            .ignore()
            .query_async(&mut con)
            .await?;
        Ok(())
    }
}
