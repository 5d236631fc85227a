//! The producer side: everything a Rust service writes so that Ruby, Java and resq workers run
//! it, byte-compatible with the peer that would have written it.
//!
//! * `enqueue` — Resque's `{"class","args"}` (Ruby's float text, see `number`), Jesque's
//!   `{"class","args","vars"}`, priority (head of queue) and batch enqueue;
//! * `queues` — listing, size, peek, removal, and `destroy`/`dequeue` with Ruby's matching;
//! * `delayed` — resque-scheduler's delayed set (`enqueue_at`/`enqueue_in`,
//!   `remove_delayed`, peeks and sizes);
//! * `jesque` — Jesque's delayed and recurring zset queues;
//! * `unique` — unique jobs: a second enqueue while one waits or runs is a no-op that says so;
//! * `track` — tracked jobs ([`crate::jobs::Track`]): the job with its record in one call,
//!   resque-status's `create`, a job's record and its cancel; `wait` — waiting for a tracked
//!   job to end;
//! * `splits` — the shard of a split queue a job goes to (crate::splits);
//! * `pipelined` — many jobs in pipelines, each the call of its own enqueue
//!   (`resq enqueue --file`);
//! * the bytes (payloads, scheduler items, Ruby's and Java's float text) are written by
//!   `crate::wire::encode` and `crate::wire::number`.
//!
//! ```no_run
//! # async fn f() -> resq::Result<()> {
//! use serde_json::json;
//! let client = resq::Client::connect("redis://127.0.0.1:6379", "resque").await?;
//! client.enqueue_to("mail", "Mailer", &[json!(42), json!("welcome")]).await?;
//! client.enqueue_in("mail", std::time::Duration::from_secs(60), "Mailer", &[json!(43)]).await?;
//! # Ok(()) }
//! ```

pub(crate) mod delayed;
pub(crate) mod enqueue;
pub(crate) mod jesque;
#[cfg(feature = "cli")]
pub(crate) mod pipelined;
pub(crate) mod queues;
mod splits;
pub(crate) mod track;
pub(crate) mod unique;
mod wait;

// The bytes a producer writes are the wire format's; `client::encode` stays for its users.
pub(crate) use crate::wire::encode;

pub use crate::wire::number::FloatFormat;
pub use delayed::Scheduled;
pub use enqueue::NewJob;
pub use jesque::JesqueJob;
pub use unique::{Enqueued, Unique};

use crate::conn::{Conn, Endpoint, RedisOptions};
use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::middleware::EnqueueMiddleware;
use std::sync::Arc;

/// A producer bound to one Redis and namespace. Cheap to clone (clones share the connection).
///
/// ```no_run
/// # async fn demo() -> resq::Result<()> {
/// use resq::Client;
/// use serde_json::json;
///
/// let client = Client::connect("redis://127.0.0.1:6379", "resque").await?;
/// client.enqueue_to("default", "Archive", &[json!(42), json!("main")]).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    /// Shared connection.
    con: Conn,
    /// Key names.
    keys: Keys,
    /// How Ruby-form payloads spell floats (the Ruby JSON library of the fleet).
    float_format: FloatFormat,
    /// Queue of [`Client::enqueue_class`] and of typed jobs without their own (Ruby takes it
    /// from the class; resq from here).
    default_queue: String,
    /// Enqueue middleware, outermost first.
    layers: Arc<Vec<Arc<dyn EnqueueMiddleware>>>,
    /// Where Redis is, when the client connected itself (for waiting on tracked jobs without
    /// polling).
    endpoint: Option<Endpoint>,
    /// Split queues' declarations as last read, and the round-robin counter (splits.rs).
    splits: Arc<splits::SplitCache>,
}

impl Client {
    /// Connects to `url` for namespace `namespace` (connection settings only from the URL).
    pub async fn connect(url: &str, namespace: &str) -> Result<Self> {
        Self::connect_with(url, namespace, &RedisOptions::default()).await
    }

    /// [`Client::connect`] with connection settings beyond the URL (TLS files, Cluster, `WAIT`).
    pub async fn connect_with(url: &str, namespace: &str, options: &RedisOptions) -> Result<Self> {
        let endpoint = Endpoint::with_options(url, options)?;
        let keys = endpoint.keys(namespace)?;
        let con = endpoint.connect().await?;
        let mut client = Self::new(con, keys);
        client.endpoint = Some(endpoint);
        Ok(client)
    }

    /// A client of namespace `namespace` over an existing connection.
    pub fn with_connection(con: Conn, namespace: &str) -> Self {
        Self::new(con, Keys::new(namespace))
    }

    /// A client over an existing connection.
    pub(crate) fn new(con: Conn, keys: Keys) -> Self {
        Client {
            con,
            keys,
            float_format: FloatFormat::default(),
            default_queue: "default".to_string(),
            layers: Arc::default(),
            endpoint: None,
            splits: Arc::default(),
        }
    }

    /// Adds an enqueue middleware (see [`crate::middleware::enqueue`]); the first added is the
    /// outermost.
    pub fn layer(mut self, middleware: impl EnqueueMiddleware) -> Self {
        Arc::make_mut(&mut self.layers).push(Arc::new(middleware));
        self
    }

    /// Adds the enqueue hooks of `hooks` (`before_enqueue`, `after_enqueue`).
    pub fn hooks(self, hooks: crate::middleware::Hooks) -> Self {
        self.layer(hooks)
    }

    /// Writes Ruby-form floats as `format` does ([`FloatFormat::RubyJsonGem`] by default;
    /// choose [`FloatFormat::RubyOj`] when the Ruby side runs MultiJson with Oj, so that
    /// `Job.destroy` and `remove_delayed` with float args match). Jesque-form payloads always
    /// use Java's text.
    pub fn with_float_format(mut self, format: FloatFormat) -> Self {
        self.float_format = format;
        self
    }

    /// The queue [`Client::enqueue`] uses (`default` unless set).
    pub fn with_default_queue(mut self, queue: impl Into<String>) -> Self {
        self.default_queue = queue.into();
        self
    }

    /// The queue of untyped enqueues and of typed jobs without their own.
    pub(crate) fn default_queue(&self) -> &str {
        &self.default_queue
    }

    /// The key names in use.
    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The float format of Ruby-form payloads.
    pub fn float_format(&self) -> FloatFormat {
        self.float_format
    }

    /// A clone of the connection, for callers that need raw commands.
    pub fn connection(&self) -> Conn {
        self.con.clone()
    }

    /// Where Redis is, when the client connected itself.
    pub(crate) fn endpoint(&self) -> Option<&Endpoint> {
        self.endpoint.as_ref()
    }

    /// The connection to send on (clones share one socket).
    fn con(&self) -> Conn {
        self.con.clone()
    }
}

/// Ruby's `Job.create` checks: a queue and a class, both non-empty.
pub(crate) fn validate(queue: &str, class: &str) -> Result<()> {
    if queue.is_empty() {
        return Err(Error::Rejected(
            "no queue given (Resque::NoQueueError)".into(),
        ));
    }
    if class.is_empty() {
        return Err(Error::Rejected(
            "no class given (Resque::NoClassError)".into(),
        ));
    }
    // (A newline or a NUL in a name breaks every tool that lists queues or classes a line each.)
    for (what, name) in [("queue", queue), ("class", class)] {
        if name.chars().any(char::is_control) {
            return Err(Error::Rejected(format!(
                "the {what} name {name:?} holds a control character"
            )));
        }
    }
    Ok(())
}
