//! The README's "Writing a worker" works as written (issue 13, item 4):
//!
//! * its Rust block is `examples/readme.rs` byte for byte (so `cargo test`, which builds the
//!   examples, compiles it, and clippy lints it);
//! * its `[dependencies]` lines build that code as a new project would: a scratch crate made
//!   of exactly the README's TOML block and Rust block, with this checkout where the path
//!   dependency points (under `target/tmp/readme-app`), built with `cargo build --offline`
//!   (sharing this target directory, so only resq and the scratch crate compile);
//! * the worker it builds logs: a failing job shows on stderr, a good one runs, TERM stops it.
//!
//! An example file rather than a doctest: a doctest would need the whole README as crate
//! documentation (or a copy of the snippet), would only see resq's own dependencies (not the
//! README's dependency lines), and could not be run against Redis to see its output.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The README's "Writing a worker" section.
fn section() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let start = readme
        .find("\n## Writing a worker\n")
        .expect("a `## Writing a worker` section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

/// The body of the first fenced block of `lang` in `text`.
fn fenced(text: &str, lang: &str) -> String {
    let open = format!("```{lang}\n");
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("no ```{lang} block"))
        + open.len();
    let len = text[start..].find("```\n").expect("closing fence");
    text[start..start + len].to_string()
}

#[test]
fn the_readme_snippet_is_the_example_byte_for_byte() {
    let snippet = fenced(&section(), "rust");
    let example = std::fs::read_to_string(root().join("examples/readme.rs")).expect("example");
    assert!(
        snippet == example,
        "README.md's worker snippet and examples/readme.rs differ; make them equal \
         (the example is what the tests compile and run)"
    );
}

#[test]
fn the_readme_dependency_lines_build_the_snippet() {
    let section = section();
    let toml = fenced(&section, "toml");
    assert!(toml.starts_with("[dependencies]\n"), "{toml}");
    let manifest = format!(
        "[package]\nname = \"readme-app\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         publish = false\n\n{toml}"
    );
    let out = support::scratch::build("readme-app", &manifest, &fenced(&section, "rust"));
    assert!(
        out.status.success(),
        "the README's dependency lines and snippet do not build as a project:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reads `reader` line by line into `sink` (shared with the test) until it closes.
fn collect(reader: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits up to `secs` for a line of `rx` that contains every one of `words`; returns it.
fn line_with(rx: &std::sync::mpsc::Receiver<String>, words: &[&str], secs: u64) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if words.iter().all(|w| line.contains(w)) => return line,
            Ok(line) => seen.push(line),
            Err(_) => panic!(
                "no line with {words:?} within {secs}s; saw:\n{}",
                seen.join("\n")
            ),
        }
    }
}

fn enqueue(ns: &str, args: &[&str]) {
    let out = Command::new(support::resq_bin())
        .args(["--url", &support::url(), "--namespace", ns, "enqueue"])
        .args(args)
        .output()
        .expect("resq enqueue");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_readme_worker_logs_a_failing_job() {
    let ns = support::namespace("readme");
    let mut child = Command::new(support::example_bin("readme"))
        .env("REDIS_URL", support::url())
        .env("RESQUE_NAMESPACE", &ns)
        .env("QUEUES", "default")
        .env_remove("RUST_LOG")
        .env_remove("RESQ_LOG_FORMAT")
        .env_remove("CONCURRENCY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start examples/readme");
    let out = collect(child.stdout.take().expect("stdout"));
    let err = collect(child.stderr.take().expect("stderr"));
    line_with(&err, &["worker started"], 20);
    enqueue(&ns, &["Notify", "\"\""]);
    let failed = line_with(&err, &["job failed"], 20);
    assert!(
        failed.contains("WARN") && failed.contains("Notify") && failed.contains("nobody to notify"),
        "{failed}"
    );
    enqueue(&ns, &["Archive", "7", "\"main\""]);
    line_with(&out, &["archiving 7 on main"], 20);
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
    let status = support::wait_until(20, "the README worker to exit", || {
        child.try_wait().ok().flatten()
    });
    assert!(status.success(), "exit status {status}");
}

/// A job's JSON log line holds each field once: the span's (`class`, `queue`, `worker`) under
/// `span`, the event's (`duration_ms`, `outcome`, `exception`, `error`) under `fields`, and no
/// list of spans repeating them.
#[test]
fn a_job_log_line_carries_each_field_once() {
    let ns = support::namespace("readme-json");
    let mut child = Command::new(support::example_bin("readme"))
        .env("REDIS_URL", support::url())
        .env("RESQUE_NAMESPACE", &ns)
        .env("QUEUES", "default")
        .env("RESQ_LOG_FORMAT", "json")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start examples/readme");
    let err = collect(child.stderr.take().expect("stderr"));
    line_with(&err, &["worker started"], 20);
    enqueue(&ns, &["Notify", "\"\""]);
    let line = line_with(&err, &["job failed"], 20);
    let _ = child.kill();
    let _ = child.wait();
    let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    assert!(v.get("spans").is_none(), "{line}");
    let keys = |k: &str| -> Vec<String> {
        v[k].as_object()
            .unwrap_or_else(|| panic!("no {k} in {line}"))
            .keys()
            .cloned()
            .collect()
    };
    let (fields, span) = (keys("fields"), keys("span"));
    for k in &fields {
        assert!(!span.contains(k), "{k} is in both fields and span: {line}");
    }
    for k in ["class", "queue", "worker"] {
        assert!(span.contains(&k.to_string()), "span lacks {k}: {line}");
    }
    assert!(v["fields"]["duration_ms"].is_number(), "{line}");
    assert_eq!(v["fields"]["outcome"], "failure", "{line}");
    assert!(
        !line.contains("duration_s"),
        "durations are in milliseconds: {line}"
    );
}
