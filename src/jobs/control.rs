//! Acting on tracked jobs: cancel (or ask a running one to stop) and purge finished ones.

use super::{JobId, State};
use crate::admin::Admin;
use crate::error::{Error, Result};
use serde::Serialize;
use std::time::Duration;

/// What a cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cancelled {
    /// It had not started: it is cancelled and will never run.
    Cancelled,
    /// It is running: it is asked to stop (it ends killed when it next looks).
    Killing,
    /// It had finished already, in this state; nothing changed.
    Finished(State),
}

/// What a cancel left to the prune round, past the bound of one call (docs/workflows.md): the
/// next rounds settle it (every minute on one process of the fleet, or `resq prune`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Settling {
    /// Ends whose batch counts and waiting jobs are not settled yet.
    pub ends: u64,
    /// Jobs whose children are still being cancelled.
    pub jobs: u64,
}

impl Settling {
    /// Whether nothing is left.
    pub fn is_empty(&self) -> bool {
        self.ends == 0 && self.jobs == 0
    }
}

/// Sends the cancel for `id`.
pub(crate) async fn cancel(
    con: &mut crate::conn::Conn,
    keys: &crate::keys::Keys,
    id: &JobId,
) -> Result<Cancelled> {
    Ok(cancel_settling(con, keys, id).await?.0)
}

/// Sends the cancel for `id`; what it did, and what it left to the prune round.
pub(crate) async fn cancel_settling(
    con: &mut crate::conn::Conn,
    keys: &crate::keys::Keys,
    id: &JobId,
) -> Result<(Cancelled, Settling)> {
    let now = chrono::Utc::now();
    let message = format!("Killed at {}", crate::wire::time::started(now));
    // (Spread: only an id naming its slot has a record there, and the call goes to that slot
    // with the record as its key; job_cancel.lua.)
    let kill = if keys.is_spread() {
        if id.slot_tag().is_none() {
            return Err(Error::Rejected(format!(
                "no tracked job {id}: on a spread cluster namespace a tracked job's id ends with \
                 its slot tag ({{<tag>}})"
            )));
        }
        keys.job_record(id.as_str())
    } else {
        keys.resque_status_kill()
    };
    let reply: String = crate::scripts::JobCancel {
        kill,
        prefix: keys.prefix(),
        id: id.as_str(),
        now_ms: now.timestamp_millis(),
        ttl_s: super::DEFAULT_TTL.as_secs(),
        message: crate::wire::encode::to_json(
            &message,
            crate::wire::number::FloatFormat::RubyJsonGem,
        ),
        budget: crate::settings::flow_budget(),
    }
    .call()
    .invoke_async(con)
    .await?;
    let text = crate::scripts::texts::parse_cancel(&reply);
    let settling = Settling {
        ends: text.ends,
        jobs: text.jobs,
    };
    if !text.problems.is_empty() {
        super::report_problem(text.problems);
    }
    let outcome = match (text.word, text.arg) {
        ("cancelled", _) => Ok(Cancelled::Cancelled),
        ("killing", _) => {
            // A record still saying working whose worker is gone reads failed: nobody runs it.
            match super::read::find(con, keys, id).await? {
                super::read::Found::Record(s) if s.state.is_final() => {
                    Ok(Cancelled::Finished(s.state))
                }
                _ => Ok(Cancelled::Killing),
            }
        }
        ("final", s) => Ok(Cancelled::Finished(
            State::parse(s).unwrap_or(State::Completed),
        )),
        _ => Err(Error::Rejected(format!("no tracked job {id}"))),
    }?;
    Ok((outcome, settling))
}

impl Admin {
    /// [`crate::Client::cancel`].
    pub async fn cancel_job(&self, id: &JobId) -> Result<Cancelled> {
        cancel(&mut self.con(), self.keys(), id).await
    }

    /// [`Admin::cancel_job`], with what the cancel left to the prune round ([`Settling`]):
    /// a tree of children, or of jobs waiting for it, larger than one call settles.
    pub async fn cancel_job_settling(&self, id: &JobId) -> Result<(Cancelled, Settling)> {
        cancel_settling(&mut self.con(), self.keys(), id).await
    }

    /// Deletes finished jobs (of `state`, or every final state) that finished more than
    /// `older_than` ago, and forgets expired ones; returns how many.
    pub async fn purge_jobs(&self, state: Option<State>, older_than: Duration) -> Result<u64> {
        let states: Vec<State> = match state {
            Some(s) if !s.is_final() => {
                return Err(Error::Rejected(format!(
                "only finished jobs can be purged (completed, failed, killed, cancelled), not {s}"
            )))
            }
            Some(s) => vec![s],
            None => State::ALL.into_iter().filter(|s| s.is_final()).collect(),
        };
        let now = chrono::Utc::now().timestamp_millis();
        let cutoff = now.saturating_sub(i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX));
        let mut con = self.con();
        let mut total = 0u64;
        // One call of the library's `job_purge`: mode, its word (a state or a cursor), the
        // cutoff, how many, how many to pass over.
        let keys = self.keys();
        let purge = |mode: &'static str, word: String, cutoff: i64, n: u64, skip: u64| {
            crate::scripts::JobPurge {
                statuses: keys.resque_statuses(),
                prefix: keys.prefix(),
                mode,
                word,
                cutoff_ms: cutoff,
                batch: n,
                skip,
                now_ms: now,
            }
            .call()
        };
        // A key Redis refuses (another type) stops only the part of the purge that needs it:
        // warned, naming the key, and the rest goes on. A connection error ends the purge.
        let refused = |e: redis::RedisError| -> Result<()> {
            if crate::conn::errors::classify(&e) != crate::conn::errors::Class::Permanent {
                return Err(e.into());
            }
            tracing::warn!(error = %e, "jobs purge: passed over a key that cannot be used");
            Ok(())
        };
        // Entries of records that expired on their own.
        match purge("expired", String::new(), 0, 10_000, 0)
            .invoke_async::<(u64, u64, u64), _>(&mut con)
            .await
        {
            Ok((forgotten, _, _)) => total += forgotten,
            Err(e) => refused(e)?,
        }
        // Tag entries of records that expired on their own (their tags were registered when
        // they were enqueued).
        let mut cursor = "0".to_string();
        loop {
            match purge("tags", cursor, 0, 10_000, 0)
                .invoke_async::<(u64, String), _>(&mut con)
                .await
            {
                Ok((_, next)) if next != "0" => cursor = next,
                Ok(_) => break,
                Err(e) => {
                    refused(e)?;
                    break;
                }
            }
        }
        for s in states {
            for mode in ["state", "status"] {
                // Records left behind (a key of another type) are passed over, not looped on.
                let mut skip = 0u64;
                loop {
                    let (n, looked, removed): (u64, u64, u64) =
                        match purge(mode, s.as_str().to_string(), cutoff, 500, skip)
                            .invoke_async(&mut con)
                            .await
                        {
                            Ok(r) => r,
                            Err(e) => {
                                refused(e)?;
                                break;
                            }
                        };
                    total += n;
                    skip += looked.saturating_sub(removed);
                    if looked < 500 {
                        break;
                    }
                }
            }
        }
        Ok(total)
    }
}
