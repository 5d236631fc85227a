//! `resq enqueue`: push one job, in Resque's form (`{"class","args"}`, exactly Ruby's bytes)
//! or Jesque's (`{"class","args","vars"}`), or with tracking (`--track`: an id, tags, a job
//! key), and print what was written where; or, with `--file`, one job per line of a file
//! (`enqueue_file`).

use super::output;
use crate::client::encode;
use crate::error::{Error, Result};
use crate::jobs::{JobId, Track};
use chrono::SecondsFormat;
use clap::Args;
use serde::Serialize;
use serde_json::{Map, Value};

/// `resq enqueue [--queue Q] [--jesque] [--vars JSON] [--track [--tag T]… [--key K]
/// [--after ID]… [--if-dep-failed P] [--parent ID] [--batch BID]] [--in S | --at T] CLASS
/// [ARG_JSON …]`, or `resq enqueue [--queue Q] [--track [--tag T]…]
/// --file F`.
#[derive(Args, Debug, Clone)]
pub(crate) struct EnqueueArgs {
    /// Queue (with --file, of the lines that name none).
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
    /// For a split queue (`resq split`): the key whose CRC-32 picks the shard (round robin
    /// without it); a queue that is not split ignores it.
    #[arg(long, value_name = "KEY", conflicts_with_all = ["jesque", "vars"])]
    pub shard_key: Option<String>,
    /// Track the job (docs/jobs.md): prints its id, for `resq job show|wait|cancel ID`.
    #[arg(long)]
    pub track: bool,
    /// A tag to find the tracked job by, `resq jobs --tag T` (repeatable; needs --track).
    #[arg(long = "tag", value_name = "T")]
    pub tags: Vec<String>,
    /// A job key (needs --track): while a job enqueued with it has not finished, nothing is
    /// enqueued and that job's id is printed.
    #[arg(long, value_name = "K")]
    pub key: Option<String>,
    /// Workflows (needs --track; docs/workflows.md).
    #[command(flatten)]
    pub flow: super::enqueue_flow::FlowArgs,
    /// One job per line of F (`-`: standard input): `{"class":…,"args":[…]}` and an optional
    /// `"queue"`; blank lines are skipped. Every line is checked first: one bad line and
    /// nothing is enqueued (exit 1).
    #[arg(long, value_name = "F", conflicts_with_all = ["class", "args", "jesque", "vars", "in_secs", "at", "key", "shard_key"])]
    pub file: Option<String>,
    /// Class name.
    #[arg(required_unless_present = "file")]
    pub class: Option<String>,
    /// Positional args, each one JSON value (negative numbers such as `-7` are values, not flags).
    #[arg(allow_negative_numbers = true)]
    pub args: Vec<String>,
}

/// A tracked job's part of what `resq enqueue --track` prints.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Tracked {
    /// The job's id (with a job key whose job is still live, that job's).
    pub id: JobId,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its job key.
    pub job_key: Option<String>,
    /// Whether `id` is that of a live job with the same job key: nothing was enqueued.
    pub existing: bool,
    /// The workflow flags given.
    #[serde(flatten)]
    pub flow: super::enqueue_flow::FlowOut,
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
    /// The exact bytes written (`None`: nothing was, a tracked job's key being live).
    pub payload: Option<String>,
    /// When it is due (RFC 3339), for a delayed job; `None` when it was pushed now.
    pub due_at: Option<String>,
    /// With `--track`: the id, tags, job key.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub tracked: Option<Tracked>,
}

/// Runs `resq enqueue` and prints what it wrote.
pub(crate) async fn run(target: &super::Target, e: EnqueueArgs, as_json: bool) -> Result<()> {
    check_flags(&e)?;
    if let Some(file) = e.file.clone() {
        return super::enqueue_file::run(target, &e, &file, as_json).await;
    }
    let done = enqueue(target, e).await?;
    if as_json {
        return output::json(&done);
    }
    if let Some(t) = &done.tracked {
        if t.existing {
            eprintln!(
                "job key {}: job {} has not finished; nothing was enqueued",
                t.job_key.as_deref().unwrap_or(""),
                t.id
            );
        }
        println!("{}", t.id);
        return Ok(());
    }
    let (verb, when) = match &done.due_at {
        Some(at) => ("scheduled", format!(" for {at}")),
        None => ("enqueued", String::new()),
    };
    println!(
        "{verb} {} on queue {}{when} ({}): {}",
        done.class,
        done.queue,
        done.key,
        done.payload.as_deref().unwrap_or("")
    );
    Ok(())
}

/// Refuses flags that do not go together, naming the flag: `--tag` and `--key` without
/// `--track`, and `--track` with Jesque's form.
fn check_flags(e: &EnqueueArgs) -> Result<()> {
    e.flow
        .check(e.track, e.in_secs.is_some() || e.at.is_some())?;
    if !e.track {
        if !e.tags.is_empty() {
            return Err(Error::Config {
                var: "--tag",
                message: "needs --track (tags are kept in a tracked job's record)".into(),
            });
        }
        if e.key.is_some() {
            return Err(Error::Config {
                var: "--key",
                message: "needs --track (a job key is kept with a tracked job)".into(),
            });
        }
        return Ok(());
    }
    for (flag, given) in [("--jesque", e.jesque), ("--vars", e.vars.is_some())] {
        if given {
            return Err(Error::Config {
                var: flag,
                message: "a tracked job is written in Resque's form; drop it or --track".into(),
            });
        }
    }
    tracking(e).check()
}

/// The tracking `--tag`, `--key` and the workflow flags ask for.
pub(crate) fn tracking(e: &EnqueueArgs) -> Track {
    let mut t = e.flow.apply(Track::new());
    for tag in &e.tags {
        t = t.tag(tag);
    }
    if let Some(k) = &e.key {
        t = t.key(k);
    }
    t
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
    let class = e.class.clone().unwrap_or_default();
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
        class: class.clone(),
        args: Some(args.clone()),
        vars: vars.clone(),
        form: if jesque { "jesque" } else { "resque" },
        key: keys.queue(&e.queue),
        payload: None,
        due_at: None,
        tracked: None,
    };
    if e.track {
        let id = JobId::new();
        let mut track = tracking(&e).id(id.clone());
        if let Some(at) = due {
            track = track.at(at);
        }
        // The members the client's chain added (a trace context) are printed too.
        let written = std::sync::Mutex::new((Map::new(), e.queue.clone()));
        let got = client
            .enqueue_class_tracked_seen(
                &e.queue,
                &class,
                &args,
                track,
                e.shard_key.as_deref(),
                |j| {
                    *written.lock().unwrap_or_else(|p| p.into_inner()) =
                        (j.extra.clone(), j.queue.clone());
                },
            )
            .await
            .map_err(|err| super::enqueue_flow::as_flag(err, &target.namespace))?;
        // (On a spread namespace the id written carries its queue's slot tag after these 32.)
        let existing = got.as_str().get(..32) != Some(id.as_str());
        let (extra, queue) = written.into_inner().unwrap_or_else(|p| p.into_inner());
        done.key = keys.queue(&queue);
        done.queue = queue;
        let fmt = client.float_format();
        let delayed = due
            .map(crate::client::delayed::epoch_secs)
            .filter(|ts| *ts > chrono::Utc::now().timestamp());
        done.payload = Some(match delayed {
            Some(ts) => {
                done.key = keys.delayed_bucket(ts);
                done.due_at = chrono::DateTime::from_timestamp(ts, 0)
                    .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true));
                encode::scheduler_item(&e.queue, &class, &args, &extra, fmt)
            }
            None => encode::resque_payload_with(&class, &args, &extra, fmt),
        })
        .filter(|_| !existing);
        let flow = e.flow.out(&client, &got).await?;
        done.tracked = Some(Tracked {
            id: got,
            tags: e.tags.clone(),
            job_key: e.key.clone(),
            existing,
            flow,
        });
        return Ok(done);
    }
    if jesque {
        // Jesque writes `"args":null` when only named args are given.
        let args = (!args.is_empty() || vars.is_none()).then_some(args);
        let job = crate::client::JesqueJob {
            class: class.clone(),
            args: args.clone(),
            vars: vars.clone(),
        };
        done.payload = Some(job.encode());
        done.args = args;
        match due {
            Some(at) => {
                client.jesque_delayed_enqueue(&e.queue, &job, at).await?;
                done.due_at = Some(at.to_rfc3339_opts(SecondsFormat::Millis, true));
            }
            None => {
                client
                    .enqueue_jesque(&e.queue, &class, job.args.as_deref(), vars.as_ref())
                    .await?;
            }
        }
        return Ok(done);
    }
    // Through the client's chain, so the members it adds (a trace context) are printed too.
    let written = std::sync::Mutex::new((Map::new(), None, e.queue.clone()));
    client
        .dispatch_seen(
            crate::middleware::Outgoing {
                queue: e.queue.clone(),
                class: class.clone(),
                args: args.clone(),
                extra: Map::new(),
                at: due,
                track: None,
                shard_key: e.shard_key.clone(),
            },
            |j| {
                *written.lock().unwrap_or_else(|p| p.into_inner()) =
                    (j.extra.clone(), j.at, j.queue.clone())
            },
        )
        .await?;
    let (extra, at, queue) = written.into_inner().unwrap_or_else(|p| p.into_inner());
    // (A split queue's job went to one of its shards.)
    done.key = keys.queue(&queue);
    done.queue = queue;
    let ts = at.map(crate::client::delayed::epoch_secs);
    match ts {
        Some(ts) if ts > crate::client::delayed::epoch_secs(chrono::Utc::now()) => {
            // resque-scheduler's item names its queue; the bucket is `delayed:<ts>`.
            done.payload = Some(encode::scheduler_item(
                &e.queue,
                &class,
                &args,
                &extra,
                client.float_format(),
            ));
            done.key = keys.delayed_bucket(ts);
            // resque-scheduler files items by whole second.
            done.due_at = chrono::DateTime::from_timestamp(ts, 0)
                .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true));
        }
        _ => {
            done.payload = Some(encode::resque_payload_with(
                &class,
                &args,
                &extra,
                client.float_format(),
            ));
        }
    }
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
pub(crate) fn as_typed_value(v: Value) -> Value {
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
