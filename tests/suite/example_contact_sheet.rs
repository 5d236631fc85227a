//! `examples/contact_sheet.rs` runs as documented (docs/workflows.md): against a given Redis it
//! resizes N images as a batch, builds the contact sheet from their results once all are done,
//! runs the batch's `on_success` callback, and exits 0; with nothing at `REDIS_URL` it starts
//! and stops its own `redis-server`, as on a fresh machine.

use crate::support;

use resq::admin::Admin;
use resq::jobs::{JobId, State};
use resq::workflows::BatchId;
use resq::Client;
use std::io::Read;
use std::process::{Command, Stdio};

/// Runs the example with `env` and `args`; its exit success and standard output.
fn run(env: &[(&str, &str)], args: &[&str]) -> (bool, String, String) {
    let mut c = Command::new(support::example_bin("contact_sheet"));
    c.args(args)
        .env_remove("RUST_LOG")
        .env_remove("RESQUE_NAMESPACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("start examples/contact_sheet");
    let status = support::wait_until(60, "the example to exit", || {
        child.try_wait().ok().flatten()
    });
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("stdout");
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("stderr");
    (status.success(), out, err)
}

/// The id after `prefix` on the line of `out` that starts with it.
fn id_after(out: &str, prefix: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{out}"))
        .chars()
        .take(32)
        .collect()
}

#[tokio::test]
async fn the_example_builds_the_sheet_from_every_resize() {
    let ns = support::namespace("contact-sheet");
    let url = support::url();
    let (ok, out, err) = tokio::task::spawn_blocking({
        let ns = ns.clone();
        move || run(&[("REDIS_URL", &url), ("RESQUE_NAMESPACE", &ns)], &["5"])
    })
    .await
    .unwrap();
    assert!(ok, "exit status not 0:\n{out}\n{err}");
    assert!(!out.contains("throwaway"), "{out}");
    assert!(
        out.contains("ContactSheet for album 7: 5 thumbnails"),
        "{out}"
    );
    assert_eq!(out.matches("] Resize photo-").count(), 5, "{out}");
    let bid = BatchId::parse(&id_after(&out, "batch ")).expect("a batch id");
    assert!(
        out.contains(&format!(
            "AlbumDone (on_success of batch {bid}): 5 of 5 resized"
        )),
        "{out}"
    );
    // What the example left in Redis: the batch succeeded, the sheet holds every thumbnail.
    let b = Admin::connect(&support::url(), &ns)
        .await
        .unwrap()
        .batch(&bid)
        .await
        .unwrap()
        .expect("the batch");
    assert_eq!((b.phase(), b.succeeded, b.total), ("succeeded", 5, 5));
    let sheet = JobId::parse(&id_after(&out, "contact sheet ")).expect("a job id");
    let s = Client::connect(&support::url(), &ns)
        .await
        .unwrap()
        .status(&sheet)
        .await
        .unwrap()
        .expect("the sheet's record");
    assert_eq!(s.state, State::Completed);
    let result = s.result.expect("a result");
    let thumbs: Vec<&str> = result["thumbs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        thumbs,
        (1..=5)
            .map(|i| format!("photo-{i:02}-thumb.png"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn without_redis_it_starts_and_stops_its_own() {
    // A port nothing listens on.
    let port = support::free_port();
    let (ok, out, err) = run(&[("REDIS_URL", &format!("redis://127.0.0.1:{port}"))], &[]);
    assert!(ok, "exit status not 0:\n{out}\n{err}");
    let started = out
        .lines()
        .find_map(|l| l.strip_prefix("started a throwaway redis-server on port "))
        .unwrap_or_else(|| panic!("no throwaway server in:\n{out}"));
    assert!(
        out.contains("ContactSheet for album 7: 6 thumbnails"),
        "{out}"
    );
    let started: u16 = started.trim().parse().unwrap();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", started)).is_err(),
        "the throwaway server on port {started} outlived the example"
    );
}
