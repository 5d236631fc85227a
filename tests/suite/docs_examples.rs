//! Every Rust example in `docs/*.md` compiles against today's API.
//!
//! The docs show fragments (a `let registry = …`, a handler's body, calls on a `client`), as a
//! reader wants them. This test puts each ```` ```rust ```` block, as written, into the body of
//! an async function of a scratch crate whose parameters and module give the names a fragment
//! leaves to its reader ([`PRELUDE`]: a connected `client`, an `admin`, a handler's `ctx`, a
//! job class `Archive`…), and builds that crate with `cargo build --offline`, sharing this
//! target directory (so only the scratch crate compiles once resq is built, as in
//! `tests/suite/readme.rs`). A block that names an item resq does not have, a private path, or a
//! wrong signature fails the build, and the failure names the doc and line.
//!
//! A block whose info string is ```` ```rust,ignore ```` is left out (none is today).
//!
//! The same crate `use`s every `resq::…` path the docs and the README name (up to its last
//! module, type or function: `resq::Client::connect` checks `resq::Client`), so a doc cannot
//! name a path a user cannot reach; and a second test checks that every file of this
//! repository a doc names in backticks exists.

use crate::support;

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One example: the doc, the line of its opening fence, its text (indentation removed).
struct Block {
    doc: String,
    line: usize,
    code: String,
}

/// Every ```rust block of every `docs/*.md`, in file and line order.
fn blocks() -> Vec<Block> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    let mut out = Vec::new();
    for path in docs {
        let text = std::fs::read_to_string(&path).expect("doc");
        let name = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let open = lines[i].trim_start();
            if let Some(info) = open.strip_prefix("```") {
                let indent = lines[i].len() - open.len();
                let end = (i + 1..lines.len())
                    .find(|&j| lines[j].trim_start().starts_with("```"))
                    .unwrap_or_else(|| panic!("{name}:{}: an unclosed fence", i + 1));
                if info.trim() == "rust" {
                    let code = lines[i + 1..end]
                        .iter()
                        .map(|l| l.get(indent..).unwrap_or(l.trim_start()))
                        .collect::<Vec<_>>()
                        .join("\n");
                    out.push(Block {
                        doc: name.clone(),
                        line: i + 1,
                        code,
                    });
                }
                i = end;
            }
            i += 1;
        }
    }
    out
}

/// What a fragment may use without defining it: the names the docs' prose introduces.
const PRELUDE: &str = r#"
pub use resq::admin::Admin;
pub use resq::jobs::{JobFilter, JobId, State, Track};
pub use resq::{Client, JobContext, JobError, JobResult, Registry};
pub use serde_json::json;
pub use std::time::Duration;

/// A job class, as the docs' `Archive` (an id and a branch).
pub struct Archive;
impl resq::Job for Archive {
    const CLASS: &'static str = "Archive";
    type Args = (u64, String);
    async fn perform(&self, _args: Self::Args, _ctx: JobContext) -> JobResult {
        Ok(())
    }
}

/// The work a handler does, as the docs name it.
pub async fn archive(_path: &str) -> Result<(), String> { Ok(()) }
pub fn resize(_path: String) -> JobResult { Ok(()) }
pub async fn export(_chunk: &[u8]) -> JobResult { Ok(()) }
pub async fn mail(_ctx: JobContext) -> JobResult { Ok(()) }
pub async fn sync(_ctx: JobContext) -> JobResult { Ok(()) }
pub fn current_trace_id() -> String { String::new() }
"#;

/// The parameters every example's function gets: what a fragment's reader already holds.
const PARAMS: &str = "client: Client, admin: Admin, ctx: JobContext, id: JobId, a: JobId, \
    b: JobId, filter: JobFilter, url: &str, redis_url: &str, password: &str, \
    my_routes: axum::Router";

/// The docs to read: every `docs/*.md` and the README.
fn docs() -> Vec<(String, String)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    paths.sort();
    paths.push(root().join("README.md"));
    paths
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(root()).expect("in the checkout");
            let text = std::fs::read_to_string(&p).expect("doc");
            (name.to_string_lossy().into_owned(), text)
        })
        .collect()
}

/// Every distinct `resq::…` path the docs name, cut after its last segment that is not an
/// associated item (a segment after a type's), with the first doc that names it.
fn resq_paths() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (doc, text) in docs() {
        let mut rest = text.as_str();
        while let Some(i) = rest.find("resq::") {
            let tail = &rest[i..];
            let len = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            let path = tail[..len].trim_end_matches(':');
            rest = &tail[len..];
            let mut kept = Vec::new();
            for seg in path.split("::") {
                let after_type = kept
                    .last()
                    .is_some_and(|s: &&str| s.starts_with(|c: char| c.is_ascii_uppercase()));
                if seg.is_empty() || after_type {
                    break;
                }
                kept.push(seg);
            }
            let path = kept.join("::");
            if path.contains("::") && !out.iter().any(|(p, _)| *p == path) {
                out.push((path, doc.clone()));
            }
        }
    }
    out
}

/// The scratch crate's `main.rs`: the prelude, one module per block, and the docs' paths.
fn crate_source(blocks: &[Block]) -> String {
    let mut src = String::from("#![allow(unused, dead_code, clippy::all)]\n\nmod prelude {\n");
    src.push_str(PRELUDE);
    src.push_str("}\n\n");
    for (n, b) in blocks.iter().enumerate() {
        // A fragment that continues a builder (`.handler(…)`) continues a registry's.
        let body = if b.code.trim_start().starts_with('.') {
            format!("let _ = Registry::new()\n{};", b.code)
        } else {
            b.code.clone()
        };
        src.push_str(&format!(
            "// {doc}:{line}\nmod example_{n} {{\n    use crate::prelude::*;\n    \
             pub async fn run({PARAMS}) -> anyhow::Result<()> {{\n{body}\n;\n        \
             Ok(())\n    }}\n}}\n\n",
            doc = b.doc,
            line = b.line,
        ));
    }
    src.push_str("mod named_paths {\n");
    for (path, doc) in resq_paths() {
        src.push_str(&format!("    use {path} as _; // {doc}\n"));
    }
    src.push_str("}\n\nfn main() {}\n");
    src
}

#[test]
fn every_rust_example_in_the_docs_compiles() {
    let blocks = blocks();
    assert!(
        blocks.len() >= 10,
        "expected the docs' examples, found {}",
        blocks.len()
    );
    let manifest = "[package]\nname = \"docs-examples\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
        publish = false\n\n[dependencies]\nresq = { path = \"../resq\" }\nanyhow = \"1\"\n\
        serde = { version = \"1\", features = [\"derive\"] }\nserde_json = \"1\"\n\
        tokio = \"1\"\ntracing = \"0.1\"\naxum = { version = \"0.8\", default-features = false }\n";
    let source = crate_source(&blocks);
    let out = support::scratch::build("docs-examples", manifest, &source);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        // Name the doc and line of each block the compiler points into.
        let places: Vec<String> = blocks
            .iter()
            .enumerate()
            .filter(|(n, _)| mentions(&err, &source, *n))
            .map(|(_, b)| format!("{}:{}", b.doc, b.line))
            .collect();
        panic!(
            "docs examples (or `resq::` paths the docs name: see `mod named_paths`) that do not \
             compile: {places:?}\n(the scratch crate is {})\n{err}",
            support::scratch::dir("docs-examples").display()
        );
    }
}

/// Whether the compiler output points at a line of block `n` in the generated source.
fn mentions(err: &str, source: &str, n: usize) -> bool {
    let start = source
        .find(&format!("mod example_{n} {{"))
        .map(|i| source[..i].lines().count() + 1);
    let Some(start) = start else { return false };
    // The block's module ends where the next top-level item begins.
    let end = source
        .lines()
        .enumerate()
        .skip(start)
        .find(|(_, l)| l.starts_with("mod ") || l.starts_with("fn main"))
        .map_or(usize::MAX, |(i, _)| i);
    err.lines().any(|l| {
        l.trim_start()
            .strip_prefix("--> src/main.rs:")
            .and_then(|rest| rest.split(':').next())
            .and_then(|line| line.parse::<usize>().ok())
            .is_some_and(|line| line >= start && line <= end)
    })
}

/// Files a doc names that are not this repository's: the user's own `src/main.rs` in the
/// README, and the benchmark's output directory (written by `compat-tests/bench/run`).
const NOT_IN_THE_TREE: &[&str] = &["src/main.rs", "compat-tests/bench/results/"];

#[test]
fn every_file_a_doc_names_exists() {
    let tops = [
        "src/",
        "tests/",
        "examples/",
        "benches/",
        "scripts/",
        "deploy/",
        "compat-tests/",
        "fixtures/",
        "docs/",
    ];
    let mut missing = Vec::new();
    let mut checked = 0;
    for (doc, text) in docs() {
        for (n, span) in text.split('`').enumerate() {
            // Odd pieces are inside backticks; a path is one word.
            if n % 2 == 0 || span.contains(char::is_whitespace) {
                continue;
            }
            if !tops.iter().any(|t| span.starts_with(t)) || NOT_IN_THE_TREE.contains(&span) {
                continue;
            }
            checked += 1;
            // `a/{b,c}.json` names both; `a/*.rs` names at least one file.
            let names: Vec<String> = match (span.find('{'), span.find('}')) {
                (Some(a), Some(b)) if a < b => span[a + 1..b]
                    .split(',')
                    .map(|alt| format!("{}{alt}{}", &span[..a], &span[b + 1..]))
                    .collect(),
                _ => vec![span.to_string()],
            };
            for name in names {
                let found = match name.split_once('*') {
                    Some((dir_and_stem, suffix)) => {
                        let (dir, stem) =
                            dir_and_stem.rsplit_once('/').unwrap_or(("", dir_and_stem));
                        std::fs::read_dir(root().join(dir)).is_ok_and(|d| {
                            d.filter_map(|e| e.ok()).any(|e| {
                                let f = e.file_name().to_string_lossy().into_owned();
                                f.starts_with(stem) && f.ends_with(suffix.trim_start_matches('/'))
                            })
                        })
                    }
                    None => root().join(name.trim_end_matches(['.', ',', ':'])).exists(),
                };
                if !found {
                    missing.push(format!("{doc}: `{name}`"));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "expected the docs to name files; checked {checked}"
    );
    assert!(
        missing.is_empty(),
        "files the docs name that do not exist:\n{}",
        missing.join("\n")
    );
}
