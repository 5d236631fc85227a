//! Every parser of what peers write into Redis, fed the same bytes: payloads, worker records,
//! failure entries, time strings (and the prune rule and id parsing built on them). None may
//! panic, whatever the bytes; a payload that parses keeps its bytes exactly.

#![no_main]

use libfuzzer_sys::fuzz_target;
use resq::wire::{failure::FailureEntry, time, Payload, WorkerRecord};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Payload::parse(data) {
        // Moved between keys byte for byte (wire notes item 56), surrounding JSON whitespace
        // aside.
        let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        let start = data.iter().position(|b| !ws(b)).unwrap_or(data.len());
        let end = data.iter().rposition(|b| !ws(b)).map_or(start, |e| e + 1);
        assert_eq!(p.raw().get().as_bytes(), &data[start..end]);
        let _ = (p.class(), p.args(), p.vars());
    }
    let _ = resq::worker::requeue::HeldJob::from_record(data);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(r) = WorkerRecord::parse(text) {
        let _ = Payload::from_raw(r.payload);
    }
    let _ = serde_json::from_str::<FailureEntry>(text);
    if let Some(t) = time::parse_any(text) {
        let _ = (
            time::heartbeat(t),
            time::failed_at(t),
            time::run_at(t),
            time::started(t),
        );
    }
    if let Some(now) = time::parse_any("2026-11-21T19:15:33Z") {
        let _ = resq::worker::prune::expired(text, now, std::time::Duration::from_secs(300));
    }
    let _ = resq::identity::parse(text);
});
