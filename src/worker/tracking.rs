//! Invalidations: Redis tells the process when a queue it found empty is written to, so idle
//! slots wake at once without polling, whatever the number of queues.
//!
//! Two dedicated RESP3 connections per process:
//!
//! * **queues** (`CLIENT TRACKING ON`, Redis's default mode): Redis sends one `invalidate`
//!   message at the next write to each key the connection has read. A queue is *armed* (read
//!   with `TYPE` on this connection) when a reserve finds it empty
//!   ([`super::fetch::Fetch::found_empty`]). If it is a list by then (it holds jobs), that
//!   answer wakes a slot at once; otherwise the next write to it (a Ruby `RPUSH`, a scheduler's
//!   move) does. A queue that is being drained is not armed, so a busy process hears nothing of
//!   its own pops (in broadcast mode every `LPOP` sent the process a message: at one slot, a
//!   second message per job);
//! * **keys** (`CLIENT TRACKING ON` too): `<ns>:resq:limits`, `<ns>:resq:limits:set`,
//!   `<ns>:resq:paused_queues`, `<ns>:resq:wake`, `<ns>:queues` and `<ns>:resq:splits`, each
//!   read (`TYPE`) on connection and again after each message about it, *before* the message is handed on, so
//!   a write made while the process reloads what changed brings a message of its own: limits
//!   changed, a queue paused or resumed, a limit opened, a new queue (for wildcard lists), a split queue's shards changed; see
//!   [`crate::limits`]. Not `BCAST`: with a broadcast client connected, Redis compares every
//!   key any client writes with every prefix (at 64 slots, ~1 µs of Redis CPU per job), while
//!   a key read in the default mode costs one lookup per write.
//!
//! Each message goes to [`super::fetch::Fetch::invalidated`]. Available with Redis ≥ 6 on one
//! server or through Sentinel. Not with Redis Cluster (tracking is per node), an ACL user
//! without the `CLIENT` command, or a proxy that does not speak RESP3: then the process logs it
//! once and falls back to its blocking watchers and the periodic reserve (see
//! [`super::fetch`]). A lost queue connection is logged, turns the fallback on until it is
//! back, and on reconnection every queue is polled again (and re-armed when found empty), so
//! nothing written while it was down is missed.

use super::fetch::Fetch;
use crate::conn::errors::{self, Reporter};
use crate::conn::{track_reads, Backoff, Endpoint};
use redis::{PushKind, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Why a tracking connection is left when the Sentinel master moved.
const MOVED: &str = "the master moved";

/// How often the tracking connection is checked while nothing arrives on it.
const PING_EVERY: Duration = Duration::from_secs(15);

/// The shortest interval between pings (a server closing idle clients sooner is not worth
/// keeping a connection to).
const MIN_PING: Duration = Duration::from_millis(250);

/// How long to wait before asking again after the server refused tracking.
const UNAVAILABLE_RETRY: Duration = Duration::from_secs(300);

/// What one tracking connection listens to.
pub(crate) enum Watch {
    /// The next write to each of these keys, read again after each message.
    Keys(Vec<String>),
    /// The queue keys named on this channel (armed when a reserve found them empty).
    Queues(mpsc::UnboundedReceiver<String>),
}

/// Keeps one tracking connection up until `stop` turns true.
pub(crate) async fn run(
    fetch: Arc<Fetch>,
    endpoint: Endpoint,
    watch: Watch,
    mut stop: watch::Receiver<bool>,
) {
    let (watched, mut arms) = match watch {
        Watch::Keys(k) => (k, None),
        Watch::Queues(rx) => (Vec::new(), Some(rx)),
    };
    let queues = arms.is_some();
    let mut backoff = Backoff::new(Duration::from_secs(5));
    let mut lost = Reporter::default();
    let mut told_unavailable = false;
    let mut ping_every = PING_EVERY;
    loop {
        let (tx, mut rx) = mpsc::unbounded_channel();
        // A master the sentinels leave is left too (it would tell of no write to the new one).
        let epoch = endpoint.master_epoch();
        let connected = tokio::select! {
            c = endpoint.tracking(tx) => c,
            _ = stop.wait_for(|s| *s) => return,
        };
        if queues && !matches!(connected, Ok(Some(_))) {
            // The supervisor may now decide about watchers.
            fetch.tracking_tried.notify_one();
        }
        let mut con = match connected {
            Ok(Some(con)) => con,
            Ok(None) => {
                tracing::debug!("invalidation tracking is not used with this deployment; watchers and the periodic reserve wake idle slots");
                return;
            }
            Err(e) => {
                let wait = if unsupported(&e) {
                    if queues && !told_unavailable {
                        tracing::info!(error = %e, "Redis does not offer CLIENT TRACKING here; idle slots are woken by blocking watchers (up to {} queues) and a reserve every INTERVAL", super::fetch::MAX_WATCHED);
                        told_unavailable = true;
                    }
                    UNAVAILABLE_RETRY
                } else {
                    if let Some(times) = lost.due().filter(|_| queues) {
                        tracing::warn!(
                            times,
                            "invalidation tracking cannot connect ({}); falling back to watchers",
                            errors::describe(&e, endpoint.label())
                        );
                    }
                    backoff.next_delay()
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => continue,
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        };
        if queues {
            // Anything written while it was down may have been missed: every queue is polled
            // again (and armed again when found empty).
            fetch.set_tracking(true);
            fetch.tracking_tried.notify_one();
        } else {
            if track_reads(&mut con, &watched).await.is_err() {
                // Lost as soon as made: tried again like a failed connection.
                tokio::select! {
                    _ = tokio::time::sleep(backoff.next_delay()) => continue,
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
            fetch.keys_connected();
        }
        let since = std::time::Instant::now();
        if lost.active() && queues {
            tracing::info!("invalidation tracking reconnected");
        }
        lost.reset();
        backoff = Backoff::new(Duration::from_secs(5));
        let why = loop {
            let event = tokio::select! {
                msg = rx.recv() => Event::Push(msg),
                Some(key) = next_arm(&mut arms) => Event::Arm(key),
                _ = tokio::time::sleep(ping_every) => Event::Quiet,
                _ = endpoint.master_moved(epoch) => Event::Moved,
                _ = stop.wait_for(|s| *s) => return,
            };
            match event {
                Event::Push(Some(info)) => match info.kind {
                    PushKind::Invalidate => {
                        let keys = invalidated_keys(&info.data);
                        if !queues {
                            // Read again first: a write from now on brings its own message.
                            let again = keys.as_deref().unwrap_or(&watched);
                            if let Err(e) = track_reads(&mut con, again).await {
                                break errors::describe(&e, endpoint.label());
                            }
                        }
                        deliver(&fetch, keys.as_deref())
                    }
                    PushKind::Disconnection => break "the connection closed".to_string(),
                    _ => {}
                },
                Event::Push(None) => break "the connection closed".to_string(),
                Event::Arm(key) => {
                    if let Err(e) = arm(&fetch, &mut con, key, arms.as_mut()).await {
                        break errors::describe(&e, endpoint.label());
                    }
                }
                Event::Moved => break MOVED.to_string(),
                Event::Quiet => {
                    let ping: redis::RedisResult<()> =
                        redis::cmd("PING").query_async(&mut con).await;
                    if let Err(e) = ping {
                        break errors::describe(&e, endpoint.label());
                    }
                }
            }
        };
        if queues {
            fetch.set_tracking(false);
        }
        // A server `timeout` (or a proxy's) closes a connection that sends nothing: ping more
        // often than it lived.
        let lived = since.elapsed();
        if lived < ping_every && why != MOVED {
            ping_every = (lived / 2).max(MIN_PING);
        }
        if let Some(times) = lost.due().filter(|_| queues) {
            tracing::warn!(times, "invalidation tracking lost its connection ({why}); falling back to watchers until it is back");
        }
    }
}

/// What woke the tracking loop.
enum Event {
    /// A message from Redis (`None`: the connection closed).
    Push(Option<redis::PushInfo>),
    /// A queue key to arm.
    Arm(String),
    /// Nothing for a while: time to ping.
    Quiet,
    /// The Sentinel master moved: reconnect to the new one.
    Moved,
}

/// The next queue key to arm (never, on the prefixes connection).
async fn next_arm(arms: &mut Option<mpsc::UnboundedReceiver<String>>) -> Option<String> {
    match arms {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Arms `first` and every other key already asked for: one `TYPE` each on the tracking
/// connection (a read, so Redis tells it of the next write; `TYPE` answers whatever the key
/// holds). A queue that is a list by now holds jobs (Redis deletes an empty list) and counts as
/// written to; anything else (nothing, a Jesque zset of delayed jobs, a key of a wrong type)
/// waits for its next write, so a key that is no list cannot wake slots in a loop.
async fn arm(
    fetch: &Fetch,
    con: &mut redis::aio::MultiplexedConnection,
    first: String,
    more: Option<&mut mpsc::UnboundedReceiver<String>>,
) -> redis::RedisResult<()> {
    let mut keys = vec![first];
    if let Some(rx) = more {
        while let Ok(k) = rx.try_recv() {
            keys.push(k);
        }
    }
    let types = track_reads(con, &keys).await?;
    for (k, t) in keys.iter().zip(types) {
        if t == "list" {
            fetch.invalidated(Some(k));
        }
    }
    Ok(())
}

/// The keys an `invalidate` message names (`None`: every key, after a flush).
fn invalidated_keys(data: &[Value]) -> Option<Vec<String>> {
    match data.first() {
        Some(Value::Array(keys)) => Some(
            keys.iter()
                .filter_map(|k| match k {
                    Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
                    _ => None,
                })
                .collect(),
        ),
        _ => None,
    }
}

/// Whether `e` says the server (or the user's ACL, or a proxy) cannot do tracking at all.
fn unsupported(e: &redis::RedisError) -> bool {
    matches!(e.kind(), redis::ErrorKind::RESP3NotSupported)
        || matches!(e.code(), Some("NOPERM" | "ERR"))
}

/// Hands the keys of one `invalidate` message to the wake-up state (`None`: every key).
fn deliver(fetch: &Fetch, keys: Option<&[String]>) {
    match keys {
        Some(keys) => {
            for k in keys {
                fetch.invalidated(Some(k));
            }
        }
        None => fetch.invalidated(None),
    }
}
