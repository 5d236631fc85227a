//! Builds resq's Lua: the files listed in `src/scripts/LIBRARY`, in that order, become one Redis
//! Functions library (`$OUT_DIR/resq.lua`), loaded once per server with `FUNCTION LOAD`.
//!
//! The library is named after a hash of its source (`resq_<hash>`), and so are its functions
//! (`resq_<hash>_<name>`): processes of two resq versions on one Redis (a rolling deploy) each
//! call their own. Each file after the prelude is wrapped in `do … end`, so its `local`s are its
//! own and it shares only what it puts in the prelude's module tables. Every file must open with
//! a header naming its KEYS and ARGV and stay under 400 lines; the build refuses one that does
//! not.

use std::fmt::Write as _;
use std::path::Path;

/// Longest Lua file accepted.
const MAX_LINES: usize = 400;

fn main() {
    let dir = Path::new("src/scripts");
    println!("cargo:rerun-if-changed=src/scripts/LIBRARY");
    let manifest = std::fs::read_to_string(dir.join("LIBRARY")).expect("src/scripts/LIBRARY");
    let mut body = String::new();
    let mut first = true;
    let mut seen = std::collections::HashSet::new();
    for name in manifest
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        assert!(seen.insert(name), "src/scripts/LIBRARY lists {name} twice");
        let path = dir.join(name);
        println!("cargo:rerun-if-changed={}", path.display());
        let src =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let lines = src.lines().count();
        assert!(
            lines <= MAX_LINES,
            "{}: {lines} lines, more than {MAX_LINES}: split it by concern",
            path.display()
        );
        let head: String = src.lines().take_while(|l| l.starts_with("--")).collect();
        assert!(
            head.contains("KEYS") && head.contains("ARGV"),
            "{}: its header comment must name its KEYS and ARGV (\"KEYS / ARGV: none\" for a \
             module)",
            path.display()
        );
        let _ = writeln!(body, "-- ===== {name} =====");
        if first {
            body.push_str(&src);
            first = false;
        } else {
            let _ = writeln!(body, "do\n{src}\nend");
        }
    }
    let version = format!("{:012x}", fnv1a(body.as_bytes()) & 0xffff_ffff_ffff);
    let library = format!("#!lua name=resq_{version}\nlocal VERSION = '{version}'\n{body}");
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    std::fs::write(Path::new(&out).join("resq.lua"), library).expect("write resq.lua");
    std::fs::write(
        Path::new(&out).join("resq_version.rs"),
        format!("/// The library's version: a hash of its source.\npub(crate) const VERSION: &str = \"{version}\";\n"),
    )
    .expect("write resq_version.rs");
}

/// FNV-1a, 64 bits: a stable hash of the library's source (no dependency).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
