//! The producer side: everything a Rust service writes so that Ruby, Java and resq workers run
//! it, byte-compatible with the peer that would have written it.
//!
//! * [`enqueue`] — Resque's `{"class","args"}` (Ruby's float text, see [`number`]), Jesque's
//!   `{"class","args","vars"}`, priority (head of queue) and batch enqueue;
//! * [`queues`] — listing, size, peek, removal, and `destroy`/`dequeue` with Ruby's matching;
//! * [`delayed`] — resque-scheduler's delayed set (`enqueue_at`/`enqueue_in`,
//!   `remove_delayed`, peeks and sizes);
//! * [`jesque`] — Jesque's delayed and recurring zset queues;
//! * [`unique`] — unique jobs: a second enqueue while one waits or runs is a no-op that says so;
//! * [`encode`] / [`number`] — the bytes.
//!
//! ```no_run
//! # async fn f() -> resq::Result<()> {
//! use serde_json::json;
//! let client = resq::Client::connect("redis://127.0.0.1:6379", "resque").await?;
//! client.enqueue_to("mail", "Mailer", &[json!(42), json!("welcome")]).await?;
//! client.enqueue_in("mail", std::time::Duration::from_secs(60), "Mailer", &[json!(43)]).await?;
//! # Ok(()) }
//! ```

pub mod delayed;
pub mod encode;
pub mod enqueue;
pub mod jesque;
pub mod number;
pub mod queues;
pub mod unique;

pub use enqueue::NewJob;
pub use jesque::JesqueJob;
pub use number::FloatFormat;
pub use unique::{Enqueued, Unique};

use crate::conn::Conn;
use crate::error::{Error, Result};
use crate::keys::Keys;

/// A producer bound to one Redis and namespace. Cheap to clone (clones share the connection).
#[derive(Clone)]
pub struct Client {
    /// Shared connection.
    con: Conn,
    /// Key names.
    keys: Keys,
    /// How Ruby-form payloads spell floats (the Ruby JSON library of the fleet).
    float_format: FloatFormat,
    /// Queue of [`Client::enqueue`] (Ruby takes it from the class; resq from here).
    default_queue: String,
}

impl Client {
    /// Connects to `url` for namespace `namespace`.
    pub async fn connect(url: &str, namespace: &str) -> Result<Self> {
        let endpoint = crate::conn::Endpoint::open(url)?;
        endpoint.check_namespace(namespace)?;
        Ok(Self::new(endpoint.connect().await?, Keys::new(namespace)))
    }

    /// A client over an existing connection.
    pub fn new(con: Conn, keys: Keys) -> Self {
        Client {
            con,
            keys,
            float_format: FloatFormat::default(),
            default_queue: "default".to_string(),
        }
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

    /// The key names in use.
    pub fn keys(&self) -> &Keys {
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

    /// The connection to send on (clones share one socket).
    fn con(&self) -> Conn {
        self.con.clone()
    }
}

/// Ruby's `Job.create` checks: a queue and a class, both non-empty.
fn validate(queue: &str, class: &str) -> Result<()> {
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
    Ok(())
}
