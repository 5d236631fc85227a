//! The bound on each request of a [`super::Conn`] made with
//! [`super::RedisOptions::response_timeout`]: a request that has no reply within it fails as a
//! timeout that says so (`redis 127.0.0.1:6380: no reply within 5s`), so a command or a page
//! never waits on a paused, stalled or overloaded Redis longer than that; connecting, too, ends
//! within the bound (`no connection within 5s`). A connection without
//! one (a worker's) sets no timer per request; redis-rs's own 30 s response timeout still
//! notices a dead peer.

use redis::RedisResult;
use std::future::Future;
use std::time::Duration;

/// `request`, failing with a timeout once `bound` has passed without its reply; `request` as it
/// is when there is no bound.
pub(crate) async fn within<T>(
    bound: Option<Duration>,
    request: impl Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
    let Some(bound) = bound else {
        return request.await;
    };
    match tokio::time::timeout(bound, request).await {
        Ok(r) => r,
        Err(_) => Err(timed_out(bound, "no reply")),
    }
}

/// The error of a request that had no reply (`what`: `no reply`, `no connection`) within
/// `bound`: an I/O timeout (so it is classified and counted as one) whose text says how long
/// it waited.
pub(crate) fn timed_out(bound: Duration, what: &str) -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "{what} within {}",
            crate::human::interval(u64::try_from(bound.as_millis()).unwrap_or(u64::MAX))
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_past_its_bound_fails_saying_so() {
        let slow = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(1)
        };
        let e = within(Some(Duration::from_millis(20)), slow)
            .await
            .unwrap_err();
        assert!(e.is_timeout(), "{e}");
        let d = super::super::errors::describe(&e, "127.0.0.1:6380");
        assert_eq!(d, "redis 127.0.0.1:6380: no reply within 20ms");
        assert_eq!(within(None, async { Ok(2) }).await.unwrap(), 2);
    }
}
