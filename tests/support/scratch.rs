//! Scratch crates built as a user's project would build them: a `Cargo.toml` and a `main.rs`
//! under `<target>/tmp/<name>/app`, with this checkout as `../resq` (a symlink) and this
//! checkout's `Cargo.lock` and profiles, built with `cargo build --offline` in this target
//! directory so the dependencies already built are reused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// The scratch crate's directory.
pub fn dir(name: &str) -> PathBuf {
    target().join("tmp").join(name).join("app")
}

/// Writes the crate (`manifest` is its whole `Cargo.toml`) and builds it; the build's output.
pub fn build(name: &str, manifest: &str, main_rs: &str) -> Output {
    let app = dir(name);
    std::fs::create_dir_all(app.join("src")).expect("scratch dir");
    // A path dependency `../resq`: a checkout next to the project.
    let link = app.parent().expect("parent").join("resq");
    if std::fs::read_link(&link).ok() != Some(root()) {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(root(), &link).expect("symlink the checkout");
    }
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).expect("Cargo.lock");
    // The checkout's profiles too: a dependency built with other settings (the default
    // profile's full debug info) is another build, and they all were, about 3 GB more.
    write_if_changed(
        &app.join("Cargo.toml"),
        &format!("{manifest}\n{}", profiles()),
    );
    write_if_changed(&app.join("src/main.rs"), main_rs);
    // The same versions as this checkout, so the dependencies already built are reused.
    write_if_changed(&app.join("Cargo.lock"), &lock);
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .args(["build", "--offline", "--quiet"])
        .current_dir(&app)
        .env("CARGO_TARGET_DIR", target());
    // What `cargo test` set for this test binary is not a user's environment; build scripts
    // watching such a variable (ring watches CARGO_MANIFEST_DIR) would otherwise rebuild, here
    // and again in the next ordinary build.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_by_cargo_test = ["CARGO_PKG_", "CARGO_BIN_", "CARGO_MANIFEST_"]
            .iter()
            .any(|p| name.starts_with(p))
            || [
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
            ]
            .contains(&name.as_ref());
        if set_by_cargo_test {
            cargo.env_remove(name.as_ref());
        }
    }
    cargo.output().expect("run cargo")
}

/// The `[profile.*]` sections of this checkout's `Cargo.toml`, as they are.
fn profiles() -> String {
    let toml = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let mut out = String::new();
    let mut keep = false;
    for line in toml.lines() {
        if line.starts_with('[') {
            keep = line.starts_with("[profile.");
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Writes `text` to `path` unless it holds it already (an unchanged file keeps its mtime, so
/// cargo does not rebuild it).
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}
