//! Schedules: a function invoked on a book at every tick of an interval or a cron
//! expression, each tick exactly once across restarts, node loss and redefinitions.
//!
//! A schedule is one stream of PLATFORM_BOOK, `schedule(name)`, whose every record is
//! the schedule's whole [`State`] after one change, at the offset the record carries:
//! each change (a tick, a definition, pause, resume, trigger, delete) is a conditional
//! append at the next offset, so changes from any number of nodes form one history,
//! and the stream's last record is all a reader needs (the stream is trimmed behind
//! it). Definitions (`PUT`, `DELETE`) are also in SCHEDULES, so every node learns the
//! names and their books.
//!
//! A schedule is driven by the owner of its book ([`crate::Peers`]): one task per
//! schedule reads the last state, waits for the next tick, and fires it in two
//! records around the invocation's start:
//!
//! ```text
//!   state (last tick t0) ── t1 due ──> record t1, starting scheduled(name, t1)
//!                                      start the invocation scheduled(name, t1)
//!                                      record it started
//! ```
//!
//! A tick fires only if its first record wins the stream's next offset, so a tick
//! never fires after a deletion or a pause recorded before it, whatever a lagging
//! replica showed the driver. The invocation's ID comes from the schedule's name and
//! the tick's time: whoever finds a start recorded and not known to have happened (a
//! new driver after a crash, a trigger, a deletion) starts it again, which runs nothing
//! new, since an invocation's Init record is a conditional append (the first wins).
//!
//! Policies, as Temporal's: `overlap` says what a tick does while the last invocation
//! still runs (skip it, buffer one, or start anyway); `catch_up` what happens to ticks
//! that came due while no node drove the schedule (the latest fires, all fire oldest
//! first, or none that is more than `LATE_MS` late). Ticks are on the wall clock:
//! every `every_ms` since the Unix epoch, or a cron expression's minutes in UTC.
//!
//! Both policies are decided from the state and the last invocation's status by
//! `State::plan`, which is pure and unit-tested.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use futures_util::lock::Mutex as AsyncMutex;
use serde::{Deserialize, Serialize};
use tally_log_core::{BookId, Context, SeqNum};

use crate::cron::Cron;
use crate::error::{Error, Result};
use crate::id::InstanceId;
use crate::invoke::InvocationStatus;
use crate::node::Durable;
use crate::record;
use crate::tags::{PLATFORM_BOOK, SCHEDULES};

/// The longest schedule name.
pub const SCHEDULE_NAME_MAX: usize = 128;
/// The shortest interval.
pub const EVERY_MIN_MS: u64 = 100;
/// The largest input of a schedule's invocations: a record of the schedule's stream
/// holds it twice (the definition and a start), and a record is at most 1 MiB.
pub const SCHEDULE_INPUT_MAX: usize = 256 << 10;
/// The longest cron expression and function name a definition may carry.
const CRON_MAX: usize = 256;
const FUNCTION_NAME_MAX: usize = 64;
/// Schedules a cluster keeps (as this node knows them); more are refused.
pub const SCHEDULES_MAX: usize = 10_000;
/// With `catch_up = none`, a tick fired later than this after its time was missed.
pub const LATE_MS: u64 = 10_000;
/// Attempts of one change that lose the race to other changes before it gives up.
const CHANGE_TRIES: usize = 32;
/// The stream is trimmed behind its last record every this many records.
const TRIM_EVERY: u64 = 32;
/// Ticks counted one by one when a catch-up passes over many of a cron expression; the
/// rest are passed over in the next round.
const PASS_MAX: u64 = 100_000;
/// How soon a driver tries again after a transient failure to start an invocation (the
/// node's limit of asynchronous invocations reached, say).
const RETRY_MS: u64 = 20;
/// How often a driver catching up looks whether the invocation before has finished.
const BACKLOG_POLL_MS: u64 = 50;

/// When a schedule ticks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Timing {
    /// Every so many milliseconds since the Unix epoch.
    EveryMs(u64),
    /// A cron expression, in UTC (see `cron.rs`).
    Cron(String),
}

/// What a tick does while the schedule's last invocation still runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Overlap {
    /// Passes the tick over.
    #[default]
    Skip,
    /// Starts the tick once the running invocation has finished; while one tick waits
    /// so, later ones are passed over.
    BufferOne,
    /// Starts the tick anyway.
    AllowAll,
}

/// What happens to ticks that came due while no node drove the schedule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CatchUp {
    /// The latest of them fires; the others are passed over.
    #[default]
    Latest,
    /// Each fires, oldest first, one after another: a missed tick waits for the
    /// invocation before it, whatever the overlap policy (which is for ticks that come
    /// due on time).
    All,
    /// The latest fires if it is at most `LATE_MS` late; the others are passed over.
    None,
}

impl Overlap {
    pub const NAMES: &'static str = "skip, buffer_one or allow_all";

    pub fn name(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::BufferOne => "buffer_one",
            Overlap::AllowAll => "allow_all",
        }
    }

    pub fn parse(text: &str) -> Option<Overlap> {
        [Overlap::Skip, Overlap::BufferOne, Overlap::AllowAll].into_iter().find(|o| o.name() == text)
    }
}

impl CatchUp {
    pub const NAMES: &'static str = "latest, all or none";

    pub fn name(self) -> &'static str {
        match self {
            CatchUp::Latest => "latest",
            CatchUp::All => "all",
            CatchUp::None => "none",
        }
    }

    pub fn parse(text: &str) -> Option<CatchUp> {
        [CatchUp::Latest, CatchUp::All, CatchUp::None].into_iter().find(|c| c.name() == text)
    }
}

/// What a schedule invokes, and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleSpec {
    pub function: String,
    pub book: BookId,
    pub input: Bytes,
    pub timing: Timing,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
}

impl ScheduleSpec {
    /// Refuses a definition that could never run as asked.
    pub fn check(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if self.function.is_empty() || self.function.len() > FUNCTION_NAME_MAX {
            return bad(format!("a schedule names a function (1 to {FUNCTION_NAME_MAX} bytes)"));
        }
        crate::switch::check_book(self.book)?;
        if self.input.len() > SCHEDULE_INPUT_MAX {
            return Err(Error::TooLarge {
                what: "the input of a schedule",
                size: Some(self.input.len() as u64),
                limit: SCHEDULE_INPUT_MAX as u64,
            });
        }
        match &self.timing {
            Timing::EveryMs(ms) if *ms < EVERY_MIN_MS || *ms > crate::SLEEP_MAX_MS => {
                bad(format!("every_ms is {ms}; it must be {EVERY_MIN_MS} to {} (a year)", crate::SLEEP_MAX_MS))
            }
            Timing::EveryMs(_) => Ok(()),
            Timing::Cron(expr) if expr.len() > CRON_MAX => bad(format!("a cron expression is at most {CRON_MAX} bytes")),
            Timing::Cron(expr) => Cron::parse(expr).map(|_| ()),
        }
    }

    /// The first tick strictly after `after_ms`, if any.
    fn next_after(&self, after_ms: u64) -> Option<u64> {
        match &self.timing {
            Timing::EveryMs(p) => (after_ms / p).checked_add(1)?.checked_mul(*p),
            Timing::Cron(expr) => Cron::parse(expr).ok()?.next_after(after_ms),
        }
    }

    /// The latest tick at or before `now` from `first` (a tick at or before `now`) on,
    /// and how many ticks that is counting both (for a cron expression, at most
    /// `PASS_MAX`: then the last one counted).
    fn latest_due(&self, first: u64, now: u64) -> (u64, u64) {
        match &self.timing {
            Timing::EveryMs(p) => {
                let latest = now / p * p;
                (latest, (latest - first) / p + 1)
            }
            Timing::Cron(_) => {
                let (mut latest, mut count) = (first, 1);
                while count < PASS_MAX {
                    match self.next_after(latest) {
                        Some(t) if t <= now => (latest, count) = (t, count + 1),
                        _ => break,
                    }
                }
                (latest, count)
            }
        }
    }
}

/// A schedule's whole state after one change: a record of its stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct State {
    name: String,
    /// This record's offset in the stream.
    offset: u64,
    /// Definitions so far (each PUT that changed it, and DELETE).
    revision: u64,
    /// `None` once deleted.
    spec: Option<ScheduleSpec>,
    paused: bool,
    /// Ticks after this wall-clock time are still to come.
    last_tick_ms: u64,
    /// The last invocation a tick or a trigger started, and its book.
    last: Option<(BookId, InstanceId)>,
    /// A tick buffered behind a running invocation (`BufferOne`).
    pending: Option<u64>,
    /// An invocation a tick or trigger decided to start, until it is known started.
    starting: Option<Start>,
    fired: u64,
    skipped: u64,
    triggered: u64,
    last_error: Option<String>,
}

/// An invocation of a schedule to start: what its definition said when the tick or
/// trigger was recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Start {
    id: InstanceId,
    function: String,
    book: BookId,
    input: Bytes,
}

/// A schedule as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub name: String,
    pub spec: ScheduleSpec,
    pub revision: u64,
    pub paused: bool,
    /// When the next tick is due (none while paused, or if the expression names none).
    pub next_tick_ms: Option<u64>,
    /// Ticks up to this time have fired or were passed over.
    pub last_tick_ms: u64,
    /// The invocation the last tick or trigger started.
    pub last_invocation: Option<String>,
    pub buffered_tick_ms: Option<u64>,
    pub ticks_fired: u64,
    pub ticks_skipped: u64,
    pub triggered: u64,
    /// Why the last tick that could not start did not (the function missing, say).
    pub last_error: Option<String>,
}

/// What a schedule's driver does next, from its state and the time alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// Nothing due: look again at this wall-clock time (`None`: no tick to wait for).
    Wait(Option<u64>),
    /// Tick `tick` is due; `passed` earlier ones are passed over by the catch-up policy.
    Due { tick: u64, passed: u64 },
    /// `count` ticks up to `upto` are passed over and none fires (`CatchUp::None`).
    Pass { upto: u64, count: u64 },
}

impl State {
    /// The state a record of schedule `name`'s stream holds.
    fn of_stream(name: &str, data: &[u8]) -> Result<State> {
        let state: State = record::decode("schedule", data)?;
        if state.name != name {
            return Err(Error::Internal(format!("the stream of schedule {name:?} holds schedule {:?}", state.name)));
        }
        Ok(state)
    }

    fn new(name: &str) -> State {
        State {
            name: name.to_string(),
            offset: 0,
            revision: 0,
            spec: None,
            paused: false,
            last_tick_ms: 0,
            last: None,
            pending: None,
            starting: None,
            fired: 0,
            skipped: 0,
            triggered: 0,
            last_error: None,
        }
    }

    /// The next record of the stream: this state with `change` applied. (A stream with
    /// no record yet is a fresh state at offset `u64::MAX`, whose next is offset 0.)
    fn next(&self, change: impl FnOnce(&mut State)) -> State {
        let mut s = self.clone();
        s.offset = s.offset.wrapping_add(1);
        change(&mut s);
        s
    }

    fn plan(&self, now: u64) -> Plan {
        let Some(spec) = self.spec.as_ref().filter(|_| !self.paused) else { return Plan::Wait(None) };
        let Some(first) = spec.next_after(self.last_tick_ms) else { return Plan::Wait(None) };
        if first > now {
            return Plan::Wait(Some(first));
        }
        let (latest, count) = match spec.catch_up {
            CatchUp::All => return Plan::Due { tick: first, passed: 0 },
            CatchUp::Latest | CatchUp::None => spec.latest_due(first, now),
        };
        if spec.catch_up == CatchUp::None && now.saturating_sub(latest) > LATE_MS {
            return Plan::Pass { upto: latest, count };
        }
        Plan::Due { tick: latest, passed: count - 1 }
    }

    /// The next record, recording that a tick or trigger starts invocation `id` of the
    /// definition.
    fn starting(&self, spec: &ScheduleSpec, id: InstanceId, change: impl FnOnce(&mut State)) -> State {
        self.next(|s| {
            s.starting = Some(Start { id, function: spec.function.clone(), book: spec.book, input: spec.input.clone() });
            change(s);
        })
    }

    fn view(&self) -> Option<Schedule> {
        let spec = self.spec.clone()?;
        let next_tick_ms = match self.pending {
            Some(p) => Some(p),
            None if self.paused => None,
            None => spec.next_after(self.last_tick_ms),
        };
        Some(Schedule {
            name: self.name.clone(),
            spec,
            revision: self.revision,
            paused: self.paused,
            next_tick_ms,
            last_tick_ms: self.last_tick_ms,
            last_invocation: self.last.as_ref().map(|(_, id)| id.to_string()),
            buffered_tick_ms: self.pending,
            ticks_fired: self.fired,
            ticks_skipped: self.skipped,
            triggered: self.triggered,
            last_error: self.last_error.clone(),
        })
    }
}

/// What this node knows of the cluster's schedules.
#[derive(Default)]
pub(crate) struct Schedules {
    /// The SCHEDULES stream as read so far: each name's book (`None` once deleted).
    known: AsyncMutex<(u64, BTreeMap<String, BookId>)>,
    /// Names this node drives.
    driving: Mutex<BTreeSet<String>>,
}

/// Refuses names the API cannot carry in a path segment, or that are too long.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= SCHEDULE_NAME_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !ok {
        return Err(Error::InvalidArgument(format!(
            "{name:?} is not a schedule name (1 to {SCHEDULE_NAME_MAX} of A-Z a-z 0-9 - _ .)"
        )));
    }
    Ok(())
}

impl Durable {
    /// Creates schedule `name` or replaces its definition (`paused`, if given, pauses or
    /// resumes it too); returns it and whether it is new. A replaced definition ticks
    /// from now on (a buffered tick is dropped); the same definition again changes
    /// nothing.
    pub async fn put_schedule(
        self: &Arc<Self>,
        name: &str,
        spec: ScheduleSpec,
        paused: Option<bool>,
    ) -> Result<(Schedule, bool)> {
        check_name(name)?;
        spec.check()?;
        let known = self.known_schedules(|known| known.len()).await?;
        let mut created = false;
        let state = self
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
            self.schedules.known.lock().await.1.insert(name.to_string(), spec.book);
            self.drive_if_owned(name, spec.book);
        }
        Ok((state.view().expect("defined"), created))
    }

    /// Schedule `name`.
    pub async fn schedule(&self, name: &str) -> Result<Schedule> {
        check_name(name)?;
        let tail = self.schedule_tail(&mut Context::new(), name).await?;
        tail.and_then(|(s, _)| s.view()).ok_or_else(|| Error::ScheduleNotFound(name.to_string()))
    }

    /// A page of the cluster's schedules: the first `limit` by name after `after` (""
    /// for the first page), and the `after` of the next page if there may be more.
    pub async fn schedules(&self, after: &str, limit: usize) -> Result<(Vec<Schedule>, Option<String>)> {
        let limit = limit.max(1);
        let names: Vec<String> = self
            .known_schedules(|known| {
                let later = known.range::<str, _>((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded));
                later.map(|(name, _)| name.clone()).take(limit.saturating_add(1)).collect()
            })
            .await?;
        let next = (names.len() > limit).then(|| names[limit - 1].clone());
        let mut out = Vec::new();
        let mut ctx = Context::new();
        for name in names.iter().take(limit) {
            if let Some(view) = self.schedule_tail(&mut ctx, name).await?.and_then(|(s, _)| s.view()) {
                out.push(view);
            }
        }
        Ok((out, next))
    }

    /// Deletes schedule `name`: no tick fires after this returns (invocations started
    /// already run on, and one whose tick was recorded before the deletion starts).
    pub async fn delete_schedule(self: &Arc<Self>, name: &str) -> Result<()> {
        check_name(name)?;
        // A start recorded before the deletion happens (no driver is left to do it).
        self.settled_tail(&mut Context::new(), name).await?;
        self.change_schedule(name, true, |old, _| {
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
        self.schedules.known.lock().await.1.remove(name);
        Ok(())
    }

    /// Pauses (`true`) or resumes schedule `name`. Ticks that come due while it is
    /// paused never fire; a buffered tick still starts.
    pub async fn pause_schedule(self: &Arc<Self>, name: &str, pause: bool) -> Result<Schedule> {
        check_name(name)?;
        let state = self
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
    pub async fn trigger_schedule(self: &Arc<Self>, name: &str) -> Result<(InstanceId, BookId)> {
        check_name(name)?;
        let mut ctx = Context::new();
        for _ in 0..CHANGE_TRIES {
            let state = self.settled_tail(&mut ctx, name).await?;
            let Some(spec) = state.as_ref().and_then(|s| s.spec.clone()) else {
                return Err(Error::ScheduleNotFound(name.to_string()));
            };
            let state = state.expect("defined");
            let n = state.triggered + 1;
            let id = InstanceId::triggered(name, n);
            let new = state.starting(&spec, id.clone(), |s| s.triggered = n);
            if self.record_schedule(&mut ctx, &new, false).await? {
                self.settle(&mut ctx, &new).await?;
                return Ok((id, spec.book));
            }
        }
        Err(Error::Conflict(format!("schedule {name:?} kept changing")))
    }

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
    async fn change_schedule(
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

    /// The names in SCHEDULES, each with its book (`None` once deleted), reading what
    /// is new.
    async fn known_schedules<R>(&self, f: impl FnOnce(&BTreeMap<String, BookId>) -> R) -> Result<R> {
        let mut guard = self.schedules.known.lock().await;
        let (next, known) = &mut *guard;
        let mut ctx = Context::new();
        while let Some(r) = self.core.log.read_next(&mut ctx, PLATFORM_BOOK, SCHEDULES, SeqNum(*next)).await? {
            *next = r.seqnum.0 + 1;
            match record::decode::<State>("schedule", &r.data) {
                // A deleted schedule is forgotten: only live ones are listed and counted.
                Ok(s) => match s.spec {
                    Some(spec) => {
                        known.insert(s.name, spec.book);
                    }
                    None => {
                        known.remove(&s.name);
                    }
                },
                Err(e) => tracing::error!(seqnum = %r.seqnum, "skipping a schedule listing: {e}"),
            }
        }
        Ok(f(known))
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
        self.schedules.driving.lock().expect("not poisoned").contains(name)
    }

    /// Starts a driver for schedule `name` if this node owns its book and drives it
    /// not yet.
    fn drive_if_owned(self: &Arc<Self>, name: &str, book: BookId) {
        if !self.core.peers.owns(book) || !self.schedules.driving.lock().expect("not poisoned").insert(name.to_string()) {
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
            d.schedules.driving.lock().expect("not poisoned").remove(&self.name);
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
            known.iter().filter(|(name, _)| !d.is_driving(name)).map(|(n, b)| (n.clone(), *b)).collect::<Vec<_>>()
        });
        match known.await {
            Ok(undriven) => {
                for (name, book) in undriven {
                    d.drive_if_owned(&name, book);
                }
            }
            Err(e) => tracing::warn!("reading the schedules: {e}"),
        }
        let sleep = d.core.clock.sleep(d.core.config.schedule_poll_ms.max(1));
        drop(d);
        sleep.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(timing: Timing, overlap: Overlap, catch_up: CatchUp) -> ScheduleSpec {
        ScheduleSpec { function: "f".into(), book: BookId(1), input: Bytes::new(), timing, overlap, catch_up }
    }

    fn state(spec: ScheduleSpec, last_tick_ms: u64) -> State {
        State { spec: Some(spec), last_tick_ms, ..State::new("s") }
    }

    #[test]
    fn ticks_are_due_on_the_interval_and_missed_ones_caught_up_by_policy() {
        let every = |c| state(spec(Timing::EveryMs(1_000), Overlap::Skip, c), 10_500);
        // The next tick is the next multiple of the interval.
        assert_eq!(every(CatchUp::Latest).plan(10_999), Plan::Wait(Some(11_000)));
        assert_eq!(every(CatchUp::Latest).plan(11_000), Plan::Due { tick: 11_000, passed: 0 });
        // Five ticks missed (11..15 s): all fire oldest first, or the latest fires.
        assert_eq!(every(CatchUp::All).plan(15_200), Plan::Due { tick: 11_000, passed: 0 });
        assert_eq!(every(CatchUp::Latest).plan(15_200), Plan::Due { tick: 15_000, passed: 4 });
        assert_eq!(every(CatchUp::None).plan(15_200), Plan::Due { tick: 15_000, passed: 4 });
        // The latest due is later than LATE_MS: with `none`, nothing fires.
        let minutely = state(spec(Timing::EveryMs(60_000), Overlap::Skip, CatchUp::None), 10_500);
        assert_eq!(minutely.plan(120_000 + LATE_MS), Plan::Due { tick: 120_000, passed: 1 });
        assert_eq!(minutely.plan(120_001 + LATE_MS), Plan::Pass { upto: 120_000, count: 2 });
        // Paused or deleted: nothing to wait for.
        let mut paused = every(CatchUp::All);
        paused.paused = true;
        assert_eq!(paused.plan(20_000), Plan::Wait(None));
        assert_eq!(State::new("s").plan(20_000), Plan::Wait(None));
    }

    #[test]
    fn cron_ticks_are_counted_when_passed_over() {
        // Every minute; 09:00:30 last, now 09:05:10: 09:01..09:05 are due.
        let t0 = 1_795_683_600_000u64; // 2026-11-26 05:00 UTC, on a minute.
        let s = state(spec(Timing::Cron("* * * * *".into()), Overlap::Skip, CatchUp::Latest), t0 + 30_000);
        assert_eq!(s.plan(t0 + 5 * 60_000 + 10_000), Plan::Due { tick: t0 + 5 * 60_000, passed: 4 });
        let never = state(spec(Timing::Cron("0 0 30 2 *".into()), Overlap::Skip, CatchUp::Latest), t0);
        assert_eq!(never.plan(t0 + 1), Plan::Wait(None));
    }

    #[test]
    fn definitions_that_cannot_run_are_refused() {
        let ok = spec(Timing::EveryMs(1_000), Overlap::Skip, CatchUp::Latest);
        assert!(ok.check().is_ok());
        for (bad, says) in [
            (ScheduleSpec { timing: Timing::EveryMs(99), ..ok.clone() }, "every_ms is 99"),
            (ScheduleSpec { timing: Timing::Cron("* *".into()), ..ok.clone() }, "2 fields"),
            (ScheduleSpec { function: String::new(), ..ok.clone() }, "names a function"),
            (ScheduleSpec { book: BookId(BookId::RESERVED_BIT | 1), ..ok.clone() }, "reserved"),
            (ScheduleSpec { input: vec![0; SCHEDULE_INPUT_MAX + 1].into(), ..ok.clone() }, "larger than"),
            (ScheduleSpec { function: "f".repeat(65), ..ok.clone() }, "1 to 64 bytes"),
            (ScheduleSpec { timing: Timing::Cron(format!("* * * * *{}", " ".repeat(300))), ..ok.clone() }, "at most 256"),
        ] {
            let e = bad.check().unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        for name in ["", "a/b", "a b", "é", &"n".repeat(SCHEDULE_NAME_MAX + 1)] {
            assert!(check_name(name).is_err(), "{name:?}");
        }
        assert!(check_name("nightly-report_v2.1").is_ok());
    }
}
