//! Pipelines on a spread namespace: one pipeline per hash slot, the replies put back in order.
//!
//! A cluster connection sends a pipeline whole to the owner of its first key's slot; a command
//! of the pipeline whose key lives in another slot owned elsewhere is answered `MOVED` (not
//! run). On a namespace spread over the slots ([`crate::keys::Keys::spread`]) a reader that
//! asks for keys of several queues, workers or shared counters in one round trip goes through
//! [`PerSlot`]: the pipeline is split into one pipeline per slot (keyless commands such as
//! `TIME` in one of their own), sent concurrently, and the replies are reassembled in the
//! order of the commands, so the caller's typed `query_async` reads them as before. Anywhere
//! else (one server, Sentinel, a hash-tagged namespace) every request is passed through
//! unchanged: not one command more. A transaction (`MULTI`) is never split: on a spread
//! namespace its caller sends single-slot steps.

use super::Conn;
use crate::keys::{hash_slot, Keys};
use futures::StreamExt;
use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};

/// Per-slot pipelines in flight at once.
const CONCURRENCY: usize = 16;

/// A connection that sends each pipeline as one pipeline per slot on a spread namespace (see
/// the module's doc); a plain pass-through otherwise.
#[derive(Clone)]
pub(crate) struct PerSlot {
    /// The shared connection.
    con: Conn,
    /// Whether pipelines are split.
    spread: bool,
}

impl PerSlot {
    /// `con` for the keys `keys` (split only when they are spread).
    pub(crate) fn new(con: Conn, keys: &Keys) -> Self {
        PerSlot {
            con,
            spread: keys.is_spread(),
        }
    }
}

/// The key a cluster routes `cmd` by: its first argument, the first declared key of a script
/// or function call, none for the server commands the dashboard and the CLI send (`TIME`,
/// `INFO`, `PING`, `FUNCTION`, `SCRIPT`, …).
fn routing_key(cmd: &Cmd) -> Option<&[u8]> {
    let mut args = cmd.args_iter().filter_map(|a| match a {
        redis::Arg::Simple(b) => Some(b),
        _ => None,
    });
    let name = args.next()?.to_ascii_uppercase();
    match name.as_slice() {
        b"TIME" | b"INFO" | b"PING" | b"ECHO" | b"FUNCTION" | b"SCRIPT" | b"CLUSTER"
        | b"CLIENT" | b"CONFIG" | b"DBSIZE" | b"COMMAND" | b"ROLE" | b"SCAN" | b"KEYS" => None,
        b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" => {
            let _name = args.next()?;
            let n: usize = std::str::from_utf8(args.next()?).ok()?.parse().ok()?;
            if n == 0 {
                None
            } else {
                args.next()
            }
        }
        _ => args.next(),
    }
}

/// The commands of `pipeline` grouped by slot, in order of first appearance; each group the
/// indexes of its commands, in order.
fn groups(pipeline: &Pipeline) -> Vec<(Option<u16>, Vec<usize>)> {
    let mut out: Vec<(Option<u16>, Vec<usize>)> = Vec::new();
    for (i, cmd) in pipeline.cmd_iter().enumerate() {
        let slot = routing_key(cmd).map(hash_slot);
        match out.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, v)) => v.push(i),
            None => out.push((slot, vec![i])),
        }
    }
    out
}

impl ConnectionLike for PerSlot {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.con.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        if !self.spread || pipeline.is_transaction() || offset != 0 || count != pipeline.len() {
            return self.con.req_packed_commands(pipeline, offset, count);
        }
        let groups = groups(pipeline);
        if groups.len() <= 1 {
            return self.con.req_packed_commands(pipeline, offset, count);
        }
        Box::pin(async move {
            let cmds: Vec<&Cmd> = pipeline.cmd_iter().collect();
            let subs: Vec<(Vec<usize>, Pipeline)> = groups
                .into_iter()
                .map(|(_, idx)| {
                    let mut p = Pipeline::with_capacity(idx.len());
                    for &i in &idx {
                        p.add_command(cmds[i].clone());
                    }
                    (idx, p)
                })
                .collect();
            let sends: Vec<futures::future::BoxFuture<'static, _>> = subs
                .iter()
                .map(|(idx, p)| {
                    let (mut con, p, n) = (self.con.clone(), p.clone(), idx.len());
                    let send: futures::future::BoxFuture<'static, _> =
                        Box::pin(async move { con.req_packed_commands(&p, 0, n).await });
                    send
                })
                .collect();
            let replies: Vec<redis::RedisResult<Vec<Value>>> = futures::stream::iter(sends)
                .buffered(CONCURRENCY)
                .collect()
                .await;
            let mut out = vec![Value::Nil; count];
            for ((idx, _), reply) in subs.iter().zip(replies) {
                let values = reply?;
                if values.len() != idx.len() {
                    return Err(RedisError::from((
                        ErrorKind::Client,
                        "a per-slot pipeline answered the wrong number of replies",
                    )));
                }
                for (&i, v) in idx.iter().zip(values) {
                    out[i] = v;
                }
            }
            Ok(out)
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_grouped_by_the_slot_of_their_key() {
        let mut p = redis::pipe();
        p.cmd("TIME")
            .get("ns:stat:processed")
            .llen("ns:queue:a")
            .get("ns:stat:processed")
            .cmd("FCALL")
            .arg("f")
            .arg(1)
            .arg("ns:queue:a")
            .cmd("FCALL")
            .arg("f")
            .arg(0);
        let g = groups(&p);
        assert_eq!(
            g,
            vec![
                (None, vec![0, 5]),
                (Some(hash_slot(b"ns:stat:processed")), vec![1, 3]),
                (Some(hash_slot(b"ns:queue:a")), vec![2, 4]),
            ]
        );
    }
}
