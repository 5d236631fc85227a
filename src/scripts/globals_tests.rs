//! The library, as Redis loads it, reads no global but Redis's own and the Lua standard
//! library's, and sets none. Redis raises at run time on any other global access — after
//! whatever the function wrote before it — so a call to a function defined further down a file
//! (a global lookup, since a `local function` is only in scope after its definition) is a
//! function that fails half-way. `luac5.1 -l` lists every global access of the compiled chunk;
//! the test fails when `luac5.1` is missing. While `FUNCTION LOAD` runs the library's top level,
//! Redis gives it only `redis` (the standard libraries appear when a function is called), so the
//! top level reads nothing else. And since a global read in a function goes through the
//! globals' metatable, no function reads one but the prelude's `globals`, once (prelude.lua).
//! With `RESQ_SCRIPTS_DIR=<dir>` the library is kept there (`resq.lua`).

use std::process::Command;

/// Globals a Redis function may read: Redis's API and the libraries Redis loads.
const ALLOWED: &[&str] = &[
    "redis",
    "cjson",
    "cmsgpack",
    "bit",
    "struct",
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
fn the_library_reads_no_unknown_global_and_sets_none() {
    let keep = std::env::var_os("RESQ_SCRIPTS_DIR");
    let dir = keep.clone().map_or_else(
        || std::env::temp_dir().join(format!("resq-luac-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut problems = Vec::new();
    let file = dir.join("resq.lua");
    std::fs::write(&file, super::LIBRARY).expect("write the library");
    let out = Command::new("luac5.1")
        .args(["-p", "-l"])
        .arg(&file)
        .output()
        .expect("luac5.1 runs (apt-get install lua5.1; .ci/run installs it)");
    assert!(
        out.status.success(),
        "the library does not compile: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `luac -l` lists the main chunk (the library's top level) first, then each function, as
    // `function <file:line,last> …`.
    let globals_at = super::LIBRARY
        .lines()
        .position(|l| l.starts_with("local function globals()"))
        .expect("the prelude defines `globals`")
        + 1;
    let globals_fn = format!(":{globals_at},");
    let mut top_level = true;
    let mut in_globals = false;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if line.starts_with("function <") {
            top_level = false;
            in_globals = line.contains(&globals_fn);
        }
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
            problems.push(format!(
                "the library {op} global `{global}`: {}",
                line.trim()
            ));
        } else if top_level && global != "redis" {
            problems.push(format!(
                "the library's top level reads `{global}`, which FUNCTION LOAD does not give it: {}",
                line.trim()
            ));
        } else if !top_level && !in_globals {
            problems.push(format!(
                "a function reads global `{global}` at each call (use the prelude's local): {}",
                line.trim()
            ));
        }
    }
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
