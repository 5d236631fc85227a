//! A tracked job's state has one writer: record.lua's `Rec.set_state`, which keeps what
//! follows from a state (the running, waiting and final indexes, a finished record's TTL and
//! job key). A file that wrote the field itself would move a job without them, so this test
//! reads every `.lua` file of the library: outside `Rec.set_state`, the text `'state'` is only
//! read (`HGET` / `HMGET`), or is a batch's own state (its hash `<ns>:resq:batch:<id>`, a
//! different record).

use std::path::Path;

/// Writes of a batch's state (not a job's), by file and the text of the line.
const BATCH_STATE: &[(&str, &str)] = &[
    ("batch_stage.lua", "{ 'state', 'staging',"),
    (
        "batch_commit.lua",
        "redis.call('HSET', bk, 'state', 'open',",
    ),
];

/// The code of a line, without its comment.
fn code(line: &str) -> &str {
    line.find("--").map_or(line, |i| &line[..i])
}

/// The problems of one file: each line that names the state field outside a read.
fn problems(name: &str, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    // In record.lua, the lines of `Rec.set_state` (to its closing `end` at column 0).
    let owner = if name == "record.lua" {
        let start = lines
            .iter()
            .position(|l| l.starts_with("function Rec.set_state("))
            .expect("record.lua defines Rec.set_state");
        let len = lines[start..]
            .iter()
            .position(|l| *l == "end")
            .expect("Rec.set_state ends");
        start..start + len
    } else {
        0..0
    };
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let c = code(line);
        if !(c.contains("'state'") || c.contains("\"state\"")) {
            continue;
        }
        let read = c.contains("'HGET'") || c.contains("'HMGET'");
        let batch = BATCH_STATE.iter().any(|(f, t)| *f == name && c.contains(t));
        if read || batch || owner.contains(&i) {
            continue;
        }
        out.push(format!(
            "src/scripts/{name}:{}: names a job's state field outside record.lua's \
             Rec.set_state (move the job with Rec.set_state): {}",
            i + 1,
            line.trim()
        ));
    }
    out
}

#[test]
fn only_rec_set_state_writes_a_jobs_state() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scripts");
    let mut all = Vec::new();
    let mut files = 0;
    for e in std::fs::read_dir(&dir).expect("src/scripts") {
        let path = e.expect("a directory entry").path();
        if path.extension().and_then(|x| x.to_str()) != Some("lua") {
            continue;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let text = std::fs::read_to_string(&path).expect("a Lua file");
        all.extend(problems(name, &text));
        files += 1;
    }
    assert!(
        files > 40,
        "read only {files} Lua files in {}",
        dir.display()
    );
    assert!(all.is_empty(), "{}", all.join("\n"));
}

/// The check itself: it sees the forms a direct write takes.
#[test]
fn the_check_sees_a_direct_write() {
    for bad in [
        "    redis.call('HSET', rk, 'state', 'queued')",
        "    local f = { 'state', state, 'class', c }",
        "    redis.pcall(\"HSET\", rk, \"state\", 'x')",
    ] {
        assert_eq!(problems("x.lua", bad).len(), 1, "{bad}");
    }
    let record = "function Rec.set_state(P)\n  s[1] = 'state'\nend\nlocal f = { 'state', 1 }\n";
    assert_eq!(problems("record.lua", record).len(), 1);
    for ok in [
        "  local v = redis.pcall('HMGET', rk, 'state', 'key')",
        "  -- redis.call('HSET', rk, 'state', 'queued')",
    ] {
        assert!(problems("x.lua", ok).is_empty(), "{ok}");
    }
}
