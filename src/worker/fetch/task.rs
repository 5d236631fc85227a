//! The fetch's supervisor task ([`Fetch::run`]): the wake-up tasks (tracking, or a watcher per
//! queue while tracking is off), the periodic reserve, the list's refresh (a wildcard list's
//! matches, split queues' shards) and the pause check.

use super::*;

impl Fetch {
    /// Runs the wake-up tasks (tracking, or watchers while tracking is off), the periodic
    /// reserve, the wildcard refresh and the pause check until `stop` turns true.
    pub(crate) async fn run(
        self: Arc<Self>,
        endpoint: crate::conn::Endpoint,
        mut con: Conn,
        mut stop: watch::Receiver<bool>,
    ) {
        let arms = self.arm_rx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut trackers = JoinSet::new();
        if let Some(arms) = arms {
            trackers.spawn(crate::worker::tracking::run(
                self.clone(),
                endpoint.clone(),
                crate::worker::tracking::Watch::Queues(arms),
                stop.clone(),
            ));
        }
        trackers.spawn(crate::worker::tracking::run(
            self.clone(),
            endpoint.clone(),
            crate::worker::tracking::Watch::Keys(vec![
                self.keys.limits_declared(),
                self.keys.limits_set(),
                self.keys.paused_queues(),
                self.keys.wake(),
                self.keys.queues(),
                self.keys.splits(),
            ]),
            stop.clone(),
        ));
        if let Some(limits) = self.limits.get() {
            // Once this process has read changed limits, the queues they closed are polled
            // again (with the new limits: a limit raised or cleared opens them).
            let mut changes = limits.changes();
            let (me, mut stop) = (self.clone(), stop.clone());
            trackers.spawn(async move {
                loop {
                    tokio::select! {
                        r = changes.changed() => {
                            if r.is_err() {
                                return;
                            }
                            me.repoll(|st| st.last == Found::Blocked);
                        }
                        _ = stop.wait_for(|s| *s) => return,
                    }
                }
            });
        }
        // Watchers only once tracking has had its chance: a watcher's BLMOVE moves a job's
        // bytes to this process and back, which tracking never does.
        let _ = tokio::time::timeout(Duration::from_secs(2), self.tracking_tried.notified()).await;
        let mut watchers = JoinSet::new();
        let mut watched: Vec<String> = Vec::new();
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut refresh_now = false;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = self.refresh.notified() => refresh_now = true,
                _ = stop.wait_for(|s| *s) => break,
            }
            // (A static list too, whose split queues' shards change: while tracking is on,
            // a change of `<ns>:resq:splits` or `<ns>:queues` asks for it, so an idle process
            // with a static list sends nothing; without tracking, one HGETALL an INTERVAL.)
            if refresh_now || self.list.is_dynamic() || !self.tracking.load(Ordering::SeqCst) {
                self.refresh_list(&mut con).await;
            }
            if std::mem::take(&mut refresh_now) {
                continue;
            }
            let current = self.queues();
            let tracking = self.tracking.load(Ordering::SeqCst);
            let want: Vec<String> = current
                .queues
                .iter()
                .enumerate()
                .filter(|(i, _)| !tracking || current.jesque.is_zset_index(*i))
                .take(MAX_WATCHED)
                .map(|(_, (_, k, _))| k.clone())
                .collect();
            if want != watched {
                watchers.abort_all();
                for key in &want {
                    watchers.spawn(self.clone().watch_queue(endpoint.clone(), key.clone()));
                }
                watched = want;
            }
            let closed = self.states().values().any(|st| st.last == Found::Blocked);
            if (!tracking || closed) && self.any_idle() && !self.paused() {
                // The periodic reserve: whatever the watchers missed (a queue beyond the
                // watched ones, a watcher that cannot connect) is found within INTERVAL. While
                // invalidations arrive, nothing can be missed and an idle process sends nothing,
                // except while a full limit closes a queue: a share returned by another process
                // that did not use the room itself is found within INTERVAL.
                self.full_due.store(true, Ordering::SeqCst);
                self.wake_unwatched();
            }
            // (Elsewhere the step reads the switch and says when it is set: read here only
            // until it is cleared.)
            if self.keys.is_spread() || *self.remote_paused.borrow() {
                self.read_pause(&mut con).await;
            }
        }
        watchers.abort_all();
        trackers.abort_all();
    }

    /// Resolves the list again: a wildcard list from `<ns>:queues`, split queues from
    /// `<ns>:resq:splits`.
    async fn refresh_list(&self, con: &mut Conn) {
        match resolve(&self.keys, &self.list, con).await {
            Ok((names, groups)) => {
                let next = Arc::new(
                    QueueKeys::with_jesque(&self.keys, &names, &self.jesque).with_groups(groups),
                );
                let mut before = Vec::new();
                let changed = self.resolved.send_if_modified(|cur| {
                    let changed = **cur != *next;
                    if changed {
                        before = cur.queues.iter().map(|(n, _, _)| n.clone()).collect();
                        *cur = next.clone();
                    }
                    changed
                });
                if changed {
                    self.mark_ours(&next);
                    self.wake_all();
                    if self.keys.is_spread() {
                        // A spread process's slots are its groups, made at its start.
                        let new: Vec<&String> =
                            names.iter().filter(|n| !before.contains(n)).collect();
                        if !new.is_empty() {
                            tracing::warn!(queues = ?new, "a split changed: this process serves the queues it started with; restart it to serve these (docs/cluster.md, split queues)");
                        }
                    }
                }
            }
            Err(e) => tracing::debug!(error = %e, "could not refresh the queue list"),
        }
    }

    async fn watch_queue(self: Arc<Self>, endpoint: crate::conn::Endpoint, key: String) {
        let block = self.interval.max(Duration::from_secs(1));
        let mut con = None;
        let mut backoff = Backoff::new(self.interval.max(Duration::from_secs(1)));
        let mut lost = crate::conn::errors::Reporter::default();
        let lane = self.lane(Some(&key));
        let watching = lanes::Watching(lane);
        loop {
            self.until_someone_parked(lane).await;
            if con.is_none() {
                match endpoint.blocking(block).await {
                    Ok(c) => con = Some(c),
                    Err(e) => {
                        if let Some(times) = lost.due() {
                            tracing::warn!(queue_key = %key, times, "queue watcher cannot connect ({}); idle slots reserve every INTERVAL meanwhile", crate::conn::errors::describe(&e, endpoint.label()));
                        }
                        tokio::time::sleep(backoff.next_delay()).await;
                        continue;
                    }
                }
            }
            let Some(c) = con.as_mut() else { continue };
            let seen = lane.attempts.load(Ordering::SeqCst);
            if self.queues().jesque.is_zset_key(&key) {
                // A Jesque zset queue: nothing to block on; wake a slot when a member is due.
                let cap = self.interval.min(crate::worker::jesque::MAX_ZSET_WAIT);
                match crate::worker::jesque::due_in(c, &key, chrono::Utc::now(), cap).await {
                    Ok(None) => {
                        lane.work.notify_one();
                        self.until_attempt_after(lane, seen).await;
                        continue;
                    }
                    Ok(Some(wait)) => {
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    // Still a list: watch it as one.
                    Err(e) if e.code() == Some("WRONGTYPE") => {}
                    Err(_) => {
                        con = None;
                        tokio::time::sleep(backoff.next_delay()).await;
                        continue;
                    }
                }
            }
            // Blocking on it from now: the periodic reserve leaves this queue to the watcher.
            watching.set(true);
            let r: redis::RedisResult<Option<Vec<u8>>> = redis::cmd("BLMOVE")
                .arg(&key)
                .arg(&key)
                .arg("LEFT")
                .arg("LEFT")
                .arg(block.as_secs_f64())
                .query_async(c)
                .await;
            match r {
                Ok(Some(_)) => {
                    backoff = Backoff::new(self.interval.max(Duration::from_secs(1)));
                    lost.reset();
                    lane.work.notify_one();
                    self.until_attempt_after(lane, seen).await;
                }
                // Redis answered: a later outage starts its back-off from the bottom again.
                Ok(None) => {
                    backoff = Backoff::new(self.interval.max(Duration::from_secs(1)));
                    lost.reset();
                }
                Err(e) if e.code() == Some("WRONGTYPE") => {
                    // Not a list (a Jesque zset queue): never block on it; the reserve script
                    // skips it too.
                    watching.set(false);
                    tokio::time::sleep(self.interval).await;
                }
                Err(e) => {
                    if let Some(times) = lost.due() {
                        tracing::warn!(queue_key = %key, times, "queue watcher lost its connection ({}); reconnecting", crate::conn::errors::describe(&e, endpoint.label()));
                    }
                    con = None;
                    watching.set(false);
                    tokio::time::sleep(backoff.next_delay()).await;
                    // Jobs may have arrived while the connection was down.
                    lane.work.notify_one();
                }
            }
        }
    }
}

/// The queues to poll: the configured list (resolved against `<ns>:queues` when it has
/// wildcards) with its split queues expanded to their shards (crate::splits::expand), and the
/// runs of equal priority. Costs one `HGETALL <ns>:resq:splits` when nothing is split, plus
/// the `SMEMBERS <ns>:queues` of a wildcard list or of a list naming a split queue.
pub(super) async fn resolve(
    keys: &Keys,
    list: &QueueList,
    con: &mut Conn,
) -> redis::RedisResult<(Vec<String>, Vec<std::ops::Range<usize>>)> {
    let splits = read_splits(keys, con).await?;
    let mut known = None;
    if list.is_dynamic() {
        known = Some(known_queues(keys, con).await?);
    }
    let names = list.resolve(known.as_deref().unwrap_or(&[]));
    if splits.is_empty() {
        return Ok((names, Vec::new()));
    }
    if known.is_none() && names.iter().any(|n| splits.contains_key(n)) {
        known = Some(known_queues(keys, con).await?);
    }
    Ok(crate::splits::expand(
        &names,
        &splits,
        known.as_deref().unwrap_or(&[]),
        list.is_dynamic(),
    ))
}

/// The queues `list` names now, split queues expanded to their shards ([`resolve`]).
pub(crate) async fn resolve_names(
    keys: &Keys,
    list: &QueueList,
    con: &mut Conn,
) -> redis::RedisResult<Vec<String>> {
    resolve(keys, list, con).await.map(|(names, _)| names)
}

/// The split queues' declarations (none when the key is not a hash).
async fn read_splits(
    keys: &Keys,
    con: &mut Conn,
) -> redis::RedisResult<std::collections::HashMap<String, crate::splits::Split>> {
    let r: redis::RedisResult<HashMap<String, Vec<u8>>> = redis::cmd("HGETALL")
        .arg(keys.splits())
        .query_async(con)
        .await;
    match r {
        Ok(fields) => Ok(crate::splits::parse_all(fields)),
        Err(e) if e.code() == Some("WRONGTYPE") => Ok(HashMap::new()),
        Err(e) => Err(e),
    }
}

/// The members of `<ns>:queues` that resq serves.
async fn known_queues(keys: &Keys, con: &mut Conn) -> redis::RedisResult<Vec<String>> {
    // (A name that is not UTF-8, or that has a control character, is left out and logged
    // once: one such name must not stop the worker from serving the others.)
    let key = keys.queues();
    let known = crate::admin::names::smembers(con, &key).await?;
    for name in known.iter().filter(|n| !crate::queues::servable(n)) {
        crate::admin::names::warn_once(
            &key,
            &format!("{name:?}"),
            "a queue name with a control character is not served",
        );
    }
    Ok(known)
}
