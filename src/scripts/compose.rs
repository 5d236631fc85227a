//! How a script's source is put together: the guard's checks, then the tracking functions and
//! the limits functions as two libraries, each built on first use, then the script's body.
//!
//! Redis runs a script's whole chunk on every call, and in Lua 5.1 each `local function` of a
//! chunk is a closure made on every run (with every upvalue looked up in the list of open
//! ones): the tracking and limits functions cost ~8 µs per call that way, on calls that track
//! and limit nothing. So each library is defined inside a loader function, run the first time
//! a call needs one of its functions, and the body names each as `TRACK().name` or
//! `LIMITS().name` (rewritten here, outside comments and string literals): a limited call
//! does not build the tracking functions, nor a tracked call the limits ones. The loaders'
//! locals are fresh on every call, as before.

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
/// comments and strings) written `loader().name`.
fn rewrite(body: &str, lib: &BTreeSet<String>, loader: &str) -> String {
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
                out.push_str(loader);
                out.push_str("().");
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

/// The source Redis runs: `guard`, then each library `(loader, source)` made on first use
/// (its names written `loader().name` in the body and in the libraries after it), then
/// `body`.
pub(super) fn compose(guard: &str, libs: &[(&str, &str)], body: &str) -> String {
    let mut out = format!("{guard}\n");
    let mut earlier: Vec<(String, BTreeSet<String>)> = Vec::new();
    for (loader, lib) in libs {
        let ns = names(lib);
        let exports: Vec<String> = ns.iter().map(|n| format!("{n} = {n}")).collect();
        let mut src = lib.to_string();
        for (l, n) in &earlier {
            src = rewrite(&src, n, l);
        }
        out.push_str(&format!(
            "-- Functions made on first use (see src/scripts/compose.rs).\n\
             local {loader}_LOADED\n\
             local function {loader}()\n\
             if {loader}_LOADED then return {loader}_LOADED end\n\
             {loader}_LOADED = (function()\n{src}\nreturn {{ {} }}\nend)()\n\
             return {loader}_LOADED\n\
             end\n",
            exports.join(", ")
        ));
        earlier.push((loader.to_string(), ns));
    }
    let mut body = body.to_string();
    for (l, n) in &earlier {
        body = rewrite(&body, n, l);
    }
    out.push_str(&body);
    out
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
            rewrite(body, &ns, "LIB"),
            "-- track(x)\nlocal s = 'track(' .. \"X\"\nlocal y = LIB().track(LIB().X[1]) + o.track + o:track()\ntrack_more(tracks)\n"
        );
    }
}
