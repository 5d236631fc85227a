//! Turning a handler's panic into a failure with its message and location.
//!
//! A process-wide panic hook records the location of a panic in a thread-local while a job is
//! being polled on that thread; the catcher reads it right after unwinding. Panics outside jobs
//! go to the previous hook as usual.

use super::{JobError, JobResult};
use futures::FutureExt;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Once;

thread_local! {
    /// Whether this thread is running job code right now.
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
    /// Location of the last panic in job code on this thread.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Installs the hook (once per process).
pub(crate) fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_JOB.with(Cell::get) {
                let loc = info
                    .location()
                    .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
                LOCATION.with(|c| *c.borrow_mut() = loc);
            } else {
                previous(info);
            }
        }));
    });
}

/// Marks this thread as running job code for the guard's lifetime.
struct InJob(bool);

impl InJob {
    fn enter() -> Self {
        InJob(IN_JOB.with(|c| c.replace(true)))
    }
}

impl Drop for InJob {
    fn drop(&mut self) {
        IN_JOB.with(|c| c.set(self.0));
    }
}

/// Runs a blocking job body, turning a panic into a `Resq::Panic` failure.
pub(crate) fn catch(f: impl FnOnce() -> JobResult) -> JobResult {
    install_hook();
    let _g = InJob::enter();
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(to_error(p)),
    }
}

/// Polls a job future, turning a panic into a `Resq::Panic` failure.
pub(crate) async fn catch_async(fut: impl Future<Output = JobResult>) -> JobResult {
    install_hook();
    let mut fut = std::pin::pin!(AssertUnwindSafe(fut).catch_unwind());
    let out = std::future::poll_fn(|cx| {
        let _g = InJob::enter();
        fut.as_mut().poll(cx)
    })
    .await;
    match out {
        Ok(r) => r,
        Err(p) => Err(to_error(p)),
    }
}

fn to_error(p: Box<dyn Any + Send>) -> JobError {
    let message = if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    };
    let loc = LOCATION.with(|c| c.borrow_mut().take());
    JobError::new("Resq::Panic", message).with_backtrace(loc.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn async_panic_has_message_and_location() {
        let e = catch_async(async { panic!("boom {}", 1) })
            .await
            .unwrap_err();
        assert_eq!(e.exception, "Resq::Panic");
        assert_eq!(e.message, "boom 1");
        assert!(e.backtrace[0].contains("panic.rs"), "{:?}", e.backtrace);
    }

    #[test]
    fn blocking_panic_is_caught() {
        let e = catch(|| panic!("sync")).unwrap_err();
        assert_eq!(e.message, "sync");
        assert_eq!(e.backtrace.len(), 1);
    }
}
