//! Worker ids: their format, parsing, and the slot convention.
//!
//! A resq process runs N slots, each a Resque worker with its own id (one `worker:<id>` record
//! holds one job). The id is `host~resq:pid-k:queues` (scheme E of the wire notes): the host
//! field carries a `~resq` suffix so it can never equal any machine's `gethostname` (`~` is not
//! a hostname character), which keeps a starting Ruby worker's same-host pid check (prune loop 2)
//! away from live resq slots whatever its `QUEUES`, while heartbeat expiry (prune loop 1) still
//! cleans up after a crashed resq process. `docs/identity.md` gives the full argument.

use std::fmt;

/// The suffix that marks a resq host field.
pub(crate) const HOST_SUFFIX: &str = "~resq";

/// One slot's worker id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct WorkerId {
    /// The full id string as registered in `<ns>:workers`.
    id: String,
}

impl WorkerId {
    /// The id of slot `slot` of process `pid` on `host`, polling `queues` (as configured,
    /// skip entries left out).
    pub(crate) fn for_slot(host: &str, pid: u32, slot: usize, queues: &[String]) -> Self {
        WorkerId {
            id: format!(
                "{}{HOST_SUFFIX}:{pid}-{slot}:{}",
                sanitize_host(host),
                queues.join(",")
            ),
        }
    }

    /// The id of slot `slot` of process `pid` on `host` serving the one queue `queue` on a
    /// spread cluster namespace: `host~resq{<tag>}:pid-k:queue`, where `tag` puts
    /// `<ns>:worker:<id>` and the worker's stats in the queue's hash slot
    /// ([`crate::keys::Keys::queue_tag`]). Ruby still splits it into host, pid and queue.
    pub(crate) fn for_queue_slot(
        host: &str,
        tag: &str,
        pid: u32,
        slot: usize,
        queue: &str,
    ) -> Self {
        WorkerId {
            id: format!(
                "{}{HOST_SUFFIX}{{{tag}}}:{pid}-{slot}:{queue}",
                sanitize_host(host)
            ),
        }
    }

    /// The id text.
    pub(crate) fn as_str(&self) -> &str {
        &self.id
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

/// Whether `host` (an id's first field) is a resq slot's: `<host>~resq`, or `<host>~resq{<tag>}`
/// on a spread cluster namespace.
pub(crate) fn is_resq_host(host: &str) -> bool {
    match host.rfind(HOST_SUFFIX) {
        Some(at) => {
            let rest = &host[at + HOST_SUFFIX.len()..];
            rest.is_empty() || (rest.starts_with('{') && rest.ends_with('}') && rest.len() > 2)
        }
        None => false,
    }
}

/// A host field without the `{tag}` of a spread slot's (`vm~resq{ab}` → `vm~resq`), so the
/// slots of one resq process share one; any other host field as it is.
pub(crate) fn base_host(host: &str) -> &str {
    match host.rfind(HOST_SUFFIX) {
        Some(at) if is_resq_host(host) => &host[..at + HOST_SUFFIX.len()],
        _ => host,
    }
}

/// The parts of any Resque-family worker id, split the way Ruby's `Worker.find` does
/// (at most three fields on `:`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParsedId {
    /// Host field (`vm`, `vm~resq`).
    pub host: String,
    /// Pid field (`1234`, `1234-0` for Jesque/goworker/resq slots).
    pub pid: String,
    /// Queue field split on `,`.
    pub queues: Vec<String>,
}

/// Splits `id` as Ruby's `Worker.find` does; `None` when Ruby would fail on it (fewer than three
/// fields or an empty queue field).
pub(crate) fn parse(id: &str) -> Option<ParsedId> {
    let mut parts = id.splitn(3, ':');
    let host = parts.next()?.to_string();
    let pid = parts.next()?.to_string();
    let queues: Vec<String> = parts.next()?.split(',').map(str::to_string).collect();
    if queues.iter().all(|q| q.is_empty()) {
        return None;
    }
    Some(ParsedId { host, pid, queues })
}

/// The machine's host name, as Ruby's `Socket.gethostname` reports it.
pub(crate) fn hostname() -> String {
    hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Keeps a host field URL-safe and free of `:` (resque-web puts ids into link paths).
fn sanitize_host(host: &str) -> String {
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_ids_split_like_ruby() {
        let id = WorkerId::for_slot("vm", 42, 3, &["high".into(), "low*".into()]);
        assert_eq!(id.as_str(), "vm~resq:42-3:high,low*");
        let p = parse(id.as_str()).unwrap();
        assert_eq!(p.host, "vm~resq");
        assert_eq!(p.pid, "42-3");
        assert_eq!(p.queues, vec!["high", "low*"]);
    }

    #[test]
    fn spread_ids_put_the_worker_in_the_queues_slot() {
        let keys = crate::keys::Keys::new("resque").spread();
        let tag = keys.queue_tag("mail");
        let id = WorkerId::for_queue_slot("vm", tag, 42, 3, "mail");
        assert_eq!(id.as_str(), format!("vm~resq{{{tag}}}:42-3:mail"));
        let p = parse(id.as_str()).unwrap();
        assert_eq!(
            (p.pid.as_str(), p.queues.as_slice()),
            ("42-3", &["mail".to_string()][..])
        );
        assert!(is_resq_host(&p.host) && !p.host.contains(':'));
        assert!(is_resq_host("vm~resq") && !is_resq_host("vm") && !is_resq_host("vm~resq{}"));
        let slot = |k: String| crate::keys::hash_slot(k.as_bytes());
        assert_eq!(slot(keys.worker(id.as_str())), slot(keys.queue("mail")));
        assert_eq!(
            slot(keys.stat_processed_by(id.as_str())),
            slot(keys.queue("mail"))
        );
    }

    #[test]
    fn the_slots_of_one_process_share_a_base_host() {
        assert_eq!(base_host("vm~resq{ab}"), "vm~resq");
        assert_eq!(base_host("vm~resq{0}"), base_host("vm~resq"));
        // Not a resq host field: as it is.
        for h in ["vm", "vm~resq{}", "vm{ab}", "vm~resq{ab}x"] {
            assert_eq!(base_host(h), h);
        }
    }

    #[test]
    fn ruby_breaking_ids_do_not_parse() {
        assert!(parse("host:1").is_none());
        assert!(parse("host:1:").is_none());
    }

    #[test]
    fn host_field_never_has_a_colon() {
        let id = WorkerId::for_slot("a:b/c", 1, 0, &["q".into()]);
        assert_eq!(parse(id.as_str()).unwrap().host, "a_b_c~resq");
    }
}
