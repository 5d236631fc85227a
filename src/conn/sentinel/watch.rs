//! Following the sentinels' failover events for one endpoint: a task per sentinel, subscribed
//! to `+failover-state-send-slaveof-noone` (the leader is about to promote a replica),
//! `+promoted-slave` and `+switch-master`, publishes the new master on the endpoint's
//! [`MasterHint`] as soon as the promoted replica answers `ROLE` as a master (holding the
//! endpoint's commands back until then, briefly) — before the
//! sentinels switch, and long before they reconfigure the old master, which meanwhile still
//! takes writes it will discard. Every connection of the endpoint reads the hint's epoch
//! before each command, so none sends another command to the old master.
//!
//! The tasks hold the hint weakly: they end once no connection of the endpoint is left (checked
//! every [`ALIVE_EVERY`]), and the next connection starts them again if they ended with their
//! runtime. A sentinel that is down is subscribed to again with back-off; the others' events
//! are enough (every sentinel publishes `+switch-master`, the leader the promotion).

use super::{HintState, MasterHint, Spec};
use crate::conn::node::split_addr;
use crate::conn::Backoff;
use futures::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisResult, Value};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// The events followed.
const EVENTS: [&str; 3] = [
    "+failover-state-send-slaveof-noone",
    "+promoted-slave",
    "+switch-master",
];
/// How often an idle subscription checks that its endpoint still has connections.
const ALIVE_EVERY: Duration = Duration::from_secs(1);
/// How long a replica being promoted is watched for saying it is master.
const PROMOTION_PATIENCE: Duration = Duration::from_secs(10);
/// How often it is asked meanwhile.
const ROLE_EVERY: Duration = Duration::from_millis(2);
/// How long connecting to a sentinel or a node may take.
const CONNECT: Duration = Duration::from_secs(5);

/// Starts following the sentinels for the endpoint of `hint`, unless it already is (in a
/// runtime: called when a connection is opened).
pub(super) fn start(spec: &Spec, hint: &MasterHint) {
    if hint.0.watching.swap(true, Ordering::AcqRel) {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        hint.0.watching.store(false, Ordering::Release);
        return;
    };
    let alive = Arc::new(Watching(Arc::downgrade(&hint.0)));
    for (host, port) in &spec.sentinels {
        rt.spawn(follow(spec.clone(), host.clone(), *port, alive.clone()));
    }
}

/// Shared by the tasks of one endpoint's watch: when the last one ends (no connection left, or
/// its runtime shut down), the endpoint's next connection starts the watch again.
struct Watching(Weak<HintState>);

impl Watching {
    fn hint(&self) -> Option<MasterHint> {
        self.0.upgrade().map(MasterHint)
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        if let Some(h) = self.0.upgrade() {
            h.watching.store(false, Ordering::Release);
        }
    }
}

/// Follows one sentinel's events until the endpoint is gone.
async fn follow(spec: Spec, host: String, port: u16, alive: Arc<Watching>) {
    let mut backoff = Backoff::new(Duration::from_secs(5));
    loop {
        if alive.0.strong_count() == 0 {
            return;
        }
        match subscribe(&spec, &host, port).await {
            Ok(pubsub) => {
                backoff = Backoff::new(Duration::from_secs(5));
                let mut stream = pubsub.into_on_message();
                loop {
                    tokio::select! {
                        m = stream.next() => match m {
                            Some(m) => {
                                let Some(hint) = alive.hint() else { return };
                                let payload = String::from_utf8_lossy(m.get_payload_bytes());
                                on_event(&spec, &hint, m.get_channel_name(), &payload);
                            }
                            None => break,
                        },
                        _ = tokio::time::sleep(ALIVE_EVERY) => {
                            if alive.0.strong_count() == 0 {
                                return;
                            }
                        }
                    }
                }
                tracing::debug!(sentinel = %format!("{host}:{port}"), "sentinel: event subscription lost; subscribing again");
            }
            Err(e) => {
                tracing::debug!(sentinel = %format!("{host}:{port}"), error = %e, "sentinel: cannot follow this sentinel's events; trying again");
            }
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// A subscription to [`EVENTS`] on the sentinel at `host:port`.
async fn subscribe(spec: &Spec, host: &str, port: u16) -> RedisResult<redis::aio::PubSub> {
    let client = spec.sentinel(host, port)?;
    let mut pubsub = tokio::time::timeout(CONNECT, client.get_async_pubsub())
        .await
        .map_err(|_| crate::conn::bound::timed_out(CONNECT, "no connection"))??;
    for event in EVENTS {
        pubsub.subscribe(event).await?;
    }
    Ok(pubsub)
}

/// A failover event about the master followed.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    /// The leader is about to promote `new` (`+failover-state-send-slaveof-noone`).
    Promoting { new: String, old: String },
    /// The leader saw `new` report itself master (`+promoted-slave`), or the sentinels
    /// switched to it (`+switch-master`).
    Promoted { new: String, old: String },
}

/// Reads an event of the master named `name`: `+switch-master <name> <old ip> <old port> <new
/// ip> <new port>`; the others `slave <ip>:<port> <ip> <port> @ <name> <master ip> <master
/// port>`.
fn parse(channel: &str, payload: &str, name: &str) -> Option<Event> {
    let w: Vec<&str> = payload.split_whitespace().collect();
    let addr = |ip: &str, port: &str| format!("{ip}:{port}");
    match channel {
        "+switch-master" => {
            let [n, oip, oport, nip, nport] = w[..] else {
                return None;
            };
            (n == name).then(|| Event::Promoted {
                new: addr(nip, nport),
                old: addr(oip, oport),
            })
        }
        "+promoted-slave" | "+failover-state-send-slaveof-noone" => {
            let ["slave", _, ip, port, "@", n, mip, mport] = w[..] else {
                return None;
            };
            if n != name {
                return None;
            }
            let (new, old) = (addr(ip, port), addr(mip, mport));
            Some(if channel == "+promoted-slave" {
                Event::Promoted { new, old }
            } else {
                Event::Promoting { new, old }
            })
        }
        _ => None,
    }
}

fn on_event(spec: &Spec, hint: &MasterHint, channel: &str, payload: &str) {
    match parse(channel, payload, &spec.master) {
        Some(Event::Promoted { new, old }) => publish(spec, hint, &new, &old),
        Some(Event::Promoting { new, old }) => {
            tokio::spawn(await_promotion(spec.clone(), hint.clone(), new, old));
        }
        None => {}
    }
}

/// Publishes that the master moved from `old` to `new`.
fn publish(spec: &Spec, hint: &MasterHint, new: &str, old: &str) {
    if hint.switched(new, old) {
        tracing::warn!(master = %new, from = %old, name = %spec.master, "sentinel: the master moved (the sentinels promoted a replica); every connection leaves the old one before its next command");
    }
}

/// Asks `new`, the replica being promoted, for its role until it says master (then publishes
/// it), for up to [`PROMOTION_PATIENCE`] (a failover that failed leaves it a replica); holds the
/// endpoint's commands back meanwhile, for up to [`super::PAUSE_MAX`].
async fn await_promotion(spec: Spec, hint: MasterHint, new: String, old: String) {
    let Some((host, port)) = split_addr(&new) else {
        return;
    };
    let Ok(client) = spec.node.client(&host, port) else {
        return;
    };
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT))
        .set_response_timeout(Some(CONNECT));
    // Nothing more to the old master while the replica is promoted: what it took now, it
    // would discard. Commands go on (to the old master) if the promotion takes longer.
    hint.pause();
    let started = tokio::time::Instant::now();
    let deadline = started + PROMOTION_PATIENCE;
    let mut con = None;
    while tokio::time::Instant::now() < deadline {
        if started.elapsed() >= super::PAUSE_MAX {
            hint.resume();
        }
        if hint.get().as_deref() == Some(new.as_str()) {
            hint.resume();
            return;
        }
        if con.is_none() {
            con = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .ok();
        }
        if let Some(c) = con.as_mut() {
            match is_master(c).await {
                Ok(true) => return publish(&spec, &hint, &new, &old),
                Ok(false) => {}
                Err(_) => con = None,
            }
        }
        tokio::time::sleep(ROLE_EVERY).await;
    }
    hint.resume();
}

/// Whether the node says it is a master (`ROLE`).
pub(super) async fn is_master(con: &mut MultiplexedConnection) -> RedisResult<bool> {
    let role: Vec<Value> = redis::cmd("ROLE").query_async(con).await?;
    Ok(match role.first() {
        Some(Value::BulkString(b)) => b == b"master",
        Some(Value::SimpleString(s)) => s == "master",
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_of_the_master_followed() {
        let switch = parse(
            "+switch-master",
            "resq 127.0.0.1 6380 127.0.0.1 6381",
            "resq",
        );
        assert_eq!(
            switch,
            Some(Event::Promoted {
                new: "127.0.0.1:6381".into(),
                old: "127.0.0.1:6380".into()
            })
        );
        let p = "slave 127.0.0.1:6381 127.0.0.1 6381 @ resq 127.0.0.1 6380";
        assert_eq!(
            parse("+promoted-slave", p, "resq"),
            Some(Event::Promoted {
                new: "127.0.0.1:6381".into(),
                old: "127.0.0.1:6380".into()
            })
        );
        assert_eq!(
            parse("+failover-state-send-slaveof-noone", p, "resq"),
            Some(Event::Promoting {
                new: "127.0.0.1:6381".into(),
                old: "127.0.0.1:6380".into()
            })
        );
        // Another master's, or another shape.
        assert_eq!(parse("+promoted-slave", p, "other"), None);
        assert_eq!(parse("+switch-master", "resq 127.0.0.1 6380", "resq"), None);
        assert_eq!(parse("+sdown", p, "resq"), None);
    }
}
