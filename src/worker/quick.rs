//! The quick way of concurrency limits on whole queues, as the worker plans it for a step call
//! (`limits_quick.lua`; docs/limits.md, "The quick way" and "What the worker knows").
//!
//! When every limit in force is a concurrency limit on a whole queue (no class, no key, no
//! weights, no priorities) and the worker knows what each slot of a call holds, the worker
//! hands the step script the call's limits ready to use (per limit: the index of its queue in
//! the call, its capacity, its keys, the units the call's completions return to it) and, per
//! slot, the index of the queue whose limits its entry in `<ns>:resq:sharing` names. The script
//! then neither decodes the limits nor reads the slots' entries nor does anything per slot but
//! plain operations (a function call there costs as much as the rest of a slot's step), and
//! marks the slots it gave a job with the job's queue: from that and the replies, the worker
//! knows what each slot holds after the call ([`after_quick`]).

use super::step::Reply;
use crate::keys::Keys;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The limits in force, when all of them are concurrency limits on whole queues.
#[derive(Debug, Default)]
pub(crate) struct QuickLimits {
    /// Per queue: each limit's holders key, held key and capacity, in the order of the limits
    /// in force.
    by_queue: HashMap<String, Vec<(String, String, u64)>>,
    /// `<ns>:resq:sharing`.
    sharing: String,
    /// Per queue: the entry a job of it gives its slot (as `limits.lua`'s `share_text`).
    texts: HashMap<String, String>,
    /// The queue whose jobs give each entry.
    queue_of_text: HashMap<String, String>,
}

impl QuickLimits {
    /// From the scripts' JSON of the limits in force (`limits/store.rs`, the JSON the step's
    /// general way reads), under `keys`; `None` when a limit is not a concurrency limit on a
    /// whole queue.
    fn from_json(keys: &Keys, json: &str) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_str(json).ok()?;
        let defs = v.get("defs")?.as_array()?;
        let mut q = QuickLimits {
            sharing: keys.sharing(),
            ..QuickLimits::default()
        };
        for d in defs {
            let empty = |field: &str| match d.get(field) {
                None | Some(serde_json::Value::Null) => true,
                Some(serde_json::Value::String(s)) => field == "key" && s.is_empty(),
                Some(serde_json::Value::Object(m)) => field != "key" && m.is_empty(),
                Some(_) => false,
            };
            if d.get("kind")?.as_str()? != "concurrency"
                || !empty("class")
                || !empty("key")
                || !empty("weights")
                || !empty("priority")
            {
                return None;
            }
            let name = d.get("name")?.as_str()?;
            let queue = d.get("queue")?.as_str()?;
            let cap = d.get("limit")?.as_u64()?;
            let holders = keys.limit_holders(name, None);
            let held = keys.limit_held(name, None);
            q.texts
                .entry(queue.to_string())
                .or_default()
                .push_str(&format!("1 {}:{holders}", holders.len()));
            q.by_queue
                .entry(queue.to_string())
                .or_default()
                .push((holders, held, cap));
        }
        q.queue_of_text = q
            .texts
            .iter()
            .map(|(queue, text)| (text.clone(), queue.clone()))
            .collect();
        Some(q)
    }

    /// The entry a job of `queue` gives its slot (`None`: no limit is on it).
    fn text(&self, queue: &str) -> Option<&str> {
        self.texts.get(queue).map(String::as_str)
    }
}

/// The limits last planned for: the prefix and JSON they were made from, and the answer.
type Memo = Option<(String, Arc<str>, Option<Arc<QuickLimits>>)>;
static LAST: Mutex<Memo> = Mutex::new(None);

/// The quick way's limits for the JSON `json` of the limits in force under `keys`, made once
/// per change of the limits.
pub(crate) fn limits(keys: &Keys, json: &str) -> Option<Arc<QuickLimits>> {
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((p, j, q)) = last.as_ref() {
        if p == keys.prefix() && &**j == json {
            return q.clone();
        }
    }
    let q = QuickLimits::from_json(keys, json).map(Arc::new);
    *last = Some((keys.prefix().to_string(), Arc::from(json), q.clone()));
    q
}

/// Most queue indexes a plan names: a slot's is sent as one byte, `'0'` + the index.
const MOST_QUEUES: usize = 78;

/// A call's plan: the arguments after the slots' own.
#[derive(Debug)]
pub(crate) struct Plan {
    /// `<ns>:resq:sharing`; per slot, a byte: `'0'` + the index of the queue whose limits its
    /// entry names (`'0'`: none); then per limit: its queue's index, its capacity, its holders
    /// key, its held key, the units the call's completions return to it (see `quick_plan` in
    /// `limits_quick.lua`).
    pub tail: Vec<String>,
    /// The limits it was made from.
    pub limits: Arc<QuickLimits>,
    /// Every slot holds the shares of the same queue, sends the completion of a job named by
    /// its record, and reserves: the call is sent as `'u'`, and the script need not look at
    /// each slot's entry when each takes a job of that queue again.
    pub uniform: bool,
}

/// How a slot of a call ends and goes on, as a plan needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlotEnds {
    /// It sends a completion (success or failure).
    pub completes: bool,
    /// It sends the completion of a job named by its record (not a claim's token) and
    /// reserves a next job.
    pub steady: bool,
}

/// The plan of a call polling `queues` (`(name, key, name as JSON)`, in order) for slots whose
/// entries are `known` (`None`: not known), each with how it ends; `None` when the call must
/// go the general way (an entry not known, or one no limit in force gives).
pub(crate) fn plan(
    limits: Arc<QuickLimits>,
    queues: &[(String, String, String)],
    known: impl Iterator<Item = (Option<String>, SlotEnds)>,
) -> Option<Plan> {
    let mut tail = vec![limits.sharing.clone(), String::new()];
    let mut index: HashMap<&str, usize> = HashMap::new();
    let add = |tail: &mut Vec<String>, queue: &str, i: usize| {
        for (holders, held, cap) in limits.by_queue.get(queue).into_iter().flatten() {
            tail.extend([
                i.to_string(),
                cap.to_string(),
                holders.clone(),
                held.clone(),
                // The units returned, counted below.
                "0".into(),
            ]);
        }
    };
    for (i, (name, _, _)) in queues.iter().enumerate() {
        if limits.by_queue.contains_key(name) {
            // A limited queue the call polls twice: the script would count its limits at one
            // index only and pop the other freely. (Worker lists poll each queue once; this
            // keeps any other caller from exceeding a limit.)
            if index.insert(name, i + 1).is_some() {
                return None;
            }
            add(&mut tail, name, i + 1);
        }
    }
    // Queues past the call's own: those whose shares a slot holds that the call does not poll.
    let mut next = queues.len() + 1;
    let mut slots = String::new();
    // Per queue index: the units the call's completions return to each of its limits.
    let mut returned: HashMap<usize, u64> = HashMap::new();
    // The queue index the first slot holds, and whether every slot so far holds it and is
    // steady.
    let (mut first, mut uniform) = (None, true);
    for (entry, ends) in known {
        let entry = entry?;
        if entry.is_empty() {
            uniform = false;
            slots.push('0');
            continue;
        }
        let queue = limits.queue_of_text.get(&entry)?;
        let i = match index.get(queue.as_str()) {
            Some(&i) => i,
            None => {
                let i = next;
                next += 1;
                index.insert(queue, i);
                add(&mut tail, queue, i);
                i
            }
        };
        if ends.completes {
            *returned.entry(i).or_default() += 1;
        }
        uniform &= ends.steady && *first.get_or_insert(i) == i;
        slots.push(char::from(
            b'0' + u8::try_from(i)
                .ok()
                .filter(|&i| i as usize <= MOST_QUEUES)?,
        ));
    }
    tail[1] = slots;
    for limit in tail[2..].chunks_exact_mut(5) {
        if let Some(n) = limit[0].parse().ok().and_then(|i: usize| returned.get(&i)) {
            limit[4] = n.to_string();
        }
    }
    Some(Plan {
        tail,
        limits: limits.clone(),
        uniform: uniform && first.is_some(),
    })
}

/// What each slot holds after a call the quick way ran, from what it held before (`known`),
/// its reply and whether its completion was applied (`replies`), and the index (from 1) of the
/// queue of the job the call gave it, 0 for none (`took`). `None` for a slot whose entry the
/// call read instead of trusting (it kept an entry while it took more).
pub(crate) fn after_quick(
    plan: &Plan,
    queues: &[(String, String, String)],
    known: &[Option<String>],
    replies: &[(Reply, bool)],
    took: &[usize],
) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = known
        .iter()
        .zip(replies)
        .map(|(k, (_, applied))| {
            if *applied {
                Some(String::new())
            } else {
                k.clone()
            }
        })
        .collect();
    for (i, &q) in took.iter().enumerate().filter(|&(_, &q)| q > 0) {
        let Some(slot) = out.get_mut(i) else { break };
        let text = queues
            .get(q - 1)
            .and_then(|(name, _, _)| plan.limits.text(name));
        *slot = match (text, slot.take()) {
            (None, cur) => cur,
            (Some(text), Some(cur)) if cur.is_empty() => Some(text.to_string()),
            _ => None,
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call is uniform only when every slot holds the shares of one queue, ends a job named
    /// by its record and reserves.
    #[test]
    fn a_plan_is_uniform_only_when_every_slot_holds_one_queue_and_goes_on() {
        let keys = Keys::new("u");
        let json = r#"{"defs":[{"name":"la","kind":"concurrency","limit":4,"queue":"a"},{"name":"lb","kind":"concurrency","limit":4,"queue":"b"}]}"#;
        let limits = Arc::new(QuickLimits::from_json(&keys, json).expect("quick limits"));
        let queues: Vec<(String, String, String)> = ["a", "b"]
            .iter()
            .map(|q| (q.to_string(), keys.queue(q), format!("\"{q}\"")))
            .collect();
        let text = |q: &str| limits.text(q).map(String::from);
        let go = SlotEnds {
            completes: true,
            steady: true,
        };
        let stays = SlotEnds {
            completes: true,
            steady: false,
        };
        let uniform = |slots: Vec<(Option<String>, SlotEnds)>| {
            plan(limits.clone(), &queues, slots.into_iter()).map(|p| p.uniform)
        };
        assert_eq!(uniform(vec![(text("a"), go), (text("a"), go)]), Some(true));
        assert_eq!(uniform(vec![(text("b"), go)]), Some(true));
        // Two queues' shares; a slot holding none; a slot that does not go on.
        assert_eq!(uniform(vec![(text("a"), go), (text("b"), go)]), Some(false));
        assert_eq!(
            uniform(vec![(text("a"), go), (Some(String::new()), go)]),
            Some(false)
        );
        assert_eq!(
            uniform(vec![(text("a"), go), (text("a"), stays)]),
            Some(false)
        );
        // An entry not known: no plan at all.
        assert_eq!(uniform(vec![(text("a"), go), (None, go)]), None);
        // A limited queue polled twice: no plan either (the general way counts it).
        let twice: Vec<(String, String, String)> =
            [queues[0].clone(), queues[1].clone(), queues[0].clone()].into();
        let planned = plan(limits.clone(), &twice, vec![(text("a"), go)].into_iter());
        assert!(planned.is_none(), "{planned:?}");
    }
}
