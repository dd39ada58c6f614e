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

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use futures_util::lock::Mutex as AsyncMutex;
use serde::{Deserialize, Serialize};
use tally_log_core::{BookId, Context, SeqNum};

use crate::cron::Cron;
use crate::error::{Error, Result};
use crate::id::InstanceId;
use crate::record;
use crate::tags::{PLATFORM_BOOK, SCHEDULES, SCHEDULES_COMPACTED};

mod driver;
mod listing;

pub(crate) use driver::schedule_loop;

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
        crate::abort::check_book(self.book)?;
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

    /// The first tick strictly after `after_ms`, if any. A record read back may hold
    /// what `check` refuses: an interval of 0 names no tick.
    fn next_after(&self, after_ms: u64) -> Option<u64> {
        match &self.timing {
            Timing::EveryMs(p) => after_ms.checked_div(*p)?.checked_add(1)?.checked_mul(*p),
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
            Timing::Cron(expr) => {
                // Parsed once: a catch-up may pass over `PASS_MAX` ticks.
                let Ok(cron) = Cron::parse(expr) else { return (first, 1) };
                let (mut latest, mut count) = (first, 1);
                while count < PASS_MAX {
                    match cron.next_after(latest) {
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
pub(crate) struct State {
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
pub(crate) enum Plan {
    /// Nothing due: look again at this wall-clock time (`None`: no tick to wait for).
    Wait(Option<u64>),
    /// Tick `tick` is due; `passed` earlier ones are passed over by the catch-up policy.
    Due { tick: u64, passed: u64 },
    /// `count` ticks up to `upto` are passed over and none fires (`CatchUp::None`).
    Pass { upto: u64, count: u64 },
}

impl State {
    /// The state a record of schedule `name`'s stream holds.
    pub(crate) fn of_stream(name: &str, data: &[u8]) -> Result<State> {
        let state: State = record::decode("schedule", data)?;
        if state.name != name {
            return Err(Error::Internal(format!("the stream of schedule {name:?} holds schedule {:?}", state.name)));
        }
        Ok(state)
    }

    pub(crate) fn new(name: &str) -> State {
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

    pub(crate) fn plan(&self, now: u64) -> Plan {
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

    pub(crate) fn view(&self) -> Option<Schedule> {
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

/// States of a schedule `name` as its stream holds them, for the fuzz targets
/// (`tally-fuzz`): one of each timing and policy, fresh, ticking, paused, deleted.
#[cfg(feature = "fuzzing")]
pub(crate) fn sample_states(name: &str) -> Vec<State> {
    let spec = |timing, overlap, catch_up| ScheduleSpec {
        function: "f".into(),
        book: BookId(7),
        input: Bytes::from_static(b"in"),
        timing,
        overlap,
        catch_up,
    };
    let id = InstanceId::scheduled(name, 60_000);
    let ticking = State {
        offset: 3,
        revision: 1,
        spec: Some(spec(Timing::EveryMs(60_000), Overlap::BufferOne, CatchUp::All)),
        last_tick_ms: 1_795_683_600_000,
        last: Some((BookId(7), id.clone())),
        pending: Some(1_795_683_660_000),
        starting: Some(Start { id, function: "f".into(), book: BookId(7), input: Bytes::from_static(b"in") }),
        fired: 2,
        skipped: 1,
        triggered: 1,
        last_error: Some("no function f".into()),
        ..State::new(name)
    };
    let cron = State {
        spec: Some(spec(Timing::Cron("*/5 9-17 * * mon-fri".into()), Overlap::Skip, CatchUp::Latest)),
        ..State::new(name)
    };
    let leap = State {
        spec: Some(spec(Timing::Cron("0 0 29 2 *".into()), Overlap::AllowAll, CatchUp::None)),
        last_tick_ms: u64::MAX - 1,
        ..State::new(name)
    };
    let paused = State { paused: true, ..ticking.clone() };
    let deleted = State { spec: None, revision: 2, ..ticking.clone() };
    vec![State::new(name), ticking, cron, leap, paused, deleted]
}

/// What this node knows of the cluster's schedules.
#[derive(Default)]
pub(crate) struct Drivers {
    /// The SCHEDULES stream as read so far (`listing.rs`).
    known: AsyncMutex<Listing>,
    /// Names this node drives.
    driving: Mutex<BTreeSet<String>>,
}

/// The SCHEDULES stream as this node read it.
#[derive(Default)]
struct Listing {
    /// The next seqnum to read.
    next: u64,
    /// The live schedules: each name's book, and the seqnum of its latest listing.
    live: BTreeMap<String, (BookId, u64)>,
    /// The seqnums of the listings read at or above the last compaction seen: past
    /// `2 * live + COMPACT_SLACK` of them, the listing is compacted.
    read: VecDeque<u64>,
    /// The last compaction applied: SCHEDULES was trimmed below it.
    compacted: u64,
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

    /// Found by the `schedule_state` fuzz target: a record whose interval is 0 (no node
    /// writes one, `ScheduleSpec::check` refuses it; a corrupt or foreign record) made
    /// the driver divide by zero. It plans no tick now.
    #[test]
    fn a_record_of_no_interval_plans_no_tick() {
        let found = "0107000000000000006e696768746c7900000000000000000000000000000001010000000000000000000000000000000000\
                     00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000";
        let bytes: Vec<u8> = (0..found.len()).step_by(2).map(|i| u8::from_str_radix(&found[i..i + 2], 16).unwrap()).collect();
        let state = State::of_stream("nightly", &bytes).unwrap();
        assert_eq!(state.spec.as_ref().map(|s| &s.timing), Some(&Timing::EveryMs(0)));
        assert_eq!(state.plan(u64::MAX), Plan::Wait(None));
        assert_eq!(state.view().unwrap().next_tick_ms, None);
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
