//! `resq failed list|show|retry|remove|clear`: the failure list, with Ruby's semantics (see
//! [`crate::admin::failures`]).

use super::output::{json, short, table};
use crate::admin::failures::Outcome;
use crate::admin::{Admin, Selector};
use crate::error::{Error, Result};
use clap::{Args, Subcommand};

/// `resq failed …`.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum FailedCmd {
    /// Entries of the failure list, oldest first.
    List {
        /// Only entries of this class.
        #[arg(long)]
        class: Option<String>,
        /// First index.
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// At most this many entries.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// One entry, whole.
    Show {
        /// Its index.
        index: usize,
    },
    /// Re-enqueue entries (Ruby's requeue: sets retried_at, pushes {"class","args"}).
    Retry(Which),
    /// Remove entries (Ruby's remove: LSET sentinel + LREM).
    Remove(Which),
    /// Remove every entry present now (entries pushed meanwhile are kept).
    Clear,
}

/// Which entries: an index, `--class C`, `--retried` (remove only) or `--all`.
#[derive(Args, Debug, Clone)]
pub(crate) struct Which {
    /// The entry at this index.
    #[arg(required_unless_present_any = ["class", "all", "retried"], conflicts_with_all = ["class", "all", "retried"])]
    pub index: Option<usize>,
    /// Every entry whose payload class is this.
    #[arg(long, conflicts_with_all = ["all", "retried"])]
    pub class: Option<String>,
    /// Every entry already retried.
    #[arg(long, conflicts_with = "all")]
    pub retried: bool,
    /// Every entry.
    #[arg(long)]
    pub all: bool,
}

impl Which {
    fn selector(&self) -> Selector {
        match (&self.index, &self.class) {
            (Some(i), _) => Selector::Index(*i),
            (None, Some(c)) => Selector::Class(c.clone()),
            (None, None) if self.retried => Selector::Retried,
            (None, None) => Selector::All,
        }
    }
}

/// Runs `resq failed …`.
pub(crate) async fn run(admin: &Admin, cmd: FailedCmd, as_json: bool) -> Result<()> {
    match cmd {
        FailedCmd::List {
            class,
            offset,
            limit,
        } => list(admin, class, offset, limit, as_json).await,
        FailedCmd::Show { index } => {
            let row = admin.failure(index).await?.ok_or_else(|| Error::Config {
                var: "INDEX",
                message: format!("no failure entry at index {index}"),
            })?;
            let value: serde_json::Value = serde_json::from_slice(&row.raw)
                .unwrap_or_else(|_| serde_json::Value::String(row.raw_text()));
            if as_json {
                return json(&value);
            }
            println!("{}", serde_json::to_string_pretty(&value)?);
            Ok(())
        }
        FailedCmd::Retry(w) => {
            if w.retried {
                return Err(Error::Config {
                    var: "--retried",
                    message: "applies to remove only".into(),
                });
            }
            let out = admin.retry_failures(&w.selector()).await?;
            report("retried", &out, as_json)
        }
        FailedCmd::Remove(w) => {
            let out = admin.remove_failures(&w.selector()).await?;
            report("removed", &out, as_json)
        }
        FailedCmd::Clear => {
            let n = admin.clear_failures().await?;
            if as_json {
                return json(&serde_json::json!({ "removed": n }));
            }
            println!("removed {n} entr{}", if n == 1 { "y" } else { "ies" });
            Ok(())
        }
    }
}

async fn list(
    admin: &Admin,
    class: Option<String>,
    offset: usize,
    limit: usize,
    as_json: bool,
) -> Result<()> {
    let rows = match &class {
        None => admin.failures(offset, limit).await?,
        Some(c) => {
            // Walk the list in chunks, keeping matches, until `limit` are found.
            let mut found = Vec::new();
            let mut at = offset;
            loop {
                let chunk = admin.failures(at, crate::admin::failures::CHUNK).await?;
                if chunk.is_empty() {
                    break;
                }
                at += chunk.len();
                found.extend(chunk.into_iter().filter(|r| r.class.as_deref() == Some(c)));
                if found.len() >= limit {
                    found.truncate(limit);
                    break;
                }
            }
            found
        }
    };
    if as_json {
        return json(&rows);
    }
    let total = admin.failure_count().await?;
    let table_rows = rows.iter().map(|r| {
        let e = r.entry.as_ref();
        let get = |f: fn(&crate::wire::failure::FailureEntry) -> Option<&String>| {
            e.and_then(f).cloned().unwrap_or_else(|| "-".into())
        };
        vec![
            r.index.to_string(),
            get(|e| e.failed_at.as_ref()),
            r.class.clone().unwrap_or_else(|| "?".into()),
            get(|e| e.queue.as_ref()),
            short(&get(|e| e.exception.as_ref()), 40),
            short(&get(|e| e.error.as_ref()), 50),
            if e.is_some_and(|e| e.retried_at.is_some()) {
                "yes".into()
            } else {
                "-".into()
            },
        ]
    });
    println!(
        "{}",
        table(
            &[
                "#",
                "FAILED AT",
                "CLASS",
                "QUEUE",
                "EXCEPTION",
                "ERROR",
                "RETRIED"
            ],
            table_rows
        )
    );
    println!(
        "({} shown, {total} in {})",
        rows.len(),
        admin.keys().failed()
    );
    Ok(())
}

fn report(verb: &str, out: &Outcome, as_json: bool) -> Result<()> {
    if as_json {
        json(out)?;
    } else {
        println!("{verb} {}", out.done);
        for s in &out.skipped {
            println!("skipped {s}");
        }
    }
    if out.done == 0 && !out.skipped.is_empty() {
        return Err(Error::Config {
            var: "selection",
            message: format!("nothing {verb} (see the skipped lines)"),
        });
    }
    Ok(())
}
