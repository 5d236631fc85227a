//! `resq enqueue`: push one job, in Resque's form (`{"class","args"}`, exactly Ruby's bytes)
//! or Jesque's (`{"class","args","vars"}`).

use crate::client::Client;
use crate::error::{Error, Result};
use clap::Args;
use serde_json::{Map, Value};

/// `resq enqueue [--queue Q] [--jesque] [--vars JSON] CLASS [ARG_JSON …]`.
#[derive(Args, Debug, Clone)]
pub struct EnqueueArgs {
    /// Queue.
    #[arg(long, default_value = "default")]
    pub queue: String,
    /// Write Jesque's form (`class, args, vars`).
    #[arg(long)]
    pub jesque: bool,
    /// Jesque named args (a JSON object).
    #[arg(long)]
    pub vars: Option<String>,
    /// Delay in seconds: resque-scheduler's delayed set (with --jesque, Jesque's zset queue).
    #[arg(long = "in", conflicts_with = "at")]
    pub in_secs: Option<String>,
    /// Due time in epoch seconds (as --in).
    #[arg(long)]
    pub at: Option<String>,
    /// Class name.
    pub class: String,
    /// Positional args, each one JSON value (negative numbers such as `-7` are values, not flags).
    #[arg(allow_negative_numbers = true)]
    pub args: Vec<String>,
}

/// Runs `resq enqueue`.
pub async fn run(url: &str, namespace: &str, e: EnqueueArgs) -> Result<()> {
    let args: Vec<Value> = e
        .args
        .iter()
        .map(|a| {
            serde_json::from_str(a).map_err(|err| Error::Config {
                var: "ARG_JSON",
                message: format!("argument {a:?} is not JSON ({err}); quote strings: '\"text\"'"),
            })
        })
        .collect::<Result<_>>()?;
    let client = Client::connect(url, namespace).await?;
    let due = crate::scheduler::cli::due_time(e.in_secs.as_deref(), e.at.as_deref())?;
    if let Some(at) = due {
        if e.jesque || e.vars.is_some() {
            let vars: Option<Map<String, Value>> = match &e.vars {
                Some(v) => Some(serde_json::from_str(v).map_err(|err| Error::Config {
                    var: "--vars",
                    message: format!("must be a JSON object ({err})"),
                })?),
                None => None,
            };
            let job = crate::client::JesqueJob {
                class: e.class.clone(),
                args: (!args.is_empty() || vars.is_none()).then_some(args),
                vars,
            };
            return client.jesque_delayed_enqueue(&e.queue, &job, at).await;
        }
        return client
            .enqueue_at(&e.queue, at, &e.class, &args)
            .await
            .map(drop);
    }
    if e.jesque || e.vars.is_some() {
        let vars: Option<Map<String, Value>> = match &e.vars {
            Some(v) => Some(serde_json::from_str(v).map_err(|err| Error::Config {
                var: "--vars",
                message: format!("must be a JSON object ({err})"),
            })?),
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
