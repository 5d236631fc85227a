//! Worker configuration: Resque's environment variables, builder methods and CLI flags all set
//! the same [`Config`].
//!
//! It lives with the worker it configures: the launcher reads it, and its defaults are the
//! worker's and the tracked jobs' own. The handles of the lower layers are built from one here
//! ([`Client::from_config`], [`Admin::from_config`], [`SchedulerConfig::from_config`]), so
//! they need not know the type.

use crate::admin::Admin;
use crate::client::Client;
use crate::conn::RedisOptions;
use crate::error::{Error, Result};
use crate::queues::QueueList;
use crate::scheduler::SchedulerConfig;
use crate::settings::{parse_bool, parse_secs, DEFAULT_NAMESPACE, DEFAULT_REDIS_URL};
use std::time::Duration;

/// Everything a worker process needs to know: the one place every setting lives (the
/// environment is read only by [`Config::from_env`]). Its `Debug` output hides the URL's
/// password.
///
/// ```
/// use resq::{Config, QueueList};
/// use std::time::Duration;
///
/// let mut config = Config::default();
/// config.redis_url = "rediss://redis.internal:6380/2".into();
/// config.queues = QueueList::parse("critical,default").unwrap();
/// config.concurrency = 8;
/// config.term_timeout = Duration::from_secs(20);
/// config.redis.tls_ca = Some("/etc/ssl/redis-ca.pem".into());
/// assert!(format!("{config:?}").contains("redis.internal"));
/// ```
#[derive(Clone)]
pub struct Config {
    /// `REDIS_URL`.
    pub redis_url: String,
    /// `RESQUE_NAMESPACE`.
    pub namespace: String,
    /// `QUEUES` / `QUEUE`.
    pub queues: QueueList,
    /// `CONCURRENCY`: slots in this process.
    pub concurrency: usize,
    /// `INTERVAL`: the fallback poll period (Ruby's default 5 s); also how often a paused or
    /// wildcard worker re-reads Redis.
    pub interval: Duration,
    /// `HEARTBEAT_INTERVAL`: how often every slot's heartbeat is written (Ruby: 60 s).
    pub heartbeat_interval: Duration,
    /// `RESQUE_TERM_TIMEOUT`: how long TERM/INT wait for running jobs before aborting them.
    pub term_timeout: Duration,
    /// `JOB_TIMEOUT`: default per-job time limit (none by default).
    pub job_timeout: Option<Duration>,
    /// `RESQ_COUNT_FAILED_AS_PROCESSED`: whether a failed job also counts in `stat:processed`
    /// (Ruby does; Jesque, node-resque and goworker do not). Default: true.
    pub count_failed_as_processed: bool,
    /// The host name used in worker ids (default: the machine's).
    pub hostname: String,
    /// `RESQ_AT_LEAST_ONCE`: a job interrupted by a crash (found by pruning), by TERM/INT
    /// after the term timeout, or by USR1 goes back to the head of its queue with its exact
    /// bytes instead of becoming a failure entry, so it may run twice. Default: false (Ruby's
    /// at-most-once semantics).
    pub at_least_once: bool,
    /// `RESQ_PRUNE`: whether this process prunes dead workers (at start and every minute, under
    /// Ruby's lock). Default: true.
    pub prune: bool,
    /// `RESQ_PRUNE_AFTER`: how old a heartbeat must be before its worker is pruned (Ruby's
    /// `Resque.prune_interval`, 300 s). Never below 300 s, so resq never prunes a worker a Ruby
    /// pruner would keep; raise it if your Ruby workers set a larger `prune_interval`.
    pub prune_after: Duration,
    /// `METRICS_ADDR`: serve Prometheus metrics, `/healthz` and `/readyz` on this address
    /// (e.g. `127.0.0.1:9100`). Default: off.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// `JESQUE_DELAYED_QUEUES`: queues (comma list) to run as Jesque delayed/recurring zset
    /// queues, when they are in the queue list (see `worker::jesque`). Default: none.
    pub jesque_delayed_queues: Vec<String>,
    /// `RESQ_SCHEDULER`: run the resque-scheduler-compatible scheduler in this process (see
    /// `scheduler`). Default: false.
    pub scheduler: bool,
    /// The scheduler's own settings (`RESQ_SCHEDULER_INTERVAL`, `LOCK_TIMEOUT`,
    /// `RESQ_SCHEDULER_TZ`, …; see [`SchedulerConfig`]), used when `scheduler` is on. Its
    /// URL, namespace, host name and connection options are replaced by this config's.
    pub schedule: SchedulerConfig,
    /// Connection settings beyond the URL: Cluster, TLS files, `WAIT` (see [`RedisOptions`]).
    pub redis: RedisOptions,
    /// `RESQ_JOB_TTL`: how long a tracked job's finished record is kept ([`crate::jobs`];
    /// a handler may set its own). Default: 24 h; 0 keeps records until purged.
    pub job_ttl: Duration,
    /// `RESQ_RESULT_MAX`: the largest result a tracked job may keep (bytes of JSON). Default:
    /// 64 KiB.
    pub result_max: usize,
    /// `RESQ_MAX_PAYLOAD`: the largest payload a slot takes, in bytes; a larger one becomes a
    /// `Resq::PayloadTooLarge` failure entry stating its size (not its bytes). Default: Redis's
    /// own largest string, 512 MiB.
    pub max_payload: u64,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("redis_url", &crate::conn::Redacted(&self.redis_url))
            .field("namespace", &self.namespace)
            .field("queues", &self.queues)
            .field("concurrency", &self.concurrency)
            .field("interval", &self.interval)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("term_timeout", &self.term_timeout)
            .field("job_timeout", &self.job_timeout)
            .field("count_failed_as_processed", &self.count_failed_as_processed)
            .field("hostname", &self.hostname)
            .field("at_least_once", &self.at_least_once)
            .field("prune", &self.prune)
            .field("prune_after", &self.prune_after)
            .field("metrics_addr", &self.metrics_addr)
            .field("jesque_delayed_queues", &self.jesque_delayed_queues)
            .field("scheduler", &self.scheduler)
            .field("schedule", &self.schedule)
            .field("redis", &self.redis)
            .field("job_ttl", &self.job_ttl)
            .field("result_max", &self.result_max)
            .field("max_payload", &self.max_payload)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            redis_url: DEFAULT_REDIS_URL.to_string(),
            namespace: DEFAULT_NAMESPACE.to_string(),
            // A literal single queue always parses.
            queues: QueueList::parse("default").unwrap_or_else(|_| unreachable!()),
            concurrency: 1,
            interval: Duration::from_secs(5),
            heartbeat_interval: Duration::from_secs(60),
            term_timeout: Duration::from_secs(4),
            job_timeout: None,
            count_failed_as_processed: true,
            hostname: crate::identity::hostname(),
            at_least_once: false,
            prune: true,
            prune_after: Duration::from_secs(300),
            metrics_addr: None,
            jesque_delayed_queues: Vec::new(),
            scheduler: false,
            schedule: SchedulerConfig::default(),
            redis: RedisOptions::default(),
            max_payload: super::step::DEFAULT_MAX_PAYLOAD,
            job_ttl: crate::jobs::DEFAULT_TTL,
            result_max: crate::jobs::DEFAULT_RESULT_MAX,
        }
    }
}

impl Config {
    /// Reads the environment over the defaults; a malformed value is an error naming its
    /// variable.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads settings through `get` (the environment, or a test's map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut c = Config {
            redis: RedisOptions::from_lookup(&get)?,
            schedule: SchedulerConfig::from_lookup(&get)?,
            ..Config::default()
        };
        if let Some(v) = get("REDIS_URL") {
            c.redis_url = crate::conn::parse_url(&v, &c.redis)?;
        }
        if let Some(v) = get("RESQUE_NAMESPACE") {
            c.namespace = v;
        }
        if let Some(v) = get("QUEUES").or_else(|| get("QUEUE")) {
            c.queues = QueueList::parse(&v)?;
        }
        if let Some(v) = get("CONCURRENCY") {
            c.concurrency = parse_count("CONCURRENCY", &v)?;
        }
        if let Some(v) = get("INTERVAL") {
            c.interval = parse_secs("INTERVAL", &v)?;
        }
        if let Some(v) = get("HEARTBEAT_INTERVAL") {
            c.heartbeat_interval = parse_secs("HEARTBEAT_INTERVAL", &v)?;
        }
        if let Some(v) = get("RESQUE_TERM_TIMEOUT") {
            c.term_timeout = parse_secs("RESQUE_TERM_TIMEOUT", &v)?;
        }
        if let Some(v) = get("JOB_TIMEOUT") {
            c.job_timeout = Some(parse_secs("JOB_TIMEOUT", &v)?);
        }
        if let Some(v) = get("RESQ_COUNT_FAILED_AS_PROCESSED") {
            c.count_failed_as_processed = parse_bool("RESQ_COUNT_FAILED_AS_PROCESSED", &v)?;
        }
        if let Some(v) = get("RESQ_AT_LEAST_ONCE") {
            c.at_least_once = parse_bool("RESQ_AT_LEAST_ONCE", &v)?;
        }
        if let Some(v) = get("RESQ_PRUNE") {
            c.prune = parse_bool("RESQ_PRUNE", &v)?;
        }
        if let Some(v) = get("RESQ_PRUNE_AFTER") {
            c.prune_after = parse_secs("RESQ_PRUNE_AFTER", &v)?;
        }
        if let Some(v) = get("METRICS_ADDR").filter(|v| !v.trim().is_empty()) {
            c.metrics_addr = Some(v.trim().parse().map_err(|_| Error::Config {
                var: "METRICS_ADDR",
                message: format!("{v:?} is not an address (e.g. 127.0.0.1:9100)"),
            })?);
        }
        if let Some(v) = get("JESQUE_DELAYED_QUEUES") {
            c.jesque_delayed_queues = v
                .split(',')
                .map(str::trim)
                .filter(|q| !q.is_empty())
                .map(str::to_string)
                .collect();
        }
        if let Some(v) = get("RESQ_SCHEDULER") {
            c.scheduler = parse_bool("RESQ_SCHEDULER", &v)?;
        }
        if let Some(v) = get("RESQ_MAX_PAYLOAD") {
            c.max_payload = parse_bytes("RESQ_MAX_PAYLOAD", &v)?;
        }
        if let Some(v) = get("RESQ_JOB_TTL") {
            c.job_ttl = parse_secs("RESQ_JOB_TTL", &v)?;
        }
        if let Some(v) = get("RESQ_RESULT_MAX") {
            c.result_max =
                usize::try_from(parse_bytes("RESQ_RESULT_MAX", &v)?).unwrap_or(usize::MAX);
        }
        Ok(c)
    }

    /// Checks values that cannot be checked one at a time.
    pub fn validate(&self) -> Result<()> {
        crate::conn::parse_url(&self.redis_url, &self.redis)?;
        // TLS files readable, WAIT not with Cluster, and in Cluster mode a hash-tagged
        // namespace.
        crate::conn::Endpoint::with_options(&self.redis_url, &self.redis)?
            .check_namespace(&self.namespace)?;
        if self.concurrency == 0 || self.concurrency > 1024 {
            return Err(Error::Config {
                var: "CONCURRENCY",
                message: format!("{} is out of range 1..=1024", self.concurrency),
            });
        }
        if self.heartbeat_interval > Duration::from_secs(60) {
            return Err(Error::Config {
                var: "HEARTBEAT_INTERVAL",
                message: "must be at most 60 s, or Ruby workers may prune live slots".into(),
            });
        }
        if self.prune_after < Duration::from_secs(300) {
            return Err(Error::Config {
                var: "RESQ_PRUNE_AFTER",
                message: "must be at least 300 s (Ruby's prune interval), or resq would prune \
                          workers a Ruby pruner keeps"
                    .into(),
            });
        }
        Ok(())
    }
}

impl Client {
    /// Connects where `config` says: its URL, namespace and [`RedisOptions`].
    pub async fn from_config(config: &Config) -> Result<Self> {
        Self::connect_with(&config.redis_url, &config.namespace, &config.redis).await
    }
}

impl Admin {
    /// Connects where `config` says: its URL, namespace and [`RedisOptions`].
    pub async fn from_config(config: &Config) -> Result<Self> {
        Self::connect_with(&config.redis_url, &config.namespace, &config.redis).await
    }
}

impl SchedulerConfig {
    /// The scheduler of a worker process: [`Config::schedule`] with the worker's URL,
    /// namespace, host name and connection options.
    pub fn from_config(c: &Config) -> Self {
        SchedulerConfig {
            redis_url: c.redis_url.clone(),
            namespace: c.namespace.clone(),
            hostname: c.hostname.clone(),
            redis: c.redis.clone(),
            ..c.schedule.clone()
        }
    }
}

fn parse_count(var: &'static str, v: &str) -> Result<usize> {
    v.trim().parse().map_err(|_| Error::Config {
        var,
        message: format!("{v:?} is not a whole number"),
    })
}

/// A size in bytes: a whole number with an optional `k`, `m` or `g` (binary multiples).
fn parse_bytes(var: &'static str, v: &str) -> Result<u64> {
    let t = v.trim().to_ascii_lowercase();
    let (digits, unit) = match t.strip_suffix('b').unwrap_or(&t) {
        s if s.ends_with('k') => (&s[..s.len() - 1], 1u64 << 10),
        s if s.ends_with('m') => (&s[..s.len() - 1], 1 << 20),
        s if s.ends_with('g') => (&s[..s.len() - 1], 1 << 30),
        s => (s, 1),
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|&n| n > 0)
        .ok_or_else(|| Error::Config {
            var,
            message: format!("{v:?} is not a size in bytes (e.g. 1048576, 64m, 1g)"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, &str)]) -> Result<Config> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn reads_resque_env() {
        let c = cfg(&[("QUEUE", "a,b"), ("CONCURRENCY", "8"), ("INTERVAL", "0.5")]).unwrap();
        assert_eq!(c.queues.entries(), &["a", "b"]);
        assert_eq!(c.concurrency, 8);
        assert_eq!(c.interval, Duration::from_millis(500));
    }

    #[test]
    fn bad_values_name_their_variable() {
        let e = cfg(&[("CONCURRENCY", "lots")]).unwrap_err().to_string();
        assert!(e.starts_with("CONCURRENCY:"), "{e}");
        let e = cfg(&[("REDIS_URL", "localhost")]).unwrap_err().to_string();
        assert!(e.starts_with("REDIS_URL:"), "{e}");
        let e = cfg(&[("INTERVAL", "-1")]).unwrap_err().to_string();
        assert!(e.starts_with("INTERVAL:"), "{e}");
        let e = cfg(&[("RESQ_MAX_PAYLOAD", "big")]).unwrap_err().to_string();
        assert!(e.starts_with("RESQ_MAX_PAYLOAD:"), "{e}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("X", "1024").unwrap(), 1024);
        assert_eq!(parse_bytes("X", "64m").unwrap(), 64 << 20);
        assert_eq!(parse_bytes("X", "1GB").unwrap(), 1 << 30);
        assert!(parse_bytes("X", "0").is_err());
    }
}
