//! The queue list of a worker, with Ruby Resque's semantics.
//!
//! `QUEUES=a,b` is a static list polled in order (a name given twice is polled once, at its
//! first place: Ruby polls it twice in a round, and the second poll of a queue the first left
//! or found empty gives nothing more). A list with any of `* ? [ ] { }` or any `!skip` entry is
//! dynamic: on every resolution `<ns>:queues` is matched against each entry with
//! Ruby's `File.fnmatch?` (no flags: `{a,b}` is literal, `*` does not match a leading `.`), each
//! entry's matches sorted, concatenated in entry order, deduplicated, skip patterns removed.

use crate::error::{Error, Result};

/// Characters that make a Ruby queue list dynamic.
const WILDCARDS: &[char] = &['*', '?', '{', '}', '[', ']'];

/// A parsed queue list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueList {
    /// Entries to poll (or patterns), in priority order.
    queues: Vec<String>,
    /// `!pattern` entries, without the `!`.
    skip: Vec<String>,
    /// Whether the list must be resolved against `<ns>:queues`.
    dynamic: bool,
}

impl QueueList {
    /// Parses a comma-separated list as `QUEUES` gives it; entries are trimmed and empty ones
    /// dropped. Fails when nothing is left to poll.
    pub fn parse(text: &str) -> Result<Self> {
        Self::from_entries(text.split(','))
    }

    /// Builds a list from separate entries.
    pub fn from_entries<I, S>(entries: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut queues = Vec::new();
        let mut skip = Vec::new();
        for e in entries {
            let e = e.as_ref().trim();
            if e.is_empty() {
                continue;
            }
            if !servable(e) {
                return Err(Error::Config {
                    var: "QUEUES",
                    message: format!(
                        "{e:?} has a control character; resq serves no such queue (its texts \
                         between Rust and Lua separate fields with tabs and newlines)"
                    ),
                });
            }
            match e.strip_prefix('!') {
                Some(s) => skip.push(s.to_string()),
                None => queues.push(e.to_string()),
            }
        }
        if queues.is_empty() {
            return Err(Error::Config {
                var: "QUEUES",
                message: "names no queue to poll (set QUEUES=a,b or QUEUES=*)".into(),
            });
        }
        let dynamic = !skip.is_empty() || queues.iter().any(|q| q.contains(WILDCARDS));
        Ok(QueueList {
            queues,
            skip,
            dynamic,
        })
    }

    /// The entries as configured (skip entries left out) — the worker id's queue field.
    pub fn entries(&self) -> &[String] {
        &self.queues
    }

    /// Whether the list depends on `<ns>:queues`.
    pub fn is_dynamic(&self) -> bool {
        self.dynamic
    }

    /// The queues to poll, in order, each once, given the members of `<ns>:queues`. A name
    /// with a control character (a tab, a newline) is not served: resq's texts between Rust
    /// and Lua separate fields with them (docs/architecture.md).
    pub fn resolve(&self, known: &[String]) -> Vec<String> {
        let picked: Vec<&String> = if self.dynamic {
            self.queues
                .iter()
                .flat_map(|pattern| {
                    let mut matched: Vec<&String> = known
                        .iter()
                        .filter(|q| fnmatch(pattern, q) && !self.skip.iter().any(|s| fnmatch(s, q)))
                        .filter(|q| servable(q))
                        .collect();
                    matched.sort();
                    matched
                })
                .collect()
        } else {
            self.queues.iter().collect()
        };
        let mut out: Vec<String> = Vec::new();
        for q in picked {
            if !out.contains(q) {
                out.push(q.clone());
            }
        }
        out
    }
}

/// Whether resq serves a queue named `name`: no control character in it.
pub(crate) fn servable(name: &str) -> bool {
    !name.chars().any(char::is_control)
}

/// Ruby's `File.fnmatch?(pattern, text)` with no flags.
pub(crate) fn fnmatch(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    fnmatch_at(&p, &t, 0, 0)
}

fn fnmatch_at(p: &[char], t: &[char], mut pi: usize, mut ti: usize) -> bool {
    // Iterative with one backtrack point for `*`, as glob matchers usually are.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if pi < p.len() {
            let leading_dot = ti == 0 && t.first() == Some(&'.');
            match p[pi] {
                '*' if !leading_dot => {
                    star = Some((pi, ti));
                    pi += 1;
                    continue;
                }
                '?' if ti < t.len() && !leading_dot => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                '[' if ti < t.len() && !leading_dot => {
                    if let Some((ok, next)) = bracket(p, pi, t[ti]) {
                        if ok {
                            pi = next;
                            ti += 1;
                            continue;
                        }
                    } else if t[ti] == '[' {
                        // An unterminated bracket is a literal `[`.
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
                '\\' if pi + 1 < p.len() && ti < t.len() && t[ti] == p[pi + 1] => {
                    pi += 2;
                    ti += 1;
                    continue;
                }
                '\\' if pi + 1 < p.len() => {}
                c if c != '*' && c != '?' && c != '[' && ti < t.len() && t[ti] == c => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                _ => {}
            }
        } else if ti == t.len() {
            return true;
        }
        match star {
            Some((sp, st)) if st < t.len() => {
                star = Some((sp, st + 1));
                pi = sp + 1;
                ti = st + 1;
            }
            _ => return false,
        }
    }
}

/// Matches `c` against the bracket expression starting at `p[start] == '['`; returns whether it
/// matched and the index after `]`, or `None` when the bracket is not closed.
fn bracket(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = matches!(p.get(i), Some('!') | Some('^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        let mut lo = p[i];
        if lo == '\\' && i + 1 < p.len() {
            i += 1;
            lo = p[i];
        }
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            let mut hi = p[i + 2];
            let mut step = 3;
            if hi == '\\' && i + 3 < p.len() {
                hi = p[i + 3];
                step = 4;
            }
            if lo <= c && c <= hi {
                matched = true;
            }
            i += step;
        } else {
            if lo == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Vec<String> {
        [
            "critical", "high_a", "high_b", "low", ".hidden", "{a,b}", "a",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    #[test]
    fn static_list_keeps_order() {
        let l = QueueList::parse(" high , low ").unwrap();
        assert!(!l.is_dynamic());
        assert_eq!(l.resolve(&[]), vec!["high", "low"]);
    }

    #[test]
    fn star_sorts_and_skips_leading_dot() {
        let l = QueueList::parse("*").unwrap();
        assert_eq!(
            l.resolve(&known()),
            vec!["a", "critical", "high_a", "high_b", "low", "{a,b}"]
        );
    }

    #[test]
    fn priority_entries_then_rest_deduplicated_with_skips() {
        let l = QueueList::parse("critical,high_*,*,!low").unwrap();
        assert_eq!(l.entries(), &["critical", "high_*", "*"]);
        assert_eq!(
            l.resolve(&known()),
            vec!["critical", "high_a", "high_b", "a", "{a,b}"]
        );
    }

    #[test]
    fn a_static_list_polls_each_queue_once_and_keeps_its_entries() {
        let l = QueueList::parse("a,b,a,c,b").unwrap();
        assert_eq!(l.entries(), &["a", "b", "a", "c", "b"]);
        assert_eq!(l.resolve(&[]), vec!["a", "b", "c"]);
    }

    #[test]
    fn plain_name_in_dynamic_list_needs_membership() {
        let l = QueueList::parse("missing,high_?").unwrap();
        assert_eq!(l.resolve(&known()), vec!["high_a", "high_b"]);
    }

    #[test]
    fn braces_are_literal_and_brackets_work() {
        assert!(fnmatch("{a,b}", "{a,b}"));
        assert!(!fnmatch("{a,b}", "a"));
        assert!(fnmatch("high_[ab]", "high_a"));
        assert!(!fnmatch("high_[!ab]", "high_a"));
        assert!(fnmatch("high_[a-c]", "high_b"));
        assert!(fnmatch(".*", ".hidden"));
        assert!(fnmatch("a*c", "abbbc"));
        assert!(!fnmatch("a*c", "abbbd"));
    }

    #[test]
    fn a_name_with_a_control_character_is_not_served() {
        let known: Vec<String> = ["a\tb", "good", "line\nbreak"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(QueueList::parse("*").unwrap().resolve(&known), ["good"]);
        assert!(QueueList::parse("good,a\tb").is_err());
    }

    #[test]
    fn only_skips_is_an_error() {
        assert!(QueueList::parse("!a, ,").is_err());
    }
}
