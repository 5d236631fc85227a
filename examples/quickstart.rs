//! The README's first command: a worker with two demo handlers processing real jobs.
//!
//! Uses `REDIS_URL` when something answers there; otherwise starts a throwaway `redis-server`
//! on a free port (and says how to install one if there is none). Enqueues a few jobs, shows
//! them being processed, prints the stats, and exits.

use anyhow::{bail, Context};
use resq::admin::Admin;
use resq::{Client, Job, JobContext, JobResult, Phase, Registry, Worker};
use serde::Deserialize;
use std::time::Duration;

/// A typed job: its args are decoded with serde.
struct SendInvoice;

#[derive(Deserialize)]
struct Invoice {
    customer: String,
    cents: u64,
}

impl Job for SendInvoice {
    const CLASS: &'static str = "SendInvoice";
    type Args = (Invoice,);
    async fn perform(&self, (inv,): Self::Args, ctx: JobContext) -> JobResult {
        println!(
            "  [{}] SendInvoice: {} owes ${}.{:02}",
            ctx.worker_id(),
            inv.customer,
            inv.cents / 100,
            inv.cents % 100
        );
        Ok(())
    }
}

fn main() -> anyhow::Result<()> {
    resq::runtime::build()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let (url, _server) = redis_url().await?;
    let ns = "resq-quickstart";
    println!(
        "resq quickstart: Redis at {}, namespace {ns}",
        resq::conn::Redacted(&url)
    );

    let registry = Registry::new()
        .handler("Greet", |ctx: JobContext| async move {
            let name: String = ctx.arg(0)?;
            println!("  [{}] Greet: hello, {name}!", ctx.worker_id());
            Ok(())
        })
        .job(SendInvoice);
    let running = Worker::builder()
        .redis_url(&url)
        .namespace(ns)
        .queues("critical,default")?
        .concurrency(2)
        .registry(registry)
        .build()?
        .start()
        .await?;
    for id in running.ids() {
        println!("worker {id} registered");
    }

    let client = Client::connect(&url, ns).await?;
    let admin = Admin::connect(&url, ns).await?;
    let before = admin.info().await?.processed;
    println!("enqueueing 4 jobs (one of them for a class nobody handles)");
    client
        .enqueue_to("default", "Greet", &["Ada".into()])
        .await?;
    client
        .enqueue_to("default", "Greet", &["Grace".into()])
        .await?;
    client
        .enqueue_to(
            "critical",
            "SendInvoice",
            &[serde_json::json!({"customer": "ACME", "cents": 123456})],
        )
        .await?;
    client.enqueue_to("default", "NoSuchJob", &[]).await?;

    // Wait for the four jobs to be counted, then stop.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if admin.info().await?.processed >= before + 4 {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            bail!("jobs were not processed within 10 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.stop(Phase::Quit);
    running.wait().await?;

    let info = admin.info().await?;
    println!("stats: processed={} failed={}", info.processed, info.failed);
    if let Some(last) = info.failed_entries.checked_sub(1) {
        if let Some(f) = admin.failure(last as usize).await? {
            println!(
                "last failure in {ns}:failed: {}",
                String::from_utf8_lossy(&f.raw)
            );
        }
    }
    Ok(())
}

/// A Redis URL that answers: `REDIS_URL` if set and reachable, else a throwaway server.
async fn redis_url() -> anyhow::Result<(String, Option<resq_quickstart_server::Server>)> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    if ping(&url).await {
        return Ok((url, None));
    }
    let server = resq_quickstart_server::Server::start()
        .context("no Redis answered at REDIS_URL and none could be started")?;
    let url = server.url();
    for _ in 0..200 {
        if ping(&url).await {
            return Ok((url, Some(server)));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    bail!("the throwaway redis-server at {url} did not answer")
}

async fn ping(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let fut = async {
        let mut c = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING").query_async::<String>(&mut c).await.ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), fut).await,
        Ok(Some(_))
    )
}

/// A throwaway `redis-server` on a free loopback port, stopped on drop.
mod resq_quickstart_server {
    use anyhow::{bail, Context};
    use std::process::{Child, Command, Stdio};

    pub struct Server {
        child: Child,
        port: u16,
    }

    impl Server {
        pub fn start() -> anyhow::Result<Self> {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            let child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .stdout(Stdio::null())
                .spawn();
            match child {
                Ok(child) => {
                    println!("started a throwaway redis-server on port {port}");
                    Ok(Server { child, port })
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
                    "redis-server is not installed; install it with `sudo apt-get install -y redis-server` (or set REDIS_URL)"
                ),
                Err(e) => Err(e).context("starting redis-server"),
            }
        }

        pub fn url(&self) -> String {
            format!("redis://127.0.0.1:{}", self.port)
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
