//! Throughput history: samples of the global `stat:processed` / `stat:failed` totals kept in
//! resq's own keys, so graphs survive restarts and cover every worker that bumps those counters
//! (Ruby, Jesque, node-resque and resq alike).
//!
//! [`Admin::sample_history`](crate::admin::Admin::sample_history) reads Redis `TIME` and both totals, then writes the value
//! `"<unix ms> <processed> <failed>"` under the current minute's key
//! (`<ns>:resq:history:m:<minute>`, kept [`MINUTE_TTL_S`]) and the current hour's
//! (`<ns>:resq:history:h:<hour>`, kept [`HOUR_TTL_S`]), each with `SET NX`: the first sample of a
//! minute wins, so any number of samplers (web servers, worker heartbeats) can run at once and
//! calling it more often than once a minute costs two no-op writes. A graph is the difference
//! between consecutive samples, scaled to the exact time between them ([`rates`]); reading a
//! day of minutes is one `MGET` of 1,441 keys
//! ([`Admin::history`](crate::admin::Admin::history)).

use crate::error::Result;
use crate::keys::Keys;
use redis::aio::ConnectionLike;

/// How long a per-minute sample is kept: two days and an hour.
pub const MINUTE_TTL_S: u64 = 2 * 86_400 + 3_600;
/// How long a per-hour sample is kept: 91 days.
pub const HOUR_TTL_S: u64 = 91 * 86_400;

/// One reading of the totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Redis time of the reading, in unix milliseconds.
    pub at_ms: i64,
    /// `stat:processed` then.
    pub processed: u64,
    /// `stat:failed` then.
    pub failed: u64,
}

impl Sample {
    /// The stored text: `"<unix ms> <processed> <failed>"`.
    pub fn encode(&self) -> String {
        format!("{} {} {}", self.at_ms, self.processed, self.failed)
    }

    /// Reads the stored text; `None` when it is not three numbers.
    pub fn decode(text: &str) -> Option<Sample> {
        let mut it = text.split_ascii_whitespace();
        let s = Sample {
            at_ms: it.next()?.parse().ok()?,
            processed: it.next()?.parse().ok()?,
            failed: it.next()?.parse().ok()?,
        };
        it.next().is_none().then_some(s)
    }
}

/// The resolution of a history series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// One sample a minute.
    Minute,
    /// One sample an hour.
    Hour,
}

impl Resolution {
    /// Milliseconds per step.
    pub fn step_ms(self) -> i64 {
        match self {
            Resolution::Minute => 60_000,
            Resolution::Hour => 3_600_000,
        }
    }

    /// The key of step number `n` (unix time divided by the step).
    fn key(self, keys: &Keys, n: i64) -> String {
        match self {
            Resolution::Minute => keys.history_minute(n),
            Resolution::Hour => keys.history_hour(n),
        }
    }
}

/// Takes one sample now (Redis time) and records it for this minute and this hour unless
/// already recorded. Two round trips (four on a spread namespace, where the two totals are in
/// slots of their own). Returns the reading.
pub(crate) async fn sample<C: ConnectionLike + Send>(con: &mut C, keys: &Keys) -> Result<Sample> {
    let ((secs, micros), processed, failed): ((i64, i64), Option<String>, Option<String>) =
        if keys.is_spread() {
            (
                redis::cmd("TIME").query_async(con).await?,
                redis::cmd("GET")
                    .arg(keys.stat_processed())
                    .query_async(con)
                    .await?,
                redis::cmd("GET")
                    .arg(keys.stat_failed())
                    .query_async(con)
                    .await?,
            )
        } else {
            redis::pipe()
                .cmd("TIME")
                .get(keys.stat_processed())
                .get(keys.stat_failed())
                .query_async(con)
                .await?
        };
    let s = Sample {
        at_ms: secs * 1000 + micros / 1000,
        processed: counter(processed.as_deref()),
        failed: counter(failed.as_deref()),
    };
    let text = s.encode();
    let _: () = redis::pipe()
        .cmd("SET")
        .arg(Resolution::Minute.key(keys, s.at_ms / Resolution::Minute.step_ms()))
        .arg(&text)
        .arg("NX")
        .arg("EX")
        .arg(MINUTE_TTL_S)
        .ignore()
        .cmd("SET")
        .arg(Resolution::Hour.key(keys, s.at_ms / Resolution::Hour.step_ms()))
        .arg(&text)
        .arg("NX")
        .arg("EX")
        .arg(HOUR_TTL_S)
        .ignore()
        .query_async(con)
        .await?;
    Ok(s)
}

/// The samples of the `steps + 1` steps ending with the one holding `now_ms`, oldest first
/// (`None` where none was recorded), in one `MGET`.
pub(crate) async fn read<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    res: Resolution,
    now_ms: i64,
    steps: usize,
) -> Result<Vec<Option<Sample>>> {
    let last = now_ms / res.step_ms();
    let first = last - steps as i64;
    let names: Vec<String> = (first..=last).map(|n| res.key(keys, n)).collect();
    let values: Vec<Option<String>> = redis::cmd("MGET").arg(&names).query_async(con).await?;
    Ok(values
        .iter()
        .map(|v| v.as_deref().and_then(Sample::decode))
        .collect())
}

/// Jobs in one step of a series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Processed jobs in the step.
    pub processed: f64,
    /// Failed jobs in the step.
    pub failed: f64,
}

/// Per-step counts from consecutive samples (`samples.len() - 1` values): the difference of
/// the totals scaled to exactly one step of `res`. `None` where a sample is missing, or where
/// a total went down (the counters were reset).
pub fn rates(samples: &[Option<Sample>], res: Resolution) -> Vec<Option<Rate>> {
    samples
        .windows(2)
        .map(|w| {
            let (a, b) = (w[0]?, w[1]?);
            let dt = b.at_ms - a.at_ms;
            if dt <= 0 || b.processed < a.processed || b.failed < a.failed {
                return None;
            }
            let scale = res.step_ms() as f64 / dt as f64;
            Some(Rate {
                processed: (b.processed - a.processed) as f64 * scale,
                failed: (b.failed - a.failed) as f64 * scale,
            })
        })
        .collect()
}

/// A counter's value; absent or unreadable counts as 0 (as Ruby's `to_i` does).
fn counter(v: Option<&str>) -> u64 {
    v.and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

impl crate::admin::Admin {
    /// Takes one sample of the counters now and records it for this minute and this hour
    /// unless already recorded (what `resq web` does every 15 s); call it from anywhere, such
    /// as a worker's heartbeat, to keep history while no dashboard runs.
    pub async fn sample_history(&self) -> Result<Sample> {
        sample(&mut self.con(), self.keys()).await
    }

    /// The samples of the `steps + 1` steps of `res` ending with the one holding `now_ms`,
    /// oldest first (`None` where none was recorded).
    pub async fn history(
        &self,
        res: Resolution,
        now_ms: i64,
        steps: usize,
    ) -> Result<Vec<Option<Sample>>> {
        read(&mut self.con(), self.keys(), res, now_ms, steps).await
    }
}

#[cfg(test)]
mod tests {
    use crate::keys::Keys;

    #[test]
    fn history_samples_of_a_spread_namespace_share_one_slot() {
        let plain = Keys::new("app");
        assert_eq!(plain.history_minute(7), "app:resq:history:m:7");
        assert_eq!(plain.history_hour(7), "app:resq:history:h:7");
        let spread = Keys::new("app").spread();
        let tag = crate::keys::slot_tag(crate::keys::hash_slot(b"app:resq:history"));
        assert_eq!(
            spread.history_minute(7),
            format!("app:resq:history:{{{tag}}}:m:7")
        );
        let slot = crate::keys::hash_slot(spread.history_minute(7).as_bytes());
        assert_eq!(
            slot,
            crate::keys::hash_slot(spread.history_minute(8).as_bytes())
        );
        assert_eq!(
            slot,
            crate::keys::hash_slot(spread.history_hour(1).as_bytes())
        );
    }

    use super::*;

    #[test]
    fn samples_round_trip_and_reject_garbage() {
        let s = Sample {
            at_ms: 1_795_288_533_678,
            processed: 12,
            failed: 3,
        };
        assert_eq!(s.encode(), "1795288533678 12 3");
        assert_eq!(Sample::decode(&s.encode()), Some(s));
        assert_eq!(Sample::decode("1 2"), None);
        assert_eq!(Sample::decode("1 2 3 4"), None);
        assert_eq!(Sample::decode("a b c"), None);
    }

    #[test]
    fn rates_scale_to_the_step_and_skip_gaps_and_resets() {
        let at = |ms, p, f| {
            Some(Sample {
                at_ms: ms,
                processed: p,
                failed: f,
            })
        };
        let samples = vec![
            at(0, 100, 10),
            at(30_000, 130, 10), // half a minute: 30 jobs → 60 a minute
            None,
            at(150_000, 200, 12),
            at(210_000, 5, 0), // reset
        ];
        let r = rates(&samples, Resolution::Minute);
        assert_eq!(r.len(), 4);
        assert_eq!(
            r[0],
            Some(Rate {
                processed: 60.0,
                failed: 0.0
            })
        );
        assert_eq!(r[1], None);
        assert_eq!(r[2], None);
        assert_eq!(r[3], None);
    }
}
