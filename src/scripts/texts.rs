//! The texts that cross between Rust and Lua beyond plain strings, numbers and JSON: for each,
//! its grammar and the one Rust function that makes it or reads it (the Lua function on the
//! other side is named with it; docs/architecture.md, "Calls between Rust and Lua", lists them
//! all). Each says what a hostile field (a tab or newline inside one, bytes that are not
//! UTF-8) does: impossible by construction, read right, or refused.

/// **A text's digest** (names the step's config and queue list, `config.lua`): the SHA-1 of
/// `text` in lowercase hex, as Lua's `redis.sha1hex` computes it (the library checks a text it
/// is sent against it). Hex: no separator inside, by construction.
pub(crate) fn digest(text: &str) -> String {
    sha1_smol::Sha1::from(text.as_bytes()).digest().to_string()
}

/// **The step's config** (`config.lua`'s `Cfg.get`): `<settings>\n<slots>`, both JSON (made
/// by serde: a newline inside a string is escaped), so the first newline splits them.
pub(crate) fn step_config(settings: &str, slots: &str) -> String {
    format!("{settings}\n{slots}")
}

/// **Problems** (`'\n'`-separated lines, each one problem naming its key; made by Lua's
/// `G.lines`): the problems of `text`. A problem is free text that is only logged: a newline
/// inside one (a key named with one) makes two lines, and nothing is misread.
pub(crate) fn problem_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|l| !l.is_empty())
}

/// What a job start said (`record.lua`'s `Rec.start_text`), borrowed from its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartText<'a> {
    /// `drop`: the job was cancelled, it must not run.
    Drop,
    /// `s`: a resque-status job.
    Statused,
    /// `r\t<attempt>\t<job key>\t<batch>`: a job resq tracks.
    Tracked {
        /// The attempt this run is.
        attempt: u64,
        /// Its job key (`""` none); may hold tabs and newlines.
        key: &'a str,
        /// Its batch (`""` none).
        batch: &'a str,
    },
    /// `absent\t<problem>`: its record could not be written (the job runs all the same).
    Absent(&'a str),
}

/// **A job start**: `drop` | `s` | `r\t<attempt>\t<job key>\t<batch>` | `absent\t<problem>`.
/// The attempt is digits and the batch an id (no tab): the job key is what lies between them,
/// so a tab or newline inside it is read right. `None` for anything else (not UTF-8, an
/// attempt that is not a number).
pub(crate) fn parse_start(data: &[u8]) -> Option<StartText<'_>> {
    let text = std::str::from_utf8(data).ok()?;
    match text {
        "drop" => return Some(StartText::Drop),
        "s" => return Some(StartText::Statused),
        _ => {}
    }
    if let Some(problem) = text.strip_prefix("absent\t") {
        return Some(StartText::Absent(problem));
    }
    let rest = text.strip_prefix("r\t")?;
    let (attempt, rest) = rest.split_once('\t').unwrap_or((rest, ""));
    let (key, batch) = rest.rsplit_once('\t').unwrap_or((rest, ""));
    Some(StartText::Tracked {
        attempt: attempt.parse().ok()?,
        key,
        batch,
    })
}

/// What a cancel answered (`job_cancel.lua`'s `reply`), borrowed from its text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CancelText<'a> {
    /// The word: `cancelled`, `killing`, `final`, `unknown`.
    pub(crate) word: &'a str,
    /// What follows the word on its line (`final <state>`: the state).
    pub(crate) arg: &'a str,
    /// Ends whose batch and waiting jobs are left to the prune round.
    pub(crate) ends: u64,
    /// Jobs whose children are still being cancelled by the prune round.
    pub(crate) jobs: u64,
    /// The problems (lines, [`problem_lines`]), or `""`.
    pub(crate) problems: &'a str,
}

/// **A cancel's reply**: `<word>[ <arg>]`, then optionally `\nsettling <ends> <jobs>`, then
/// optionally `\n<problems>`. The word and the state are the library's own, the numbers its
/// counts: a newline can only come from a problem, which is read as its own lines.
pub(crate) fn parse_cancel(text: &str) -> CancelText<'_> {
    let (line, mut problems) = text.split_once('\n').unwrap_or((text, ""));
    let (word, arg) = line.split_once(' ').unwrap_or((line, ""));
    let mut out = CancelText {
        word,
        arg,
        ..CancelText::default()
    };
    if let Some(rest) = problems.strip_prefix("settling ") {
        let (counts, after) = rest.split_once('\n').unwrap_or((rest, ""));
        let mut n = counts.split(' ').map(|x| x.parse::<u64>().unwrap_or(0));
        out.ends = n.next().unwrap_or(0);
        out.jobs = n.next().unwrap_or(0);
        problems = after;
    }
    out.problems = problems;
    out
}

/// A held job, as a limit's held set keeps it (`limits_held.lua`'s `Lim.member_text`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeldMember<'a> {
    /// The hold's sequence (unique in its call).
    pub(crate) seq: &'a [u8],
    /// The queue it goes back to.
    pub(crate) queue: &'a [u8],
    /// The units it takes (digits).
    pub(crate) units: &'a [u8],
    /// The limit that holds it.
    pub(crate) name: &'a [u8],
    /// Its payload, or `@<key>` of a list holding a large one.
    pub(crate) payload: &'a [u8],
}

/// **A held job**: zset member `<seq>\t<queue>\t<units>\t<name>\t<payload>`. The payload is
/// last and may hold anything; the units are digits, and a member whose units are not (a tab
/// inside the queue shifts them) is refused (`None`).
pub(crate) fn parse_held(member: &[u8]) -> Option<HeldMember<'_>> {
    let mut parts = member.splitn(5, |b| *b == b'\t');
    let m = HeldMember {
        seq: parts.next()?,
        queue: parts.next()?,
        units: parts.next()?,
        name: parts.next()?,
        payload: parts.next()?,
    };
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    digits(m.units).then_some(m)
}

/// **A schedule's token**: `<next due epoch s> <spec digest>` (`fire_schedule.lua` compares
/// it whole and stores it; it reads no part). The due time is a number and the digest hex:
/// no separator inside a field, by construction.
pub(crate) fn schedule_token(due_s: i64, digest: &str) -> String {
    format!("{due_s} {digest}")
}

/// The due time and digest of a [`schedule_token`]; `None` for anything else.
pub(crate) fn parse_schedule_token(token: &str) -> Option<(i64, &str)> {
    let (due, digest) = token.split_once(' ')?;
    Some((due.parse().ok()?, digest))
}

/// **A batch's first chunk** (`batch_stage.lua`'s `header`):
/// `<callbacks' queue>\t<parent>\t<ttl s>\t<description>`. The parent is a batch id and the
/// TTL a number; the queue and description are refused by the client (`workflows/batch.rs`)
/// when they hold a tab or a newline (a description's newlines become spaces first).
pub(crate) fn batch_header(queue: &str, parent: &str, ttl_s: u64, description: &str) -> String {
    format!("{queue}\t{parent}\t{ttl_s}\t{description}")
}

/// **A job's workflow** (`job_enqueue.lua`'s `workflow`): `''`, or
/// `<batch>\t<parent>\t<run|fail|cancel>\t<ttl s>\t<deps, space-separated>`. Every field is an
/// id, a policy word or a number: no tab, space or newline inside one, by construction.
pub(crate) fn workflow_text(
    batch: &str,
    parent: &str,
    policy: &str,
    ttl_s: u64,
    deps: &[&str],
) -> String {
    format!("{batch}\t{parent}\t{policy}\t{ttl_s}\t{}", deps.join(" "))
}

/// **A delayed item's job** (`move_delayed.lua`'s `item_ref`): `r:<id>` for a job resq
/// tracks, `s:<id>` for a resque-status job (`''`: neither). The id is hex, by construction.
pub(crate) fn item_ref(statused: bool, id: &str) -> String {
    format!("{}:{id}", if statused { 's' } else { 'r' })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_start_reads_a_key_with_tabs_and_newlines_right() {
        assert_eq!(
            parse_start(b"r\t2\ta\tb\nc\tba69034b39c05d28a5403ac10e276e79"),
            Some(StartText::Tracked {
                attempt: 2,
                key: "a\tb\nc",
                batch: "ba69034b39c05d28a5403ac10e276e79"
            })
        );
        assert_eq!(
            parse_start(b"r\t1\t\t"),
            Some(StartText::Tracked {
                attempt: 1,
                key: "",
                batch: ""
            })
        );
        assert_eq!(parse_start(b"drop"), Some(StartText::Drop));
        assert_eq!(parse_start(b"absent\tx y"), Some(StartText::Absent("x y")));
        assert_eq!(parse_start(b"r\tx\t\t"), None);
        assert_eq!(parse_start(b"r\t1\t\xff\t"), None);
        assert_eq!(parse_start(b""), None);
    }

    #[test]
    fn a_cancel_reply_is_read_whole() {
        let c = parse_cancel("final completed\nsettling 3 4\nb1 a problem\nb2 another");
        assert_eq!(
            (c.word, c.arg, c.ends, c.jobs, c.problems),
            ("final", "completed", 3, 4, "b1 a problem\nb2 another")
        );
        let c = parse_cancel("cancelled\nk a problem");
        assert_eq!(
            (c.word, c.ends, c.problems),
            ("cancelled", 0, "k a problem")
        );
        assert_eq!(parse_cancel("unknown").word, "unknown");
    }

    #[test]
    fn a_held_member_with_a_tab_in_its_queue_is_refused() {
        let m = parse_held(b"12\tq\t3\tlim\t{\"a\":\"\t\"}").expect("a member");
        assert_eq!(
            (m.seq, m.queue, m.units, m.name, m.payload),
            (
                &b"12"[..],
                &b"q"[..],
                &b"3"[..],
                &b"lim"[..],
                &b"{\"a\":\"\t\"}"[..]
            )
        );
        assert_eq!(parse_held(b"12\tq\tx\t3\tlim\t{}"), None);
        assert_eq!(parse_held(b"12\tq\t3"), None);
    }

    #[test]
    fn a_digest_is_lowercase_sha1_hex() {
        // sha1("abc"), as redis.sha1hex("abc") answers.
        assert_eq!(digest("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(digest(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        let c = step_config(r#"{"p":"a\nb:"}"#, "[]");
        assert_eq!(c.matches('\n').count(), 1);
    }

    #[test]
    fn texts_rust_makes_read_back() {
        let t = schedule_token(1_795_000_000, "ab12");
        assert_eq!(parse_schedule_token(&t), Some((1_795_000_000, "ab12")));
        assert_eq!(parse_schedule_token("soon ab12"), None);
        assert_eq!(
            problem_lines("a\n\nb\n").collect::<Vec<_>>(),
            vec!["a", "b"]
        );
    }
}
