//! A slot's claimed payloads (too large or too unusual for Redis to check): read on a
//! connection of the slot's own, checked, promoted to the slot's record and run — or made a
//! failure entry, or given back to their queue.

use super::*;

impl Slot {
    /// A claimed payload: read, check, promote, run — on a connection of the slot's own (so
    /// a large payload never holds up the other slots' steps on the shared one, and its read
    /// buffer is freed with it). Returns the completion of the job run, if one ran, and
    /// whether it was taken under limits.
    pub(super) async fn claimed(
        &mut self,
        c: Claim,
        trouble: &mut Trouble,
    ) -> (Option<Completion>, bool) {
        let outcome = loop {
            if *self.shutdown.borrow() != Phase::Running {
                self.unclaim(&c).await;
                return (None, false);
            }
            match self.read_and_promote(&c).await {
                Ok(o) => break o,
                Err(e) => {
                    if !self.back_off(trouble, &Problem::Call(e), None).await {
                        // Still claimed: pruning puts it back in its queue.
                        return (None, false);
                    }
                }
            }
        };
        self.recovered(trouble);
        let (payload, limited) = match outcome {
            None => return (None, false),
            Some((Ok(p), limited)) => (p, limited),
            Some((Err(why), limited)) => {
                // Promoted, yet the decoder refuses what the check passed: it fails as a job.
                let err = crate::registry::JobError::new("Resq::MalformedPayload", why.to_string());
                let entry =
                    crate::worker::perform::failure_entry(None, &c.queue, &self.state.id, &err);
                let failed = Completion::Failure {
                    job: crate::worker::step::JobRef::Token(c.token.clone()),
                    entry,
                    track: None,
                    ends: None,
                };
                return (Some(failed), limited);
            }
        };
        let mut started = None;
        if let Some((id, statused)) =
            crate::jobs::tracked_id(&payload, self.registry.statused_set())
        {
            let mut con = self.con.clone();
            match crate::jobs::start_claimed(
                &mut con,
                &self.keys,
                &id,
                statused,
                payload.class(),
                &self.state.id,
            )
            .await
            {
                None => {
                    tracing::info!(job = %id, worker = %self.state.id, "cancelled job dropped");
                    let dropped = Completion::Success {
                        job: crate::worker::step::JobRef::Token(c.token.clone()),
                        track: None,
                        ends: None,
                    };
                    return (Some(dropped), limited);
                }
                Some(s) => started = s,
            }
        }
        let large = payload.text().len() >= claim::LARGE;
        let completion = self
            .run_job(
                Reserved::Claimed {
                    payload,
                    queue: c.queue.clone(),
                    token: c.token.clone(),
                    started,
                },
                limited,
            )
            .await;
        if large {
            crate::runtime::release_memory();
        }
        (completion, limited)
    }

    /// Reads, checks and promotes a claim; the payload to run, or `None` (malformed: recorded
    /// as a failure; or gone). The read and the promote each use a connection of their own,
    /// dropped at once: a large reply's read buffer does not outlive it.
    async fn read_and_promote(
        &self,
        c: &Claim,
    ) -> redis::RedisResult<
        Option<(
            Result<crate::wire::Payload, crate::wire::payload::PayloadError>,
            bool,
        )>,
    > {
        let _one = claim::ONE_AT_A_TIME.acquire().await;
        let bytes = {
            let mut con = self.endpoint.blocking(CLAIM_PATIENCE).await?;
            match claim::read(&mut con, &self.stepper, c).await? {
                Some(b) => b,
                None => return Ok(None),
            }
        };
        let size = bytes.len();
        let text = match claim::check(bytes) {
            Ok(text) => text,
            Err((why, bytes)) => {
                tracing::warn!(worker = %self.state.id, queue = %c.queue, bytes = size, error = %why, "malformed payload");
                let entry = claim::failure_entry(&why, &bytes, &c.queue, &self.state.id);
                drop(bytes);
                let mut con = self.con.clone();
                claim::fail(&mut con, &self.stepper, c, &entry).await?;
                return Ok(None);
            }
        };
        let json = self.limits.json();
        let limited = !json.is_empty();
        if limited {
            // Only when limits are in force: the limits need the class and the small args.
            if let Ok(p) = crate::wire::Payload::parse(text.as_bytes()) {
                let mut con = self.con.clone();
                match claim::limit(&mut con, &self.stepper, c, &p, &json).await? {
                    claim::Limited::Admitted => {}
                    claim::Limited::Held(due) => {
                        if let Some(d) = due {
                            self.limits.note_due(d);
                        }
                        return Ok(None);
                    }
                    claim::Limited::Gone => return Ok(None),
                    claim::Limited::Bad(why) => {
                        let err = crate::registry::JobError::new("Resq::LimitKeyError", why);
                        let entry = crate::worker::perform::failure_entry(
                            Some(p.text()),
                            &c.queue,
                            &self.state.id,
                            &err,
                        );
                        claim::fail(&mut con, &self.stepper, c, &entry).await?;
                        return Ok(None);
                    }
                }
            }
        }
        let mut con = self.endpoint.blocking(CLAIM_PATIENCE).await?;
        match claim::promote(&mut con, &self.stepper, c, &text).await? {
            Promoted::Run => {}
            _ => return Ok(None),
        }
        drop(con);
        Ok(Some((crate::wire::Payload::from_string(text), limited)))
    }

    /// Puts a claim that will not run back at the head of its queue (best effort: pruning
    /// does it for claims left behind).
    async fn unclaim(&self, c: &Claim) {
        let mut con = self.con.clone();
        let put_back = tokio::time::timeout(
            ABORT_GRACE,
            claim::unclaim(&mut con, &self.keys, &self.state.id, &c.token, &c.queue),
        )
        .await;
        if !matches!(put_back, Ok(Ok(_))) {
            tracing::warn!(worker = %self.state.id, queue = %c.queue, key = %self.keys.claim(&self.state.id), "could not put a claimed job back in its queue; pruning will");
        }
    }
}
