//! Running the `resq` binary against the test server: a command with the test's URL and
//! namespace (and none from the environment), run off the async runtime's threads, and its
//! output as text.

use std::process::{Command, Output, Stdio};

/// `resq --url <test server> --namespace <ns> <args>`, with nothing read from the environment.
pub fn cmd(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new(super::resq_bin());
    c.args(["--url", &super::url(), "--namespace", ns])
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("RESQUE_NAMESPACE")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    c
}

/// Runs `resq` off the async runtime's threads (an in-process worker keeps running).
pub async fn resq(ns: &str, args: &[&str]) -> Output {
    let mut c = cmd(ns, args);
    tokio::task::spawn_blocking(move || c.output().expect("run resq"))
        .await
        .expect("join")
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `resq`, which must succeed; its output.
pub async fn ok(ns: &str, args: &[&str]) -> Output {
    let out = resq(ns, args).await;
    assert!(
        out.status.success(),
        "resq {args:?}: {}{}",
        stdout(&out),
        stderr(&out)
    );
    out
}

/// Runs `resq --json <args>`, which must succeed; its output parsed.
pub async fn json_of(ns: &str, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let out = stdout(&ok(ns, &a).await);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}
