//! Invalidations: Redis tells the process which queue keys anyone wrote, so idle slots wake at
//! once without polling, whatever the number of queues.
//!
//! One dedicated RESP3 connection per process runs `CLIENT TRACKING ON BCAST PREFIX
//! <ns>:queue: PREFIX <ns>:resq:limits PREFIX <ns>:resq:paused_queues` (the last two: limits
//! changed, a queue paused or resumed; see [`crate::limits`]). In broadcast mode Redis pushes, after every command that modified a key under
//! the prefix, an `invalidate` message naming the keys (batched per event-loop turn, so a
//! busy queue costs a message per turn, not per job). Each one goes to
//! [`super::fetch::Fetch::invalidated`]: a write to one of this process's queues wakes a parked
//! slot and puts the queue back among those reserves poll.
//!
//! Available with Redis ≥ 6 on one server or through Sentinel. Not with Redis Cluster (tracking
//! is per node), an ACL user without the `CLIENT` command, or a proxy that does not speak RESP3:
//! then the process logs it once and falls back to its blocking watchers and the periodic
//! reserve (see [`super::fetch`]). A lost tracking connection is logged, turns the fallback on
//! until it is back, and on reconnection every queue is polled again, so nothing written while
//! it was down is missed.

use super::fetch::Fetch;
use crate::conn::errors::{self, Reporter};
use crate::conn::{Backoff, Endpoint};
use redis::{PushKind, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How often the tracking connection is checked while nothing arrives on it.
const PING_EVERY: Duration = Duration::from_secs(15);

/// The shortest interval between pings (a server closing idle clients sooner is not worth
/// keeping a connection to).
const MIN_PING: Duration = Duration::from_millis(250);

/// How long to wait before asking again after the server refused tracking.
const UNAVAILABLE_RETRY: Duration = Duration::from_secs(300);

/// Keeps the tracking connection up until `stop` turns true.
pub(crate) async fn run(
    fetch: Arc<Fetch>,
    endpoint: Endpoint,
    prefixes: Vec<String>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Backoff::new(Duration::from_secs(5));
    let mut lost = Reporter::default();
    let mut told_unavailable = false;
    let mut ping_every = PING_EVERY;
    loop {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let prefix_refs: Vec<&str> = prefixes.iter().map(String::as_str).collect();
        let connected = tokio::select! {
            c = endpoint.tracking(&prefix_refs, tx) => c,
            _ = stop.wait_for(|s| *s) => return,
        };
        if !matches!(connected, Ok(Some(_))) {
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
                    if !told_unavailable {
                        tracing::info!(error = %e, "Redis does not offer CLIENT TRACKING here; idle slots are woken by blocking watchers (up to {} queues) and a reserve every INTERVAL", super::fetch::MAX_WATCHED);
                        told_unavailable = true;
                    }
                    UNAVAILABLE_RETRY
                } else {
                    if let Some(times) = lost.due() {
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
        fetch.set_tracking(true);
        fetch.tracking_tried.notify_one();
        let since = std::time::Instant::now();
        if lost.active() {
            tracing::info!("invalidation tracking reconnected");
        }
        lost.reset();
        backoff = Backoff::new(Duration::from_secs(5));
        let why = loop {
            let event = tokio::select! {
                msg = rx.recv() => Some(msg),
                _ = tokio::time::sleep(ping_every) => None,
                _ = stop.wait_for(|s| *s) => return,
            };
            match event {
                Some(Some(info)) => match info.kind {
                    PushKind::Invalidate => deliver(&fetch, &info.data),
                    PushKind::Disconnection => break "the connection closed".to_string(),
                    _ => {}
                },
                Some(None) => break "the connection closed".to_string(),
                None => {
                    let ping: redis::RedisResult<()> =
                        redis::cmd("PING").query_async(&mut con).await;
                    if let Err(e) = ping {
                        break errors::describe(&e, endpoint.label());
                    }
                }
            }
        };
        fetch.set_tracking(false);
        // A server `timeout` (or a proxy's) closes a connection that sends nothing: ping more
        // often than it lived.
        let lived = since.elapsed();
        if lived < ping_every {
            ping_every = (lived / 2).max(MIN_PING);
        }
        if let Some(times) = lost.due() {
            tracing::warn!(times, "invalidation tracking lost its connection ({why}); falling back to watchers until it is back");
        }
    }
}

/// Whether `e` says the server (or the user's ACL, or a proxy) cannot do tracking at all.
fn unsupported(e: &redis::RedisError) -> bool {
    matches!(e.kind(), redis::ErrorKind::RESP3NotSupported)
        || matches!(e.code(), Some("NOPERM" | "ERR"))
}

/// Hands the keys of one `invalidate` message to the wake-up state (`nil`: every key).
fn deliver(fetch: &Fetch, data: &[Value]) {
    match data.first() {
        Some(Value::Array(keys)) => {
            for k in keys {
                if let Value::BulkString(b) = k {
                    if let Ok(key) = std::str::from_utf8(b) {
                        fetch.invalidated(Some(key));
                    }
                }
            }
        }
        _ => fetch.invalidated(None),
    }
}
