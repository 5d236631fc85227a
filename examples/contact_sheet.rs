//! Fan-out, fan-in (docs/workflows.md): resize N images, then build a contact sheet.
//!
//! The N `Resize` jobs are one batch; the `ContactSheet` job waits for all of them
//! (`Track::after`) and reads their results (`ctx.dependencies()`); the batch's `on_success`
//! callback (`AlbumDone`) says the album is done. Both are written by the same call that ends
//! the last resize, so neither can fire twice or be missed.
//!
//! ```sh
//! cargo run --example contact_sheet        # 6 images
//! cargo run --example contact_sheet -- 20  # 20 images
//! ```
//!
//! Uses `REDIS_URL` when something answers there (namespace `RESQUE_NAMESPACE`, default
//! `resq-contact-sheet`); otherwise starts a throwaway `redis-server` on a free port. Runs a
//! worker until the sheet is done, prints what happened, and exits 0.

use anyhow::{bail, Context};
use resq::admin::Admin;
use resq::jobs::{State, Track};
use resq::workflows::Batch;
use resq::{Client, JobContext, JobError, Phase, Registry, Worker};
use serde_json::{json, Value};
use std::time::Duration;

fn main() -> anyhow::Result<()> {
    resq::runtime::build()?.block_on(run())
}

/// `Resize`: pretends to resize the image its arg names, and keeps where the thumbnail went.
async fn resize(ctx: JobContext) -> Result<(), JobError> {
    let name: String = ctx.arg(0)?;
    let stem = name.trim_end_matches(".png");
    let bytes = 8_000 + stem.bytes().map(u64::from).sum::<u64>() * 37 % 9_000;
    let thumb = format!("{stem}-thumb.png");
    println!(
        "  [{}] Resize {name} → {thumb} ({bytes} bytes)",
        ctx.worker_id()
    );
    ctx.set_result(&json!({ "thumb": thumb, "bytes": bytes }))
}

/// `ContactSheet`: reads the results of the resizes it waited for and lays them out.
async fn contact_sheet(ctx: JobContext) -> Result<(), JobError> {
    let album: u64 = ctx.arg(0)?;
    let deps = ctx.dependencies().await?;
    let mut thumbs = Vec::new();
    let mut total = 0;
    for d in &deps {
        if d.state != State::Completed {
            return Err(JobError::msg(format!("resize {} ended {}", d.id, d.state)));
        }
        let r = d.result.clone().unwrap_or(Value::Null);
        total += r["bytes"].as_u64().unwrap_or(0);
        thumbs.push(r["thumb"].as_str().unwrap_or("?").to_string());
    }
    println!(
        "  [{}] ContactSheet for album {album}: {} thumbnails, {total} bytes",
        ctx.worker_id(),
        thumbs.len()
    );
    for row in thumbs.chunks(4) {
        println!("        | {} |", row.join(" | "));
    }
    ctx.set_result(&json!({ "album": album, "thumbs": thumbs, "bytes": total }))
}

async fn run() -> anyhow::Result<()> {
    let n: usize = match std::env::args().nth(1) {
        Some(a) => a
            .parse()
            .context("the argument is how many images (a whole number)")?,
        None => 6,
    };
    let (url, _server) = redis_url().await?;
    let ns = std::env::var("RESQUE_NAMESPACE").unwrap_or_else(|_| "resq-contact-sheet".into());
    println!(
        "contact_sheet: Redis at {}, namespace {ns}",
        resq::conn::Redacted(&url)
    );
    let client = Client::connect(&url, &ns).await?;
    let admin = Admin::connect(&url, &ns).await?;

    // Fan-out: N resizes as one batch, whose on_success callback says the album is done.
    let mut batch = Batch::new()
        .description("thumbnails of album 7")
        .on_success("AlbumDone", vec![json!(7)]);
    for i in 1..=n {
        batch = batch.job("images", "Resize", vec![json!(format!("photo-{i:02}.png"))]);
    }
    let (bid, resizes) = client.create_batch(batch).await?;
    println!("batch {bid}: {n} resizes of album 7");

    // Fan-in: the contact sheet waits for every resize and reads their results.
    let mut track = Track::new();
    for id in &resizes {
        track = track.after(id.clone());
    }
    let sheet = client
        .enqueue_class_tracked("images", "ContactSheet", &[json!(7)], track)
        .await?;
    let state = client
        .status(&sheet)
        .await?
        .map_or("gone", |s| s.state.as_str());
    println!("contact sheet {sheet}: {state}, after the {n} resizes");

    // The callback tells this process it ran (no polling).
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let callback_admin = admin.clone();
    let registry = Registry::new()
        .handler("Resize", resize)
        .handler("ContactSheet", contact_sheet)
        .handler("AlbumDone", move |ctx: JobContext| {
            let (admin, done) = (callback_admin.clone(), done_tx.clone());
            async move {
                let bid = ctx
                    .batch()
                    .ok_or_else(|| JobError::msg("not a batch's callback"))?;
                let b = admin
                    .batch(&bid)
                    .await?
                    .ok_or_else(|| JobError::msg("no batch"))?;
                println!(
                    "  [{}] AlbumDone (on_success of batch {bid}): {} of {} resized",
                    ctx.worker_id(),
                    b.succeeded,
                    b.total
                );
                let _ = done.send(bid);
                Ok(())
            }
        });
    let running = Worker::builder()
        .redis_url(&url)
        .namespace(&ns)
        .queues("images")?
        .concurrency(3)
        .registry(registry)
        .build()?
        .start()
        .await?;

    let finished = client
        .wait(&sheet, Duration::from_secs(30))
        .await?
        .context("the contact sheet's record is gone")?;
    let called_back = tokio::time::timeout(Duration::from_secs(30), done_rx.recv()).await;
    running.stop(Phase::Quit);
    running.wait().await?;

    if finished.state != State::Completed {
        bail!(
            "the contact sheet ended {} ({:?})",
            finished.state,
            finished.error
        );
    }
    if !matches!(called_back, Ok(Some(ref b)) if *b == bid) {
        bail!("the batch's on_success callback did not run within 30 s");
    }
    let b = admin.batch(&bid).await?.context("the batch is gone")?;
    let sheet_result = finished.result.unwrap_or(Value::Null);
    println!(
        "batch {bid}: {}, {} of {} succeeded, {} failed",
        b.phase(),
        b.succeeded,
        b.total,
        b.failed
    );
    println!("contact sheet {sheet}: {} — {sheet_result}", finished.state);
    Ok(())
}

/// A Redis URL that answers: `REDIS_URL` if set and reachable, else a throwaway server.
async fn redis_url() -> anyhow::Result<(String, Option<Server>)> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    if ping(&url).await {
        return Ok((url, None));
    }
    let server =
        Server::start().context("no Redis answered at REDIS_URL and none could be started")?;
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
struct Server {
    child: std::process::Child,
    port: u16,
}

impl Server {
    fn start() -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
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

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
