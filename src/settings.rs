//! What every settings struct shares ([`crate::Config`], [`crate::conn::RedisOptions`],
//! [`crate::scheduler::SchedulerConfig`], the CLI's global flags): where Redis is by default,
//! and the text forms of values as Resque's tooling writes them, each error naming its
//! variable. A leaf: it imports nothing but the error type, so the lowest layer may read its
//! settings with it.

use crate::error::{Error, Result};
use std::time::Duration;

/// Default Redis URL (what Ruby's redis client uses when nothing is set).
pub(crate) const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// Default namespace of every Resque-family peer.
pub(crate) const DEFAULT_NAMESPACE: &str = "resque";

/// `RESQ_FLOW_BUDGET`: a per-call workflow budget smaller than the library's 10,000 (a cancel
/// and the prune round's settling pass it; 1 to 10,000), so the paths that go on over later
/// calls can be tried with small trees. '' (the library's own) when unset or not a number.
pub(crate) fn flow_budget() -> String {
    std::env::var("RESQ_FLOW_BUDGET")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|n| (1..=10_000).contains(n))
        .map_or_else(String::new, |n| n.to_string())
}

/// Seconds as Ruby gives them (`5`, `0.1`).
pub(crate) fn parse_secs(var: &'static str, v: &str) -> Result<Duration> {
    let f: f64 = v.trim().parse().map_err(|_| Error::Config {
        var,
        message: format!("{v:?} is not a number of seconds"),
    })?;
    Duration::try_from_secs_f64(f).map_err(|_| Error::Config {
        var,
        message: format!("{v:?} is not a non-negative number of seconds"),
    })
}

/// A boolean as Resque's tooling writes them (`1`/`true`/`yes`; `0`/`false`/`no`/empty).
pub(crate) fn parse_bool(var: &'static str, v: &str) -> Result<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Ok(true),
        "" | "0" | "false" | "no" => Ok(false),
        _ => Err(Error::Config {
            var,
            message: format!("{v:?} is not a boolean (true/false)"),
        }),
    }
}
