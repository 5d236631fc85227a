//! The sources a listing of tracked jobs reads, a chunk at a time: where jobs are (the workers'
//! records, the queues, the limits' held sets that hold jobs (their index), the delayed set) and the indexes (final states,
//! waiting, tags, `_statuses`). Each entry looked at comes with the position right after it, and
//! with the tracked job it names, if any (`places.rs`).

use super::places::{cand_of, held_cand, payload_cand, Big, Cand, Place};
use super::position::{Cur, Seg};
use super::read::{bytes, each, Want};
use super::JobId;
use crate::error::{Error, Result};
use crate::keys::Keys;
use redis::aio::ConnectionLike;
use redis::Value;
use serde_json::Value as Json;

/// One entry looked at.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The position right after it.
    pub after: Cur,
    pub cand: Option<Cand>,
}

/// Delayed timestamps read per round trip.
const STAMPS: isize = 100;
/// Queues read per round trip (and queue names asked of `SSCAN` at a time).
const LISTS: usize = 100;
/// Names of held sets read from their index per round trip.
const HELD_NAMES: usize = 200;

/// One source being read.
pub(crate) struct Walk {
    seg: Seg,
    /// The index's key (an index source).
    key: String,
    /// Names still to read (workers, queues, held sets), sorted, the current one first.
    names: Vec<String>,
    /// Where the current name (or the index, by rank) is read from.
    off: usize,
    /// The delayed set's place.
    delayed: Option<(i64, usize)>,
    /// In the current held set: the score and sequence of the entry read last.
    held_from: Option<(f64, Vec<u8>)>,
    /// The index of held sets has more names after the ones in `names`.
    held_more: bool,
    /// The `SSCAN` cursor of `<ns>:queues` that gave the names in `names` (the queues).
    scan_at: u64,
    /// The cursor of the next batch of queue names, and whether there is one.
    scan_next: u64,
    scan_more: bool,
    done: bool,
    /// Keys read since [`Walk::take_reads`] last asked (an empty queue or held set costs a
    /// read as a job does: a listing's budget counts them).
    reads: usize,
    /// On a spread namespace, an index source's per-slot parts ([`index_keys`]), read as one
    /// index merged newest first; empty elsewhere.
    parts: Vec<String>,
    /// In the merged parts: the score and member of the entry read last.
    last: Option<(f64, String)>,
}

/// The keys that hold index `base` (a final state's, waiting's, a tag's): `base` itself, or on
/// a spread namespace its part in each slot a tracked job may be in (`base{<tag>}`,
/// [`Keys::in_slot`]), the slots of the queues named in `<ns>:queues` (split shards are named
/// there once jobs are pushed to them).
pub(crate) async fn index_keys<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    base: String,
) -> Result<Vec<String>> {
    if !keys.is_spread() {
        return Ok(vec![base]);
    }
    let tags: std::collections::BTreeSet<&str> = members(con, &keys.queues())
        .await?
        .iter()
        .map(|q| keys.queue_tag(q))
        .collect();
    Ok(tags
        .into_iter()
        .map(|t| Keys::in_slot(base.clone(), Some(t)))
        .collect())
}

impl Walk {
    /// The source `seg` from `cur`; `queue` narrows the queues read to one.
    pub(crate) async fn open<C: ConnectionLike + Send>(
        con: &mut C,
        keys: &Keys,
        seg: Seg,
        cur: &Cur,
        tag: Option<&str>,
        queue: Option<&str>,
    ) -> Result<Walk> {
        let mut w = Walk {
            seg,
            key: String::new(),
            names: Vec::new(),
            off: 0,
            delayed: None,
            held_from: None,
            held_more: false,
            scan_at: 0,
            scan_next: 0,
            scan_more: false,
            done: false,
            reads: 0,
            parts: Vec::new(),
            last: None,
        };
        match seg {
            Seg::Workers => {
                w.names = members(con, &keys.workers()).await?;
                if let Cur::Worker(after) = cur {
                    w.names.retain(|n| n > after);
                }
            }
            Seg::Queues => {
                match queue {
                    Some(q) => w.names = vec![q.to_string()],
                    None => {
                        // Names a batch at a time (`SSCAN`), each batch by name: a request
                        // reads the names it gets to, not all of them.
                        w.scan_at = match cur {
                            Cur::Queue { scan, .. } => *scan,
                            _ => 0,
                        };
                        w.scan_more = true;
                        w.fetch_queues(con, keys).await?;
                    }
                }
                if let Cur::Queue { queue, off, .. } = cur {
                    w.names.retain(|n| n >= queue);
                    if w.names.first() == Some(queue) {
                        w.off = *off;
                    }
                }
            }
            Seg::Held => {
                let from = match cur {
                    Cur::Held { key, .. } => std::ops::Bound::Included(key.as_str()),
                    _ => std::ops::Bound::Unbounded,
                };
                w.fetch_held(con, keys, from).await?;
                if let Cur::Held { key, score, seq } = cur {
                    if w.names.first() == Some(key) {
                        w.held_from = Some((*score, seq.clone()));
                    }
                }
            }
            Seg::Delayed => {
                if let Cur::Delayed { ts, idx } = cur {
                    w.delayed = Some((*ts, *idx));
                }
            }
            Seg::State(s) => w.key = keys.job_state(s.as_str()),
            Seg::Tag => w.key = keys.job_tag(tag.unwrap_or_default()),
            Seg::Statuses(_) => w.key = keys.resque_statuses(),
        }
        if keys.is_spread() && matches!(seg, Seg::State(_) | Seg::Tag) {
            // (Spread: the index's parts, one per slot, merged; read from after `cur`.)
            w.parts = index_keys(con, keys, std::mem::take(&mut w.key)).await?;
            if let Cur::Score { score, member } = cur {
                w.last = Some((*score, member.clone()));
            }
        }
        if !w.key.is_empty() {
            w.off = index_rank(con, &w.key, cur).await?;
        }
        Ok(w)
    }

    /// The next entries (about `want`, at most a few hundred); `None` at the source's end.
    pub(crate) async fn next<C: ConnectionLike + Send>(
        &mut self,
        con: &mut C,
        keys: &Keys,
        want: usize,
    ) -> Result<Option<Vec<Entry>>> {
        if self.done {
            return Ok(None);
        }
        let want = want.clamp(1, 200);
        let out = match self.seg {
            Seg::Workers => self.workers(con, keys, want).await?,
            Seg::Queues => self.lists(con, keys, want).await?,
            Seg::Held => self.held(con, keys, want).await?,
            Seg::Delayed => self.delayed(con, keys, want).await?,
            Seg::State(_) | Seg::Tag | Seg::Statuses(_) => self.index(con, want).await?,
        };
        if out.is_none() {
            self.done = true;
        }
        Ok(out)
    }

    /// Keys read since the last call.
    pub(crate) fn take_reads(&mut self) -> usize {
        std::mem::take(&mut self.reads)
    }

    /// Where a queue or held-set walk stands (the name it reads next, and how far into it),
    /// when it has not ended.
    pub(crate) fn resume(&self) -> Option<Cur> {
        if self.seg == Seg::Queues && self.names.is_empty() && self.scan_more {
            // Between two batches of queue names: the next batch.
            return Some(Cur::Queue {
                queue: String::new(),
                off: 0,
                scan: self.scan_next,
            });
        }
        let name = self.names.first()?.clone();
        match self.seg {
            Seg::Queues => Some(Cur::Queue {
                queue: name,
                off: self.off,
                scan: self.scan_at,
            }),
            Seg::Held => {
                // After the entry read last, or from the set's start.
                let (score, seq) = self
                    .held_from
                    .clone()
                    .unwrap_or((f64::NEG_INFINITY, Vec::new()));
                Some(Cur::Held {
                    key: name,
                    score,
                    seq,
                })
            }
            _ => None,
        }
    }

    async fn workers<C: ConnectionLike + Send>(
        &mut self,
        con: &mut C,
        keys: &Keys,
        want: usize,
    ) -> Result<Option<Vec<Entry>>> {
        if self.names.is_empty() {
            return Ok(None);
        }
        let ids: Vec<String> = self.names.drain(..want.min(self.names.len())).collect();
        let records = each(
            con,
            ids.iter().map(|id| {
                let mut c = redis::cmd("GET");
                c.arg(keys.worker(id));
                c
            }),
        )
        .await?;
        let mut out = Vec::with_capacity(ids.len());
        for (id, r) in ids.into_iter().zip(records) {
            let cand = r.ok().and_then(bytes).and_then(|b| {
                let v: Json = serde_json::from_slice(&b).ok()?;
                let queue = v.get("queue").and_then(Json::as_str).map(String::from);
                let mut c = cand_of(v.get("payload")?, Place::Worker)?;
                c.queue = queue.or(c.queue);
                Some(c)
            });
            out.push(Entry {
                after: Cur::Worker(id),
                cand,
            });
        }
        Ok(Some(out))
    }

    /// Held sets (by name, each in the order it is released), from the entry after the one
    /// read last — found by its score and sequence, not by its rank, so a job released (taken
    /// out) meanwhile shifts nothing and none is skipped.
    async fn held<C: ConnectionLike + Send>(
        &mut self,
        con: &mut C,
        keys: &Keys,
        want: usize,
    ) -> Result<Option<Vec<Entry>>> {
        if self.names.is_empty() {
            return Ok(None);
        }
        let mut out = Vec::new();
        let mut big: Vec<Big> = Vec::new();
        while out.len() < want {
            let Some(name) = self.names.first().cloned() else {
                break;
            };
            // Entries of the score read last and not after it (ties are ordered by bytes)
            // come again: read past them, a page at a time.
            let from = self.held_from.clone();
            let min = from
                .as_ref()
                .map_or_else(|| "-inf".to_string(), |(s, _)| s.to_string());
            let mut skip = 0;
            let mut exhausted = false;
            while out.len() < want {
                let ask = want - out.len();
                let r: redis::RedisResult<Vec<(Vec<u8>, f64)>> = redis::cmd("ZRANGE")
                    .arg(&name)
                    .arg(&min)
                    .arg("+inf")
                    .arg("BYSCORE")
                    .arg("LIMIT")
                    .arg(skip)
                    .arg(ask)
                    .arg("WITHSCORES")
                    .query_async(con)
                    .await;
                // A key of another type holds no jobs here.
                self.reads += 1;
                let items = match r {
                    Ok(v) => v,
                    Err(e) if e.code() == Some("WRONGTYPE") => Vec::new(),
                    Err(e) => return Err(e.into()),
                };
                let n = items.len();
                skip += n;
                for (member, score) in items {
                    if let Some((s, seq)) = &from {
                        if score == *s && !after_seq(&member, seq) {
                            continue;
                        }
                    }
                    let seq = member
                        .split(|b| *b == b'\t')
                        .next()
                        .unwrap_or_default()
                        .to_vec();
                    self.held_from = Some((score, seq.clone()));
                    let cand = held_cand(&member, &mut big, out.len());
                    out.push(Entry {
                        after: Cur::Held {
                            key: name.clone(),
                            score,
                            seq,
                        },
                        cand,
                    });
                }
                if n < ask {
                    exhausted = true;
                    break;
                }
            }
            if !exhausted {
                break;
            }
            let gone = self.names.remove(0);
            self.held_from = None;
            if self.names.is_empty() && self.held_more {
                self.fetch_held(con, keys, std::ops::Bound::Excluded(&gone))
                    .await?;
            }
        }
        self.with_big(con, out, big).await.map(Some)
    }

    /// The batch of queue names `SSCAN` gives from cursor `scan_at`, by name (a key of
    /// another type: none).
    async fn fetch_queues<C: ConnectionLike + Send>(
        &mut self,
        con: &mut C,
        keys: &Keys,
    ) -> Result<()> {
        let key = keys.queues();
        let r: redis::RedisResult<(u64, Vec<Vec<u8>>)> = redis::cmd("SSCAN")
            .arg(&key)
            .arg(self.scan_at)
            .arg("COUNT")
            .arg(LISTS)
            .query_async(con)
            .await;
        self.reads += 1;
        let (next, raw) = match r {
            Ok(v) => v,
            Err(e) if e.code() == Some("WRONGTYPE") => (0, Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut names = crate::admin::names::decode(&key, raw);
        names.sort();
        names.dedup();
        self.names = names;
        self.off = 0;
        self.scan_next = next;
        self.scan_more = next != 0;
        Ok(())
    }

    /// The next names of the index of held sets, from `from`.
    async fn fetch_held<C: ConnectionLike + Send>(
        &mut self,
        con: &mut C,
        keys: &Keys,
        from: std::ops::Bound<&str>,
    ) -> Result<()> {
        let (names, more) = held_sets(con, keys, from, Some(HELD_NAMES)).await?;
        self.reads += 1;
        self.names = names;
        self.held_more = more;
        Ok(())
    }

    /// Queues (newest first).
    async fn lists<C: ConnectionLike + Send>(
        &mut self,
        con: &mut C,
        keys: &Keys,
        want: usize,
    ) -> Result<Option<Vec<Entry>>> {
        if self.names.is_empty() {
            if !self.scan_more {
                return Ok(None);
            }
            // The next batch of names (read now; its queues on the next call).
            self.scan_at = self.scan_next;
            self.fetch_queues(con, keys).await?;
            return Ok(Some(Vec::new()));
        }
        let names: Vec<String> = self.names.iter().take(LISTS).cloned().collect();
        self.reads += names.len();
        let replies = each(
            con,
            names.iter().enumerate().map(|(i, n)| {
                let from = if i == 0 { self.off } else { 0 };
                let mut c = redis::cmd("LRANGE");
                c.arg(keys.queue(n))
                    .arg(-((from + want) as i64))
                    .arg(-(from as i64) - 1);
                c
            }),
        )
        .await?;
        let mut out = Vec::new();
        for (i, (name, r)) in names.iter().zip(replies).enumerate() {
            let from = if i == 0 { self.off } else { 0 };
            // A key of another type holds no jobs here.
            let mut items: Vec<Vec<u8>> = match r {
                Ok(Value::Array(v)) | Ok(Value::Set(v)) => {
                    v.into_iter().filter_map(bytes).collect()
                }
                _ => Vec::new(),
            };
            items.reverse();
            let full = items.len() >= want;
            for (k, item) in items.into_iter().enumerate() {
                let after = Cur::Queue {
                    queue: name.clone(),
                    off: from + k + 1,
                    scan: self.scan_at,
                };
                let cand = payload_cand(&item, Place::Queue, Some(name));
                out.push(Entry { after, cand });
            }
            if full {
                // More of this one next time.
                self.names.drain(..i);
                self.off = from + want;
                return Ok(Some(out));
            }
        }
        self.names.drain(..names.len());
        self.off = 0;
        Ok(Some(out))
    }

    /// Held entries whose payload is kept in a list of its own (`@<key>`), read now.
    async fn with_big<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        mut out: Vec<Entry>,
        big: Vec<Big>,
    ) -> Result<Vec<Entry>> {
        let replies = each(
            con,
            big.iter().map(|b| {
                let mut c = redis::cmd("LINDEX");
                c.arg(&b.key).arg(0);
                c
            }),
        )
        .await?;
        for (b, r) in big.into_iter().zip(replies) {
            if let (Some(e), Some(p)) = (out.get_mut(b.at), r.ok().and_then(bytes)) {
                e.cand = payload_cand(&p, Place::Held, Some(&b.queue));
            }
        }
        Ok(out)
    }

    async fn delayed<C: ConnectionLike + Send>(
        &mut self,
        con: &mut C,
        keys: &Keys,
        want: usize,
    ) -> Result<Option<Vec<Entry>>> {
        let (lo, lo_idx) = self.delayed.unwrap_or((i64::MIN, 0));
        let lower = if lo == i64::MIN {
            "-inf".to_string()
        } else {
            lo.to_string()
        };
        let stamps: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
            .arg(keys.delayed_schedule())
            .arg(&lower)
            .arg("+inf")
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(STAMPS)
            .query_async(con)
            .await
            .map_err(|e| index_error(e, &keys.delayed_schedule()))?;
        if stamps.is_empty() {
            return Ok(None);
        }
        let stamps: Vec<(i64, usize)> = stamps
            .iter()
            .map(|(_, score)| {
                let ts = score.floor() as i64;
                (ts, if ts == lo { lo_idx } else { 0 })
            })
            .collect();
        let replies = each(
            con,
            stamps.iter().map(|(ts, from)| {
                let mut c = redis::cmd("LRANGE");
                c.arg(keys.delayed_bucket(*ts))
                    .arg(*from)
                    .arg(from + want - 1);
                c
            }),
        )
        .await?;
        let mut out = Vec::new();
        for ((ts, from), r) in stamps.iter().zip(replies) {
            let items: Vec<Vec<u8>> = match r {
                Ok(Value::Array(v)) => v.into_iter().filter_map(bytes).collect(),
                _ => Vec::new(),
            };
            let full = items.len() >= want;
            let n = items.len();
            for (k, item) in items.into_iter().enumerate() {
                // After a bucket's last item, the next bucket.
                let after = if k + 1 == n && !full {
                    Cur::Delayed {
                        ts: ts.saturating_add(1),
                        idx: 0,
                    }
                } else {
                    Cur::Delayed {
                        ts: *ts,
                        idx: from + k + 1,
                    }
                };
                out.push(Entry {
                    after,
                    cand: payload_cand(&item, Place::Delayed, None),
                });
            }
            if full {
                self.delayed = Some((*ts, from + want));
                return Ok(Some(out));
            }
            self.delayed = Some((ts.saturating_add(1), 0));
        }
        Ok(Some(out))
    }

    /// The next `want` entries of the per-slot parts of an index (a spread namespace's),
    /// newest first as one index orders them (by score, then member, descending), after the
    /// entry read last: each part is read from that score down (`ZREVRANGEBYSCORE`, one
    /// pipeline, a command per part: the connection sends them to their slots), the entries of
    /// that very score it passed over counted in (`ZCOUNT`).
    async fn merged<C: ConnectionLike + Send>(
        &mut self,
        con: &mut C,
        want: usize,
    ) -> Result<Vec<(Vec<u8>, f64)>> {
        let max = self
            .last
            .as_ref()
            .map_or_else(|| "+inf".to_string(), |(s, _)| s.to_string());
        let ties: Vec<usize> = match &self.last {
            None => vec![0; self.parts.len()],
            Some(_) => each(
                con,
                self.parts.iter().map(|k| {
                    let mut c = redis::cmd("ZCOUNT");
                    c.arg(k).arg(&max).arg(&max);
                    c
                }),
            )
            .await?
            .into_iter()
            .map(|r| match r {
                Ok(Value::Int(n)) => usize::try_from(n).unwrap_or(0),
                _ => 0,
            })
            .collect(),
        };
        let replies = each(
            con,
            self.parts.iter().zip(&ties).map(|(k, t)| {
                let mut c = redis::cmd("ZREVRANGEBYSCORE");
                c.arg(k)
                    .arg(&max)
                    .arg("-inf")
                    .arg("WITHSCORES")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(want + t);
                c
            }),
        )
        .await?;
        let mut all: Vec<(Vec<u8>, f64)> = Vec::new();
        for (k, r) in self.parts.iter().zip(replies) {
            let v = r.map_err(|e| index_error(e, k))?;
            let got: Vec<(Vec<u8>, f64)> = redis::from_redis_value(v).map_err(|e| {
                Error::Protocol(format!("{k}: an index of tracked jobs read as {e}"))
            })?;
            all.extend(got.into_iter().filter(|(m, s)| match &self.last {
                None => true,
                Some((ls, lm)) => *s < *ls || (*s == *ls && m.as_slice() < lm.as_bytes()),
            }));
        }
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        all.truncate(want);
        if let Some((m, s)) = all.last() {
            self.last = Some((*s, String::from_utf8_lossy(m).into_owned()));
        }
        Ok(all)
    }

    async fn index<C: ConnectionLike + Send>(
        &mut self,
        con: &mut C,
        want: usize,
    ) -> Result<Option<Vec<Entry>>> {
        let entries: Vec<(Vec<u8>, f64)> = if self.parts.is_empty() {
            redis::cmd("ZREVRANGE")
                .arg(&self.key)
                .arg(self.off)
                .arg(self.off + want - 1)
                .arg("WITHSCORES")
                .query_async(con)
                .await
                .map_err(|e| index_error(e, &self.key))?
        } else {
            self.merged(con, want).await?
        };
        if entries.is_empty() {
            return Ok(None);
        }
        self.off += entries.len();
        let want_kind = match self.seg {
            Seg::State(_) => Want::Own,
            Seg::Statuses(_) => Want::Statused,
            _ => Want::Either,
        };
        Ok(Some(
            entries
                .into_iter()
                .map(|(m, score)| {
                    let member = String::from_utf8_lossy(&m).into_owned();
                    let cand = JobId::parse(&member).map(|id| Cand {
                        id,
                        want: want_kind,
                        place: Place::Index,
                        queue: None,
                        class: None,
                    });
                    Entry {
                        after: Cur::Score { score, member },
                        cand,
                    }
                })
                .collect(),
        ))
    }
}

/// The rank an index is read from for position `cur`: right after its entry when that entry
/// is still there with its score, else after every entry newer than its score.
async fn index_rank<C: ConnectionLike + Send>(con: &mut C, key: &str, cur: &Cur) -> Result<usize> {
    let Cur::Score { score, member } = cur else {
        return Ok(0);
    };
    let (rank, at, newer): (Option<usize>, Option<f64>, usize) = redis::pipe()
        .cmd("ZREVRANK")
        .arg(key)
        .arg(member)
        .cmd("ZSCORE")
        .arg(key)
        .arg(member)
        .cmd("ZCOUNT")
        .arg(key)
        .arg(format!("({score}"))
        .arg("+inf")
        .query_async(con)
        .await
        .map_err(|e| index_error(e, key))?;
    Ok(match (rank, at) {
        (Some(r), Some(s)) if s == *score => r + 1,
        _ => newer,
    })
}

/// An error reading index `key`, naming it.
fn index_error(e: redis::RedisError, key: &str) -> Error {
    if e.code() == Some("WRONGTYPE") {
        Error::Protocol(format!(
            "{key} is not an index of tracked jobs (a sorted set)"
        ))
    } else {
        e.into()
    }
}

/// Whether held member `m` (of the same score) sorts after the one of sequence `seq`: members
/// start `<seq>\t`, and a tie of scores is ordered by bytes.
fn after_seq(m: &[u8], seq: &[u8]) -> bool {
    let mut ours = seq.to_vec();
    ours.push(b'\t');
    !m.starts_with(&ours) && m > ours.as_slice()
}

/// The members of set `key`, sorted (a key of another type: none).
async fn members<C: ConnectionLike + Send>(con: &mut C, key: &str) -> Result<Vec<String>> {
    let r: redis::RedisResult<Vec<Vec<u8>>> =
        redis::cmd("SMEMBERS").arg(key).query_async(con).await;
    let mut v: Vec<String> = match r {
        Ok(v) => crate::admin::names::decode(key, v),
        Err(e) if e.code() == Some("WRONGTYPE") => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    v.sort();
    v.dedup();
    Ok(v)
}

/// The held sets that hold jobs (the index `<ns>:resq:held:sets`, kept by the one place that
/// holds and releases jobs, limits_held.lua), by name, from `from` on (`Excluded`: after it),
/// at most `most` (`None`: all); and whether the index has more after them. An index of
/// another type lists none.
pub(crate) async fn held_sets<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    from: std::ops::Bound<&str>,
    most: Option<usize>,
) -> Result<(Vec<String>, bool)> {
    let min = match from {
        std::ops::Bound::Included(n) => format!("[{n}"),
        std::ops::Bound::Excluded(n) => format!("({n}"),
        std::ops::Bound::Unbounded => "-".to_string(),
    };
    let mut c = redis::cmd("ZRANGE");
    c.arg(keys.held_sets()).arg(&min).arg("+").arg("BYLEX");
    if let Some(m) = most {
        c.arg("LIMIT").arg(0).arg(m + 1);
    }
    let r: redis::RedisResult<Vec<Vec<u8>>> = c.query_async(con).await;
    let raw = match r {
        Ok(v) => v,
        Err(e) if e.code() == Some("WRONGTYPE") => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let mut names = crate::admin::names::decode(&keys.held_sets(), raw);
    let more = most.is_some_and(|m| names.len() > m);
    if let Some(m) = most {
        names.truncate(m);
    }
    Ok((names, more))
}
