//! Retry with back-off, a policy per handler ([`super::Registry::retry`]): mosquito's geometric
//! back-off, resque-retry's delay lists (`@retry_delay`, `@backoff_strategy`), its jitter
//! (`@retry_delay_multiplicand_min/max`) and limit (`@retry_limit`).
//!
//! What a failed attempt does (one atomic step with the record's removal, `complete.lua`):
//! * attempt index `n` (0 for the first run) comes from resque-retry's own counter
//!   `<ns>:resque-retry:<class>:<sha1(args.join('-'))>` (`SETNX -1` + `INCR`, as resque-retry's
//!   `before_perform_retry` does, here at failure time);
//! * `n < limit`: the job goes back through resque-scheduler's delayed set, due `delay(n)` from
//!   now (`{"class","args","queue"}`, so resque-scheduler's and resque-retry's web tabs show
//!   it, and a Ruby resque-scheduler moves it), or straight onto its queue when the delay is 0;
//!   resque-retry's `<ns>:failure-<retry key>` gets the attempt's failure (TTL 2 × delay);
//! * otherwise the failure goes to `<ns>:failed` with the attempt count appended to its error
//!   message, and the counter is deleted (resque-retry's `give_up`);
//! * a success deletes the counter (resque-retry's `after_perform_retry`).
//!
//! Every attempt counts in `stat:failed` (as in a Ruby fleet running resque-retry).

use crate::wire::number;
use serde_json::Value;
use std::time::Duration;

/// How the delay before retry `n` (0-based) is chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum Delays {
    /// `base × factor^n` (mosquito's geometric back-off).
    Geometric {
        /// Delay before the first retry.
        base: Duration,
        /// Growth per retry.
        factor: f64,
    },
    /// `list[n]`, or the last entry once past the end (resque-retry's delay arrays).
    List(Vec<Duration>),
}

/// A handler's retry policy.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Delay before each retry.
    pub delays: Delays,
    /// Retries after the first attempt (resque-retry's `retry_limit`): a job runs at most
    /// `limit + 1` times.
    pub limit: u32,
    /// Each delay is multiplied by a random factor in this range (resque-retry's
    /// multiplicands; `(1.0, 1.0)` is no jitter).
    pub jitter: (f64, f64),
    /// Upper bound of any delay.
    pub max_delay: Option<Duration>,
    /// Queue to retry on (default: the queue the job came from).
    pub queue: Option<String>,
    /// Exception names that are never retried (resque-retry's `@fatal_exceptions`).
    pub give_up_on: Vec<String>,
    /// How long the attempt counter may outlive the last failure (default 7 days), so a
    /// retry removed by hand does not leave it forever.
    pub counter_ttl: Duration,
}

impl RetryPolicy {
    /// Geometric back-off: retry `n` waits `base × factor^n`; `limit` retries.
    pub fn geometric(base: Duration, factor: f64, limit: u32) -> Self {
        Self::with(Delays::Geometric { base, factor }, limit)
    }

    /// resque-retry's `ExponentialBackoff` `@backoff_strategy`: retry `n` waits `delays[n]`;
    /// as many retries as delays (change with [`RetryPolicy::limit`]).
    pub fn delays(delays: impl IntoIterator<Item = Duration>) -> Self {
        let list: Vec<Duration> = delays.into_iter().collect();
        let limit = u32::try_from(list.len()).unwrap_or(u32::MAX);
        Self::with(Delays::List(list), limit)
    }

    /// resque-retry's plain `@retry_delay` + `@retry_limit`.
    pub fn fixed(delay: Duration, limit: u32) -> Self {
        Self::with(Delays::List(vec![delay]), limit)
    }

    fn with(delays: Delays, limit: u32) -> Self {
        RetryPolicy {
            delays,
            limit,
            jitter: (1.0, 1.0),
            max_delay: None,
            queue: None,
            give_up_on: Vec::new(),
            counter_ttl: Duration::from_secs(7 * 24 * 3600),
        }
    }

    /// Sets the number of retries.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// Multiplies each delay by a random factor in `min..=max` (e.g. `0.5, 1.5`).
    pub fn jitter(mut self, min: f64, max: f64) -> Self {
        self.jitter = (min.min(max).max(0.0), max.max(min).max(0.0));
        self
    }

    /// Caps every delay.
    pub fn max_delay(mut self, max: Duration) -> Self {
        self.max_delay = Some(max);
        self
    }

    /// Retries on `queue` instead of the job's own queue.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Never retries failures with these exception names (e.g. `Resq::InvalidArgs`).
    pub fn give_up_on<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.give_up_on = names.into_iter().map(Into::into).collect();
        self
    }

    /// Whether a failure of attempt `attempt` (0-based) with `exception` is retried.
    pub fn retries(&self, attempt: u32, exception: &str) -> bool {
        attempt < self.limit && !self.give_up_on.iter().any(|e| e == exception)
    }

    /// The delay before retrying after attempt `attempt` failed, jitter applied, in whole
    /// seconds (resque-retry's `(delay * multiplicand).to_i`).
    pub fn delay_for(&self, attempt: u32) -> Duration {
        let base = match &self.delays {
            Delays::Geometric { base, factor } => {
                base.as_secs_f64() * factor.powi(i32::try_from(attempt).unwrap_or(i32::MAX))
            }
            Delays::List(list) => list
                .get(attempt as usize)
                .or(list.last())
                .map_or(0.0, Duration::as_secs_f64),
        };
        let (lo, hi) = self.jitter;
        let m = if hi > lo {
            rand::Rng::random_range(&mut rand::rng(), lo..=hi)
        } else {
            hi
        };
        let mut secs = (base * m).floor();
        if let Some(max) = self.max_delay {
            secs = secs.min(max.as_secs_f64().floor());
        }
        if !secs.is_finite() || secs < 0.0 {
            secs = 0.0;
        }
        Duration::from_secs(secs.min(u32::MAX as f64) as u64)
    }
}

/// resque-retry's `retry_identifier(*args)`: SHA-1 hex of `args.join('-')`, or `None` for an
/// empty join (the key is then `resque-retry:<class>`).
pub(crate) fn retry_identifier(args: &[Value]) -> Option<String> {
    let joined = ruby_join(args);
    if joined.is_empty() {
        None
    } else {
        Some(
            sha1_smol::Sha1::from(joined.as_bytes())
                .digest()
                .to_string(),
        )
    }
}

/// Ruby's `Array#join('-')` over decoded JSON args (nested arrays flattened, `nil` empty).
pub(crate) fn ruby_join(args: &[Value]) -> String {
    let mut parts = Vec::new();
    flatten(args, &mut parts);
    parts.join("-")
}

fn flatten(values: &[Value], out: &mut Vec<String>) {
    for v in values {
        match v {
            Value::Array(a) => flatten(a, out),
            other => out.push(ruby_to_s(other)),
        }
    }
}

/// Ruby's `to_s` of a decoded JSON value (`Hash#to_s` in Ruby ≤ 3.3's `{"k"=>v}` form).
fn ruby_to_s(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Object(_) => ruby_inspect(v),
        other => ruby_inspect(other),
    }
}

/// Ruby's `inspect` of a decoded JSON value.
fn ruby_inspect(v: &Value) -> String {
    match v {
        Value::Null => "nil".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => {
            let t = n.to_string();
            if t.contains(['.', 'e', 'E']) {
                t.parse::<f64>()
                    .ok()
                    .and_then(|x| number::FloatFormat::RubyJsonGem.format(x))
                    .unwrap_or(t)
            } else {
                t
            }
        }
        Value::String(s) => inspect_str(s),
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(ruby_inspect).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(o) => {
            let items: Vec<String> = o
                .iter()
                .map(|(k, x)| format!("{}=>{}", inspect_str(k), ruby_inspect(x)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// Ruby's `String#inspect` for UTF-8 text.
fn inspect_str(s: &str) -> String {
    let mut out = String::from("\"");
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{0c}' => out.push_str("\\f"),
            '\u{0b}' => out.push_str("\\v"),
            '\u{08}' => out.push_str("\\b"),
            '\u{07}' => out.push_str("\\a"),
            '\u{1b}' => out.push_str("\\e"),
            '#' if matches!(chars.peek(), Some('{' | '$' | '@')) => out.push_str("\\#"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn list_delays_repeat_the_last() {
        let p = RetryPolicy::delays([0, 60, 600].map(Duration::from_secs));
        assert_eq!(p.limit, 3);
        assert_eq!(p.delay_for(0), Duration::ZERO);
        assert_eq!(p.delay_for(1), Duration::from_secs(60));
        assert_eq!(p.delay_for(7), Duration::from_secs(600));
        assert!(p.retries(2, "RuntimeError"));
        assert!(!p.retries(3, "RuntimeError"));
    }

    #[test]
    fn geometric_with_cap_and_jitter_bounds() {
        let p = RetryPolicy::geometric(Duration::from_secs(2), 3.0, 5)
            .max_delay(Duration::from_secs(100));
        assert_eq!(p.delay_for(0), Duration::from_secs(2));
        assert_eq!(p.delay_for(2), Duration::from_secs(18));
        assert_eq!(p.delay_for(4), Duration::from_secs(100));
        let j = RetryPolicy::fixed(Duration::from_secs(100), 1).jitter(0.5, 1.5);
        for _ in 0..100 {
            let d = j.delay_for(0).as_secs();
            assert!((50..=150).contains(&d), "{d}");
        }
    }

    #[test]
    fn give_up_on_named_exceptions() {
        let p = RetryPolicy::fixed(Duration::ZERO, 3).give_up_on(["Resq::InvalidArgs"]);
        assert!(!p.retries(0, "Resq::InvalidArgs"));
        assert!(p.retries(0, "RuntimeError"));
    }

    #[test]
    fn resque_retry_identifier() {
        // Ruby: Digest::SHA1.hexdigest([1, "a", nil, [2, 3.5]].join('-')) of "1-a--2-3.5".
        assert_eq!(
            ruby_join(&[json!(1), json!("a"), Value::Null, json!([2, 3.5])]),
            "1-a--2-3.5"
        );
        assert_eq!(
            retry_identifier(&[json!(1), json!("a")]).unwrap(),
            sha1_smol::Sha1::from("1-a").digest().to_string()
        );
        assert_eq!(retry_identifier(&[]), None);
        assert_eq!(
            ruby_join(&[json!({"x": 1, "y": "z"})]),
            r#"{"x"=>1, "y"=>"z"}"#
        );
        assert_eq!(ruby_join(&[json!(1e20), json!(true)]), "1.0e+20-true");
    }
}
