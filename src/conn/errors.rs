//! What a Redis error means for the step that got it, and how to say so.
//!
//! Every failed Redis step is put in one of three classes and acted on by class:
//!
//! * [`Class::Transient`] — the connection or the server is away or not ready (I/O errors,
//!   timeouts, `LOADING`, `BUSY`, `MASTERDOWN`, `READONLY` while a failover promotes a replica,
//!   `TRYAGAIN`, `CLUSTERDOWN`, `maxclients` reached): retry with back-off, logged once per
//!   outage;
//! * [`Class::RefusedWrite`] — `OOM`: Redis is up but refuses writes until memory is freed:
//!   retry with back-off, and say so (not "unreachable");
//! * [`Class::Permanent`] — retrying cannot help until someone repairs something: a key of the
//!   wrong type (`WRONGTYPE`, or resq's own checks' `NOTINTEGER` / `BADCLAIM`), a script error,
//!   a missing permission (`NOPERM`), refused credentials. The job stays where it is in Redis,
//!   the error is reported with what to repair at a bounded rate ([`Reporter`]), the other slots
//!   go on, and shutdown is never held by it.
//!
//! [`describe`] says what is wrong in words an operator can act on: `WRONGTYPE at
//! resque:failed: it is a string, not a list`, `Redis refuses writes (OOM)`, `redis
//! 127.0.0.1:6380: connection refused`.

use redis::{ErrorKind, RedisError, ServerErrorKind};
use std::time::{Duration, Instant};

/// How a failed Redis step is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Retry with back-off: the server or the connection will come back by itself.
    Transient,
    /// Redis refuses writes (`OOM`): retry with back-off until memory is freed.
    RefusedWrite,
    /// Needs a repair: report it at a bounded rate, keep the job where it is.
    Permanent,
}

/// The class of `e`; a pipeline's failure is the worst class among its commands' errors.
pub(crate) fn classify(e: &RedisError) -> Class {
    if let Some(parts) = pipeline_parts(e) {
        let classes: Vec<Class> = parts.iter().map(classify).collect();
        for worst in [Class::Permanent, Class::RefusedWrite] {
            if classes.contains(&worst) {
                return worst;
            }
        }
        return Class::Transient;
    }
    if let Some(code) = e.code() {
        match code {
            "OOM" => return Class::RefusedWrite,
            "BUSY" | "LOADING" | "MASTERDOWN" | "READONLY" | "TRYAGAIN" | "CLUSTERDOWN"
            | "MOVED" | "ASK" | "UNBLOCKED" | "NOSCRIPT" | "NOREPLICAS" | "BUSYKEY" => {
                return Class::Transient
            }
            "WRONGTYPE" | "NOPERM" | "NOAUTH" | "WRONGPASS" | "NOTINTEGER" | "BADCLAIM"
            | "EXECABORT" | "CROSSSLOT" => return Class::Permanent,
            _ => {}
        }
    }
    if max_clients(e) {
        return Class::Transient;
    }
    match e.kind() {
        ErrorKind::Io
        | ErrorKind::ClusterConnectionNotFound
        | ErrorKind::MasterNameNotFoundBySentinel
        | ErrorKind::NoValidReplicasFoundBySentinel
        | ErrorKind::Server(ServerErrorKind::BusyLoading)
        | ErrorKind::Server(ServerErrorKind::TryAgain)
        | ErrorKind::Server(ServerErrorKind::ClusterDown)
        | ErrorKind::Server(ServerErrorKind::MasterDown)
        | ErrorKind::Server(ServerErrorKind::ReadOnly)
        | ErrorKind::Server(ServerErrorKind::Moved)
        | ErrorKind::Server(ServerErrorKind::Ask)
        | ErrorKind::Server(ServerErrorKind::NoScript) => Class::Transient,
        // resq's own client-side refusals: `WAIT` not acknowledged by enough replicas.
        ErrorKind::Client if e.to_string().contains("replicas") => Class::Transient,
        _ if e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal() => {
            Class::Transient
        }
        _ => Class::Permanent,
    }
}

/// Whether `e` is the server's "max number of clients reached".
fn max_clients(e: &RedisError) -> bool {
    e.to_string().contains("max number of clients")
}

/// Where the process's connections go, for messages that do not know their connection (set
/// when an endpoint is opened).
static TARGET: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// Records where connections go (`127.0.0.1:6380`) for [`describe_here`].
pub(crate) fn set_target(label: &str) {
    *TARGET.lock().unwrap_or_else(|p| p.into_inner()) = label.to_string();
}

/// [`describe`] with the target of the process's endpoint.
pub(crate) fn describe_here(e: &RedisError) -> String {
    let target = TARGET.lock().unwrap_or_else(|p| p.into_inner()).clone();
    describe(e, if target.is_empty() { "server" } else { &target })
}

/// A Redis error for an error message: [`describe_here`], with `redis: ` before a server reply
/// it does not reword.
pub(crate) fn display(e: &RedisError) -> String {
    let described = describe_here(e);
    if described == e.to_string() {
        format!("redis: {described}")
    } else {
        described
    }
}

/// Redis's own `WRONGTYPE` reply does not say which key: for a plain command (its key is its
/// first argument) the error is given the key's name, so every report can say `WRONGTYPE at
/// <key>`. Scripts' errors already name their keys.
pub(crate) fn name_the_key(e: RedisError, cmd: &redis::Cmd) -> RedisError {
    named(&e, cmd).unwrap_or(e)
}

/// `e` naming the key of `cmd`, when `e` is Redis's anonymous `WRONGTYPE` for a plain command.
fn named(e: &RedisError, cmd: &redis::Cmd) -> Option<RedisError> {
    if e.code() != Some("WRONGTYPE") || !detail(e).starts_with("Operation against") {
        return None;
    }
    let mut args = cmd.args_iter().filter_map(|a| match a {
        redis::Arg::Simple(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    });
    let (name, key) = (args.next()?, args.next()?);
    let name = name.to_ascii_uppercase();
    if matches!(
        name.as_str(),
        "EVAL" | "EVALSHA" | "FCALL" | "EVAL_RO" | "EVALSHA_RO"
    ) {
        return None;
    }
    Some(redis::make_extension_error(
        "WRONGTYPE".into(),
        Some(format!("{key} holds the wrong kind of value for {name}")),
    ))
}

/// [`name_the_key`] for the replies of a pipeline: each `WRONGTYPE` reply names the key of the
/// command it answers (`replies` are one per command, or, for a transaction, `EXEC`'s one
/// array of them), so the error redis-rs gathers from them says which keys are wrong.
pub(crate) fn name_the_keys(replies: &mut [redis::Value], pipeline: &redis::Pipeline) {
    let replies = match replies {
        [redis::Value::Array(inner)] if pipeline.is_transaction() => inner.as_mut_slice(),
        all => all,
    };
    for (reply, cmd) in replies.iter_mut().zip(pipeline.cmd_iter()) {
        let redis::Value::ServerError(se) = reply else {
            continue;
        };
        let Some(e) = named(&RedisError::from(se.clone()), cmd) else {
            continue;
        };
        if let Ok(se) = redis::ServerError::try_from(e) {
            *reply = redis::Value::ServerError(se);
        }
    }
}

/// The errors of a pipeline's commands, each an error of its own, when `e` is the one error
/// redis-rs gathers them into (`Pipeline failure: [(Index 1, …)]`); `None` for any other error.
fn pipeline_parts(e: &RedisError) -> Option<Vec<RedisError>> {
    let items = e.clone().into_server_errors()?;
    let parts: Vec<RedisError> = items
        .iter()
        .map(|(_, se)| RedisError::from(se.clone()))
        .collect();
    // A plain server error is handed back as a "pipeline" of itself.
    let alone = parts.len() == 1 && parts[0].to_string() == e.to_string();
    (!parts.is_empty() && !alone).then_some(parts)
}

/// What is wrong, for a log line: the class in words, the key or target, and the server's text.
/// `target` is where the connection goes (`host:port`).
pub(crate) fn describe(e: &RedisError, target: &str) -> String {
    if let Some(parts) = pipeline_parts(e) {
        let mut said: Vec<String> = Vec::new();
        for p in &parts {
            let d = describe(p, target);
            if !said.contains(&d) {
                said.push(d);
            }
        }
        return said.join("; ");
    }
    let text = e.to_string();
    match e.code() {
        Some("OOM") => return format!("Redis refuses writes (OOM): {}", detail(e)),
        Some("WRONGTYPE" | "NOTINTEGER" | "BADCLAIM") => return key_problem(e),
        Some("BUSY") => {
            return format!(
                "Redis is busy running a script (BUSY), retrying: {}",
                detail(e)
            )
        }
        Some("LOADING") => return "Redis is loading its dataset (LOADING), retrying".into(),
        Some("READONLY") => {
            return "connected to a replica (READONLY: a failover in progress?), retrying".into()
        }
        Some("MASTERDOWN") => return "the replica lost its master (MASTERDOWN), retrying".into(),
        Some("NOPERM") => {
            return format!(
                "the ACL user lacks a permission resq needs (NOPERM): {}",
                detail(e)
            )
        }
        _ => {}
    }
    if max_clients(e) {
        return format!("redis {target}: maxclients reached, connection refused by the server");
    }
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
        let cause = io_cause(e).unwrap_or(text);
        return format!("redis {target}: {cause}");
    }
    text
}

/// The server's text after the error code.
fn detail(e: &RedisError) -> String {
    e.detail()
        .map(str::to_string)
        .unwrap_or_else(|| e.to_string())
}

/// A key of the wrong type (or holding what resq's checks refuse), as `<CODE> at <key>: what it
/// is; how to repair`.
fn key_problem(e: &RedisError) -> String {
    let code = e.code().unwrap_or("WRONGTYPE");
    let detail = detail(e);
    // resq's checks write "<key> is a <type>, not a <want>" / "<key> holds …".
    let (key, rest) = match detail.split_once(' ') {
        Some((k, r)) if !k.is_empty() && (r.starts_with("is ") || r.starts_with("holds ")) => {
            (k.to_string(), r.to_string())
        }
        _ => return format!("{code}: {detail}"),
    };
    format!(
        "{code} at {key}: it {rest} (inspect it with `TYPE {key}`, then RENAME it aside or DEL \
         it)"
    )
}

/// The innermost I/O error message (`connection refused`), without repeated causes.
fn io_cause(e: &RedisError) -> Option<String> {
    let mut cause: &dyn std::error::Error = std::error::Error::source(e)?;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let s = cause.to_string();
    // std's "Connection refused (os error 111)" → "connection refused".
    let s = match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    };
    let mut chars = s.chars();
    Some(match chars.next() {
        Some(c) => c.to_lowercase().collect::<String>() + chars.as_str(),
        None => s,
    })
}

/// How often a lasting permanent error is reported again.
pub(crate) const REPORT_EVERY: Duration = Duration::from_secs(10);

/// Reports a lasting error at a bounded rate: the first occurrence at once, then at most once
/// per [`REPORT_EVERY`] with how many times it happened meanwhile, so an error that lasts is
/// never reported once and then silent, and never floods the log.
#[derive(Debug, Default)]
pub(crate) struct Reporter {
    /// When the last report was logged.
    last: Option<Instant>,
    /// Occurrences since then.
    since: u64,
}

impl Reporter {
    /// Counts one occurrence; returns how many happened since the last report (this one
    /// included) when a report is due now, `None` when it is not.
    pub(crate) fn due(&mut self) -> Option<u64> {
        self.since += 1;
        let now = Instant::now();
        match self.last {
            Some(t) if now.duration_since(t) < REPORT_EVERY => None,
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.since))
            }
        }
    }

    /// Forgets the error (it was repaired): the next occurrence is reported at once.
    pub(crate) fn reset(&mut self) {
        *self = Reporter::default();
    }

    /// Whether an error is being reported.
    pub(crate) fn active(&self) -> bool {
        self.last.is_some()
    }
}

/// Reporters shared by every task of the process, one per distinct problem: 64 slots stuck on
/// the same broken key make one report per [`REPORT_EVERY`], not 64.
static SHARED: std::sync::Mutex<Option<SharedReports>> = std::sync::Mutex::new(None);

/// Per problem: its reporter and the tasks that met it since the last report.
type SharedReports =
    std::collections::HashMap<String, (Reporter, std::collections::BTreeSet<String>)>;

/// Counts one occurrence of `problem` met by `who`; when a report is due, returns how many
/// times it happened since the last report and how many distinct tasks met it.
pub(crate) fn shared_due(problem: &str, who: &str) -> Option<(u64, usize)> {
    let mut g = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    let map = g.get_or_insert_with(Default::default);
    let (reporter, whom) = map.entry(problem.to_string()).or_default();
    whom.insert(who.to_string());
    let times = reporter.due()?;
    let n = whom.len();
    whom.clear();
    Some((times, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: &str, detail: &str) -> RedisError {
        redis::make_extension_error(code.to_string(), Some(detail.to_string()))
    }

    #[test]
    fn classes() {
        assert_eq!(
            classify(&server("OOM", "command not allowed")),
            Class::RefusedWrite
        );
        assert_eq!(classify(&server("BUSY", "script")), Class::Transient);
        assert_eq!(classify(&server("LOADING", "x")), Class::Transient);
        assert_eq!(
            classify(&server("WRONGTYPE", "k is a string, not a list")),
            Class::Permanent
        );
        assert_eq!(classify(&server("NOPERM", "no")), Class::Permanent);
        assert_eq!(
            classify(&server("ERR", "Error running script")),
            Class::Permanent
        );
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(classify(&io), Class::Transient);
    }

    #[test]
    fn descriptions_name_the_key_and_the_class() {
        let d = describe(
            &server("WRONGTYPE", "resque:failed is a string, not a list"),
            "x",
        );
        assert!(
            d.starts_with("WRONGTYPE at resque:failed: it is a string, not a list"),
            "{d}"
        );
        let d = describe(
            &server("OOM", "command not allowed when used memory > 'maxmemory'."),
            "x",
        );
        assert!(d.starts_with("Redis refuses writes (OOM)"), "{d}");
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(
            describe(&io, "127.0.0.1:6380"),
            "redis 127.0.0.1:6380: connection refused"
        );
    }

    /// Answers every pipeline with `replies`, naming their keys as `Conn` does.
    struct Replies(Vec<redis::Value>);

    impl redis::aio::ConnectionLike for Replies {
        fn req_packed_command<'a>(
            &'a mut self,
            _cmd: &'a redis::Cmd,
        ) -> redis::RedisFuture<'a, redis::Value> {
            Box::pin(async { Ok(redis::Value::Okay) })
        }

        fn req_packed_commands<'a>(
            &'a mut self,
            pipeline: &'a redis::Pipeline,
            _offset: usize,
            _count: usize,
        ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
            let mut replies = self.0.clone();
            name_the_keys(&mut replies, pipeline);
            Box::pin(async move { Ok(replies) })
        }

        fn get_db(&self) -> i64 {
            0
        }
    }

    #[tokio::test]
    async fn a_pipeline_failure_names_each_key() {
        let anonymous = || {
            let e = server(
                "WRONGTYPE",
                "Operation against a key holding the wrong kind of value",
            );
            redis::Value::ServerError(redis::ServerError::try_from(e).unwrap())
        };
        let mut con = Replies(vec![redis::Value::Array(vec![]), anonymous()]);
        let e = redis::pipe()
            .hgetall("ns:resq:limits")
            .hgetall("ns:resq:limits:set")
            .query_async::<()>(&mut con)
            .await
            .unwrap_err();
        let d = describe(&e, "x");
        assert!(
            d.starts_with(
                "WRONGTYPE at ns:resq:limits:set: it holds the wrong kind of value for HGETALL"
            ),
            "{d}"
        );
        assert_eq!(classify(&e), Class::Permanent);
        // Two keys: both named, once each.
        let mut con = Replies(vec![anonymous(), anonymous()]);
        let e = redis::pipe()
            .llen("ns:failed")
            .get("ns:stat:processed")
            .query_async::<()>(&mut con)
            .await
            .unwrap_err();
        let d = describe(&e, "x");
        assert!(
            d.contains("WRONGTYPE at ns:failed:") && d.contains("WRONGTYPE at ns:stat:processed:"),
            "{d}"
        );
        // A transaction's EXEC answers one array of replies.
        let mut replies = vec![redis::Value::Array(vec![redis::Value::Okay, anonymous()])];
        let mut pipe = redis::pipe();
        pipe.atomic().set("ns:a", 1).lpush("ns:b", 2);
        name_the_keys(&mut replies, &pipe);
        let redis::Value::Array(inner) = &replies[0] else {
            panic!("{replies:?}")
        };
        let redis::Value::ServerError(se) = &inner[1] else {
            panic!("{inner:?}")
        };
        assert_eq!(
            se.details(),
            Some("ns:b holds the wrong kind of value for LPUSH")
        );
    }

    #[test]
    fn reports_at_a_bounded_rate() {
        let mut r = Reporter::default();
        assert_eq!(r.due(), Some(1));
        assert_eq!(r.due(), None);
        assert_eq!(r.due(), None);
        r.last = Some(Instant::now() - REPORT_EVERY);
        assert_eq!(r.due(), Some(3));
    }
}
