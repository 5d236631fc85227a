//! The retry policy every Redis step follows: capped exponential [`Backoff`] with jitter,
//! [`retry_until`] (resend until Redis answers or shutdown), and the process-wide [`outage`]
//! state that logs an outage once, however many tasks retry meanwhile.

use super::errors;
use rand::Rng;
use redis::RedisResult;
use std::future::Future;
use std::time::Duration;

/// Capped exponential back-off with full jitter: 50 ms doubling to `cap`.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    /// Attempts made so far.
    attempt: u32,
    /// Longest wait.
    cap: Duration,
}

impl Backoff {
    /// A fresh back-off capped at `cap`.
    pub(crate) fn new(cap: Duration) -> Self {
        Backoff { attempt: 0, cap }
    }

    /// The next wait.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = Duration::from_millis(50).saturating_mul(1u32 << self.attempt.min(16));
        self.attempt += 1;
        let max = base.min(self.cap);
        let ms = rand::rng().random_range(max.as_millis() as u64 / 2..=max.as_millis() as u64);
        Duration::from_millis(ms)
    }

    /// Whether any attempt failed since the last reset.
    pub(crate) fn failing(&self) -> bool {
        self.attempt > 0
    }
}

/// Runs `op` until it succeeds, waiting with [`Backoff`] between failures, or gives up
/// (returns `None`) when `stop` resolves, even while an attempt is in flight: nothing waits on
/// Redis without also waiting on shutdown. `what` names the step in logs; the process says once
/// that Redis is unreachable (or refuses writes) and once that it is back (see `outage`),
/// however many tasks retry meanwhile; an error that needs a repair
/// (`errors::Class::Permanent`) is reported at a bounded rate while it lasts.
pub(crate) async fn retry_until<T, F, Fut>(
    what: &str,
    mut op: F,
    stop: impl Future<Output = ()>,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = RedisResult<T>>,
{
    let mut backoff = Backoff::new(Duration::from_secs(5));
    let mut streak = outage::Streak::default();
    let mut reporter = errors::Reporter::default();
    tokio::pin!(stop);
    loop {
        let result = tokio::select! {
            r = op() => r,
            _ = &mut stop => return None,
        };
        match result {
            Ok(v) => {
                if backoff.failing() {
                    crate::metrics::redis_reconnect();
                    streak.succeeded(what);
                }
                return Some(v);
            }
            Err(e) => {
                crate::metrics::redis_error();
                if errors::classify(&e) == errors::Class::Permanent {
                    if let Some(times) = reporter.due() {
                        tracing::error!(step = what, times, "{}", errors::describe_here(&e));
                    }
                } else {
                    streak.failed_request(what, &e);
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff.next_delay()) => {}
                    _ = &mut stop => return None,
                }
            }
        }
    }
}

/// Process-wide outage state, so an outage is logged once for the whole process: a warning
/// when the first task sees Redis fail, an info line when a task that had failed gets through
/// again — not once per task or per attempt. A failure still belongs to the outage already
/// logged when it comes within [`outage::GRACE`] after the recovery (a connection that notices
/// the restart late), or from a task whose own run of failures began before the recovery (it
/// was backing off while another task got through first).
pub(crate) mod outage {
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    /// How long after a recovery a new failure still counts as the same outage.
    pub(crate) const GRACE: Duration = Duration::from_secs(1);

    /// The shared state.
    struct State {
        /// A warning was logged for the current outage and no recovery logged since.
        logged: bool,
        /// When the last logged outage ended.
        recovered_at: Option<Instant>,
    }

    static STATE: Mutex<State> = Mutex::new(State {
        logged: false,
        recovered_at: None,
    });

    fn state() -> std::sync::MutexGuard<'static, State> {
        STATE.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One task's run of failures: reports them and its recovery to the process-wide state.
    #[derive(Debug, Default)]
    pub(crate) struct Streak {
        /// When the current run of failures began (`None` while succeeding).
        since: Option<Instant>,
    }

    impl Streak {
        /// Reports a failure of this task.
        pub(crate) fn failed(&mut self, what: &str, e: &dyn std::fmt::Display) {
            let since = *self.since.get_or_insert_with(Instant::now);
            report_failure(what, e, since);
        }

        /// Reports a failed Redis request of this task, described by its class.
        pub(crate) fn failed_request(&mut self, what: &str, e: &redis::RedisError) {
            let text = crate::conn::errors::describe_here(e);
            self.failed(what, &text);
        }

        /// Reports a success of this task; the end of the outage is logged if it was.
        pub(crate) fn succeeded(&mut self, what: &str) {
            if self.since.take().is_some() {
                recovered(what);
            }
        }
    }

    /// Reports a failed Redis step of a task failing since `since`; logs the first failure of
    /// an outage.
    fn report_failure(what: &str, e: &dyn std::fmt::Display, since: Instant) {
        let mut s = state();
        let aftershock = same_outage(s.recovered_at, since, Instant::now());
        if !s.logged && !aftershock {
            s.logged = true;
            drop(s);
            let text = e.to_string();
            if text.starts_with("Redis refuses writes") {
                tracing::warn!(step = what, "{text}; retrying with back-off");
            } else {
                tracing::warn!(step = what, error = %text, "redis unreachable; retrying with back-off");
            }
        } else {
            drop(s);
            tracing::debug!(step = what, error = %e, "redis step failed; retrying");
        }
    }

    /// Whether a failure at `now`, of a task failing since `since`, belongs to the outage whose
    /// recovery was logged at `recovered_at`.
    fn same_outage(recovered_at: Option<Instant>, since: Instant, now: Instant) -> bool {
        recovered_at.is_some_and(|t| since < t || now.saturating_duration_since(t) < GRACE)
    }

    /// Reports that a step which had failed succeeded; logs the end of the outage once.
    fn recovered(what: &str) {
        let mut s = state();
        if s.logged {
            s.logged = false;
            s.recovered_at = Some(Instant::now());
            drop(s);
            tracing::info!(step = what, "redis reachable again");
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn late_failures_of_the_same_outage() {
            let t = Instant::now();
            let s = Duration::from_secs(1);
            // Nothing recovered yet: a new outage.
            assert!(!same_outage(None, t, t));
            // Within the grace period after the recovery.
            assert!(same_outage(Some(t), t + s / 2, t + s / 2));
            // Long after, but the task has been failing since before the recovery (it was
            // backing off while another task got through first).
            assert!(same_outage(Some(t + s), t, t + 10 * s));
            // Long after, from a task that had succeeded since: a new outage.
            assert!(!same_outage(Some(t), t + 5 * s, t + 5 * s));
        }
    }
}
