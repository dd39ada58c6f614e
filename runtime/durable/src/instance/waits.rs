//! Durable sleeps, promises, delayed starts: steps logged before the guest waits.
//!
//! A wait is waited in place if its end is within `sleep_in_place_max_ms` and, with a
//! margin for what follows, the attempt's deadline; otherwise the attempt ends with
//! `Abort::Suspended`, the instance is dropped, and the re-execution at the wake time
//! replays to the step and goes on. The wake compares the recorded wake time with the
//! core's wall clock (`Clock::wall_ms`), never a reading the guest sees.
//!
//! Delayed starts (`?delay_ms=`): a `Delay` step at step 1, logged by the invocation path
//! right after the Init and taken by every execution before its guest runs
//! (`Instance::delay`); a peer that knew of no delay and ran the guest first wins the
//! position, and the invocation runs undelayed.
//!
//! Promises: a `Promise` step creates one (its ID a keyed hash of the book, the instance
//! and its count of promises; the record is also in the promise's stream, at offset 0). A
//! completion (`Invocations::complete_promise`) is a conditional append of `Completed` at
//! offset 1 of that stream (one wins; also in INSTANCES, so that the recovery scan wakes
//! the root) and runs the root again. An await logs a `Sleep` step (its timeout, or
//! `u64::MAX`) only before it would wait, and an `Awaited` step with the value, the
//! timeout or an unknown promise before the guest sees it (a peer that logged `Awaited`
//! first wins). The Sleep of an await is also in the promise's waiters stream, and the
//! await looks at the promise once more after logging it, since a completion made before
//! did not see this waiter: a completion wakes every waiter found there (so does the
//! recovery scan, from the `Completed` record, should the completing node die), so any
//! invocation of the book may await any promise; a woken run reads from where its waker
//! saw the completion. An await waiting in place looks every `PROMISE_POLL_MS`, or at once
//! when the completion is made on its node (`Completions`, `core/completions.rs`).

use super::*;

impl Instance {
    /// A durable sleep until `wake`: the wake time (from a recorded reading of the wall
    /// clock, for a duration) is logged as a step, also in INSTANCES, before the guest
    /// waits, so every execution wakes at the same time. Waits in place when the wake is
    /// at most `sleep_in_place_max_ms` away and before `deadline_ms` (on the core's
    /// clock); otherwise ends the attempt with `Abort::Suspended`: the instance is
    /// dropped, and a re-execution at the wake time (this node's timer, or the recovery
    /// scan on any node after a restart) replays to here and goes on. Returns the wake
    /// time (milliseconds since the Unix epoch).
    pub async fn sleep(&mut self, ctx: &mut Context, wake: Wake, deadline_ms: u64) -> Result<u64, Abort> {
        self.flush(ctx).await?;
        self.init_checked(ctx).await?;
        // A recorded reading, so that the wake time and the limit's verdict are the same
        // in every execution.
        let now_ms = self.recorder.read(GuestClock::Wall, self.core.clock.wall_ms().saturating_mul(1_000_000)) / 1_000_000;
        let until_ms = match wake {
            Wake::After(ms) => now_ms.saturating_add(ms),
            Wake::At(ms) => ms,
        };
        if until_ms.saturating_sub(now_ms) > SLEEP_MAX_MS {
            return Err(Abort::Refused(Error::InvalidArgument(format!(
                "a sleep until {until_ms} ms after the Unix epoch is longer than the limit of {SLEEP_MAX_MS} ms (a year)"
            ))));
        }
        self.log_clocks(ctx).await?;
        let until_ms = self.log(ctx, kind::Sleep { until_ms, root: self.id.root() }, &[INSTANCES]).await?.until_ms;
        if until_ms > self.core.clock.wall_ms() {
            self.check_cancelled(ctx).await?;
        }
        self.wait_until(until_ms, deadline_ms).await
    }

    /// Creates a promise (`context.promise-create`): its ID comes from the instance and
    /// how many it created before, and its creation is a step, also in the promise's
    /// stream (offset 0), where a completion finds it.
    pub async fn create_promise(&mut self, ctx: &mut Context) -> Result<String, Abort> {
        self.flush(ctx).await?;
        self.init_checked(ctx).await?;
        self.log_clocks(ctx).await?;
        let promise = self.core.tags.promise_id(self.book, &self.id, self.promises);
        let stream = self.core.tags.promise(&promise);
        self.log_step(ctx, Step::Promise(kind::Promise { promise: promise.clone(), root: self.id.root() }), &[stream]).await?;
        self.promises += 1;
        Ok(promise)
    }

    /// Waits durably for the value of `promise` (`context.promise-await`), until
    /// `timeout_ms` past a recorded reading of the wall clock if given. The wait's end is
    /// logged first as a `Sleep` step (also in INSTANCES; `u64::MAX` without a timeout),
    /// then what the await got as an `Awaited` step, before the guest sees it; an await
    /// that finds neither a value nor its time up suspends the invocation until the
    /// completion wakes it (`Invocations::complete_promise`) or the timeout does.
    pub async fn await_promise(
        &mut self,
        ctx: &mut Context,
        promise: &str,
        timeout_ms: Option<u64>,
        deadline_ms: u64,
    ) -> Result<Awaited, Abort> {
        self.flush(ctx).await?;
        if !crate::tags::is_promise_id(promise) {
            return Err(Abort::Refused(Error::InvalidArgument(format!("{promise:?} is not a promise ID"))));
        }
        self.init_checked(ctx).await?;
        let now_ns = self.recorder.read(GuestClock::Wall, self.core.clock.wall_ms().saturating_mul(1_000_000));
        let until_ms = timeout_ms.map_or(u64::MAX, |t| (now_ns / 1_000_000).saturating_add(t.min(SLEEP_MAX_MS)));
        self.log_clocks(ctx).await?;
        // An earlier execution waited here (Sleep), or got its outcome (Awaited).
        if let Some(outcome) = self.recorded_awaited(promise)? {
            return Ok(outcome);
        }
        let (until_ms, waited) = match self.steps.get(self.next).map(|r| (r.seqnum, r.step.clone())) {
            Some((seqnum, Step::Sleep(kind::Sleep { until_ms, .. }))) => {
                self.take(seqnum);
                (until_ms, true)
            }
            _ => (until_ms, false),
        };
        let outcome = match self.promise_value(ctx, promise).await? {
            Some(outcome) => outcome,
            None if self.core.clock.wall_ms() >= until_ms => Awaited::TimedOut,
            None => {
                if !waited {
                    // About to wait: the wait's end is logged (also in INSTANCES, for the
                    // recovery scan, and among the promise's waiters, whom a completion
                    // wakes), unless a peer logged the outcome here meanwhile.
                    let step = Step::Sleep(kind::Sleep { until_ms, root: self.id.root() });
                    let waiters = self.core.tags.promise_waiters(promise);
                    match self.log_step(ctx, step, &[INSTANCES, waiters]).await {
                        Ok(_) => {}
                        Err(Abort::NonDeterministic(m)) => {
                            return self.recorded_awaited(promise)?.ok_or(Abort::NonDeterministic(m));
                        }
                        Err(abort) => return Err(abort),
                    }
                }
                // In place if near, looking at the promise every PROMISE_POLL_MS, or at once
                // when it is completed on this node; else
                // suspended until then, after a last look (a completion that came
                // before the Sleep was logged did not see this waiter).
                let remaining = until_ms.saturating_sub(self.core.clock.wall_ms());
                let in_place = remaining <= self.core.config.sleep_in_place_max_ms
                    && self.core.clock.now_ms().saturating_add(remaining).saturating_add(IN_PLACE_MARGIN_MS) < deadline_ms;
                let mut first = true;
                loop {
                    if let Some(outcome) = self.promise_value(ctx, promise).await? {
                        break outcome;
                    }
                    let left = until_ms.saturating_sub(self.core.clock.wall_ms());
                    if left == 0 {
                        break Awaited::TimedOut;
                    }
                    if first || self.cancel_requested(ctx, false).await? {
                        self.check_cancelled(ctx).await?;
                        first = false;
                    }
                    if !in_place {
                        return Err(Abort::Suspended { wake_ms: until_ms });
                    }
                    let look = self.core.clock.sleep(left.min(PROMISE_POLL_MS));
                    futures_util::future::select(look, self.core.completions.wait(promise)).await;
                }
            }
        };
        Ok(self.log(ctx, kind::Awaited { promise: promise.to_string(), outcome }, &[]).await?.outcome)
    }

    /// The outcome an earlier execution (or a peer) logged for this await of `promise`,
    /// taken; `None` if the step log has none here (a recorded Sleep is the await's
    /// too); another operation recorded here is non-determinism.
    pub(super) fn recorded_awaited(&mut self, promise: &str) -> Result<Option<Awaited>, Abort> {
        match self.steps.get(self.next).map(|r| (r.seqnum, r.step.clone())) {
            Some((seqnum, Step::Awaited(kind::Awaited { promise: p, outcome }))) if p == promise => {
                self.take(seqnum);
                Ok(Some(outcome))
            }
            None | Some((_, Step::Sleep(kind::Sleep { .. }))) => Ok(None),
            Some(_) => {
                let asked = Step::Awaited(kind::Awaited { promise: promise.to_string(), outcome: Awaited::TimedOut });
                Err(self.recorded(&asked).err().unwrap_or_else(|| Abort::internal("a recorded step vanished")))
            }
        }
    }

    /// What the stream of `promise` holds: its value once completed, `Unknown` if no
    /// promise of that ID was created in this book, `None` while it waits.
    pub(super) async fn promise_value(&self, ctx: &mut Context, promise: &str) -> Result<Option<Awaited>, Abort> {
        let (book, stream) = (self.shadow(), self.core.tags.promise(promise));
        let Some(created) = self.core.log.read_next(ctx, book, stream, SeqNum(0)).await? else {
            return Ok(Some(Awaited::Unknown));
        };
        match self.core.log.read_next(ctx, book, stream, SeqNum(created.seqnum.0.saturating_add(1))).await? {
            Some(r) => match record::decode::<Step>("promise", &r.data)? {
                Step::Completed(kind::Completed { promise: p, value, .. }) if p == promise => Ok(Some(Awaited::Value(value))),
                other => Err(Abort::internal(format!("the stream of promise {promise} holds {}", other.describe()))),
            },
            None => Ok(None),
        }
    }

    /// A delayed start, before the guest runs (right after `init`): takes the Delay
    /// step the invocation has at step 1, or logs one until `until` if it has none yet
    /// and one is asked for; then waits for that time as [`Instance::sleep`] does
    /// (in place if near, otherwise `Abort::Suspended`). An invocation whose guest ran
    /// first (no delay asked, or its Delay lost to a crash before it was logged) goes on.
    pub async fn delay(&mut self, ctx: &mut Context, until: Option<u64>, deadline_ms: u64) -> Result<(), Abort> {
        self.flush(ctx).await?;
        let until_ms = match self.steps.get(self.next) {
            Some(Recorded { step: Step::Delay(kind::Delay { until_ms, .. }), seqnum }) => {
                let (until_ms, seqnum) = (*until_ms, *seqnum);
                self.take(seqnum);
                until_ms
            }
            Some(_) => return Ok(()),
            None => {
                let Some(until_ms) = until else { return Ok(()) };
                match self.log(ctx, kind::Delay { until_ms, root: self.id.root() }, &[INSTANCES]).await {
                    Ok(delay) => delay.until_ms,
                    // A peer that knew of no delay ran the guest first: it has started.
                    Err(Abort::NonDeterministic(_)) => return Ok(()),
                    Err(abort) => return Err(abort),
                }
            }
        };
        if until_ms > self.core.clock.wall_ms() {
            self.check_cancelled(ctx).await?;
        }
        self.wait_until(until_ms, deadline_ms).await.map(|_| ())
    }

    /// Waits for `until_ms` (wall clock) in place if it is near and before
    /// `deadline_ms`, else ends the attempt suspended until then.
    pub(super) async fn wait_until(&self, until_ms: u64, deadline_ms: u64) -> Result<u64, Abort> {
        let remaining = until_ms.saturating_sub(self.core.clock.wall_ms());
        if remaining == 0 {
            return Ok(until_ms);
        }
        let near = remaining <= self.core.config.sleep_in_place_max_ms;
        if near && self.core.clock.now_ms().saturating_add(remaining).saturating_add(IN_PLACE_MARGIN_MS) < deadline_ms {
            self.core.clock.sleep(remaining).await;
            return Ok(until_ms);
        }
        Err(Abort::Suspended { wake_ms: until_ms })
    }
}
