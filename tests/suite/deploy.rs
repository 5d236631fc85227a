//! The deployment recipes under `deploy/` (issue 13, item 5; docs/deploy.md) hold together:
//!
//! * the systemd units pass `systemd-analyze verify` (with no warning) and `systemd-analyze
//!   security` rates them "OK" or better; they stop with TERM and leave systemd's SIGKILL
//!   after `RESQUE_TERM_TIMEOUT` plus a margin; they restart on failure;
//! * the Dockerfile is multi-stage, builds with `cargo build --release --locked` on the crate's
//!   `rust-version`, runs as a numeric non-root user, exposes the `METRICS_ADDR` port;
//! * the Kubernetes Deployment probes `/readyz` and `/healthz` on the `METRICS_ADDR` port, runs
//!   as the image's user, and its grace period covers `RESQUE_TERM_TIMEOUT` plus a margin;
//! * every variable any of them sets is one the README's configuration table documents.
//!
//! Docker cannot build here and no cluster runs here: docs/deploy.md says what was checked
//! by hand (hadolint, schema validation) and what was not.

use crate::support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

fn deploy(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(deploy(path)).unwrap_or_else(|e| panic!("deploy/{path}: {e}"))
}

/// Fails unless every name in `names` is in the README's configuration table.
fn documented(what: &str, names: impl IntoIterator<Item = String>) {
    let known = support::readme_variables();
    for name in names {
        assert!(
            known.contains(&name),
            "{what} sets {name}, which the README's configuration table does not document"
        );
    }
}

/// A systemd unit file: section → (key, value) in order (keys repeat, as `Environment=`).
type Unit = BTreeMap<String, Vec<(String, String)>>;

/// Parses a unit file; panics on a line that is neither a section, an assignment, a comment
/// nor blank.
fn parse_unit(text: &str) -> Unit {
    let mut unit = Unit::new();
    let mut section = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(name.to_string());
            unit.entry(name.to_string()).or_default();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("line {}: not `Key=value`: {line}", n + 1));
        let section = section
            .clone()
            .unwrap_or_else(|| panic!("line {}: assignment outside a section", n + 1));
        unit.entry(section)
            .or_default()
            .push((key.trim().to_string(), value.trim().to_string()));
    }
    unit
}

/// The last value of `key` in `section`.
fn get<'a>(unit: &'a Unit, section: &str, key: &str) -> Option<&'a str> {
    unit.get(section)?
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// `NAME=value` lines of an environment file.
fn env_file(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("not NAME=value: {l}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn secs(v: &str) -> u64 {
    let v = v.trim().trim_end_matches('s');
    v.parse()
        .unwrap_or_else(|_| panic!("{v:?} is not whole seconds"))
}

#[test]
fn systemd_units_verify_and_stop_after_the_term_timeout() {
    support::topology::require("systemd-analyze", "systemd");
    let text = read("systemd/resq@.service");
    let unit = parse_unit(&text);
    assert_eq!(get(&unit, "Service", "KillSignal"), Some("SIGTERM"));
    assert_eq!(get(&unit, "Service", "KillMode"), Some("mixed"));
    assert_eq!(get(&unit, "Service", "Restart"), Some("on-failure"));
    assert_eq!(get(&unit, "Install", "WantedBy"), Some("resq.target"));
    assert_eq!(get(&unit, "Unit", "PartOf"), Some("resq.target"));
    // One user for every instance and /proc left visible: the dead-worker pruner judges a
    // local resq process by its /proc entry.
    assert!(get(&unit, "Service", "User").is_some());
    assert_eq!(get(&unit, "Service", "ProtectProc"), None);

    let mut env: BTreeMap<String, String> = unit["Service"]
        .iter()
        .filter(|(k, _)| k == "Environment")
        .map(|(_, v)| {
            let (name, value) = v.split_once('=').expect("NAME=value");
            (name.to_string(), value.to_string())
        })
        .collect();
    documented("resq@.service", env.keys().cloned());
    let file = env_file(&read("systemd/default.env"));
    documented("default.env", file.keys().cloned());
    env.extend(file);
    let stop = secs(get(&unit, "Service", "TimeoutStopSec").expect("TimeoutStopSec"));
    let term = secs(&env["RESQUE_TERM_TIMEOUT"]);
    assert!(
        stop >= term + 5,
        "TimeoutStopSec={stop} leaves no margin over RESQUE_TERM_TIMEOUT={term}"
    );

    // systemd's own checks, on a copy whose ExecStart runs the binary these tests built (verify
    // insists that the program exists).
    let dir = support::topology::temp_dir("systemd-units");
    let exec = get(&unit, "Service", "ExecStart").expect("ExecStart");
    let program = exec.split_whitespace().next().expect("a program");
    let copy = text.replace(program, &support::resq_bin().display().to_string());
    let instance = dir.join("resq@default.service");
    std::fs::write(&instance, copy).expect("unit copy");
    std::fs::write(dir.join("resq.target"), read("systemd/resq.target")).expect("target");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&instance)
        .arg(dir.join("resq.target"))
        .output()
        .expect("systemd-analyze verify");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // verify exits 0 on unknown keys and bad values too, only printing them: any output fails.
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify:\n{said}"
    );
    // Exposure 2.0 ("OK") at most; the unit rates 1.4 when written.
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--threshold=20"])
        .arg(&instance)
        .output()
        .expect("systemd-analyze security");
    assert!(
        out.status.success(),
        "systemd-analyze security rates the unit above 2.0:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The instructions of a Dockerfile: (INSTRUCTION, arguments), continuation lines joined.
fn dockerfile(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let t = line.trim();
        if pending.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(part) = t.strip_suffix('\\') {
            pending.push_str(part);
            pending.push(' ');
            continue;
        }
        pending.push_str(t);
        let (ins, args) = pending.split_once(' ').unwrap_or((&pending, ""));
        out.push((ins.to_ascii_uppercase(), args.trim().to_string()));
        pending.clear();
    }
    out
}

/// The Dockerfile's final-stage `USER`, as a numeric uid.
fn image_uid(ins: &[(String, String)]) -> u64 {
    let last_from = ins.iter().rposition(|(i, _)| i == "FROM").expect("FROM");
    let user = ins[last_from..]
        .iter()
        .rev()
        .find(|(i, _)| i == "USER")
        .map(|(_, a)| a.clone())
        .expect("the final stage sets USER");
    let uid = user.split(':').next().unwrap_or("");
    uid.parse()
        .unwrap_or_else(|_| panic!("USER {user}: a numeric uid lets Kubernetes check runAsNonRoot"))
}

/// `ENV` settings of the Dockerfile (`ENV A=1 B=2` form).
fn image_env(ins: &[(String, String)]) -> BTreeMap<String, String> {
    ins.iter()
        .filter(|(i, _)| i == "ENV")
        .flat_map(|(_, a)| {
            a.split_whitespace()
                .map(|kv| {
                    let (k, v) = kv.split_once('=').expect("ENV NAME=value");
                    (k.to_string(), v.to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The port of an `ip:port` address.
fn port(addr: &str) -> u64 {
    addr.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{addr:?} has no port"))
}

#[test]
fn dockerfile_is_multi_stage_non_root_and_locked() {
    let ins = dockerfile(&read("Dockerfile"));
    let froms: Vec<&str> = ins
        .iter()
        .filter(|(i, _)| i == "FROM")
        .map(|(_, a)| a.as_str())
        .collect();
    assert_eq!(
        froms.len(),
        2,
        "a build stage and a runtime stage: {froms:?}"
    );
    assert!(froms[0].ends_with(" AS build"), "{froms:?}");
    assert!(
        ins.iter()
            .any(|(i, a)| i == "RUN" && a.contains("cargo build --release --locked")),
        "the build stage runs cargo build --release --locked"
    );
    // The toolchain is the crate's rust-version.
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("Cargo.toml");
    let rust_version = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("rust-version")
        .trim_matches('"');
    assert!(
        ins.iter()
            .any(|(i, a)| i == "ARG" && a == &format!("RUST_VERSION={rust_version}")),
        "ARG RUST_VERSION={rust_version}, as Cargo.toml's rust-version"
    );
    assert_ne!(image_uid(&ins), 0, "the image runs as root");
    let env = image_env(&ins);
    documented("the Dockerfile", env.keys().cloned());
    let exposed: Vec<u64> = ins
        .iter()
        .filter(|(i, _)| i == "EXPOSE")
        .map(|(_, a)| a.parse().expect("EXPOSE port"))
        .collect();
    assert_eq!(exposed, [port(&env["METRICS_ADDR"])]);
    let stop = ins.iter().find(|(i, _)| i == "STOPSIGNAL").map(|(_, a)| a);
    assert_eq!(stop.map(String::as_str), Some("SIGTERM"));
    // The entrypoint is the binary the build stage produced.
    let copied = ins
        .iter()
        .find(|(i, a)| i == "COPY" && a.starts_with("--from=build "))
        .map(|(_, a)| a.rsplit(' ').next().unwrap_or("").to_string())
        .expect("COPY --from=build");
    let entry = ins
        .iter()
        .find(|(i, _)| i == "ENTRYPOINT")
        .expect("ENTRYPOINT");
    let entry: Vec<String> = serde_json::from_str(&entry.1).expect("ENTRYPOINT in JSON form");
    assert_eq!(entry, [copied]);
    let ignore = read("Dockerfile.dockerignore");
    assert!(ignore.lines().any(|l| l.trim() == "target"), "{ignore}");
}

/// Every document of a YAML file, as JSON values.
fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("well-formed YAML"))
        .collect()
}

#[test]
fn kubernetes_deployment_probes_health_and_outlasts_the_term_timeout() {
    let docs = yaml_documents(&read("kubernetes/deployment.yaml"));
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    assert_eq!(deployment["apiVersion"], "apps/v1");
    let pod = &deployment["spec"]["template"]["spec"];
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let env: BTreeMap<String, Value> = c["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| (e["name"].as_str().expect("name").to_string(), e.clone()))
        .collect();
    documented("the Deployment", env.keys().cloned());
    let value = |name: &str| -> String {
        env.get(name)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_else(|| panic!("{name} has no literal value"))
            .to_string()
    };
    assert!(
        env["REDIS_URL"]["valueFrom"]["secretKeyRef"].is_object(),
        "REDIS_URL (which may hold a password) comes from a Secret"
    );
    // Probes on the metrics port.
    let metrics_port = port(&value("METRICS_ADDR"));
    let ports = c["ports"].as_array().expect("ports");
    let named = ports
        .iter()
        .find(|p| p["name"] == "metrics")
        .expect("a port named metrics");
    assert_eq!(named["containerPort"], metrics_port);
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        assert_eq!(c[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(c[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    // TERM, then RESQUE_TERM_TIMEOUT for running jobs, then a margin before SIGKILL.
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds");
    let term = secs(&value("RESQUE_TERM_TIMEOUT"));
    assert!(
        grace >= term + 10,
        "terminationGracePeriodSeconds={grace} leaves no margin over RESQUE_TERM_TIMEOUT={term}"
    );
    // The image's user (numeric in the Dockerfile) and no root.
    let uid = image_uid(&dockerfile(&read("Dockerfile")));
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], uid);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
}

#[test]
fn docs_deploy_points_to_every_recipe() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deploy.md"))
        .expect("docs/deploy.md");
    let mut files = Vec::new();
    let mut dirs = vec![deploy("")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d)
            .expect("deploy/")
            .map_while(Result::ok)
        {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 5, "{files:?}");
    for f in files {
        let rel = f
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .expect("under the repository")
            .display()
            .to_string();
        let rel = rel.trim_start_matches('/');
        assert!(doc.contains(rel), "docs/deploy.md does not mention {rel}");
    }
}
