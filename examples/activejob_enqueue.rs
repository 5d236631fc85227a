//! Enqueues one ActiveJob job for Rails workers, used by `compat-tests/activejob`.
//!
//! ```text
//! activejob_enqueue --url URL --namespace NS --rails 6.1 [--queue Q] [--at EPOCH | --in SECS]
//!                   [--job-id ID] [--priority N] [--locale L] [--timezone TZ] CLASS [ARG ...]
//! ```
//! Each ARG is one JSON value. Plain JSON is a plain argument (objects become string-keyed
//! Hashes); a one-key object whose key starts with `$` names a Ruby type:
//! `{"$sym":"x"}`, `{"$time":"…Z"|"…+01:00"}`, `{"$datetime":"…"}`,
//! `{"$twz":{"at":"…-05:00","zone":"America/New_York"}}`, `{"$date":"2026-11-21"}`,
//! `{"$decimal":"1.50"}`, `{"$duration":{"seconds":3600,"parts":[["hours",1]]}}`,
//! `{"$module":"Name"}`, `{"$gid":"gid://app/User/1"}`, `{"$range":[BEGIN,END,EXCLUDE_END]}`,
//! `{"$custom":{"serializer":"MoneySerializer","fields":{…}}}`,
//! `{"$symhash":{…}}`, `{"$kwargs":{…}}`, `{"$indifferent":{…}}`,
//! `{"$hash":[["key","sym"|"str",VALUE],…]}`, `{"$kwargs":[["key","sym"|"str",VALUE],…]}`;
//! values inside are specs too.
//!
//! Prints one JSON line: `{"job_id":…,"bytes":…,"delayed_until":…}`.

use anyhow::{anyhow, bail, Context};
use chrono::{DateTime, NaiveDate, Utc};
use clap::Parser;
use resq::activejob::{ActiveJobClient, Arg, DurationUnit, Key, NewJob, Rails};
use serde_json::{json, Map, Number, Value};

#[derive(Parser)]
struct Cli {
    /// Redis URL.
    #[arg(long, env = "REDIS_URL")]
    url: String,
    /// Namespace.
    #[arg(long, env = "RESQUE_NAMESPACE", default_value = "resque")]
    namespace: String,
    /// Rails version of the consuming workers (6.1, 7.0, 7.1, 7.2, 8.0, 8.1).
    #[arg(long)]
    rails: Rails,
    /// Queue (`queue_name`).
    #[arg(long, default_value = "default")]
    queue: String,
    /// Run at this epoch time (seconds, fractions allowed).
    #[arg(long, conflicts_with = "in_secs")]
    at: Option<f64>,
    /// Run in this many seconds.
    #[arg(long = "in")]
    in_secs: Option<f64>,
    /// The job id (default: a fresh UUID v4).
    #[arg(long)]
    job_id: Option<String>,
    /// Priority.
    #[arg(long)]
    priority: Option<i64>,
    /// Locale.
    #[arg(long, default_value = "en")]
    locale: String,
    /// Time zone name.
    #[arg(long, default_value = "UTC")]
    timezone: String,
    /// ActiveJob class.
    class: String,
    /// Arguments, one JSON value each.
    args: Vec<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut job = NewJob::new(&cli.class)
        .queue(&cli.queue)
        .locale(&cli.locale)
        .timezone(Some(cli.timezone.clone()));
    for (i, a) in cli.args.iter().enumerate() {
        let v: Value = serde_json::from_str(a).with_context(|| format!("argument {i}: {a}"))?;
        job = job.arg(spec(&v).with_context(|| format!("argument {i}: {a}"))?);
    }
    if let Some(id) = &cli.job_id {
        job = job.job_id(id);
    }
    if let Some(p) = cli.priority {
        job = job.priority(p);
    }
    let client = resq::Client::connect(&cli.url, &cli.namespace).await?;
    let aj = ActiveJobClient::new(client, cli.rails);
    let done = match (cli.at, cli.in_secs) {
        (Some(at), _) => {
            let t = DateTime::<Utc>::from_timestamp_micros((at * 1e6) as i64)
                .ok_or_else(|| anyhow!("--at {at} is out of range"))?;
            aj.enqueue_at(&job, t).await?
        }
        (None, Some(secs)) => {
            aj.enqueue_in(&job, std::time::Duration::try_from_secs_f64(secs)?)
                .await?
        }
        (None, None) => aj.enqueue(&job).await?,
    };
    println!(
        "{}",
        json!({"job_id": done.job_id, "bytes": done.bytes, "delayed_until": done.delayed_until})
    );
    Ok(())
}

/// A JSON spec → an ActiveJob argument.
fn spec(v: &Value) -> anyhow::Result<Arg> {
    let obj = match v {
        Value::Array(items) => {
            return Ok(Arg::Array(
                items.iter().map(spec).collect::<Result<_, _>>()?,
            ))
        }
        Value::Object(o) => o,
        other => return Ok(Arg::Json(other.clone())),
    };
    let tagged = obj.len() == 1 && obj.keys().all(|k| k.starts_with('$'));
    if !tagged {
        let entries = obj
            .iter()
            .map(|(k, v)| Ok((Key::Str(k.clone()), spec(v)?)))
            .collect::<anyhow::Result<_>>()?;
        return Ok(Arg::Hash {
            entries,
            keywords: false,
        });
    }
    let (tag, body) = obj.iter().next().ok_or_else(|| anyhow!("empty spec"))?;
    let text = || body.as_str().ok_or_else(|| anyhow!("{tag} takes a string"));
    Ok(match tag.as_str() {
        "$sym" => Arg::symbol(text()?),
        "$time" => {
            let t = DateTime::parse_from_rfc3339(text()?)?;
            if text()?.ends_with('Z') {
                Arg::time_utc(t.with_timezone(&Utc))
            } else {
                Arg::time(t)
            }
        }
        "$datetime" => Arg::DateTime(DateTime::parse_from_rfc3339(text()?)?),
        "$twz" => Arg::TimeWithZone {
            at: DateTime::parse_from_rfc3339(body["at"].as_str().unwrap_or_default())?,
            zone: body["zone"].as_str().unwrap_or("UTC").to_string(),
        },
        "$date" => Arg::date(NaiveDate::parse_from_str(text()?, "%Y-%m-%d")?),
        "$decimal" => Arg::big_decimal(text()?),
        "$duration" => Arg::Duration {
            seconds: number(&body["seconds"])?,
            parts: body["parts"]
                .as_array()
                .map(|ps| ps.iter().map(duration_part).collect::<anyhow::Result<_>>())
                .transpose()?
                .unwrap_or_default(),
        },
        "$module" => Arg::module(text()?),
        "$custom" => Arg::Custom {
            serializer: body["serializer"].as_str().unwrap_or_default().to_string(),
            fields: body["fields"].as_object().cloned().unwrap_or_default(),
        },
        "$gid" => Arg::global_id(text()?),
        "$range" => match body.as_array().map(Vec::as_slice) {
            Some([b, e, x]) => Arg::range(spec(b)?, spec(e)?, x.as_bool().unwrap_or(false)),
            _ => bail!("$range takes [begin, end, exclude_end]"),
        },
        "$symhash" => Arg::symbol_hash(entries(body)?),
        "$kwargs" if body.is_array() => Arg::Hash {
            entries: keyed(body)?,
            keywords: true,
        },
        "$kwargs" => Arg::keywords(entries(body)?),
        "$indifferent" => Arg::indifferent(entries(body)?),
        "$hash" => Arg::Hash {
            entries: keyed(body)?,
            keywords: false,
        },
        other => bail!("unknown type tag {other}"),
    })
}

fn entries(body: &Value) -> anyhow::Result<Vec<(String, Arg)>> {
    let m: &Map<String, Value> = body
        .as_object()
        .ok_or_else(|| anyhow!("expected an object"))?;
    m.iter().map(|(k, v)| Ok((k.clone(), spec(v)?))).collect()
}

/// `[[key, "sym"|"str", value], …]`: a hash with mixed key kinds.
fn keyed(body: &Value) -> anyhow::Result<Vec<(Key, Arg)>> {
    let items = body
        .as_array()
        .ok_or_else(|| anyhow!("expected [[key, kind, value], …]"))?;
    items
        .iter()
        .map(|e| match e.as_array().map(Vec::as_slice) {
            Some([Value::String(k), Value::String(kind), v]) => {
                let key = if kind == "sym" {
                    Key::Sym(k.clone())
                } else {
                    Key::Str(k.clone())
                };
                Ok((key, spec(v)?))
            }
            _ => bail!("a hash entry is [key, \"sym\"|\"str\", value]"),
        })
        .collect()
}

fn number(v: &Value) -> anyhow::Result<Number> {
    match v {
        Value::Number(n) => Ok(n.clone()),
        other => bail!("expected a number, got {other}"),
    }
}

fn duration_part(p: &Value) -> anyhow::Result<(DurationUnit, Number)> {
    let [Value::String(unit), n] = p.as_array().map(Vec::as_slice).unwrap_or_default() else {
        bail!("a duration part is [unit, number]");
    };
    let unit = match unit.as_str() {
        "years" => DurationUnit::Years,
        "months" => DurationUnit::Months,
        "weeks" => DurationUnit::Weeks,
        "days" => DurationUnit::Days,
        "hours" => DurationUnit::Hours,
        "minutes" => DurationUnit::Minutes,
        "seconds" => DurationUnit::Seconds,
        other => bail!("unknown duration unit {other}"),
    };
    Ok((unit, number(n)?))
}
