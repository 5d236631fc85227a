//! The client side of tracked jobs, for the compat harnesses (compat-tests/CONTRACT.md):
//! enqueue with tracking, resque-status's `create`, and resq's readers of job records.
//!
//! Configured by `REDIS_URL` and `RESQUE_NAMESPACE` (default `resque`). Each command prints one
//! line on stdout; errors go to stderr with exit status 1.
//!
//! ```text
//! compat_client enqueue-tracked QUEUE CLASS [ARG_JSON ...]   # Client::enqueue_class_tracked → the id
//! compat_client create-status QUEUE CLASS OPTIONS_JSON       # Client::create_status_class → the id
//! compat_client job ID [ID ...]      # Admin::job of each: {"<id>": JobStatus | null | {"read_error": …}}
//! compat_client jobs [LIMIT]         # Admin::jobs (no filter, default 1000): JobPage
//! ```
//!
//! An id that is not a job id's shape (32 lowercase hex characters) reads as `null`, as
//! resque-status's `Hash.get` of an unknown uuid does.

use anyhow::{bail, Context};
use resq::admin::Admin;
use resq::jobs::{JobFilter, JobId, Track};
use resq::Client;
use serde_json::{Map, Value};

fn main() -> anyhow::Result<()> {
    resq::runtime::build()?.block_on(run())
}

/// Each word parsed as one JSON value.
fn json_args(words: &[String]) -> anyhow::Result<Vec<Value>> {
    words
        .iter()
        .map(|w| serde_json::from_str(w).with_context(|| format!("{w:?} is not one JSON value")))
        .collect()
}

async fn run() -> anyhow::Result<()> {
    let url = std::env::var("REDIS_URL").context("REDIS_URL is not set")?;
    let ns = std::env::var("RESQUE_NAMESPACE").unwrap_or_else(|_| "resque".into());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        bail!("usage: compat_client enqueue-tracked|create-status|job|jobs …");
    };
    match command.as_str() {
        "enqueue-tracked" => {
            let [queue, class, json @ ..] = rest else {
                bail!("usage: compat_client enqueue-tracked QUEUE CLASS [ARG_JSON ...]");
            };
            let client = Client::connect(&url, &ns).await?;
            let id = client
                .enqueue_class_tracked(queue, class, &json_args(json)?, Track::new())
                .await?;
            println!("{id}");
        }
        "create-status" => {
            let [queue, class, options] = rest else {
                bail!("usage: compat_client create-status QUEUE CLASS OPTIONS_JSON");
            };
            let options: Map<String, Value> = serde_json::from_str(options)
                .with_context(|| format!("{options:?} is not a JSON object"))?;
            let client = Client::connect(&url, &ns).await?;
            let id = client
                .create_status_class(queue, class, options, Track::new())
                .await?;
            println!("{id}");
        }
        "job" => {
            let admin = Admin::connect(&url, &ns).await?;
            let mut out = Map::new();
            for word in rest {
                let v = match JobId::parse(word) {
                    None => Value::Null,
                    Some(id) => match admin.job(&id).await {
                        Ok(s) => serde_json::to_value(s)?,
                        Err(e) => serde_json::json!({ "read_error": e.to_string() }),
                    },
                };
                out.insert(word.clone(), v);
            }
            println!("{}", Value::Object(out));
        }
        "jobs" => {
            let limit = match rest.first() {
                Some(n) => n.parse().context("LIMIT is a number")?,
                None => 1000,
            };
            let admin = Admin::connect(&url, &ns).await?;
            let page = admin.jobs(&JobFilter::default(), 0, limit).await?;
            println!("{}", serde_json::to_string(&page)?);
        }
        other => bail!("unknown command {other:?}: enqueue-tracked, create-status, job, jobs"),
    }
    Ok(())
}
