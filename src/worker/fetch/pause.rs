//! The pause switches read by the supervisor every `INTERVAL` (Ruby's test of the value:
//! `crate::admin::pause::is_true`). Where the step reads `<ns>:pause-all-workers` itself and says
//! when it is set, the supervisor reads it only until it is cleared. On a spread cluster
//! namespace (`docs/cluster.md`) the step touches only its queue's slot and reads neither it nor
//! `<ns>:resq:paused_queues`: the supervisor reads both every `INTERVAL`, and the process stops
//! reserving (all queues, or the paused ones) within one `INTERVAL` of a pause, as a Ruby worker
//! polling every `INTERVAL` does.

use super::*;

impl Fetch {
    /// Whether `<ns>:pause-all-workers` pauses this spread process (as last read).
    pub(crate) fn spread_paused(&self) -> bool {
        self.keys.is_spread() && *self.remote_paused.borrow()
    }

    /// The paused queues' names, as last read (a spread namespace only).
    pub(super) fn paused_queues(&self) -> Vec<String> {
        self.spread_paused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Reads `<ns>:pause-all-workers` and, on a spread namespace, `<ns>:resq:paused_queues`
    /// (one key per command: they are in different slots); a read that fails changes nothing.
    pub(super) async fn read_pause(&self, con: &mut Conn) {
        let all: redis::RedisResult<Option<Vec<u8>>> = redis::cmd("GET")
            .arg(self.keys.pause_all_workers())
            .query_async(con)
            .await;
        if let Ok(v) = all {
            let paused = v.is_some_and(|b| crate::admin::pause::is_true(&b));
            if paused != *self.remote_paused.borrow() {
                match paused {
                    true => tracing::info!(paused, "pause-all-workers set: taking no new job"),
                    false => tracing::info!(paused, "pause-all-workers cleared; resuming"),
                }
                self.remote_paused.send_replace(paused);
            }
        }
        if !self.keys.is_spread() {
            return;
        }
        let names: redis::RedisResult<Vec<String>> = redis::cmd("SMEMBERS")
            .arg(self.keys.paused_queues())
            .query_async(con)
            .await;
        if let Ok(mut names) = names {
            names.sort();
            let mut cur = self.spread_paused.lock().unwrap_or_else(|p| p.into_inner());
            if *cur != names {
                *cur = names;
                drop(cur);
                // A queue resumed may hold jobs: a parked slot of each queue looks.
                self.wake_all();
            }
        }
    }
}
