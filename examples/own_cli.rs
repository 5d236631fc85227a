//! A service's own binary: the whole `resq` CLI with its handlers (docs/cli.md, "Your own
//! binary"). `work` runs its jobs; `coverage` reports which classes of a live namespace it
//! has no handler for (docs/migration.md).
//!
//! ```sh
//! cargo run --example own_cli -- coverage            # against REDIS_URL, RESQUE_NAMESPACE
//! cargo run --example own_cli -- work --queues default
//! ```

use resq::{JobContext, JobError, Registry};

fn registry() -> Registry {
    Registry::new()
        .handler("Archive", |ctx: JobContext| async move {
            let path: String = ctx.arg(0)?;
            archive(&path).await.map_err(JobError::msg)
        })
        .blocking("Resize", |ctx| resize(ctx.arg(0)?))
        // A Rails job enqueued through ActiveJob's Resque adapter: registered under its own
        // class name, found inside the wrapper.
        .handler("SendInvoiceJob", |_ctx: JobContext| async { Ok(()) })
}

/// Stands for the service's own work.
async fn archive(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("nothing to archive".into());
    }
    Ok(())
}

/// Stands for the service's own blocking work.
fn resize(width: u32) -> resq::JobResult {
    if width == 0 {
        return Err(JobError::msg("width 0"));
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    resq::cli::run(registry())
}
