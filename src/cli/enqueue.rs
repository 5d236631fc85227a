//! `resq enqueue`: push one job, in Resque's form (`{"class","args"}`, exactly Ruby's bytes)
//! or Jesque's (`{"class","args","vars"}`), and print what was written where.

use super::output;
use crate::client::delayed::Scheduled;
use crate::client::encode;
use crate::error::{Error, Result};
use chrono::SecondsFormat;
use clap::Args;
use serde::Serialize;
use serde_json::{Map, Value};

/// `resq enqueue [--queue Q] [--jesque] [--vars JSON] CLASS [ARG_JSON …]`.
#[derive(Args, Debug, Clone)]
pub(crate) struct EnqueueArgs {
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

/// What `resq enqueue` wrote, printed as its confirmation (as JSON with `--json`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Enqueued {
    /// The queue.
    pub queue: String,
    /// The class.
    pub class: String,
    /// The positional args as written (`null` for a Jesque job given only `--vars`).
    pub args: Option<Vec<Value>>,
    /// Jesque's named args, when given.
    pub vars: Option<Map<String, Value>>,
    /// `resque` (`{"class","args"}`) or `jesque` (`{"class","args","vars"}`).
    pub form: &'static str,
    /// Where it went: the queue list, resque-scheduler's delayed bucket or Jesque's zset queue.
    pub key: String,
    /// The exact bytes written.
    pub payload: String,
    /// When it is due (RFC 3339), for a delayed job; `None` when it was pushed now.
    pub due_at: Option<String>,
}

/// Runs `resq enqueue` and prints what it wrote.
pub(crate) async fn run(target: &super::Target, e: EnqueueArgs, as_json: bool) -> Result<()> {
    let done = enqueue(target, e).await?;
    if as_json {
        return output::json(&done);
    }
    let (verb, when) = match &done.due_at {
        Some(at) => ("scheduled", format!(" for {at}")),
        None => ("enqueued", String::new()),
    };
    println!(
        "{verb} {} on queue {}{when} ({}): {}",
        done.class, done.queue, done.key, done.payload
    );
    Ok(())
}

/// Pushes the job `e` describes and says what was written.
async fn enqueue(target: &super::Target, e: EnqueueArgs) -> Result<Enqueued> {
    let args: Vec<Value> = e
        .args
        .iter()
        .map(|a| {
            serde_json::from_str(a).map_err(|err| Error::Config {
                var: "ARG_JSON",
                message: format!("argument {a:?} is not JSON ({err}); quote strings: '\"text\"'"),
            })
        })
        .collect::<Result<Vec<Value>>>()?
        .into_iter()
        .map(as_typed_value)
        .collect();
    let client = target.client().await?;
    let keys = client.keys().clone();
    let due = crate::scheduler::cli::due_time(e.in_secs.as_deref(), e.at.as_deref())?;
    let jesque = e.jesque || e.vars.is_some();
    let vars = if jesque {
        parse_vars(e.vars.as_deref())?
    } else {
        None
    };
    let mut done = Enqueued {
        queue: e.queue.clone(),
        class: e.class.clone(),
        args: Some(args.clone()),
        vars: vars.clone(),
        form: if jesque { "jesque" } else { "resque" },
        key: keys.queue(&e.queue),
        payload: String::new(),
        due_at: None,
    };
    if jesque {
        // Jesque writes `"args":null` when only named args are given.
        let args = (!args.is_empty() || vars.is_none()).then_some(args);
        let job = crate::client::JesqueJob {
            class: e.class.clone(),
            args: args.clone(),
            vars: vars.clone(),
        };
        done.payload = job.encode();
        done.args = args;
        match due {
            Some(at) => {
                client.jesque_delayed_enqueue(&e.queue, &job, at).await?;
                done.due_at = Some(at.to_rfc3339_opts(SecondsFormat::Millis, true));
            }
            None => {
                client
                    .enqueue_jesque(&e.queue, &e.class, job.args.as_deref(), vars.as_ref())
                    .await?;
            }
        }
        return Ok(done);
    }
    done.payload = encode::resque_payload(&e.class, &args, client.float_format());
    if let Some(at) = due {
        if let Scheduled::Delayed(ts) = client.enqueue_at(&e.queue, at, &e.class, &args).await? {
            // resque-scheduler's item names its queue; the bucket is `delayed:<ts>`.
            done.payload = encode::scheduler_item(
                &e.queue,
                &e.class,
                &args,
                &Map::new(),
                client.float_format(),
            );
            done.key = keys.delayed_bucket(ts);
            // resque-scheduler files items by whole second.
            done.due_at = chrono::DateTime::from_timestamp(ts, 0)
                .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true));
        }
        return Ok(done);
    }
    client.enqueue_to(&e.queue, &e.class, &args).await?;
    Ok(done)
}

/// `--vars`: a JSON object, its numbers read as values (see [`as_typed_value`]).
fn parse_vars(text: Option<&str>) -> Result<Option<Map<String, Value>>> {
    let Some(text) = text else { return Ok(None) };
    match serde_json::from_str::<Value>(text).map(as_typed_value) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        Ok(_) => Err(Error::Config {
            var: "--vars",
            message: "must be a JSON object".into(),
        }),
        Err(err) => Err(Error::Config {
            var: "--vars",
            message: format!("must be a JSON object ({err})"),
        }),
    }
}

/// A command-line argument is a value typed by a person, so its numbers are read as the
/// reading peer reads them: a number with a fraction or an exponent becomes a float (written in
/// the peer's own float text: `1E2` → `100.0` for Ruby and Java), an integer stays an integer.
fn as_typed_value(v: Value) -> Value {
    match v {
        Value::Number(n) if n.to_string().contains(['.', 'e', 'E']) => n
            .to_string()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Number(n), Value::Number),
        Value::Array(a) => Value::Array(a.into_iter().map(as_typed_value).collect()),
        Value::Object(m) => {
            Value::Object(m.into_iter().map(|(k, v)| (k, as_typed_value(v))).collect())
        }
        other => other,
    }
}
