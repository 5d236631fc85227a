//! The tokio runtime resq's own programs run on (`resq work`, the examples).
//!
//! A worker is Redis-bound: each job is a few microseconds of its own work between two
//! round trips, and the step batcher, the slots and the connection hand work to one another
//! constantly. On one worker thread those hand-offs are plain task switches; on several they
//! become cross-thread wake-ups (futex, context switches) that cost more than the job. So the
//! runtime has **one worker thread** by default, which measured 17–30 % more jobs/s and
//! 19–25 % less CPU per job than two (`docs/performance.md`). Handlers registered with
//! [`crate::Registry::blocking`] run on the blocking pool (many threads) either way; a program
//! whose *async* handlers burn CPU sets `TOKIO_WORKER_THREADS` (tokio's own variable) to the
//! number of threads it wants.
//!
//! A program that embeds a [`crate::Worker`] in a runtime of its own keeps its own choice.

/// Builds resq's runtime: multi-thread scheduler, all drivers enabled, `TOKIO_WORKER_THREADS`
/// worker threads (default 1).
pub fn build() -> std::io::Result<tokio::runtime::Runtime> {
    build_with(1)
}

/// [`build`] with `threads` worker threads by default (`resq web` serves on two, so one
/// request's own work never holds up the next).
pub(crate) fn build_with(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.enable_all();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        b.worker_threads(threads.max(1));
    }
    b.build()
}

/// Gives freed memory back to the operating system after a large job (a claimed payload of
/// megabytes): glibc's allocator keeps freed heap pages for reuse, so without this a worker that
/// once ran a 100 MB job would keep hundreds of megabytes resident for good. A no-op elsewhere.
pub(crate) fn release_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks glibc's own arenas; it takes no pointers from us.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}
