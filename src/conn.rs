//! Redis connections: where Redis is ([`Endpoint`]), the shared self-reconnecting connection
//! every slot multiplexes over ([`Conn`]), dedicated connections for blocking waits, and the
//! retry policy every Redis step follows. Everything else talks to Redis through these types,
//! so the kind of deployment (plain, TLS, Sentinel, Cluster) is decided here alone.

use crate::error::Result;
use rand::Rng;
use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::{AsyncConnectionConfig, Client, Cmd, Pipeline, RedisFuture, RedisResult, Value};
use std::future::Future;
use std::time::Duration;

/// Where Redis is: parsed from a URL; opens connections.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The redis-rs client for the URL.
    client: Client,
}

impl Endpoint {
    /// Parses `url` (nothing is sent yet).
    pub fn open(url: &str) -> Result<Self> {
        Ok(Endpoint {
            client: Client::open(url)?,
        })
    }

    /// Opens the shared connection: it reconnects by itself, and commands time out after
    /// 30 s so a dead peer is noticed.
    pub async fn connect(&self) -> Result<Conn> {
        let cfg = ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_secs(30)))
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_max_delay(Duration::from_secs(2));
        Ok(Conn(
            ConnectionManager::new_with_config(self.client.clone(), cfg).await?,
        ))
    }

    /// A dedicated connection for a blocking command whose server-side timeout is `block`.
    pub async fn blocking(&self, block: Duration) -> RedisResult<MultiplexedConnection> {
        let cfg = AsyncConnectionConfig::new()
            .set_response_timeout(Some(block + Duration::from_secs(10)))
            .set_connection_timeout(Some(Duration::from_secs(5)));
        self.client
            .get_multiplexed_async_connection_with_config(&cfg)
            .await
    }
}

/// The shared connection; cheap to clone (clones share one socket and pipeline).
#[derive(Clone)]
pub struct Conn(ConnectionManager);

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

/// Capped exponential back-off with full jitter: 50 ms doubling to `cap`.
#[derive(Debug, Clone)]
pub struct Backoff {
    /// Attempts made so far.
    attempt: u32,
    /// Longest wait.
    cap: Duration,
}

impl Backoff {
    /// A fresh back-off capped at `cap`.
    pub fn new(cap: Duration) -> Self {
        Backoff { attempt: 0, cap }
    }

    /// The next wait.
    pub fn next_delay(&mut self) -> Duration {
        let base = Duration::from_millis(50).saturating_mul(1u32 << self.attempt.min(16));
        self.attempt += 1;
        let max = base.min(self.cap);
        let ms = rand::rng().random_range(max.as_millis() as u64 / 2..=max.as_millis() as u64);
        Duration::from_millis(ms)
    }

    /// Whether any attempt failed since the last reset.
    pub fn failing(&self) -> bool {
        self.attempt > 0
    }
}

/// Runs `op` until it succeeds, waiting with [`Backoff`] between failures. `what` names the
/// step in logs, which say once that Redis is unreachable and once that it is back.
pub async fn retry<T, F, Fut>(what: &str, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = RedisResult<T>>,
{
    let mut backoff = Backoff::new(Duration::from_secs(5));
    loop {
        match op().await {
            Ok(v) => {
                if backoff.failing() {
                    tracing::info!(step = what, "redis is reachable again");
                }
                return v;
            }
            Err(e) => {
                if !backoff.failing() {
                    tracing::warn!(step = what, error = %e, "redis step failed; retrying with back-off");
                }
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
    }
}
