//! `resq enqueue --file F` (`-`: standard input): one job per line, `{"class":…,"args":[…]}`
//! with an optional `"queue"`; blank lines skipped.
//!
//! Every line is read and checked before anything is sent: one bad line and nothing is
//! enqueued, each bad line said with its number and why. The jobs then go to Redis in pipelines
//! ([`crate::client::pipelined`]), each the script call of its own single enqueue, so each line
//! is atomic on its own and a few thousand lines take one round trip per thousand. An untracked
//! line writes the bytes `resq enqueue CLASS ARGS` writes (Ruby's `{"class","args"}`); with
//! `--track` (and `--tag`), each line is a tracked job.
//!
//! Prints, without `--json`: the ids, one per line, when tracked (a summary on stderr), else a
//! summary; with `--json`, one object per job, in order: `line`, `queue`, `class`, and `id`
//! (tracked) or `error` (a line Redis refused or that was not sent). A line Redis refused is
//! said with its number on stderr, and the exit status is 1.

use super::enqueue::{as_typed_value, tracking, EnqueueArgs};
use super::output;
use crate::client::pipelined::{Outcome, Pending, CHUNK};
use crate::error::{Error, Result};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// What `--json` prints for one job.
#[derive(Debug, Serialize)]
struct JobOut {
    /// Its line in the file (from 1).
    line: usize,
    /// Its queue.
    queue: String,
    /// Its class.
    class: String,
    /// A tracked job's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    /// Why it was not enqueued (refused by Redis, or not sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Runs `resq enqueue --file`.
pub(crate) async fn run(
    target: &super::Target,
    e: &EnqueueArgs,
    file: &str,
    as_json: bool,
) -> Result<()> {
    let text = read_input(file, "--file")?;
    let file = if file == "-" { "standard input" } else { file };
    let (lines, bad) = parse(&text, &e.queue);
    if !bad.is_empty() {
        for (n, why) in &bad {
            eprintln!("line {n}: {why}");
        }
        return Err(Error::Config {
            var: "--file",
            message: format!(
                "{file}: {} of {} lines are not jobs (listed above); nothing was enqueued",
                bad.len(),
                bad.len() + lines.len()
            ),
        });
    }
    let jobs: Vec<Pending> = lines
        .iter()
        .map(|(_, job)| Pending {
            track: e.track.then(|| tracking(e)),
            ..job.clone()
        })
        .collect();
    let client = target.client().await?;
    let sent = client.enqueue_pipelined(&jobs).await;
    let mut out = Vec::with_capacity(jobs.len());
    let mut failed = 0;
    for ((n, job), outcome) in lines.iter().zip(&sent.outcomes) {
        let mut o = JobOut {
            line: *n,
            queue: job.queue.clone(),
            class: job.class.clone(),
            id: None,
            error: None,
        };
        match outcome {
            Outcome::Enqueued(t) => o.id = t.as_ref().map(|(id, _)| id.to_string()),
            Outcome::Refused(why) => {
                failed += 1;
                eprintln!("line {n}: not enqueued: {why}");
                o.error = Some(why.clone());
            }
        }
        out.push(o);
    }
    let unsent = lines.get(sent.outcomes.len()..).unwrap_or_default();
    if let Some(err) = &sent.failure {
        let unknown = unsent.len().min(CHUNK);
        for (k, (n, job)) in unsent.iter().enumerate() {
            let why = if k < unknown {
                format!("unknown: {err} while it was sent; it may or may not be enqueued")
            } else {
                "not sent".to_string()
            };
            out.push(JobOut {
                line: *n,
                queue: job.queue.clone(),
                class: job.class.clone(),
                id: None,
                error: Some(why),
            });
        }
    }
    let done = out.iter().filter(|o| o.error.is_none()).count();
    if as_json {
        output::json(&out)?;
    } else if e.track {
        for o in &out {
            if let Some(id) = &o.id {
                println!("{id}");
            }
        }
        eprintln!("{}", summary(&out, done, file));
    } else {
        println!("{}", summary(&out, done, file));
    }
    if let Some(err) = sent.failure {
        let first = unsent.first().map_or(0, |(n, _)| *n);
        return Err(Error::Config {
            var: "--file",
            message: format!(
                "{file}: {err}: the jobs of lines {first} on are not known to be enqueued \
                 (up to {CHUNK} of them may be; the rest were not sent); {done} before them were"
            ),
        });
    }
    if failed > 0 {
        return Err(Error::Config {
            var: "--file",
            message: format!(
                "{file}: {failed} of {} jobs were not enqueued (lines listed above)",
                out.len()
            ),
        });
    }
    Ok(())
}

/// `enqueued 3 jobs from jobs.ndjson: default 2, mail 1`.
fn summary(out: &[JobOut], done: usize, file: &str) -> String {
    let mut by_queue: BTreeMap<&str, usize> = BTreeMap::new();
    for o in out.iter().filter(|o| o.error.is_none()) {
        *by_queue.entry(o.queue.as_str()).or_default() += 1;
    }
    let queues: Vec<String> = by_queue.iter().map(|(q, n)| format!("{q} {n}")).collect();
    let jobs = if done == 1 { "job" } else { "jobs" };
    if queues.is_empty() {
        format!("enqueued {done} {jobs} from {file}")
    } else {
        format!("enqueued {done} {jobs} from {file}: {}", queues.join(", "))
    }
}

/// The text of `file` given with option `flag` (`-`: standard input).
pub(crate) fn read_input(file: &str, flag: &'static str) -> Result<String> {
    use std::io::Read;
    let mut text = String::new();
    let r = if file == "-" {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::File::open(file).and_then(|mut f| f.read_to_string(&mut text).map(|_| ()))
    };
    r.map_err(|err| Error::Config {
        var: flag,
        message: format!("{file}: cannot be read ({err})"),
    })?;
    Ok(text)
}

/// Lines of the file with what was made of them: `(line number, job or why it is not one)`.
pub(crate) type Numbered<T> = Vec<(usize, T)>;

/// The jobs of `text` with their line numbers (from 1; blank lines skipped), and the lines that
/// are not jobs with why. `queue` is the queue of a line that names none.
pub(crate) fn parse(text: &str, queue: &str) -> (Numbered<Pending>, Numbered<String>) {
    let (mut jobs, mut bad) = (Vec::new(), Vec::new());
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match job(line, queue) {
            Ok(j) => jobs.push((i + 1, j)),
            Err(why) => bad.push((i + 1, why)),
        }
    }
    (jobs, bad)
}

/// One line's job, or why it is not one.
fn job(line: &str, queue: &str) -> std::result::Result<Pending, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let Value::Object(mut m) = v else {
        return Err(r#"not a JSON object ({"class":…,"args":[…]})"#.into());
    };
    if let Some(k) = m
        .keys()
        .find(|k| !matches!(k.as_str(), "class" | "args" | "queue"))
    {
        return Err(format!(
            "unknown field {k:?} (a line has \"class\", \"args\" and an optional \"queue\")"
        ));
    }
    let class = match m.remove("class") {
        Some(Value::String(c)) if !c.is_empty() => c,
        Some(_) => return Err("\"class\" is not a non-empty string".into()),
        None => return Err("no \"class\"".into()),
    };
    let args = match m.remove("args") {
        Some(Value::Array(a)) => a.into_iter().map(as_typed_value).collect(),
        Some(_) => return Err("\"args\" is not an array".into()),
        None => return Err("no \"args\" (an array: [] for none)".into()),
    };
    let queue = match m.remove("queue") {
        None => queue.to_string(),
        Some(Value::String(q)) if !q.is_empty() => q,
        Some(_) => return Err("\"queue\" is not a non-empty string".into()),
    };
    crate::client::validate(&queue, &class).map_err(|e| e.to_string())?;
    Ok(Pending {
        queue,
        class,
        args,
        track: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_line_is_said_with_its_number() {
        let text = "\u{feff}{\"class\":\"A\",\"args\":[1]}\n\n  \n{\"class\":\"B\"}\nnope\n\
                    [1]\n{\"class\":\"\",\"args\":[]}\n{\"class\":\"C\",\"args\":{}}\n\
                    {\"class\":\"D\",\"args\":[],\"queue\":\"mail\",\"x\":1}\n\
                    {\"class\":\"E\",\"args\":[],\"queue\":7}\n\
                    {\"class\":\"F\",\"args\":[1.50],\"queue\":\"mail\"}\r\n\
                    {\"class\":\"G\",\"args\":[],\"queue\":\"a\\nb\"}\n";
        let (jobs, bad) = parse(text, "default");
        let lines: Vec<usize> = jobs.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, [1, 11]);
        assert_eq!(jobs[0].1.queue, "default");
        assert_eq!(jobs[1].1.queue, "mail");
        assert_eq!(jobs[1].1.args, vec![serde_json::json!(1.5)]);
        let said: Vec<(usize, &str)> = bad.iter().map(|(n, w)| (*n, w.as_str())).collect();
        assert_eq!(said[0], (4, "no \"args\" (an array: [] for none)"));
        assert!(
            said[1].0 == 5 && said[1].1.starts_with("not JSON"),
            "{said:?}"
        );
        assert!(said[2].0 == 6 && said[2].1.starts_with("not a JSON object"));
        assert_eq!(said[3], (7, "\"class\" is not a non-empty string"));
        assert_eq!(said[4], (8, "\"args\" is not an array"));
        assert!(said[5].0 == 9 && said[5].1.starts_with("unknown field \"x\""));
        assert_eq!(said[6], (10, "\"queue\" is not a non-empty string"));
        assert!(
            said[7].0 == 12 && said[7].1.contains("control character"),
            "{said:?}"
        );
        assert_eq!(said.len(), 8);
    }
}
