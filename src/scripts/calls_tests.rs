//! Every builder (calls.rs) against its file's header: the same KEYS and ARGV, in the same
//! order, a repeated trailing part where the header has one; and every function of the library
//! has a builder, or is on the list of those still built by position.

use super::calls::{Spec, SPECS, TEST_SPECS};
use std::collections::BTreeMap;

/// Functions whose calls are still built by position at their call site: none.
const BY_POSITION: &[&str] = &[];

/// The header of `file`: its opening comment lines, without their `--`.
fn header(file: &str) -> String {
    let path = format!("{}/src/scripts/{file}", env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    src.lines()
        .take_while(|l| l.starts_with("--"))
        .map(|l| l.trim_start_matches('-'))
        .collect::<Vec<_>>()
        .join("\n")
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What a header declares of `what` (`KEYS` or `ARGV`): per index, its words (to the next
/// declaration or the end of the line), and whether a repeated part follows. A declaration
/// opens a line or follows two spaces; `KEYS[3]` inside a sentence is a reference.
struct Declared {
    at: BTreeMap<usize, String>,
    tail: bool,
}

fn declared(head: &str, what: &str) -> Declared {
    let mut at = BTreeMap::new();
    let mut tail = false;
    // "then per …" opens a repeated part of what the declaration before it is of.
    let mut last = "";
    for line in head.lines() {
        let starts: Vec<usize> = decl_starts(line);
        let mut marks: Vec<(usize, &str)> = starts.iter().map(|&s| (s, &line[s..s + 4])).collect();
        marks.extend(line.match_indices("then per").map(|(i, _)| (i, "then")));
        marks.sort();
        for (_, m) in marks {
            match m {
                "then" => tail |= last == what,
                kind => last = kind,
            }
        }
        for (n, &s) in starts.iter().enumerate() {
            let rest = &line[s..];
            let Some(rest) = rest.strip_prefix(what).and_then(|r| r.strip_prefix('[')) else {
                continue;
            };
            let end = starts.get(n + 1).map_or(line.len(), |&e| e);
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let after = &rest[digits.len()..];
            let from: usize = digits.parse().expect("an index");
            let text_of = |close: usize| squash(&line[s + what.len() + 1 + close + 1..end]);
            if let Some(r) = after.strip_prefix("..") {
                let to: String = r.chars().take_while(char::is_ascii_digit).collect();
                if !to.is_empty() && r[to.len()..].starts_with(']') {
                    let close = digits.len() + 2 + to.len();
                    let text = text_of(close);
                    for i in from..=to.parse::<usize>().expect("an index") {
                        assert!(at.insert(i, text.clone()).is_none(), "{what}[{i}] twice");
                    }
                } else {
                    tail = true;
                }
            } else if after.starts_with(']') {
                let text = text_of(digits.len());
                assert!(
                    at.insert(from, text).is_none(),
                    "{what}[{from}] twice: {line}"
                );
            } else {
                tail = true;
            }
        }
    }
    if squash(head).contains(&format!("{what}: the")) {
        tail = true;
    }
    Declared { at, tail }
}

/// Where declarations may start in `line`: its first word, and any word after two spaces.
fn decl_starts(line: &str) -> Vec<usize> {
    let b = line.as_bytes();
    let mut v = Vec::new();
    let first = line.len() - line.trim_start().len();
    for i in 0..b.len() {
        let opens = i == first || (i >= 2 && b[i - 1] == b' ' && b[i - 2] == b' ');
        if opens && (line[i..].starts_with("KEYS[") || line[i..].starts_with("ARGV[")) {
            v.push(i);
        }
    }
    v
}

fn check(spec: &Spec) -> Vec<String> {
    let head = header(spec.file);
    let mut problems = Vec::new();
    for (what, fields, tail) in [
        ("KEYS", spec.keys, spec.keys_tail),
        ("ARGV", spec.argv, spec.argv_tail),
    ] {
        let d = declared(&head, what);
        let indexes: Vec<usize> = d.at.keys().copied().collect();
        let want: Vec<usize> = (1..=fields.len()).collect();
        if indexes != want {
            problems.push(format!(
                "{}: the header declares {what} {indexes:?}, the builder {want:?}",
                spec.file
            ));
            continue;
        }
        for (i, (field, words)) in fields.iter().enumerate() {
            let text = &d.at[&(i + 1)];
            if !text.starts_with(&squash(words)) {
                problems.push(format!(
                    "{}: {what}[{}] is `{text}` in the header, the builder's `{field}` says `{words}`",
                    spec.file,
                    i + 1
                ));
            }
        }
        let tailed = !tail.is_empty();
        if d.tail != tailed {
            problems.push(format!(
                "{}: a repeated part of {what} in the header: {}, in the builder: {}",
                spec.file, d.tail, tailed
            ));
        }
        let squashed = squash(&head);
        for words in tail {
            if !squashed.contains(&squash(words)) {
                problems.push(format!(
                    "{}: the header says nothing of {what}'s repeated `{words}`",
                    spec.file
                ));
            }
        }
    }
    problems
}

#[test]
fn every_builder_matches_its_header() {
    let problems: Vec<String> = SPECS.iter().chain(TEST_SPECS).flat_map(check).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check itself: a builder whose fields are out of the header's order, or that misses one,
/// is refused.
#[test]
fn a_builder_out_of_order_is_refused() {
    let spec = SPECS
        .iter()
        .find(|s| s.function == "fire_schedule")
        .expect("fire_schedule's builder");
    let mut keys = spec.keys.to_vec();
    keys.swap(1, 2);
    let swapped = Spec {
        keys: Box::leak(keys.into_boxed_slice()),
        ..*spec
    };
    assert_eq!(check(&swapped).len(), 2, "{:?}", check(&swapped));
    let short = Spec {
        argv: &spec.argv[..spec.argv.len() - 1],
        ..*spec
    };
    assert_eq!(check(&short).len(), 1);
    let tailed = Spec {
        argv_tail: &["job payload"],
        ..*spec
    };
    assert_eq!(check(&tailed).len(), 1);
}

/// Every function the library registers has a builder, or is listed as built by position.
#[test]
fn every_function_has_a_builder() {
    let manifest = std::fs::read_to_string(format!(
        "{}/src/scripts/LIBRARY",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("LIBRARY");
    let mut registered = Vec::new();
    for file in manifest
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let src =
            std::fs::read_to_string(format!("{}/src/scripts/{file}", env!("CARGO_MANIFEST_DIR")))
                .expect("a library file");
        for (i, _) in src.match_indices("register('") {
            let name = &src[i + "register('".len()..];
            let name = &name[..name.find('\'').expect("a quoted name")];
            if name != "version" {
                registered.push((name.to_string(), file.to_string()));
            }
        }
    }
    let mut missing = Vec::new();
    for (name, file) in &registered {
        let built = SPECS.iter().chain(TEST_SPECS).find(|s| s.function == name);
        match built {
            Some(s) => assert_eq!(&s.file, file, "{name}'s builder names another file"),
            None if BY_POSITION.contains(&name.as_str()) => {}
            None => missing.push(name.clone()),
        }
    }
    assert!(
        missing.is_empty(),
        "functions without a builder: {missing:?}"
    );
    for name in BY_POSITION {
        assert!(
            registered.iter().any(|(n, _)| n == name) && !SPECS.iter().any(|s| s.function == *name),
            "{name} is listed as built by position but is not (or has a builder)"
        );
    }
}

/// The calls still built by position (`crate::scripts::<FUNCTION>` outside the builders):
/// only these, each in its file, while their callers are reworked elsewhere.
const POSITIONAL_CALLS: &[(&str, &str)] = &[];

/// Every `.rs` file under `dir`, with its path relative to `src/`.
fn rust_files(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, root, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p
                .strip_prefix(root)
                .expect("under src")
                .display()
                .to_string();
            out.push((rel, std::fs::read_to_string(&p).expect("a source file")));
        }
    }
}

/// No new call is built by position: a call site outside `scripts/` names a builder, not a
/// function constant, except the calls listed above.
#[test]
fn calls_outside_the_builders_are_only_the_listed_ones() {
    let root = std::path::PathBuf::from(format!("{}/src", env!("CARGO_MANIFEST_DIR")));
    let mut files = Vec::new();
    rust_files(&root, &root, &mut files);
    let mut found = Vec::new();
    for (path, src) in &files {
        if path.starts_with("scripts/") {
            continue;
        }
        for (i, _) in src.match_indices("scripts::") {
            let name: String = src[i + "scripts::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                .collect();
            if name.len() > 1 && name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                let next = src[i + "scripts::".len() + name.len()..].chars().next();
                if !next.is_some_and(|c| c.is_ascii_alphanumeric()) {
                    found.push((path.clone(), name));
                }
            }
        }
    }
    found.sort();
    let mut want: Vec<(String, String)> = POSITIONAL_CALLS
        .iter()
        .map(|(p, n)| (p.to_string(), n.to_string()))
        .collect();
    want.sort();
    assert_eq!(
        found, want,
        "calls built by position (use the builder in scripts/calls.rs)"
    );
}
