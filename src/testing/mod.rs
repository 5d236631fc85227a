//! Helpers for the crate's own unit tests against a real `redis-server`.

pub(crate) mod cluster;
pub(crate) mod server;

use std::sync::OnceLock;

/// The URL of this test binary's shared `redis-server` (started on first use).
pub(crate) fn url() -> String {
    static SERVER: OnceLock<(std::sync::Mutex<std::process::Child>, String)> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            let (guard, url) = server::start_redis(&[]);
            (std::sync::Mutex::new(guard), url)
        })
        .1
        .clone()
}

/// A fresh namespace name for one test.
pub(crate) fn namespace(prefix: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A shared connection to the test server.
pub(crate) async fn con() -> crate::conn::Conn {
    crate::conn::Endpoint::open(&url())
        .expect("url")
        .connect()
        .await
        .expect("connect")
}
