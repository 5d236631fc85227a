//! The step: finish (or fail) a slot's job and reserve its next one in one call of the library's
//! `step` function (`src/scripts/step.lua`) — for one slot, or for every slot of the process that
//! is ready at the same moment (see [`super::batch`]).
//!
//! One request type and one reply type, end to end: a slot asks with a [`StepRequest`], which
//! the batcher queues and [`call_step`] writes into the call; each slot gets back its
//! [`StepReply`], read from the call's reply and handed over as it is. The call and those
//! types are `call.rs`, read whole; this file holds what the call is made with.
//!
//! What never changes between calls — the process's settings and slots (its [`StepConfig`]),
//! its queue list ([`QueueKeys`]) — the library decodes once and keeps, named by their texts'
//! digests (`config.lua`): a call carries the two digests and only what is new — the time, the
//! queues to poll, and per slot its index, its completion and whether it reserves — and the
//! texts only when the library answers that it does not hold them. A slot's [`Stepper`] is its
//! place in them.

use crate::keys::Keys;
use crate::wire::record;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use std::sync::Arc;

mod call;
#[cfg(test)]
mod config_tests;
pub(crate) mod gate;
pub(crate) mod outbox;
pub(crate) mod spread;

#[cfg(test)]
use call::bad_reply;
pub(crate) use call::{
    call_step, Claim, Completion, Ends, Found, JobRef, Reply, Started, StepReply, StepRequest,
};

/// Largest payload the step checks inside Redis (bytes); larger ones are claimed and checked by
/// the worker. Bounds how long one reserve can hold Redis (about 5 ns a byte).
pub(crate) const CHECKED_IN_REDIS: usize = 8 * 1024;

/// Most non-ASCII characters the step checks in one payload; a payload with more is claimed and
/// checked by the worker.
pub(crate) const CHARS_CHECKED_IN_REDIS: usize = 32;

/// Default `RESQ_MAX_PAYLOAD`: Redis's own largest string (`proto-max-bulk-len`), 512 MiB.
pub(crate) const DEFAULT_MAX_PAYLOAD: u64 = 512 * 1024 * 1024;

/// The queues a slot polls, resolved to keys and JSON-encoded names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueKeys {
    /// `(queue name, <ns>:queue:<name>, name as a JSON string)` in priority order.
    pub queues: Vec<(String, String, String)>,
    /// Jesque zset queues among them (see [`super::jesque`]); empty for list-only workers.
    pub jesque: super::jesque::JesqueQueues,
    /// The whole list as the step's queues text (`[[name, name as JSON, zset], …]`).
    text: Arc<str>,
    /// The text's digest ([`crate::scripts::texts::digest`]).
    digest: Arc<str>,
    /// Each queue's position (from 1) in `text`.
    index: Vec<usize>,
    /// Runs of queues of equal priority (a split queue and its shards, crate::splits), which
    /// the fetch polls in a rotating order.
    pub groups: Vec<std::ops::Range<usize>>,
}

impl Default for QueueKeys {
    /// No queue (a call that reserves nothing): the empty text, which the library knows
    /// without being sent it.
    fn default() -> Self {
        QueueKeys {
            queues: Vec::new(),
            jesque: Default::default(),
            text: Arc::from(""),
            digest: Arc::from(crate::scripts::texts::digest("")),
            index: Vec::new(),
            groups: Vec::new(),
        }
    }
}

impl QueueKeys {
    /// Resolves names to keys.
    #[cfg(test)]
    pub(crate) fn new(keys: &Keys, names: &[String]) -> Self {
        Self::with_jesque(keys, names, &[])
    }

    /// Resolves names to keys, marking those named in `zsets` as Jesque zset queues.
    pub(crate) fn with_jesque(keys: &Keys, names: &[String], zsets: &[String]) -> Self {
        let queues: Vec<(String, String, String)> = names
            .iter()
            .map(|n| (n.clone(), keys.queue(n), record::encode_queue(n)))
            .collect();
        let text = serde_json::Value::Array(
            queues
                .iter()
                .map(|(n, _, json)| serde_json::json!([n, json, u8::from(zsets.contains(n))]))
                .collect(),
        )
        .to_string();
        QueueKeys {
            index: (1..=queues.len()).collect(),
            queues,
            jesque: super::jesque::JesqueQueues::new(keys, names, zsets),
            digest: Arc::from(crate::scripts::texts::digest(&text)),
            text: Arc::from(text),
            groups: Vec::new(),
        }
    }

    /// The same list with `groups` as its runs of equal priority.
    pub(crate) fn with_groups(mut self, groups: Vec<std::ops::Range<usize>>) -> Self {
        self.groups = groups;
        self
    }

    /// The queues at `picked` (indexes into `self.queues`, in order), as a list of their own.
    pub(crate) fn subset(&self, picked: &[usize]) -> Self {
        QueueKeys {
            queues: picked.iter().map(|&i| self.queues[i].clone()).collect(),
            jesque: self.jesque.subset(picked),
            text: self.text.clone(),
            digest: self.digest.clone(),
            index: picked.iter().map(|&i| self.index[i]).collect(),
            groups: Vec::new(),
        }
    }
}

/// What never changes between a process's step calls: its settings and its slots, as the one
/// text the library decodes once and keeps (config.lua), and that text's digest, which names it
/// in every call.
#[derive(Debug)]
pub(crate) struct StepConfig {
    /// The config text ([`crate::scripts::texts::step_config`]).
    text: String,
    /// Its digest.
    digest: String,
}

impl StepConfig {
    /// The config of a process whose slots are `ids`.
    pub(crate) fn new(keys: &Keys, ids: &[String], settings: &Settings) -> Arc<Self> {
        let slots = serde_json::Value::Array(
            ids.iter()
                .map(|id| serde_json::json!([id, record::encode_queue(id)]))
                .collect(),
        )
        .to_string();
        let text = crate::scripts::texts::step_config(&settings.text(keys), &slots);
        Arc::new(StepConfig {
            digest: crate::scripts::texts::digest(&text),
            text,
        })
    }
}

/// A process's settings as the step needs them.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Ruby's processed-counts-failures semantics.
    pub count_failed: bool,
    /// `RESQ_MAX_PAYLOAD`: larger payloads become failure entries.
    pub max_payload: u64,
    /// The classes whose jobs follow resque-status's convention (`args[0]` is the id).
    pub statused: Vec<String>,
    /// How long a finished tracked job stays listed (the longest TTL any class has; zero:
    /// kept until purged).
    pub sweep: std::time::Duration,
    /// On a spread namespace, the counts the process's calls report, for the shared counters
    /// ([`spread`]).
    pub shared: Option<Arc<spread::Shared>>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            count_failed: true,
            max_payload: DEFAULT_MAX_PAYLOAD,
            statused: Vec::new(),
            sweep: crate::jobs::DEFAULT_TTL,
            shared: None,
        }
    }
}

impl Settings {
    /// The settings text (config.lua). On a spread namespace every payload is checked in
    /// Redis (no claim: its keys would be in another slot) and `"spread"` says so.
    fn text(&self, keys: &Keys) -> String {
        let spread = keys.is_spread();
        let mut s = serde_json::json!({
            "p": keys.prefix(),
            "count_failed": self.count_failed,
            "small": if spread { self.max_payload } else { CHECKED_IN_REDIS as u64 },
            "max": self.max_payload,
            "chars": if spread { u64::from(u32::MAX) } else { CHARS_CHECKED_IN_REDIS as u64 },
            "statused": self.statused,
            "sweep_ms": u64::try_from(self.sweep.as_millis()).unwrap_or(u64::MAX),
        });
        if spread {
            s["spread"] = serde_json::Value::Bool(true);
        }
        s.to_string()
    }
}

/// One slot's part of the step: its id, its keys and its place in the process's config.
#[derive(Debug, Clone)]
pub(crate) struct Stepper {
    /// The slot's worker id.
    id: String,
    /// The process's config.
    config: Arc<StepConfig>,
    /// The slot's position (from 1) in the config's slots.
    index: usize,
    /// The process's settings.
    settings: Settings,
    /// Key names.
    keys: Keys,
    /// The limits in force (for completions outside the step).
    limits: Option<Arc<crate::limits::cache::LimitsCache>>,
    /// On a spread namespace, the share of the limit on its group's queue ([`gate`]).
    gate: Option<Arc<gate::Gate>>,
}

impl Stepper {
    /// A stepper for worker `id` alone (a process of one slot).
    #[cfg(test)]
    pub(crate) fn new(keys: &Keys, id: &str, count_failed: bool) -> Self {
        let settings = Settings {
            count_failed,
            ..Settings::default()
        };
        Self::in_process(
            keys,
            id,
            StepConfig::new(keys, &[id.to_string()], &settings),
            1,
            settings,
        )
    }

    /// The stepper of slot `index` (from 1) of a process whose config is `config`.
    pub(crate) fn in_process(
        keys: &Keys,
        id: &str,
        config: Arc<StepConfig>,
        index: usize,
        settings: Settings,
    ) -> Self {
        Stepper {
            id: id.to_string(),
            config,
            index,
            settings,
            keys: keys.clone(),
            limits: None,
            gate: None,
        }
    }

    /// Sets the process's limits (their shares go back with extended completions).
    pub(crate) fn with_limits(mut self, limits: Arc<crate::limits::cache::LimitsCache>) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Sets the share of the spread limit on its group's queue.
    pub(crate) fn with_gate(mut self, gate: Option<Arc<gate::Gate>>) -> Self {
        self.gate = gate;
        self
    }

    /// The share of the spread limit on its group's queue, if any.
    pub(crate) fn gate(&self) -> Option<&Arc<gate::Gate>> {
        self.gate.as_ref()
    }

    /// The limits' JSON in force (`""` when none).
    pub(crate) fn limits_json(&self) -> Arc<str> {
        self.limits
            .as_ref()
            .map_or_else(|| Arc::from(""), |l| l.json())
    }

    /// The slot's worker id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Key names.
    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Whether failures count as processed.
    pub(crate) fn count_failed(&self) -> bool {
        self.settings.count_failed
    }

    /// How long finished tracked jobs stay listed.
    pub(crate) fn sweep(&self) -> std::time::Duration {
        self.settings.sweep
    }

    /// Applies an extended completion (retry, unique lock) with its own function; returns
    /// whether it was applied by this call.
    pub(crate) async fn apply_extended<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        ext: &super::complete::Extended,
        limited: bool,
    ) -> RedisResult<bool> {
        super::complete::apply(con, self, ext, limited).await
    }

    /// Applies `completion` (if any) and, when `reserve`, reserves the next job from `queues`:
    /// a call of one slot (see [`call_step`]). Returns the slot's reply.
    #[cfg(test)]
    pub(crate) async fn call_alone<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        completion: Option<&Completion>,
        reserve: bool,
        queues: &Arc<QueueKeys>,
    ) -> RedisResult<StepReply> {
        let mut completion = completion;
        let mut extended_applied = false;
        if let Some(Completion::Extended(ext)) = completion {
            extended_applied = self.apply_extended(con, ext, false).await?;
            completion = None;
            if !reserve {
                return Ok(StepReply::empty(extended_applied));
            }
        }
        let req = StepRequest::new(Arc::new(self.clone()), completion.cloned(), reserve, queues);
        let mut out = call_step(con, queues, std::slice::from_ref(&req), "").await?;
        match out.replies.pop() {
            Some(mut r) => {
                r.applied |= extended_applied;
                Ok(r)
            }
            None => Err(bad_reply()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_claim() {
        let c = Claim::parse(b"1f.2.3 \"q:a\"\n123").unwrap();
        assert_eq!(c.token, "1f.2.3");
        assert_eq!(c.queue, "q:a");
        assert_eq!(c.size, 123);
    }

    #[test]
    fn reads_what_a_tracked_start_said() {
        assert_eq!(
            Started::parse(b"r\t3\tinvoice-9\t"),
            Some(Started::Tracked {
                attempt: 3,
                key: "invoice-9".into(),
                batch: None
            })
        );
        assert_eq!(
            Started::parse(b"r\t1\t\tba69034b39c05d28a5403ac10e276e79"),
            Some(Started::Tracked {
                attempt: 1,
                key: String::new(),
                batch: crate::wire::job_id::BatchId::parse("ba69034b39c05d28a5403ac10e276e79")
            })
        );
        assert_eq!(Started::parse(b"s"), Some(Started::Statused));
        assert_eq!(Started::parse(b""), None);
        assert_eq!(Started::parse(b"r\tx\t"), None);
    }

    #[test]
    fn a_subset_keeps_its_positions_in_the_whole_list() {
        let keys = Keys::new("ns");
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let all = QueueKeys::new(&keys, &names);
        let sub = all.subset(&[0, 2]);
        assert_eq!(sub.index, [1, 3]);
        assert!(Arc::ptr_eq(&sub.text, &all.text));
        assert_eq!(
            &*all.text,
            r#"[["a","\"a\"",0],["b","\"b\"",0],["c","\"c\"",0]]"#
        );
    }
}
