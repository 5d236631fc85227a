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
        .collect::<Result<Vec<Value>>>()?
        .into_iter()
        .map(as_typed_value)
        .collect();
    let client = Client::connect(url, namespace).await?;
    let due = crate::scheduler::cli::due_time(e.in_secs.as_deref(), e.at.as_deref())?;
    if let Some(at) = due {
        if e.jesque || e.vars.is_some() {
            let vars = parse_vars(e.vars.as_deref())?;
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
        let vars = parse_vars(e.vars.as_deref())?;
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
