//! Log output for binaries: `tracing` to stderr, human or JSON.
//!
//! `RESQ_LOG_FORMAT=json` gives one JSON object per line; anything else the human format.
//! `RUST_LOG` filters (default `info`).

use tracing_subscriber::EnvFilter;

/// Log formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Human-readable lines.
    Human,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber with `format`; does nothing if one is installed already.
pub fn init(format: Format) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        // The current span's fields once (`span`), not again in a list of every open span
        // (`spans`): a job's line holds class, queue and worker once.
        Format::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        Format::Human => builder.try_init(),
    };
}

/// Installs the subscriber with the format named by `RESQ_LOG_FORMAT`.
pub fn init_from_env() {
    let json = std::env::var("RESQ_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    init(if json { Format::Json } else { Format::Human });
}
