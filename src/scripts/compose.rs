//! How a script's source is put together: the guard's checks, then the tracking and limits
//! functions as a library built on first use, then the script's body.
//!
//! Redis runs a script's whole chunk on every call, and in Lua 5.1 each `local function` of a
//! chunk is a closure made on every run (with every upvalue looked up in the list of open
//! ones): the tracking and limits functions cost ~8 µs per call that way, on calls that track
//! and limit nothing. So they are defined inside one loader function, run the first time a
//! call needs one of them, and the body names each as `LIB().name` (rewritten here, outside
//! comments and string literals). The loader's locals are fresh on every call, as before.

use std::collections::BTreeSet;

/// The top-level names a library chunk defines (`local function f`, `local a, b = …`).
fn names(lib: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in lib.lines() {
        let Some(rest) = line.strip_prefix("local ") else {
            continue;
        };
        let rest = rest.strip_prefix("function ").unwrap_or(rest);
        let decl = rest.split(['=', '(']).next().unwrap_or("");
        for n in decl.split(',') {
            let n = n.trim();
            if !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                out.insert(n.to_string());
            }
        }
    }
    out
}

/// `body` with every use of a name of `lib` (an identifier not after `.` or `:`, outside
/// comments and strings) written `LIB().name`.
fn rewrite(body: &str, lib: &BTreeSet<String>) -> String {
    let b = body.as_bytes();
    let mut out = String::with_capacity(body.len() + body.len() / 8);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'-' && b.get(i + 1) == Some(&b'-') {
            let end = body[i..].find('\n').map_or(b.len(), |e| i + e);
            out.push_str(&body[i..end]);
            i = end;
        } else if c == b'\'' || c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != c {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            out.push_str(&body[i..end]);
            i = end;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            let word = &body[i..j];
            let after_dot = out.ends_with('.') || out.ends_with(':');
            if !after_dot && lib.contains(word) {
                out.push_str("LIB().");
            }
            out.push_str(word);
            i = j;
        } else {
            let ch = body[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The source Redis runs: `guard`, then `lib` as a library loaded on first use, then `body`.
pub(super) fn compose(guard: &str, lib: &str, body: &str) -> String {
    let ns = names(lib);
    let exports: Vec<String> = ns.iter().map(|n| format!("{n} = {n}")).collect();
    format!(
        "{guard}\n\
         -- The tracking and limits functions, made on first use (see src/scripts/compose.rs).\n\
         local LIB_LOADED\n\
         local function LIB()\n\
         if LIB_LOADED then return LIB_LOADED end\n\
         LIB_LOADED = (function()\n{lib}\nreturn {{ {} }}\nend)()\n\
         return LIB_LOADED\n\
         end\n\
         {}",
        exports.join(", "),
        rewrite(body, &ns)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_rewrites() {
        let lib = "local function track(a) end\nlocal tfind, tsub = string.find, string.sub\nlocal X = {}\n";
        let ns = names(lib);
        assert_eq!(
            ns.iter().map(String::as_str).collect::<Vec<_>>(),
            ["X", "tfind", "track", "tsub"]
        );
        let body = "-- track(x)\nlocal s = 'track(' .. \"X\"\nlocal y = track(X[1]) + o.track + o:track()\ntrack_more(tracks)\n";
        assert_eq!(
            rewrite(body, &ns),
            "-- track(x)\nlocal s = 'track(' .. \"X\"\nlocal y = LIB().track(LIB().X[1]) + o.track + o:track()\ntrack_more(tracks)\n"
        );
    }
}
