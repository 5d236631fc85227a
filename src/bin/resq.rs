//! `resq`: run a worker, enqueue jobs, look at a Resque namespace.
//!
//! This binary has no handlers of its own: `resq work` here runs a worker whose every job fails
//! as an unknown class, which is only useful to test wiring. A service with handlers builds its
//! own binary around [`resq::Worker`] (see `examples/compat_worker.rs`).

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use resq::{Client, Config, Registry, Worker};
use serde_json::Value;

#[derive(Parser)]
#[command(
    name = "resq",
    version,
    about = "Resque-compatible worker runtime and tools"
)]
struct Cli {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Clone)]
struct Conn {
    /// Redis URL.
    #[arg(long = "url", env = "REDIS_URL", default_value = resq::config::DEFAULT_REDIS_URL, global = true)]
    url: String,
    /// Namespace.
    #[arg(long, env = "RESQUE_NAMESPACE", default_value = resq::config::DEFAULT_NAMESPACE, global = true)]
    namespace: String,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a worker process (no handlers in this binary; see its docs).
    Work(WorkArgs),
    /// Enqueue a job.
    Enqueue(EnqueueArgs),
}

#[derive(Args)]
struct WorkArgs {
    /// Queues, Ruby syntax (`a,b`, `*`, globs, `!skip`).
    #[arg(long, env = "QUEUES", default_value = "default")]
    queues: String,
    /// Slots.
    #[arg(long, env = "CONCURRENCY", default_value_t = 1)]
    concurrency: usize,
    /// Poll interval in seconds.
    #[arg(long, env = "INTERVAL", default_value = "5")]
    interval: String,
}

#[derive(Args)]
struct EnqueueArgs {
    /// Queue.
    #[arg(long, default_value = "default")]
    queue: String,
    /// Write Jesque's form (`class, args, vars`).
    #[arg(long)]
    jesque: bool,
    /// Jesque named args (a JSON object).
    #[arg(long)]
    vars: Option<String>,
    /// Class name.
    class: String,
    /// Positional args, each one JSON value.
    args: Vec<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    resq::logging::init_from_env();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Work(w) => work(&cli.conn, w).await,
        Cmd::Enqueue(e) => enqueue(&cli.conn, e).await,
    }
}

async fn work(conn: &Conn, w: WorkArgs) -> anyhow::Result<()> {
    let cfg = Config {
        redis_url: resq::config::parse_url(&conn.url)?,
        namespace: conn.namespace.clone(),
        queues: resq::queues::QueueList::parse(&w.queues)?,
        concurrency: w.concurrency,
        interval: resq::config::parse_secs("INTERVAL", &w.interval)?,
        ..Config::from_env()?
    };
    let running = Worker::builder()
        .config(cfg)
        .registry(Registry::new())
        .build()?
        .start()
        .await?;
    for id in running.ids() {
        println!("worker {id}");
    }
    running.run_until_signal().await?;
    Ok(())
}

async fn enqueue(conn: &Conn, e: EnqueueArgs) -> anyhow::Result<()> {
    let args: Vec<Value> = e
        .args
        .iter()
        .map(|a| serde_json::from_str(a).with_context(|| format!("argument {a:?} is not JSON")))
        .collect::<anyhow::Result<_>>()?;
    let client = Client::connect(&conn.url, &conn.namespace).await?;
    if e.jesque || e.vars.is_some() {
        let vars: Option<serde_json::Map<String, Value>> = match &e.vars {
            Some(v) => Some(serde_json::from_str(v).context("--vars must be a JSON object")?),
            None => None,
        };
        let args = if args.is_empty() && vars.is_some() {
            None
        } else {
            Some(args.as_slice())
        };
        client
            .enqueue_jesque(&e.queue, &e.class, args, vars.as_ref())
            .await?;
    } else {
        client.enqueue_to(&e.queue, &e.class, &args).await?;
    }
    Ok(())
}
