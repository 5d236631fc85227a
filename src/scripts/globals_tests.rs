//! Every script, as Redis runs it (guard, tracking and limits functions prepended), reads no
//! global but Redis's own and the Lua standard library's, and sets none. Redis raises at run
//! time on any other global access — after whatever the script wrote before it — so a call to a
//! function defined further down the file (a global lookup, since a `local function` is only in
//! scope after its definition) is a script that fails half-way. `luac5.1 -l` lists every
//! global access of the compiled chunk; the test fails when `luac5.1` is missing. With
//! `RESQ_SCRIPTS_DIR=<dir>` the composed scripts are kept there (`<NAME>.lua`).

use std::process::Command;

/// Globals a Redis script may read: Redis's API and the libraries Redis loads.
const ALLOWED: &[&str] = &[
    "redis",
    "cjson",
    "cmsgpack",
    "bit",
    "struct",
    "KEYS",
    "ARGV",
    "string",
    "table",
    "math",
    "tonumber",
    "tostring",
    "type",
    "pairs",
    "ipairs",
    "pcall",
    "error",
    "unpack",
    "next",
    "select",
    "assert",
    "setmetatable",
    "getmetatable",
    "rawget",
    "rawset",
    "os",
];

#[test]
fn no_script_reads_an_unknown_global_or_sets_one() {
    // `RESQ_SCRIPTS_DIR` keeps the composed scripts there (scripts/step-replay replays them).
    let keep = std::env::var_os("RESQ_SCRIPTS_DIR");
    let dir = keep.clone().map_or_else(
        || std::env::temp_dir().join(format!("resq-luac-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut problems = Vec::new();
    for (name, body) in super::ALL {
        let src = super::composed(body);
        let file = dir.join(format!("{name}.lua"));
        std::fs::write(&file, &src).expect("write script");
        let out = Command::new("luac5.1")
            .args(["-p", "-l"])
            .arg(&file)
            .output()
            .expect("luac5.1 runs (apt-get install lua5.1; .ci/run installs it)");
        assert!(
            out.status.success(),
            "{name} does not compile: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let op = if line.contains("GETGLOBAL") {
                "reads"
            } else if line.contains("SETGLOBAL") {
                "sets"
            } else {
                continue;
            };
            // `... GETGLOBAL 5 -3 ; name`
            let global = line.rsplit("; ").next().unwrap_or("").trim();
            if op == "sets" || !ALLOWED.contains(&global) {
                problems.push(format!("{name} {op} global `{global}`: {}", line.trim()));
            }
        }
    }
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
