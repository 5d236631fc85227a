//! `resq enqueue --file F` (`-`: standard input): one job per line, `{"class":…,"args":[…]}`
//! with an optional `"queue"`; blank lines skipped.
//!
//! The file is read twice, a line at a time, in bounded memory whatever its size: a first pass
//! checks every line (one bad line and nothing is enqueued, each bad line said with its number
//! and why, a line that is not UTF-8 too); a second pass enqueues, [`CHUNK`] lines at a time, in
//! pipelines ([`crate::client::pipelined`]), each the script call of its own single enqueue, so
//! each line is atomic on its own and a thousand lines take one round trip. Standard input is
//! kept aside in a temporary file by the first pass (removed at the end). An untracked line
//! writes the bytes `resq enqueue CLASS ARGS` writes (Ruby's `{"class","args"}`); with
//! `--track` (and `--tag`), each line is a tracked job.
//!
//! Prints, without `--json`: the ids, one per line, when tracked (a summary on stderr), else a
//! summary; with `--json`, one object per job, in order: `line`, `queue`, `class`, and `id`
//! (tracked) or `error` (a line Redis refused or that was not sent). A line Redis refused is
//! said with its number on stderr, and the exit status is 1.

use super::enqueue::{as_typed_value, tracking, EnqueueArgs};
use crate::client::pipelined::{Outcome, Pending, CHUNK};
use crate::error::{Error, Result};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};

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

/// Prints the jobs as they are done: `--json`'s array an element at a time, or the ids of
/// tracked jobs a line each; counts what was enqueued, by queue.
struct Printer {
    as_json: bool,
    track: bool,
    first: bool,
    done: usize,
    total: usize,
    by_queue: BTreeMap<String, usize>,
    out: std::io::BufWriter<std::io::Stdout>,
}

impl Printer {
    fn new(as_json: bool, track: bool) -> Printer {
        Printer {
            as_json,
            track,
            first: true,
            done: 0,
            total: 0,
            by_queue: BTreeMap::new(),
            out: std::io::BufWriter::new(std::io::stdout()),
        }
    }

    fn job(&mut self, o: JobOut) -> Result<()> {
        self.total += 1;
        if o.error.is_none() {
            self.done += 1;
            match self.by_queue.get_mut(&o.queue) {
                Some(n) => *n += 1,
                None => {
                    self.by_queue.insert(o.queue.clone(), 1);
                }
            }
        }
        if self.as_json {
            let sep = if self.first { "[\n  " } else { ",\n  " };
            self.first = false;
            write!(self.out, "{sep}{}", serde_json::to_string(&o)?).map_err(out_err)?;
        } else if self.track {
            if let Some(id) = &o.id {
                writeln!(self.out, "{id}").map_err(out_err)?;
            }
        }
        Ok(())
    }

    /// Ends `--json`'s array; the summary.
    fn finish(mut self, file: &str) -> Result<(usize, usize)> {
        if self.as_json {
            writeln!(self.out, "{}", if self.first { "[]" } else { "\n]" }).map_err(out_err)?;
        }
        let line = summary(&self.by_queue, self.done, file);
        if !self.as_json {
            if self.track {
                self.out.flush().map_err(out_err)?;
                eprintln!("{line}");
            } else {
                writeln!(self.out, "{line}").map_err(out_err)?;
            }
        }
        self.out.flush().map_err(out_err)?;
        Ok((self.done, self.total))
    }
}

/// An error writing the output.
fn out_err(e: std::io::Error) -> Error {
    Error::Protocol(format!("writing the output: {e}"))
}

/// Runs `resq enqueue --file`.
pub(crate) async fn run(
    target: &super::Target,
    e: &EnqueueArgs,
    file: &str,
    as_json: bool,
) -> Result<()> {
    let name = if file == "-" { "standard input" } else { file };
    // First pass: every line checked (standard input kept aside for the second).
    let spool = (file == "-").then(Spool::new).transpose()?;
    let mut lines = Lines::open(file, "--file")?;
    let (mut jobs, mut bad) = (0usize, 0usize);
    let mut kept = spool.as_ref().map(Spool::writer).transpose()?;
    while let Some((n, line)) = lines.next_line(kept.as_mut())? {
        match line.and_then(|l| parse_line(l, &e.queue)) {
            Ok(None) => {}
            Ok(Some(_)) => jobs += 1,
            Err(why) => {
                bad += 1;
                eprintln!("line {n}: {why}");
            }
        }
    }
    if let Some(w) = kept.as_mut() {
        w.flush().map_err(|err| Error::Config {
            var: "--file",
            message: format!("standard input: cannot be kept aside ({err})"),
        })?;
    }
    drop(kept);
    if bad > 0 {
        return Err(Error::Config {
            var: "--file",
            message: format!(
                "{name}: {bad} of {} lines are not jobs (listed above); nothing was enqueued",
                bad + jobs
            ),
        });
    }
    // Second pass: a chunk at a time.
    let again = spool.as_ref().map_or(file, |s| s.path());
    let mut lines = Lines::open(again, "--file")?;
    let client = target.client().await?;
    let track = e.track.then(|| tracking(e));
    let mut printer = Printer::new(as_json, e.track);
    let mut failed = 0usize;
    let mut failure: Option<(Error, usize)> = None;
    let mut chunk: Vec<(usize, Pending)> = Vec::with_capacity(CHUNK);
    let mut ready = false;
    loop {
        let next = lines.next_line(None)?;
        let at_end = next.is_none();
        if let Some((n, line)) = next {
            match line.and_then(|l| parse_line(l, &e.queue)) {
                Ok(Some(job)) => chunk.push((
                    n,
                    Pending {
                        track: track.clone(),
                        ..job
                    },
                )),
                Ok(None) => {}
                // The file changed between the two passes.
                Err(why) => {
                    failed += 1;
                    eprintln!("line {n}: not enqueued: it changed since it was checked: {why}");
                }
            }
        }
        if chunk.len() < CHUNK && !at_end {
            continue;
        }
        if chunk.is_empty() {
            break;
        }
        let batch = std::mem::take(&mut chunk);
        if failure.is_some() {
            for (n, job) in batch {
                printer.job(JobOut {
                    line: n,
                    queue: job.queue,
                    class: job.class,
                    id: None,
                    error: Some("not sent".into()),
                })?;
            }
        } else {
            let jobs: Vec<Pending> = batch.iter().map(|(_, j)| j.clone()).collect();
            let sent = if ready {
                client.enqueue_chunk(&jobs).await
            } else {
                ready = true;
                match client.prepare_pipelined().await {
                    Ok(()) => client.enqueue_chunk(&jobs).await,
                    Err(e) => Err(e),
                }
            };
            match sent {
                Ok(outcomes) => {
                    for ((n, job), outcome) in batch.into_iter().zip(outcomes) {
                        let mut o = JobOut {
                            line: n,
                            queue: job.queue,
                            class: job.class,
                            id: None,
                            error: None,
                        };
                        match outcome {
                            Outcome::Enqueued(t) => o.id = t.map(|(id, _)| id.to_string()),
                            Outcome::Refused(why) => {
                                failed += 1;
                                eprintln!("line {n}: not enqueued: {why}");
                                o.error = Some(why);
                            }
                        }
                        printer.job(o)?;
                    }
                }
                Err(err) => {
                    let first = batch.first().map_or(0, |(n, _)| *n);
                    for (n, job) in batch {
                        printer.job(JobOut {
                            line: n,
                            queue: job.queue,
                            class: job.class,
                            id: None,
                            error: Some(format!(
                                "unknown: {err} while it was sent; it may or may not be enqueued"
                            )),
                        })?;
                    }
                    failure = Some((err, first));
                }
            }
        }
        if at_end {
            break;
        }
    }
    let (done, total) = printer.finish(name)?;
    if let Some((err, first)) = failure {
        return Err(Error::Config {
            var: "--file",
            message: format!(
                "{name}: {err}: the jobs of lines {first} on are not known to be enqueued \
                 (up to {CHUNK} of them may be; the rest were not sent); {done} before them were"
            ),
        });
    }
    if failed > 0 {
        return Err(Error::Config {
            var: "--file",
            message: format!(
                "{name}: {failed} of {total} jobs were not enqueued (lines listed above)"
            ),
        });
    }
    Ok(())
}

/// `enqueued 3 jobs from jobs.ndjson: default 2, mail 1`.
fn summary(by_queue: &BTreeMap<String, usize>, done: usize, file: &str) -> String {
    let queues: Vec<String> = by_queue.iter().map(|(q, n)| format!("{q} {n}")).collect();
    let jobs = if done == 1 { "job" } else { "jobs" };
    if queues.is_empty() {
        format!("enqueued {done} {jobs} from {file}")
    } else {
        format!("enqueued {done} {jobs} from {file}: {}", queues.join(", "))
    }
}

/// The lines of a file (or standard input), read one at a time into one buffer: bounded
/// memory whatever the file's size. Each comes with its number (from 1), as text, or why it is
/// not text (not UTF-8, naming the byte and its column). A byte order mark opening the file
/// and a `\r` ending a line are dropped.
pub(crate) struct Lines {
    reader: Box<dyn BufRead>,
    buf: Vec<u8>,
    n: usize,
    file: String,
    flag: &'static str,
}

impl Lines {
    /// `file` (`-`: standard input) given with option `flag`.
    pub(crate) fn open(file: &str, flag: &'static str) -> Result<Lines> {
        let reader: Box<dyn BufRead> = if file == "-" {
            Box::new(std::io::BufReader::with_capacity(1 << 16, std::io::stdin()))
        } else {
            let f = std::fs::File::open(file).map_err(|err| Error::Config {
                var: flag,
                message: format!("{file}: cannot be read ({err})"),
            })?;
            Box::new(std::io::BufReader::with_capacity(1 << 16, f))
        };
        Ok(Lines {
            reader,
            buf: Vec::new(),
            n: 0,
            file: file.to_string(),
            flag,
        })
    }

    /// The next line (its bytes also written to `keep`, when given), or `None` at the end.
    pub(crate) fn next_line(
        &mut self,
        keep: Option<&mut std::io::BufWriter<std::fs::File>>,
    ) -> Result<Option<(usize, std::result::Result<&str, String>)>> {
        self.buf.clear();
        let read = self
            .reader
            .read_until(b'\n', &mut self.buf)
            .map_err(|err| Error::Config {
                var: self.flag,
                message: format!("{}: cannot be read ({err})", self.file),
            })?;
        if read == 0 {
            return Ok(None);
        }
        if let Some(k) = keep {
            k.write_all(&self.buf).map_err(|err| Error::Config {
                var: self.flag,
                message: format!("standard input: cannot be kept aside ({err})"),
            })?;
        }
        self.n += 1;
        let mut line = self.buf.as_slice();
        if self.n == 1 {
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        line = line.strip_suffix(b"\n").unwrap_or(line);
        line = line.strip_suffix(b"\r").unwrap_or(line);
        let text = std::str::from_utf8(line).map_err(|e| {
            let at = e.valid_up_to();
            format!(
                "not UTF-8 text (byte 0x{:02x} at column {})",
                line.get(at).copied().unwrap_or(0),
                at + 1
            )
        });
        Ok(Some((self.n, text)))
    }
}

/// Standard input kept aside, in a file of its own removed when dropped, for a second pass.
struct Spool(std::path::PathBuf);

impl Spool {
    fn new() -> Result<Spool> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!(
            "resq-enqueue-{}-{nanos}.ndjson",
            std::process::id()
        ));
        Ok(Spool(p))
    }

    fn writer(&self) -> Result<std::io::BufWriter<std::fs::File>> {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&self.0)
            .map_err(|err| Error::Config {
                var: "--file",
                message: format!(
                    "standard input: cannot be kept aside in {} ({err})",
                    self.0.display()
                ),
            })?;
        Ok(std::io::BufWriter::new(f))
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap_or("-")
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Lines of the file with what was made of them: `(line number, job or why it is not one)`.
pub(crate) type Numbered<T> = Vec<(usize, T)>;

/// A line's job (`None`: a blank line), or why it is not one. `queue` is the queue of a line
/// that names none.
pub(crate) fn parse_line(line: &str, queue: &str) -> std::result::Result<Option<Pending>, String> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    job(line, queue).map(Some)
}

/// Every line of `file` (given with option `flag`; `-`: standard input) checked, a line at a
/// time: the jobs with their line numbers, and the lines that are not jobs with why.
pub(crate) fn read_jobs(
    file: &str,
    flag: &'static str,
    queue: &str,
) -> Result<(Numbered<Pending>, Numbered<String>)> {
    let (mut jobs, mut bad) = (Vec::new(), Vec::new());
    let mut lines = Lines::open(file, flag)?;
    while let Some((n, line)) = lines.next_line(None)? {
        match line.and_then(|l| parse_line(l, queue)) {
            Ok(None) => {}
            Ok(Some(j)) => jobs.push((n, j)),
            Err(why) => bad.push((n, why)),
        }
    }
    Ok((jobs, bad))
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
        let (mut jobs, mut bad) = (Vec::new(), Vec::new());
        for (i, line) in text.split('\n').enumerate() {
            let line = if i == 0 {
                line.trim_start_matches('\u{feff}')
            } else {
                line
            };
            match parse_line(line.trim_end_matches('\r'), "default") {
                Ok(None) => {}
                Ok(Some(j)) => jobs.push((i + 1, j)),
                Err(w) => bad.push((i + 1, w)),
            }
        }
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
