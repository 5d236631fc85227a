//! `resq`: run a worker, enqueue jobs, look at and repair a Resque namespace.
//!
//! The commands live in the library ([`resq::cli`], `src/cli/`), so a service's own binary gets
//! the same CLI with its handlers by calling `resq::cli::run(registry)` (docs/cli.md). This
//! binary has no handlers of its own: `resq work` here runs a worker whose every job fails as
//! an unknown class, which is only useful to test wiring.

use std::process::ExitCode;

fn main() -> ExitCode {
    resq::cli::run(resq::Registry::new())
}
