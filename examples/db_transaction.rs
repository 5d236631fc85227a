//! Middleware example: one database transaction per job, committed only when the job succeeds.
//!
//! `PerJobTransaction` opens a transaction before the handler, attaches it to the job
//! (`ctx.insert`), and after the handler commits it on success or drops it (rolls back) on
//! failure; a failed commit fails the job, so it lands in Resque's failed list with the
//! database's error and can be retried. Handlers write through `ctx.get::<Tx>()`.
//!
//! The database here is Redis itself (a `MULTI`/`EXEC` block holds the staged writes), so the
//! example runs anywhere resq does. With sqlx the shape is the same: `pool.begin()` where
//! `Tx::begin` is, `tx.commit()` where `Tx::commit` is, and a dropped `sqlx::Transaction`
//! rolls back.
//!
//! Run with `REDIS_URL` pointing at a Redis you can write to:
//! `REDIS_URL=redis://127.0.0.1:6379 cargo run --example db_transaction`. It runs two transfers
//! in namespace `resq-example-tx`: one commits, one fails half-way and leaves no trace.

use resq::conn::Conn;
use resq::middleware::{BoxFuture, Middleware, Next};
use resq::{Client, JobContext, JobError, JobResult, Phase, Registry, Worker};
use serde_json::json;
use std::sync::Mutex;
use tokio::sync::mpsc;

/// A transaction: writes staged during the job, applied together by [`Tx::commit`].
struct Tx {
    staged: Mutex<redis::Pipeline>,
}

impl Tx {
    fn begin() -> Self {
        let mut pipe = redis::pipe();
        pipe.atomic();
        Tx {
            staged: Mutex::new(pipe),
        }
    }

    /// Stages `INCRBY key by`.
    fn incr_by(&self, key: &str, by: i64) {
        self.staged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .incr(key, by)
            .ignore();
    }

    /// Applies every staged write at once (`MULTI … EXEC`).
    async fn commit(self, con: &mut Conn) -> redis::RedisResult<()> {
        let pipe = self.staged.into_inner().unwrap_or_else(|p| p.into_inner());
        pipe.query_async(con).await
    }
}

/// Runs every job inside its own [`Tx`].
struct PerJobTransaction {
    con: Conn,
}

impl Middleware for PerJobTransaction {
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        Box::pin(async move {
            ctx.insert(Tx::begin());
            let outcome = next.run(ctx.clone()).await;
            // Taken back whatever happened: a failed job's writes are dropped here.
            let tx = ctx.take::<Tx>();
            outcome?;
            match tx {
                Some(tx) => tx.commit(&mut self.con.clone()).await.map_err(|e| {
                    JobError::new("Redis::CommandError", format!("commit failed: {e}"))
                }),
                None => Err(JobError::msg(
                    "the transaction was still held by the handler",
                )),
            }
        })
    }
}

fn main() -> anyhow::Result<()> {
    resq::logging::init_from_env();
    resq::runtime::build()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let ns = std::env::var("RESQUE_NAMESPACE").unwrap_or_else(|_| "resq-example-tx".into());
    let prefix = format!("{ns}:example:balance:");
    let balance = move |who: &str| format!("{prefix}{who}");
    let (done_tx, mut done) = mpsc::unbounded_channel::<()>();

    let con = resq::conn::Endpoint::open(&url)?.connect().await?;
    let key = balance.clone();
    let registry = Registry::new()
        .layer(PerJobTransaction { con: con.clone() })
        .layer(resq::middleware::from_fn(
            move |ctx: JobContext, next: Next<'_>| {
                let done_tx = done_tx.clone();
                Box::pin(async move {
                    let outcome = next.run(ctx).await;
                    let _ = done_tx.send(());
                    outcome
                })
            },
        ))
        .handler("Transfer", move |ctx: JobContext| {
            let key = key.clone();
            async move {
                let (from, to, cents): (String, String, i64) = ctx.decode_args()?;
                let tx = ctx
                    .get::<Tx>()
                    .ok_or_else(|| JobError::msg("no transaction"))?;
                tx.incr_by(&key(&from), -cents);
                if cents > 10_000 {
                    // The debit above is staged, not applied: failing now leaves no trace.
                    return Err(JobError::new("LimitExceeded", "over the transfer limit"));
                }
                tx.incr_by(&key(&to), cents);
                Ok(())
            }
        });

    let client = Client::connect(&url, &ns).await?;
    client
        .enqueue_class("Transfer", &[json!("alice"), json!("bob"), json!(2_500)])
        .await?;
    client
        .enqueue_class("Transfer", &[json!("alice"), json!("bob"), json!(50_000)])
        .await?;

    let running = Worker::builder()
        .redis_url(&url)
        .namespace(&ns)
        .registry(registry)
        .build()?
        .start()
        .await?;
    for _ in 0..2 {
        done.recv().await;
    }
    running.stop(Phase::Quit);
    running.wait().await?;

    let mut con = con;
    for who in ["alice", "bob"] {
        let cents: Option<i64> = redis::cmd("GET")
            .arg(balance(who))
            .query_async(&mut con)
            .await?;
        println!("{who}: {}", cents.unwrap_or(0));
    }
    Ok(())
}
