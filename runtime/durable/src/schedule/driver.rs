//! Driving schedules: their definitions and changes as conditional appends to their
//! streams, the one task per schedule that fires its ticks on the owner of its book, and
//! the loop that starts and stops those tasks as ownership moves.

use super::*;
use crate::invoke::InvocationStatus;
use crate::node::{Durable, Schedules};

impl Durable {
    /// The last state of schedule `name` with no start left pending: a pending one is
    /// started and recorded started first.
    async fn settled_tail(self: &Arc<Self>, ctx: &mut Context, name: &str) -> Result<Option<State>> {
        for _ in 0..CHANGE_TRIES {
            let Some((state, _)) = self.schedule_tail(ctx, name).await? else { return Ok(None) };
            if state.starting.is_none() {
                return Ok(Some(state));
            }
            self.settle(ctx, &state).await?;
        }
        Err(Error::Conflict(format!("schedule {name:?} kept changing")))
    }

    /// Starts the invocation `state` says is starting, then records it started (or, for
    /// a start refused for good, why not); `false` if another change took the offset
    /// first (which carries the start on, or recorded it).
    async fn settle(self: &Arc<Self>, ctx: &mut Context, state: &State) -> Result<bool> {
        let Some(start) = &state.starting else { return Ok(true) };
        let started = self
            .start_async(&mut Context::new(), start.function.clone(), start.book, start.input.clone(), start.id.clone(), 0, None)
            .await;
        let new = match started {
            Ok(_) => state.next(|s| {
                s.starting = None;
                s.last = Some((start.book, start.id.clone()));
                s.last_error = None;
            }),
            Err(e) if e.is_transient() => return Err(e),
            Err(e) => {
                tracing::warn!(schedule = state.name, id = %start.id, "a scheduled invocation could not start: {e}");
                state.next(|s| {
                    s.starting = None;
                    s.last_error = Some(record::cut(&format!("invocation {}: {e}", start.id)));
                })
            }
        };
        self.record_schedule(ctx, &new, false).await
    }

    /// Applies `change` to the last state of schedule `name` (a fresh one if it has
    /// none) and records the result, again while other changes win the race; returns
    /// the state recorded (or the last one, for no change). `listed` puts the record in
    /// SCHEDULES too.
    pub(super) async fn change_schedule(
        &self,
        name: &str,
        listed: bool,
        mut change: impl FnMut(&State, u64) -> Result<Option<State>>,
    ) -> Result<State> {
        let mut ctx = Context::new();
        for _ in 0..CHANGE_TRIES {
            let old = match self.schedule_tail(&mut ctx, name).await? {
                Some((s, _)) => s,
                None => State { offset: u64::MAX, ..State::new(name) },
            };
            let Some(new) = change(&old, self.core.clock.wall_ms())? else { return Ok(old) };
            if self.record_schedule(&mut ctx, &new, listed).await? {
                return Ok(new);
            }
        }
        Err(Error::Conflict(format!("schedule {name:?} kept changing")))
    }

    /// The last record of schedule `name`'s stream, and its seqnum.
    async fn schedule_tail(&self, ctx: &mut Context, name: &str) -> Result<Option<(State, SeqNum)>> {
        let stream = self.core.tags.schedule(name);
        let Some(r) = self.core.log.read_prev(ctx, PLATFORM_BOOK, stream, SeqNum::MAX).await? else { return Ok(None) };
        Ok(Some((State::of_stream(name, &r.data)?, r.seqnum)))
    }

    /// [`Durable::schedule_tail`] for a driver, which decodes the state again only when
    /// the stream has a new record: a schedule's input may be 256 KiB, and a driver looks
    /// every `schedule_poll_ms`, also while the schedule is paused.
    async fn schedule_tail_seen(&self, ctx: &mut Context, name: &str, seen: &mut Seen) -> Result<Option<State>> {
        let stream = self.core.tags.schedule(name);
        let Some(r) = self.core.log.read_prev(ctx, PLATFORM_BOOK, stream, SeqNum::MAX).await? else { return Ok(None) };
        if let Some((_, state)) = seen.as_ref().filter(|(s, _)| *s == r.seqnum) {
            return Ok(Some(state.clone()));
        }
        let state = State::of_stream(name, &r.data)?;
        *seen = Some((r.seqnum, state.clone()));
        Ok(Some(state))
    }

    /// Appends `state` at its offset of its stream; `false` if another change took it.
    /// Trims the stream behind it now and then.
    async fn record_schedule(&self, ctx: &mut Context, state: &State, listed: bool) -> Result<bool> {
        let stream = self.core.tags.schedule(&state.name);
        let tags = if listed { vec![stream, SCHEDULES] } else { vec![stream] };
        let data = record::encode(state);
        match self.core.log.cond_append(ctx, PLATFORM_BOOK, &tags, data, stream, state.offset).await {
            Ok(seqnum) => {
                if state.offset.is_multiple_of(TRIM_EVERY) && state.offset > 0 {
                    if let Err(e) = self.core.log.trim(ctx, PLATFORM_BOOK, stream, seqnum).await {
                        tracing::warn!(schedule = state.name, "trimming its stream: {e}");
                    }
                }
                Ok(true)
            }
            Err(tally_log_core::Error::Conflict { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether the invocation a schedule started last still runs (or sleeps).
    async fn still_running(&self, last: &Option<(BookId, InstanceId)>) -> Result<bool> {
        let Some((book, id)) = last else { return Ok(false) };
        match self.invocation(&mut Context::new(), *book, &id.to_string()).await {
            Ok(InvocationStatus::Finished(_)) | Err(Error::InvocationNotFound(_)) => Ok(false),
            Ok(_) => Ok(true),
            Err(e) => Err(e),
        }
    }

    fn is_driving(&self, name: &str) -> bool {
        self.drivers.driving.lock().expect("not poisoned").contains(name)
    }

    /// Starts a driver for schedule `name` if this node owns its book and drives it
    /// not yet.
    fn drive_if_owned(self: &Arc<Self>, name: &str, book: BookId) {
        if !self.core.peers.owns(book) || !self.drivers.driving.lock().expect("not poisoned").insert(name.to_string()) {
            return;
        }
        let driving = Driving { weak: Arc::downgrade(self), name: name.to_string() };
        // Cancelling a driver loses nothing: the stream holds the schedule's state, and
        // the next scan (here or on the book's next owner) starts another.
        self.core.spawn.spawn("schedule", Box::pin(drive(driving)));
    }

    /// One turn of schedule `name`'s driver: starts what is recorded starting, or
    /// records what is due; returns how long to wait for the next turn, or `None` when
    /// the schedule is gone or its book is no longer this node's.
    async fn drive_once(self: &Arc<Self>, ctx: &mut Context, name: &str, seen: &mut Seen) -> Result<Option<u64>> {
        let Some(state) = self.schedule_tail_seen(ctx, name, seen).await? else { return Ok(None) };
        if state.starting.is_some() {
            return match self.settle(ctx, &state).await {
                Ok(_) => Ok(Some(0)),
                Err(e) => {
                    tracing::warn!(schedule = name, "starting a scheduled invocation, will try again: {e}");
                    Ok(Some(RETRY_MS))
                }
            };
        }
        let Some(spec) = state.spec.clone() else { return Ok(None) };
        if !self.core.peers.owns(spec.book) {
            return Ok(None);
        }
        let poll = self.core.config.schedule_poll_ms.max(1);
        let now = self.core.clock.wall_ms();
        if let Some(tick) = state.pending {
            if !self.still_running(&state.last).await? {
                let new = state.starting(&spec, InstanceId::scheduled(name, tick), |s| {
                    s.pending = None;
                    s.fired += 1;
                });
                return self.record_schedule(ctx, &new, false).await.map(|_| Some(0));
            }
        }
        let (tick, passed, due) = match state.plan(now) {
            Plan::Wait(at) => return Ok(Some(at.map_or(poll, |t| (t - now).min(poll)))),
            Plan::Pass { upto, count } => (upto, count, false),
            Plan::Due { tick, passed } => (tick, passed, true),
        };
        // Whether the last invocation still runs matters only to a tick that fires (a
        // buffered tick waits for it: it does).
        let busy =
            state.pending.is_some() || (due && spec.overlap != Overlap::AllowAll && self.still_running(&state.last).await?);
        // Catching up on every missed tick, one waits for the invocation before it
        // (whatever the overlap policy, which is for ticks that come due on time).
        let missed = spec.catch_up == CatchUp::All && spec.next_after(tick).is_some_and(|t| t <= now);
        if due && missed && busy {
            return Ok(Some(BACKLOG_POLL_MS));
        }
        let new = if !due || (busy && (spec.overlap == Overlap::Skip || state.pending.is_some())) {
            state.next(|s| {
                s.last_tick_ms = tick;
                s.skipped += passed + u64::from(due);
            })
        } else if busy {
            state.next(|s| {
                s.last_tick_ms = tick;
                s.skipped += passed;
                s.pending = Some(tick);
            })
        } else {
            state.starting(&spec, InstanceId::scheduled(name, tick), |s| {
                s.last_tick_ms = tick;
                s.skipped += passed;
                s.fired += 1;
            })
        };
        self.record_schedule(ctx, &new, false).await.map(|_| Some(0))
    }
}

/// The last record of a schedule's stream a driver decoded, and its state.
type Seen = Option<(SeqNum, State)>;

/// A schedule this node drives: leaves the driving set when the driver ends, also when
/// its task is cancelled.
struct Driving {
    weak: Weak<Durable>,
    name: String,
}

impl Drop for Driving {
    fn drop(&mut self) {
        if let Some(d) = self.weak.upgrade() {
            d.drivers.driving.lock().expect("not poisoned").remove(&self.name);
        }
    }
}

/// Drives one schedule until it is deleted, its book moves to another node or the node
/// stops.
async fn drive(driving: Driving) {
    let mut ctx = Context::new();
    let mut seen = None;
    loop {
        let Some(d) = Durable::live(&driving.weak) else { return };
        let wait = match d.drive_once(&mut ctx, &driving.name, &mut seen).await {
            Ok(Some(ms)) => ms,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(schedule = driving.name, "driving a schedule: {e}");
                d.core.config.schedule_poll_ms.max(1)
            }
        };
        if wait == 0 {
            continue;
        }
        let sleep = d.core.clock.sleep(wait);
        drop(d);
        sleep.await;
    }
}

/// Looks for schedules to drive every `schedule_poll_ms` until the node stops: each one
/// whose book this node owns and drives not yet.
pub(crate) async fn schedule_loop(weak: Weak<Durable>) {
    loop {
        let Some(d) = Durable::live(&weak) else { return };
        let known = d.known_schedules(|known| {
            known.iter().filter(|(name, _)| !d.is_driving(name)).map(|(n, (b, _))| (n.clone(), *b)).collect::<Vec<_>>()
        });
        match known.await {
            Ok(undriven) => {
                for (name, book) in undriven {
                    d.drive_if_owned(&name, book);
                }
            }
            Err(e) => tracing::warn!("reading the schedules: {e}"),
        }
        if d.core.peers.owns(PLATFORM_BOOK) {
            if let Err(e) = d.compact_listing().await {
                tracing::warn!("compacting the listing of schedules: {e}");
            }
        }
        let sleep = d.core.clock.sleep(d.core.config.schedule_poll_ms.max(1));
        drop(d);
        sleep.await;
    }
}

impl Schedules<'_> {
    /// Creates schedule `name` or replaces its definition (`paused`, if given, pauses or
    /// resumes it too); returns it and whether it is new. A replaced definition ticks
    /// from now on (a buffered tick is dropped); the same definition again changes
    /// nothing.
    pub async fn put(&self, name: &str, spec: ScheduleSpec, paused: Option<bool>) -> Result<(Schedule, bool)> {
        let d = self.0;
        check_name(name)?;
        spec.check()?;
        let known = d.known_schedules(|known| known.len()).await?;
        let mut created = false;
        let state = d
            .change_schedule(name, true, |old, now| {
                if old.spec.is_none() && known >= SCHEDULES_MAX {
                    return Err(Error::InvalidArgument(format!("this cluster keeps at most {SCHEDULES_MAX} schedules")));
                }
                let paused = paused.unwrap_or(old.paused && old.spec.is_some());
                if old.spec.as_ref() == Some(&spec) && old.paused == paused {
                    return Ok(None);
                }
                created = old.spec.is_none();
                Ok(Some(old.next(|s| {
                    if s.spec.as_ref() != Some(&spec) {
                        s.revision += 1;
                        s.spec = Some(spec.clone());
                        s.last_tick_ms = s.last_tick_ms.max(now);
                        s.pending = None;
                    }
                    if s.paused && !paused {
                        s.last_tick_ms = s.last_tick_ms.max(now);
                    }
                    s.paused = paused;
                    if created {
                        s.fired = 0;
                        s.skipped = 0;
                        s.last_error = None;
                    }
                })))
            })
            .await?;
        if let Some(spec) = &state.spec {
            d.drivers.known.lock().await.live.insert(name.to_string(), (spec.book, 0));
            d.drive_if_owned(name, spec.book);
        }
        Ok((state.view().expect("defined"), created))
    }

    /// Schedule `name`.
    pub async fn get(&self, name: &str) -> Result<Schedule> {
        let d = self.0;
        check_name(name)?;
        let tail = d.schedule_tail(&mut Context::new(), name).await?;
        tail.and_then(|(s, _)| s.view()).ok_or_else(|| Error::ScheduleNotFound(name.to_string()))
    }

    /// A page of the cluster's schedules: the first `limit` by name after `after` (""
    /// for the first page), and the `after` of the next page if there may be more.
    pub async fn list(&self, after: &str, limit: usize) -> Result<(Vec<Schedule>, Option<String>)> {
        let d = self.0;
        let limit = limit.max(1);
        let names: Vec<String> = d
            .known_schedules(|known| {
                let later = known.range::<str, _>((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded));
                later.map(|(name, _)| name.clone()).take(limit.saturating_add(1)).collect()
            })
            .await?;
        let next = (names.len() > limit).then(|| names[limit - 1].clone());
        let mut out = Vec::new();
        let mut ctx = Context::new();
        for name in names.iter().take(limit) {
            if let Some(view) = d.schedule_tail(&mut ctx, name).await?.and_then(|(s, _)| s.view()) {
                out.push(view);
            }
        }
        Ok((out, next))
    }

    /// Deletes schedule `name`: no tick fires after this returns (invocations started
    /// already run on, and one whose tick was recorded before the deletion starts).
    pub async fn delete(&self, name: &str) -> Result<()> {
        let d = self.0;
        check_name(name)?;
        // A start recorded before the deletion happens (no driver is left to do it).
        d.settled_tail(&mut Context::new(), name).await?;
        d.change_schedule(name, true, |old, _| {
            if old.spec.is_none() {
                return Err(Error::ScheduleNotFound(name.to_string()));
            }
            Ok(Some(old.next(|s| {
                s.revision += 1;
                s.spec = None;
                s.paused = false;
                s.pending = None;
            })))
        })
        .await?;
        d.drivers.known.lock().await.live.remove(name);
        Ok(())
    }

    /// Pauses (`true`) or resumes schedule `name`. Ticks that come due while it is
    /// paused never fire; a buffered tick still starts.
    pub async fn pause(&self, name: &str, pause: bool) -> Result<Schedule> {
        let d = self.0;
        check_name(name)?;
        let state = d
            .change_schedule(name, false, |old, now| {
                if old.spec.is_none() {
                    return Err(Error::ScheduleNotFound(name.to_string()));
                }
                if old.paused == pause {
                    return Ok(None);
                }
                Ok(Some(old.next(|s| {
                    s.paused = pause;
                    s.last_tick_ms = s.last_tick_ms.max(now);
                })))
            })
            .await?;
        Ok(state.view().expect("defined"))
    }

    /// Starts schedule `name`'s invocation now, whatever its overlap policy and whether
    /// it is paused; returns the invocation's ID and book. Each call starts another
    /// invocation.
    /// Once the trigger is recorded the invocation starts, even if this call then fails
    /// (the schedule's driver starts it).
    pub async fn trigger(&self, name: &str) -> Result<(InstanceId, BookId)> {
        let d = self.0;
        check_name(name)?;
        let mut ctx = Context::new();
        for _ in 0..CHANGE_TRIES {
            let state = d.settled_tail(&mut ctx, name).await?;
            let Some(spec) = state.as_ref().and_then(|s| s.spec.clone()) else {
                return Err(Error::ScheduleNotFound(name.to_string()));
            };
            let state = state.expect("defined");
            let n = state.triggered + 1;
            let id = InstanceId::triggered(name, n);
            let new = state.starting(&spec, id.clone(), |s| s.triggered = n);
            if d.record_schedule(&mut ctx, &new, false).await? {
                d.settle(&mut ctx, &new).await?;
                return Ok((id, spec.book));
            }
        }
        Err(Error::Conflict(format!("schedule {name:?} kept changing")))
    }
}
