//! Pausing on a spread cluster namespace (`docs/cluster.md`): there the step touches only its
//! queue's slot and reads neither `<ns>:pause-all-workers` nor `<ns>:resq:paused_queues`, so the
//! supervisor reads them every `INTERVAL` and the process stops reserving (all queues, or the
//! paused ones) within one `INTERVAL` of a pause, as a Ruby worker polling every `INTERVAL` does.

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

    /// Reads both pause keys (one key per command: they are in different slots); a read that
    /// fails changes nothing.
    pub(super) async fn read_pause(&self, con: &mut Conn) {
        let all: redis::RedisResult<Option<String>> = redis::cmd("GET")
            .arg(self.keys.pause_all_workers())
            .query_async(con)
            .await;
        if let Ok(v) = all {
            let paused = v.is_some_and(|s| s.trim().eq_ignore_ascii_case("true"));
            if paused != *self.remote_paused.borrow() {
                tracing::info!(paused, "pause-all-workers changed");
                self.remote_paused.send_replace(paused);
            }
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
                // A queue resumed may hold jobs: a parked slot looks.
                self.work.notify_one();
            }
        }
    }
}
