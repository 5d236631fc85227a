//! A plain job's path in the library is three files — `step.lua` (the call's frame and order),
//! `finish.lua` (ends), `reserve.lua` (reserves) — and each feature is entered from them only
//! at its named hooks: a test of the files' code (comments aside), so a feature's code cannot
//! creep back into the plain path unnoticed.

/// The plain path's files.
const PLAIN: &[&str] = &["step.lua", "finish.lua", "reserve.lua"];

/// Per feature module: the hooks the plain path may call (anything else of the module is the
/// feature's own business, called from its hooks).
const HOOKS: &[(&str, &[&str])] = &[
    // Tracking (track.lua); resq's records and resque-status's are reached through it.
    (
        "Track",
        &[
            "reserve",
            "reserve_spread",
            "in_slot",
            "start",
            "held",
            "finish",
            "finish_moved",
            "sweep",
        ],
    ),
    ("Rec", &[]),
    ("Status", &[]),
    // Workflows are a tracked job's end (record.lua calls them).
    ("Flow", &[]),
    // Limits (limits_step.lua); `load` reads the limits in force (the flag X.L), `flush` and
    // `prefetch` run only when a limit was touched or a slot returns shares.
    (
        "Lim",
        &[
            "load",
            "flush",
            "prefetch",
            "step_free",
            "step_admit",
            "step_release_for",
            "step_give_released",
            "step_gate",
            "step_closed",
        ],
    ),
    // Claims (claim.lua).
    ("Claim", &["take", "held"]),
    // Jesque zset queues (jesque.lua).
    ("Jes", &["step_next"]),
    // What an end deletes besides the job: resque-retry's keys, a unique lock (ends.lua; op 'x').
    ("Ends", &["clear_retry", "release_unique"]),
];

/// `file`'s code: each line up to its comment.
fn code(file: &str) -> String {
    let path = format!("{}/src/scripts/{file}", env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    src.lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `<module>.<name>` that `text` uses of the feature modules, not in their hook lists.
fn outside_hooks(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (module, hooks) in HOOKS {
        let pat = format!("{module}.");
        for (i, _) in text.match_indices(&pat) {
            let before = text[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
                continue;
            }
            let name: String = text[i + pat.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !hooks.contains(&name.as_str()) {
                found.push(format!("{module}.{name}"));
            }
        }
    }
    found
}

#[test]
fn the_plain_path_enters_features_only_at_their_hooks() {
    let mut problems = Vec::new();
    for file in PLAIN {
        for call in outside_hooks(&code(file)) {
            problems.push(format!("{file} calls {call}, not a hook of its feature"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every hook listed is defined in the library (a renamed hook is renamed here too).
#[test]
fn every_hook_is_defined() {
    let manifest = std::fs::read_to_string(format!(
        "{}/src/scripts/LIBRARY",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("LIBRARY");
    let all: String = manifest
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(code)
        .collect();
    for (module, hooks) in HOOKS {
        for hook in *hooks {
            let def = format!("function {module}.{hook}(");
            let assigned = format!("{module}.{hook} = ");
            assert!(
                all.contains(&def) || all.contains(&assigned),
                "{module}.{hook} is listed as a hook but not defined"
            );
        }
    }
}

/// The check itself: a feature's own function called from the plain path is found.
#[test]
fn a_feature_call_on_the_plain_path_is_refused() {
    assert_eq!(
        outside_hooks("local v = Rec.peek(X.P, id)\nif X.L then Lim.step_gate(X, q) end"),
        ["Rec.peek"]
    );
    assert_eq!(
        outside_hooks("local x = G.Lim.gate(1)"),
        Vec::<String>::new()
    );
}
