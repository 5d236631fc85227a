use resq::{Job, JobContext, JobError, JobResult, Registry, WorkerBuilder};

struct Archive;
impl Job for Archive {
    const CLASS: &'static str = "Archive"; // the class name producers use
    type Args = (u64, String); // serde-decoded positional args
    async fn perform(&self, (id, branch): Self::Args, _ctx: JobContext) -> JobResult {
        println!("archiving {id} on {branch}");
        Ok(())
    }
}

fn main() -> anyhow::Result<()> {
    resq::logging::init_from_env(); // logs to stderr; RESQ_LOG_FORMAT=json, RUST_LOG=debug
    resq::runtime::build()?.block_on(work()) // one async thread: fastest for Redis-bound jobs
}

async fn work() -> anyhow::Result<()> {
    let registry = Registry::new()
        .job(Archive)
        .handler("Notify", |ctx: JobContext| async move {
            let who: String = ctx.arg(0)?; // plain async fn over JSON args
            if who.is_empty() {
                return Err(JobError::msg("nobody to notify")); // logged, and kept in <ns>:failed
            }
            Ok(())
        })
        .blocking("Resize", |_ctx| Ok(())); // runs on the blocking pool
    let running = WorkerBuilder::from_env()? // REDIS_URL, QUEUES, CONCURRENCY, …
        .registry(registry)
        .build()?
        .start()
        .await?;
    running.run_until_signal().await?; // QUIT/TERM/INT/USR1/USR2/CONT as in Resque
    Ok(())
}
