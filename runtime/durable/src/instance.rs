//! One instance of an exactly-once invocation: its step log, `cursorTS`, and the
//! protocols' reads and writes (Halfmoon Figures 5 and 7, Boki Figure 6).
//!
//! Invariants, for every instance ID:
//! - The step log is a sequence of records, each only ever appended by a conditional
//!   append at the next offset of `step(id)`, so peer instances of one invocation (a
//!   retry racing a re-execution, two nodes) agree on every step: the loser of a race
//!   adopts the winner's record, values included. A record holds one step, or a
//!   [`Step::Group`] of consecutive ones: read-optimized writes taken since the last
//!   record (pending: nothing outside the instance sees them before that record, and
//!   every other operation logs them first) and the step that logs them. A pending
//!   step that a peer's record does not hold exactly, at its place, stops the
//!   execution, since its guest went on from it.
//! - A re-execution takes every step it reaches from the log instead of doing it again;
//!   a recorded step that is not the operation asked for now (another kind, table, key,
//!   callee or input) is non-determinism and ends the attempt with a clear error.
//! - An invocation runs the version of its function that started it: the Init record
//!   names it, and every later execution adopts it.
//! - `cursor` only moves forward: it is the seqnum of the last step taken, and every
//!   log-free operation is parameterised by it, so it returns or does the same thing in
//!   every execution.
//! - Read-optimized: a version is written to the store before the write-log record
//!   that makes it visible, so a reader always finds the version it is pointed at.
//! - A log-free read that finds nothing is only believed while the invocation's root is
//!   unfinished: garbage collection trims write logs below the oldest unfinished root,
//!   so a late peer of a finished root could otherwise read trimmed history as "never
//!   written" and act on it.
//! - What the guest read of its clocks is logged before every operation that could
//!   depend on it, except log-free reads (`recorder.rs`): a `Clocks` step before the
//!   operation's own step, or before its log-free write.
//! - The guest's appends to its user book carry one of the instance's marks, so every
//!   execution finds the records earlier ones appended instead of appending them again.
//!   A plain append is a conditional append at the next offset of the first mark (the
//!   `j`-th at offset `j`) and needs no step: it cannot fail at its offset, so every
//!   execution counts the same. A conditional append (its condition is the guest's)
//!   carries the second mark and logs what it got as a step before the guest sees it; a
//!   record holding its offset that carries that mark past the instance's last
//!   conditional append is its own, from an execution that stopped before logging it.
//!   (One mark for both would let such a record, had it been trimmed, take a plain
//!   append's offset.) Garbage collection retires the marks with the step log, which
//!   keeps their offsets, so a late peer's plain append stops; a conditional one checks
//!   first that the root is unfinished.
//! - Reads of the guest's book are recorded like clock readings (`read_log`), so the
//!   offsets a guest computes from them are the same in every execution.
//! - A durable sleep is a step (`Sleep`, its wake time from a recorded clock reading),
//!   logged before the guest waits, so every execution wakes at the same time; one that
//!   reaches it before then waits in place if the wake is near, and otherwise ends its
//!   attempt (`Abort::Suspended`) to run again then.
//! - Known gaps of conditional appends: (1) one at an offset ahead of its stream's end
//!   conflicts with no holder, and a peer or re-execution that tries it while the first
//!   execution logs that conflict, once the stream reached the offset, appends: the
//!   record stays, the invocation sees the conflict (one record cannot carry the
//!   guest's condition and the step's). Offsets at or below the end are held for ever,
//!   so every execution gets the same outcome. (2) A record that an execution appended
//!   and that was trimmed before the re-execution looked (a book trimmed past its end)
//!   cannot be told from another's: the invocation sees a conflict, the offset stays
//!   taken by a record nobody can read.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tally_log_core::{BookId, Cond, Context, Error as LogError, LogRecord, SeqNum, Tag, UNCHANGED_MAX};

use crate::config::Protocol;
use crate::error::Error;
use crate::locks::{self, LockView};
use crate::node::{fresher_value, visible_write, written_value, Abort, Durable, LastOp, Ops};
use crate::objects::{self, ObjOp, Txn};
use crate::queues;
use crate::record::{
    self, input_sha256, Awaited, CondOutcome, InvocationKey, LockId, Outcome, ReadRecord, Reading, Step, Transition,
};
use crate::recorder::{GuestClock, Recorder};
use crate::store::{LatestPut, Version, VersionPut};
use crate::tags::{shadow, APPENDED, INSTANCES};
use crate::InstanceId;

/// How often an await waiting in place looks whether its promise was completed.
const PROMISE_POLL_MS: u64 = 5;
/// A wait in place must end this long before the attempt's deadline, so that the
/// guest has time left for what follows it; a wait that would not suspends instead.
const IN_PLACE_MARGIN_MS: u64 = 100;
/// How long a keyed invocation whose key stayed held for its whole time suspends
/// before it tries again.
pub const KEY_RETRY_MS: u64 = 50;
/// How often a running instance looks in the log for its root's cancellation (at its
/// steps; an instance younger than this does not look, except before it waits).
const CANCEL_CHECK_MS: u64 = 50;

/// The longest durable sleep a guest may ask for: a year. (A sleeping invocation holds
/// back garbage collection of its book, as any unfinished one does.)
pub const SLEEP_MAX_MS: u64 = 365 * 24 * 3600 * 1000;

/// When a durable sleep ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// This many milliseconds after the guest's wall clock now.
    After(u64),
    /// At this wall-clock time, in milliseconds since the Unix epoch.
    At(u64),
}

/// The protocol an instance uses for one table, decided at its first use of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effective {
    ReadOptimized,
    WriteOptimized,
    Symmetric,
    Unsafe,
    /// During a switch between read- and write-optimized (Halfmoon §4.7, §5.2): reads
    /// look at both stores and are logged, writes go to both.
    Transitional,
}

/// Aborts an instance after a number of effects, as if its process died there.
#[derive(Debug)]
pub struct CrashAfter(AtomicU64);

impl CrashAfter {
    pub fn new(effects: u64) -> Arc<CrashAfter> {
        Arc::new(CrashAfter(AtomicU64::new(effects)))
    }

    /// Counts one effect; true when this one is the last before the crash.
    fn hit(&self) -> bool {
        self.0.try_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok_and(|before| before == 1)
    }
}

/// The largest input whose Init may be deferred (`Instance::begin`): it is one of the
/// pending steps, of which a record holds `PENDING_MAX` (the assertions below).
const DEFER_INPUT_MAX: usize = record::PUT_INLINE_MAX;

/// Steps (read-optimized writes, and the clock readings before a result) an instance
/// takes before it logs them (see `Instance::put`).
const PENDING_MAX: usize = 32;
/// The bytes of values and readings it holds at most before it logs them.
const PENDING_BYTES_MAX: usize = 1 << 20;
/// The largest readings it takes with the result rather than logging them at once, and
/// the most bytes of pending readings: a group stays well inside a record.
const PENDING_READINGS_MAX: usize = 64 << 10;
const PENDING_READINGS_TOTAL_MAX: usize = 256 << 10;
// A group's tags: the step log's, one per write, and a result's INSTANCES and APPENDED.
const _: () = assert!(PENDING_MAX + 3 <= crate::env::TAGS_MAX);
// The pending steps' part of a record: writes that carry their values (a table name is
// at most 64 bytes; 64 more for framing) and readings, inside a record.
const _: () =
    assert!(PENDING_MAX * (record::PUT_INLINE_MAX + crate::KEY_MAX + 128) + PENDING_READINGS_TOTAL_MAX <= crate::PAYLOAD_MAX);

/// A decoded step, and the seqnum of the record that holds it (several steps of a
/// [`Step::Group`] share one).
#[derive(Clone, Debug)]
struct Recorded {
    seqnum: u64,
    step: Step,
}

/// A step taken and not logged yet: a read-optimized write, or the clock readings
/// before the result.
struct Pending {
    step: Step,
    /// What a write stores; `None` for readings.
    write: Option<PendingWrite>,
    /// What the step adds to its record, about.
    record_bytes: usize,
}

/// A pending write's object write log, and the value to store as its version before the
/// record that makes it visible.
struct PendingWrite {
    object: Tag,
    st: String,
    key: Bytes,
    value: Option<Bytes>,
    stored: bool,
}

impl Pending {
    /// The bytes the instance holds for it: a write's value, or the readings.
    fn held_bytes(&self) -> usize {
        match &self.write {
            Some(w) => w.value.as_ref().map_or(0, |v| v.len()),
            None => self.record_bytes,
        }
    }
}

impl PendingWrite {
    fn same_object(&self, other: &PendingWrite) -> bool {
        self.st == other.st && self.key == other.key
    }
}

/// What an instance is of: the invocation it executes.
pub struct Of {
    pub id: InstanceId,
    pub book: BookId,
    pub function: String,
    /// The version to start a fresh invocation on; an invocation with history runs the
    /// version its Init record names.
    pub version: u64,
    /// `None` for a re-execution that takes the input from the Init record.
    pub input: Option<Bytes>,
    /// The protocols the version declares, per table.
    pub declared: Arc<BTreeMap<String, Protocol>>,
    pub crash: Option<Arc<CrashAfter>>,
    /// The key a fresh invocation is addressed to (`?key=`); one with history has the
    /// key its Init record names.
    pub key: Option<InvocationKey>,
    /// A root started lazily may defer its Init to its first record (`Instance::begin`).
    pub defer_init: bool,
    /// Nothing can ask for this invocation again (a synchronous root from outside with
    /// no key: no retry names it, its caller waits for the answer): one that only read
    /// while its Init was deferred logs nothing (`Instance::finish`).
    pub forgettable: bool,
}

/// What `init` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Started {
    /// This instance appended the Init record.
    Fresh,
    /// An earlier execution or a peer started the invocation, on `version`.
    Running { version: u64 },
    /// The invocation has a logged result.
    Finished(Outcome),
}

pub struct Instance {
    svc: Arc<Durable>,
    pub id: InstanceId,
    pub book: BookId,
    function: String,
    version: u64,
    input: Option<Bytes>,
    step_tag: Tag,
    /// The step log as far as this instance knows it, one entry per step.
    steps: Vec<Recorded>,
    /// Records in the step log as far as this instance knows it: the stream offset of
    /// its next one (a group holds several steps).
    records: u64,
    /// Read-optimized writes (and the clock readings before the result) taken since the
    /// last logged step, steps `next - pending.len()` to `next - 1`: the next record
    /// logs them (`put`).
    pending: Vec<Pending>,
    /// Write-optimized writes taken since the last store of them: stored together (one
    /// synced batch) before anything else the instance does could reveal them
    /// (`store_latest`).
    latest: Vec<LatestPut>,
    /// The next step number.
    next: usize,
    /// `cursorTS`; 0 until `init`.
    cursor: u64,
    init_cursor: u64,
    /// Consecutive log-free writes at this cursor (write-optimized versions).
    counter: u32,
    protocols: BTreeMap<String, Effective>,
    declared: Arc<BTreeMap<String, Protocol>>,
    crash: Option<Arc<CrashAfter>>,
    /// The guest's clocks and random bytes.
    recorder: Recorder,
    /// The tag every plain append of the guest to its user book carries besides its own,
    /// and the one its conditional appends carry: derived at the first append (two
    /// SHA-256s that most invocations never need).
    marks: std::sync::OnceLock<[Tag; 2]>,
    /// Plain appends so far: the mark's next offset.
    appends: u64,
    /// The seqnum of the last successful conditional append (0 before the first).
    last_cond_append: u64,
    /// Whether the mark may hold records, so that garbage collection retires it.
    marked: bool,
    /// Promises created so far: the next one's number.
    promises: u64,
    /// The instance saw its root's cancellation (a Cancelled step).
    cancelled: bool,
    /// When it last looked for a cancellation in the log (the core's clock); `None`:
    /// look at the next step.
    cancel_checked_ms: Option<u64>,
    /// The transaction on durable objects in progress (`objects.rs`).
    txn: Option<Txn>,
    /// The seqnum of the last transaction's commit record (for the simulator's oracle).
    pub last_commit: u64,
    /// The locks this instance holds, as its steps so far say (`locks.rs`).
    held: std::collections::BTreeSet<LockId>,
    /// The key the invocation is addressed to (`?key=`), from its Init record.
    key: Option<InvocationKey>,
    /// Whether `begin` may defer the Init (`Of::defer_init`).
    may_defer: bool,
    /// While the Init is deferred (the first pending step): the conditions of its
    /// record besides the step log's offset 0, one per table used so far (its
    /// transition log holds as many records as when the instance looked).
    deferred: Option<Vec<Cond>>,
    /// The tables of `deferred`'s conditions, in order.
    deferred_tables: Vec<String>,
    /// `Of::forgettable`.
    forgettable: bool,
    /// The last state operation on each switchable table used so far, for `auto`'s
    /// costs (`observe`).
    last_ops: BTreeMap<String, LastOp>,
}

impl Instance {
    pub fn new(svc: Arc<Durable>, of: Of) -> Instance {
        let step_tag = svc.tags.step(&of.id);
        Instance {
            marks: std::sync::OnceLock::new(),
            step_tag,
            id: of.id,
            book: of.book,
            function: of.function,
            version: of.version,
            input: of.input,
            steps: Vec::new(),
            records: 0,
            pending: Vec::new(),
            latest: Vec::new(),
            next: 0,
            cursor: 0,
            init_cursor: 0,
            counter: 0,
            protocols: BTreeMap::new(),
            declared: of.declared,
            crash: of.crash,
            recorder: Recorder::default(),
            appends: 0,
            last_cond_append: 0,
            marked: false,
            promises: 0,
            cancelled: false,
            cancel_checked_ms: Some(svc.clock.now_ms()),
            txn: None,
            last_commit: 0,
            held: Default::default(),
            key: of.key,
            may_defer: of.defer_init,
            deferred: None,
            deferred_tables: Vec::new(),
            forgettable: of.forgettable,
            last_ops: BTreeMap::new(),
            svc,
        }
    }

    /// What the guest reads from `clock`, when the clock itself says `live` (in
    /// nanoseconds): the reading recorded for this point of the invocation, if an
    /// earlier execution got here, otherwise `live`, to be logged before the next effect.
    pub fn read_clock(&mut self, clock: GuestClock, live: u64) -> u64 {
        self.recorder.read(clock, live)
    }

    /// The mark of the guest's plain appends to its user book.
    fn mark(&self) -> Tag {
        self.marks()[0]
    }

    /// The mark of its conditional appends.
    fn cond_mark(&self) -> Tag {
        self.marks()[1]
    }

    fn marks(&self) -> [Tag; 2] {
        *self.marks.get_or_init(|| self.svc.tags.marks(self.step_tag))
    }

    /// The next bytes of the invocation's random stream: the same in every execution.
    pub fn random(&mut self, out: &mut [u8]) {
        let (tags, book, id) = (&self.svc.tags, self.book, &self.id);
        self.recorder.random(|| tags.random_seed(book, id), out);
    }

    /// The invocation's `wasi:random/insecure-seed`.
    pub fn insecure_seed(&self) -> (u64, u64) {
        Recorder::insecure_seed(self.svc.tags.random_seed(self.book, &self.id))
    }

    /// Tells the recorder where the execution stands in the step log.
    fn follow(&mut self) {
        self.recorder.follow(self.next, self.steps.get(self.next).map(|r| &r.step));
    }

    /// Logs the clock readings the guest took since the last step, before an operation
    /// that may depend on them; in replay, moves past the recorded readings instead.
    async fn log_clocks(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        let readings = self.recorder.take_fresh();
        if readings.is_empty() {
            match self.steps.get(self.next) {
                Some(r @ Recorded { step: Step::Clocks { .. }, .. }) if self.recorder.read_at_step() => {
                    let seqnum = r.seqnum;
                    self.take(seqnum);
                }
                _ => {}
            }
            return Ok(());
        }
        self.log_readings(ctx, readings).await
    }

    /// Logs live readings here, or compares them with a record that a peer put here
    /// since (`log_step` takes a recorded step as it is).
    async fn log_readings(&mut self, ctx: &mut Context, readings: Vec<Reading>) -> Result<(), Abort> {
        let logged = self.log_step(ctx, Step::Clocks { readings: readings.clone() }, &[]).await?;
        match logged.step {
            Step::Clocks { readings: theirs } if theirs == readings => Ok(()),
            // A peer logged its own readings here first: what this execution read is not
            // the invocation's, so it stops before acting on it and runs again.
            _ => Err(Abort::Superseded),
        }
    }

    pub(crate) fn svc(&self) -> &Arc<Durable> {
        &self.svc
    }

    /// Whether the invocation started: its Init is logged, or deferred.
    pub fn initialized(&self) -> bool {
        self.cursor != 0 || self.deferred.is_some()
    }

    /// Whether the Init is deferred, not logged yet.
    pub fn init_deferred(&self) -> bool {
        self.deferred.is_some()
    }

    /// `cursorTS`: the seqnum of the newest step taken (for the simulator's oracle).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The version this instance runs (the recorded one, once initialised).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The invocation's input (the recorded one, for a re-execution, once initialised).
    pub fn input(&self) -> Option<&Bytes> {
        self.input.as_ref()
    }

    /// Uses the table declarations of the version the Init record named.
    pub fn set_declared(&mut self, declared: Arc<BTreeMap<String, Protocol>>) {
        self.declared = declared;
    }

    pub fn crash(&self) -> Option<Arc<CrashAfter>> {
        self.crash.clone()
    }

    fn shadow(&self) -> BookId {
        shadow(self.book)
    }

    /// Counts an effect against the crash hook.
    fn effect(&self) -> Result<(), Abort> {
        match &self.crash {
            Some(c) if c.hit() => Err(Abort::Crash),
            _ => Ok(()),
        }
    }

    /// Appends the init record, or recovers the step log of an earlier execution.
    pub async fn init(&mut self, ctx: &mut Context) -> Result<Started, Abort> {
        if self.deferred.is_some() {
            // Whatever asks for the Init now needs it logged (and at the cursor).
            self.flush(ctx).await?;
        }
        if self.initialized() {
            return Ok(Started::Running { version: self.version });
        }
        let mut fresh = false;
        if let Some(input) = &self.input {
            if input.len() > crate::PAYLOAD_MAX {
                return Err(Abort::Refused(Error::TooLarge {
                    what: "the input of an exactly-once invocation",
                    size: Some(input.len() as u64),
                    limit: crate::PAYLOAD_MAX as u64,
                }));
            }
            self.svc.register_book(self.book).await?;
            let (id, function, version, input) = (self.id.clone(), self.function.clone(), self.version, input.clone());
            let init = match self.key.clone() {
                None => Step::Init { id, function, version, input },
                Some(key) => Step::InitKeyed { id, function, version, input, key },
            };
            let tags = [self.step_tag, INSTANCES];
            let appended = self.svc.log.cond_append(ctx, self.shadow(), &tags, record::encode(&init), self.step_tag, 0).await;
            match appended {
                Ok(s) => {
                    self.steps.push(Recorded { seqnum: s.0, step: init });
                    self.records = 1;
                    fresh = true;
                    self.effect()?;
                }
                Err(LogError::Conflict { .. }) => self.load_steps(ctx, 0).await?,
                Err(e) => return Err(e.into()),
            }
        } else {
            self.load_steps(ctx, 0).await?;
        }
        // Offset 0 is taken, yet nothing is left: garbage collection took the step log
        // of an invocation that finished longer ago than `results_kept_ms`.
        let Some(first) = self.steps.first() else {
            return Err(Abort::Ended(Error::Conflict(format!(
                "invocation {} finished and its result is no longer kept; use a new idempotency key",
                self.id
            ))));
        };
        match &first.step {
            Step::Init { id, function, version, input } | Step::InitKeyed { id, function, version, input, .. }
                if *id == self.id =>
            {
                let key = match &first.step {
                    Step::InitKeyed { key, .. } => Some(key.clone()),
                    _ => None,
                };
                // Only a client reusing an idempotency key for another request gets here.
                let other_key = self.input.is_some() && self.key.is_some() && self.key != key;
                if *function != self.function || self.input.as_ref().is_some_and(|i| i != input) || other_key {
                    return Err(Abort::Ended(Error::Conflict(format!(
                        "invocation {} was started with another function or input; an idempotency key names one request",
                        self.id
                    ))));
                }
                self.version = *version;
                self.input = Some(input.clone());
                self.key = key;
            }
            Step::Refused { id, function, outcome } if *id == self.id => {
                if *function != self.function {
                    return Err(Abort::Ended(Error::Conflict(format!(
                        "invocation {} was started with another function",
                        self.id
                    ))));
                }
                let outcome = outcome.clone();
                self.cursor = first.seqnum;
                self.init_cursor = first.seqnum;
                self.next = 1;
                return Ok(Started::Finished(outcome));
            }
            other => return Err(Abort::internal(format!("the step log of {} starts with {other:?}", self.id))),
        }
        self.cursor = first.seqnum;
        self.init_cursor = first.seqnum;
        self.next = 1;
        self.follow();
        let result = self.steps.iter().find_map(|r| match &r.step {
            Step::Result { outcome } => Some(outcome.clone()),
            _ => None,
        });
        Ok(match result {
            Some(outcome) => Started::Finished(outcome),
            None if fresh => Started::Fresh,
            None => {
                // Run again (after a crash, a wake, a cancellation): look at once.
                self.cancel_checked_ms = None;
                Started::Running { version: self.version }
            }
        })
    }

    /// Starts the invocation for a read-optimized operation: a root started lazily
    /// defers its Init to the step log's first record, which then holds the Init, the
    /// reads taken before it (values and all, so that every execution reads the same)
    /// and the steps up to the next logged one, often the result: one append for an
    /// invocation that logged two. Conditional on the transition log of every table it
    /// used (`Log::cond_append_if`): no switch began since it looked, so its protocols
    /// are those of its Init's place, as every reader takes them. Anything else, and a
    /// failed condition (`Superseded`: it runs again with its Init first), logs the Init
    /// as before.
    pub(crate) async fn begin(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        if self.initialized() {
            return Ok(());
        }
        let input = self.input.clone().filter(|i| i.len() <= DEFER_INPUT_MAX);
        let (true, None, true, Some(input)) = (self.may_defer, &self.key, self.steps.is_empty(), input) else {
            return self.init_checked(ctx).await;
        };
        self.svc.register_book(self.book).await?;
        // Reads from here on see what finished before this invocation began.
        if let Some(fresh) = &self.svc.fresh_from {
            ctx.merge(fresh);
        }
        let init = Step::Init { id: self.id.clone(), function: self.function.clone(), version: self.version, input };
        self.deferred = Some(Vec::new());
        self.pending.push(Pending { record_bytes: record::encoded_len(&init), step: init, write: None });
        self.next = 1;
        self.follow();
        Ok(())
    }

    /// The deferred Init is logged (or a peer's identical one taken): the instance runs
    /// on from it as if it had logged it first.
    fn settle_init(&mut self) {
        if self.deferred.is_some() && !self.steps.is_empty() {
            self.deferred = None;
            self.init_cursor = self.steps[0].seqnum;
        }
    }

    /// After a trap: logs the deferred Init alone, so that the invocation is retried as
    /// its policy says; the attempt's other pending steps are lost, as a crash loses them.
    pub async fn log_init_alone(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        if self.deferred.is_none() {
            return Ok(());
        }
        self.pending.truncate(1);
        self.next = 1;
        self.recorder.discard_fresh();
        self.follow();
        self.flush(ctx).await
    }

    /// Logs `outcome` as the whole history of a child refused before it ran, or finds
    /// what a peer logged first: that refusal, or the start of a real run.
    pub async fn refuse(&mut self, ctx: &mut Context, outcome: Outcome) -> Result<Started, Abort> {
        let refused = Step::Refused { id: self.id.clone(), function: self.function.clone(), outcome: outcome.clone() };
        let tags = [self.step_tag, INSTANCES];
        match self.svc.log.cond_append(ctx, self.shadow(), &tags, record::encode(&refused), self.step_tag, 0).await {
            Ok(_) => Ok(Started::Finished(outcome)),
            Err(LogError::Conflict { .. }) => {
                self.input = None;
                self.init(ctx).await
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Reads the step log from seqnum `from` on into `steps`.
    async fn load_steps(&mut self, ctx: &mut Context, from: u64) -> Result<(), Abort> {
        let mut at = from;
        let known = self.steps.last().map(|r| r.seqnum);
        while let Some(r) = self.svc.log.read_next(ctx, self.shadow(), self.step_tag, SeqNum(at)).await? {
            at = r.seqnum.0.saturating_add(1);
            if known.is_some_and(|k| r.seqnum.0 <= k) {
                continue;
            }
            self.records += 1;
            for step in record::decode_steps("step", &r.data)?.into_steps() {
                self.steps.push(Recorded { seqnum: r.seqnum.0, step });
            }
            if at == u64::MAX {
                break;
            }
        }
        self.follow();
        Ok(())
    }

    /// Moves past a step taken now or recorded earlier.
    fn take(&mut self, seqnum: u64) {
        self.next += 1;
        self.reach(seqnum);
        self.follow();
    }

    /// Moves the cursor to a step's record, if that is newer.
    fn reach(&mut self, seqnum: u64) {
        if seqnum > self.cursor {
            self.cursor = seqnum;
            self.counter = 0;
        }
    }

    /// The recorded step `next`, if the log has it, checked against what is asked now.
    fn recorded(&self, asked: &Step) -> Result<Option<Recorded>, Abort> {
        match self.steps.get(self.next) {
            Some(r) if r.step.same_operation(asked) => Ok(Some(r.clone())),
            Some(r) => Err(Abort::NonDeterministic(format!(
                "step {} of {} was a {} and is now a {}",
                self.next,
                self.id,
                r.step.describe(),
                asked.describe()
            ))),
            None => Ok(None),
        }
    }

    /// Logs `step` as step `next` (with `extra` tags besides the step log's), or takes
    /// what is recorded there: from an earlier execution, or from a peer that won the
    /// race for the position.
    async fn log_step(&mut self, ctx: &mut Context, step: Step, extra: &[Tag]) -> Result<Recorded, Abort> {
        // The gate of steps logged before their effect, or of reads: a conditional
        // append and a call pass it before theirs (see `step_gate`).
        let guest_step = !matches!(
            step,
            Step::Clocks { .. }
                | Step::Result { .. }
                | Step::Cancelled
                | Step::CondAppend { .. }
                | Step::Invoke { .. }
                | Step::LockRelease { .. }
        );
        if guest_step {
            self.step_gate(ctx).await?;
        }
        if let Some(r) = self.recorded(&step)? {
            self.take(r.seqnum);
            return Ok(r);
        }
        match self.append_step(ctx, step, extra).await {
            // A peer saw the cancellation here first (after this execution's effect, for
            // a conditional append or a call: the effect stays, the guest is told of
            // the cancellation).
            Err(Abort::NonDeterministic(_))
                if matches!(self.steps.get(self.next), Some(Recorded { step: Step::Cancelled, .. })) =>
            {
                let seqnum = self.steps[self.next].seqnum;
                self.take(seqnum);
                self.cancelled = true;
                Err(Abort::Refused(Error::Cancelled))
            }
            other => other,
        }
    }

    /// Logs `step` as step `next`, which holds nothing this instance knows of, or takes
    /// what a peer that won the race for the position logged there. The pending writes
    /// go in the same record if `step` may end a group; otherwise in one before it.
    async fn append_step(&mut self, ctx: &mut Context, step: Step, extra: &[Tag]) -> Result<Recorded, Abort> {
        if !self.pending.is_empty() && (!step.ends_group() || self.too_large_with_pending(&step)) {
            self.flush(ctx).await?;
            // A peer's steps that the flush found after the writes come first.
            if let Some(r) = self.recorded(&step)? {
                self.take(r.seqnum);
                return Ok(r);
            }
        }
        Ok(self.log_record(ctx, Some((step, extra))).await?.expect("a step was asked for"))
    }

    /// Whether `step` with the pending writes could pass the largest record a step may
    /// take (a result of `PAYLOAD_MAX` bytes fits alone, with room for framing).
    fn too_large_with_pending(&self, step: &Step) -> bool {
        let pending: usize = self.pending.iter().map(|p| p.record_bytes).sum();
        record::encoded_len(step).saturating_add(pending) > crate::PAYLOAD_MAX
    }

    /// Takes `step` (with what a write stores) to be logged with the next record.
    async fn take_pending(&mut self, ctx: &mut Context, step: Step, write: Option<PendingWrite>) -> Result<(), Abort> {
        let record_bytes = match (&write, &step) {
            (Some(w), Step::Put { value, .. }) => w.st.len() + w.key.len() + value.as_ref().map_or(0, |v| v.len()) + 64,
            (Some(w), _) => w.st.len() + w.key.len() + 64,
            (None, _) => record::encoded_len(&step),
        };
        self.pending.push(Pending { step, write, record_bytes });
        self.next += 1;
        self.follow();
        let held: usize = self.pending.iter().map(Pending::held_bytes).sum();
        if self.pending.len() >= PENDING_MAX || held >= PENDING_BYTES_MAX {
            self.flush(ctx).await?;
        }
        Ok(())
    }

    /// `log_clocks` before the result or a write that carries its value (`Step::Put`):
    /// live readings past the recorded history, if small, are taken to go in the next
    /// record, just before the step, since that record is the first effect that may
    /// depend on them (a peer's other readings there stop this execution then, as they
    /// would now). Never before a `Step::Write`: its version is stored before its
    /// record, under a name that does not depend on its value, so the readings it may
    /// depend on must be logged before that store (a re-execution after a crash between
    /// them would read other values and store them under the same name, where the first
    /// one stays); such a write logs the pending readings first (`put`). A `Put`'s
    /// stored version is never read.
    async fn take_clocks(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        if self.steps.get(self.next).is_some() || !self.recorder.has_fresh() {
            return self.log_clocks(ctx).await;
        }
        let readings = Step::Clocks { readings: self.recorder.take_fresh() };
        if !self.readings_fit(&readings) {
            let Step::Clocks { readings } = readings else { unreachable!("built above") };
            return self.log_readings(ctx, readings).await;
        }
        self.take_pending(ctx, readings, None).await
    }

    /// Whether `step`, a reading (clocks, a logged read), may wait in the pending steps
    /// for the next record: small enough, with the readings already waiting.
    fn readings_fit(&self, step: &Step) -> bool {
        let pending: usize = self.pending.iter().filter(|p| p.write.is_none()).map(|p| p.record_bytes).sum();
        let bytes = record::encoded_len(step);
        bytes <= PENDING_READINGS_MAX && pending + bytes <= PENDING_READINGS_TOTAL_MAX
    }

    /// Logs the pending writes, each stored as its version first, in the step log's next
    /// record: the point from which they are visible, in order, as if logged one by one.
    /// Every operation but a read-optimized write calls this before it acts or reads at
    /// the cursor.
    pub(crate) async fn flush(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        match self.pending.is_empty() {
            true => self.store_latest().await,
            false => self.log_record(ctx, None).await.map(|_| ()),
        }
    }

    /// Stores the write-optimized writes taken since the last store, together: issued
    /// at once, synced, so that the embedded store commits them in one batch (one
    /// fsync where each alone synced its own). Every step before each was logged
    /// before it was taken (`put`), so a re-execution writes the same versions.
    async fn store_latest(&mut self) -> Result<(), Abort> {
        if self.latest.is_empty() {
            return Ok(());
        }
        let writes = std::mem::take(&mut self.latest);
        self.svc.store.put_if_newer_all(&writes).await?;
        self.effect()
    }

    /// Logs the pending writes and `tail` (with its extra tags) as the step log's next
    /// record, a [`Step::Group`] if it holds more than one step, or takes what a peer
    /// logged there: a peer's record that holds a prefix of them leaves the rest for the
    /// next offset. Returns what holds `tail`.
    async fn log_record(&mut self, ctx: &mut Context, tail: Option<(Step, &[Tag])>) -> Result<Option<Recorded>, Abort> {
        loop {
            self.store_latest().await?;
            self.store_pending().await?;
            let init = self.deferred.clone();
            let mut tags = vec![self.step_tag];
            if init.is_some() {
                tags.push(INSTANCES);
            }
            tags.extend(self.pending.iter().filter_map(|p| p.write.as_ref()).map(|w| w.object));
            let mut steps: Vec<Step> = self.pending.iter().map(|p| p.step.clone()).collect();
            if let Some((step, extra)) = &tail {
                tags.extend_from_slice(extra);
                if step.is_library() {
                    tags.push(crate::tags::LIBRARIES);
                }
                steps.push(step.clone());
            }
            tags.sort_unstable();
            tags.dedup();
            let data = match steps.len() {
                1 => record::encode(&steps[0]),
                _ => record::encode(&Step::Group { steps }),
            };
            let position = self.records;
            let appended = match &init {
                Some(unchanged) => {
                    let at = Cond { tag: self.step_tag, position };
                    self.svc.log.cond_append_if(ctx, self.shadow(), &tags, data, at, unchanged).await
                }
                None => self.svc.log.cond_append(ctx, self.shadow(), &tags, data, self.step_tag, position).await,
            };
            match appended {
                Ok(s) => {
                    self.records += 1;
                    for p in std::mem::take(&mut self.pending) {
                        self.steps.push(Recorded { seqnum: s.0, step: p.step });
                    }
                    self.reach(s.0);
                    self.settle_init();
                    let Some((step, _)) = tail else {
                        self.follow();
                        self.effect()?;
                        return Ok(None);
                    };
                    self.steps.push(Recorded { seqnum: s.0, step });
                    self.take(s.0);
                    self.effect()?;
                    return Ok(Some(self.steps[self.next - 1].clone()));
                }
                Err(LogError::Conflict { .. }) if init.is_some() => {
                    self.load_steps(ctx, 0).await?;
                    // Offset 0 is free: a table this instance used switched since it
                    // looked (or the step log of a long finished peer was collected).
                    if self.records == 0 {
                        return Err(Abort::Superseded);
                    }
                    // A peer's, which must begin with exactly these steps.
                    self.take_recorded_pending()?;
                    self.settle_init();
                    if !self.pending.is_empty() {
                        continue;
                    }
                    let Some((step, _)) = &tail else { return Ok(None) };
                    if let Some(r) = self.recorded(step)? {
                        self.take(r.seqnum);
                        return Ok(Some(r));
                    }
                }
                Err(LogError::Conflict { holder: Some(h) }) => {
                    let known = self.records;
                    self.load_steps(ctx, h.0).await?;
                    if self.records == known {
                        return Err(Abort::internal(format!("step record {position} of {} is held but unreadable", self.id)));
                    }
                    self.take_recorded_pending()?;
                    if !self.pending.is_empty() {
                        continue;
                    }
                    let Some((step, _)) = &tail else { return Ok(None) };
                    if let Some(r) = self.recorded(step)? {
                        self.take(r.seqnum);
                        return Ok(Some(r));
                    }
                }
                // The step log was trimmed: the invocation finished long ago.
                Err(LogError::Conflict { holder: None }) => return Err(Abort::Superseded),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Drops the pending steps that the step log now holds (a peer logged them), in
    /// order. A recorded step that is not the pending one at its place, exactly (the
    /// same readings too), means that the guest went on from a step that the
    /// invocation's history does not have (a peer saw a cancellation there, read other
    /// clock values, or the guest is not deterministic): this execution stops, and one
    /// that replays the history runs on.
    fn take_recorded_pending(&mut self) -> Result<(), Abort> {
        let base = self.next - self.pending.len();
        let mut taken = 0;
        while let Some(r) = self.steps.get(base + taken).filter(|_| taken < self.pending.len()) {
            if r.step != self.pending[taken].step {
                return Err(Abort::Superseded);
            }
            let seqnum = r.seqnum;
            self.reach(seqnum);
            taken += 1;
        }
        self.pending.drain(..taken);
        self.follow();
        Ok(())
    }

    /// Stores the version of every pending write not stored yet, together, except
    /// those of objects that a later pending write writes again (no reader sees them,
    /// since a record's last write of an object is the one it makes visible) and the
    /// markers of objects known to have a durable version. Synced: what is stored is a
    /// `Step::Write`'s value or the first marker of an object.
    ///
    /// A marker (a `Step::Put`'s version: its record carries the value) is only how
    /// garbage collection and a switch's migration find the object in the store, for
    /// which one durable version an object is enough. So the object's first write in
    /// this node's life stores one, synced, lest a machine crash lose it while its
    /// record survives, and later writes store none: garbage collection stores the
    /// marker of the version it keeps before deleting any other (`gc.rs`, `delete`), so
    /// an object keeps a version while its write log has a record.
    async fn store_pending(&mut self) -> Result<(), Abort> {
        let store = self.svc.store.clone();
        let pending: Vec<(&Step, &PendingWrite)> =
            self.pending.iter().filter_map(|p| Some((&p.step, p.write.as_ref()?))).collect();
        let mut puts = Vec::new();
        for (i, &(step, w)) in pending.iter().enumerate() {
            let again = pending[i + 1..].iter().any(|(_, later)| later.same_object(w));
            if w.stored || again {
                continue;
            }
            let (Step::Write { version, .. } | Step::Put { version, .. }) = step else {
                unreachable!("a pending write is a write")
            };
            let marker = matches!(step, Step::Put { .. });
            if marker && self.svc.durable_objects.get(&w.st, &w.key).is_some() {
                continue;
            }
            puts.push(VersionPut { table: w.st.clone(), key: w.key.clone(), version: *version, value: w.value.clone(), marker });
        }
        let durable = !puts.is_empty();
        if durable {
            store.put_versions(puts, true).await?;
        }
        for w in self.pending.iter_mut().filter_map(|p| p.write.as_mut()) {
            w.stored = true;
            // A synced write makes every version stored before it durable as well.
            if durable {
                self.svc.durable_objects.insert(&w.st, &w.key, ());
            }
        }
        match durable {
            true => self.effect(),
            false => Ok(()),
        }
    }

    /// Where a guest's step may see its root's cancellation, before the step's effect:
    /// a Cancelled step recorded here (an earlier execution saw it here), or one seen
    /// before (no step after that), fails the host call with `cancelled`; so does a
    /// cancellation found in the log (at most every `CANCEL_CHECK_MS`) past the
    /// recorded history, which is logged here first.
    async fn step_gate(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        if let Some(Recorded { step: Step::Cancelled, seqnum }) = self.steps.get(self.next) {
            let seqnum = *seqnum;
            self.take(seqnum);
            self.cancelled = true;
        }
        if self.cancelled {
            return Err(Abort::Refused(Error::Cancelled));
        }
        if self.steps.get(self.next).is_none() && self.cancel_requested(ctx, false).await? {
            return Err(self.cancel(ctx).await);
        }
        Ok(())
    }

    /// Whether the root has been cancelled, as the log says: looked up at most every
    /// `CANCEL_CHECK_MS`, unless `now`.
    async fn cancel_requested(&mut self, ctx: &mut Context, now: bool) -> Result<bool, Abort> {
        let at = self.svc.clock.now_ms();
        if !now && self.cancel_checked_ms.is_some_and(|t| at < t.saturating_add(CANCEL_CHECK_MS)) {
            return Ok(false);
        }
        self.cancel_checked_ms = Some(at);
        let stream = self.svc.tags.cancel(&self.id.root());
        Ok(self.svc.log.read_next(ctx, self.shadow(), stream, SeqNum(0)).await?.is_some())
    }

    /// Logs that the instance saw its cancellation here (or takes what a peer logged
    /// here) and returns what the guest's host call gets: a `cancelled` error.
    async fn cancel(&mut self, ctx: &mut Context) -> Abort {
        let logged = match self.recorded(&Step::Cancelled) {
            Ok(Some(r)) => {
                self.take(r.seqnum);
                Ok(r)
            }
            Ok(None) => self.append_step(ctx, Step::Cancelled, &[]).await,
            Err(abort) => Err(abort),
        };
        match logged {
            Ok(Recorded { step: Step::Cancelled, .. }) => {
                self.cancelled = true;
                Abort::Refused(Error::Cancelled)
            }
            // A peer logged another step here first: this execution is behind it.
            Ok(r) => Abort::NonDeterministic(format!("step {} of {} is a {}", self.next - 1, self.id, r.step.describe())),
            Err(abort) => abort,
        }
    }

    /// For the first run of an invocation this node has just started (its Init is the
    /// only history): look for a cancellation only after `CANCEL_CHECK_MS`, as a fresh
    /// instance does.
    pub fn look_for_cancellation_later(&mut self) {
        self.cancel_checked_ms = Some(self.svc.clock.now_ms());
    }

    /// Whether the instance saw its cancellation: its outcome is then `Cancelled`.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }

    /// Before the instance waits (a sleep, an await, a delayed start): a cancelled root
    /// does not wait. A re-execution (which a cancellation causes) looks in the log; a
    /// first execution does if it last looked `CANCEL_CHECK_MS` ago or more (one that
    /// sleeps without seeing a cancellation made meanwhile is woken to see it).
    async fn check_cancelled(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        if self.cancelled || self.cancel_requested(ctx, false).await? {
            return Err(self.cancel(ctx).await);
        }
        Ok(())
    }

    /// The protocol of `table` for this instance. A table's protocol is the table's: its
    /// transition log decides (as of the instance's start), whatever a function
    /// declares; a declaration only names the protocol of a table nobody used yet.
    /// Using an `unsafe` table (no guarantee) needs an `unsafe` declaration.
    async fn protocol(&mut self, ctx: &mut Context, table: &str) -> Result<Effective, Abort> {
        if let Some(&p) = self.protocols.get(table) {
            return Ok(p);
        }
        let declared = crate::node::declared_protocol(&self.svc.config, &self.declared, table);
        // An unsafe table stays unsafe (tables switch only between read- and
        // write-optimized), so its first record says all, without an init record.
        let first = self.svc.first_transition(ctx, self.book, table, declared).await?;
        let effective = match first {
            Transition::End { protocol: Protocol::Unsafe, .. } if declared == Protocol::Unsafe => Effective::Unsafe,
            Transition::End { protocol: Protocol::Unsafe, .. } => {
                return Err(Abort::Refused(Error::InvalidArgument(format!(
                    "table {table:?} is unsafe (its operations are not exactly-once); a function uses it only by \
                     declaring it unsafe too"
                ))))
            }
            _ => {
                self.begin(ctx).await?;
                match self.deferred_protocol(ctx, table).await? {
                    Some(effective) => effective,
                    None => match self.transition_at(ctx, table, first).await? {
                        Transition::End { protocol, .. } => effective(protocol),
                        Transition::Begin { .. } => Effective::Transitional,
                    },
                }
            }
        };
        self.protocols.insert(table.to_string(), effective);
        Ok(effective)
    }

    /// While the Init is deferred: the protocol `table` has now (its latest transition)
    /// if that is not a switch under way, and the deferred record then holds only if
    /// that stays so. A read-optimized read then reads at the index's end
    /// (`read_deferred`), a logged one (write-optimized, symmetric) the store's newest
    /// version, as it always does; both wait with the Init, and a write of those
    /// protocols logs it first (it flushes). `None` once the Init is logged (this logs
    /// it for a table being switched).
    async fn deferred_protocol(&mut self, ctx: &mut Context, table: &str) -> Result<Option<Effective>, Abort> {
        let Some(unchanged) = &self.deferred else { return Ok(None) };
        if unchanged.len() < UNCHANGED_MAX {
            let (latest, records) = self.svc.latest_transition(ctx, self.book, table).await?;
            let now = match latest {
                Transition::End { protocol, .. } if protocol != Protocol::Unsafe => Some(effective(protocol)),
                _ => None,
            };
            if let Some(now) = now {
                let unchanged = Cond { tag: self.svc.tags.transition(table), position: records };
                self.deferred.as_mut().expect("checked").push(unchanged);
                self.deferred_tables.push(table.to_string());
                return Ok(Some(now));
            }
        }
        self.flush(ctx).await?;
        Ok(None)
    }

    /// The transition record in effect for `table` at this instance's start; `first`
    /// (the table's first record) if the table began after it.
    async fn transition_at(&self, ctx: &mut Context, table: &str, first: Transition) -> Result<Transition, Abort> {
        let tag = self.svc.tags.transition(table);
        let mut at = self.init_cursor;
        loop {
            let found = self.svc.log.read_prev(ctx, self.shadow(), tag, SeqNum(at)).await?;
            let Some(r) = found else {
                // Nothing at or before the init record: the table began later.
                return Ok(first);
            };
            let t: Transition = record::decode("transition", &r.data)?;
            if t.table() == table {
                return Ok(t);
            }
            match r.seqnum.0.checked_sub(1) {
                Some(prev) => at = prev,
                None => return Ok(first),
            }
        }
    }

    /// `init` for a state operation: an invocation that finished already cannot be
    /// running one, unless this is a late peer, which stops.
    async fn init_checked(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        match self.init(ctx).await? {
            Started::Finished(_) => Err(Abort::Superseded),
            _ => Ok(()),
        }
    }

    /// Stops a late peer: fails with `Superseded` if the invocation's root has a
    /// result, or its step log is gone (collected after its result).
    async fn check_unfinished(&self, ctx: &mut Context) -> Result<(), Abort> {
        let root = self.svc.tags.step(&self.id.root());
        match self.svc.log.read_prev(ctx, self.shadow(), root, SeqNum::MAX).await? {
            None => Err(Abort::Superseded),
            Some(r) => match record::decode_last("step", &r.data)? {
                Step::Result { .. } => Err(Abort::Superseded),
                _ => Ok(()),
            },
        }
    }

    /// Counts a read (`None`) or a write (`Some(large)`: its value is too large for its
    /// record) of `table`, switchable under `protocol`, with what it costs under
    /// read- and write-optimized as it follows this instance's last operation on the
    /// table ([`Ops`]).
    fn observe(&mut self, table: &str, protocol: Effective, write: Option<bool>) {
        if matches!(protocol, Effective::Unsafe | Effective::Symmetric) {
            return;
        }
        let last = self.last_ops.get(table).copied();
        let (ops, now) = Ops::of(last, write, self.deferred.is_some());
        match self.last_ops.get_mut(table) {
            Some(l) => *l = now,
            None => {
                self.last_ops.insert(table.to_string(), now);
            }
        }
        self.svc.observe(self.book, table, ops);
    }

    fn store_table(&self, table: &str) -> String {
        crate::node::store_table(self.book, table)
    }

    pub async fn get(&mut self, ctx: &mut Context, table: &str, key: &[u8]) -> Result<Option<Bytes>, Abort> {
        // Reads taken while the Init is deferred wait with it; pending writes are logged
        // first, so that a read sees them. A logged read (of a table known to be such)
        // waits in the pending steps too: it reads no cursor.
        let logged =
            matches!(self.protocols.get(table), Some(Effective::WriteOptimized | Effective::Symmetric | Effective::Transitional));
        if !logged && (self.deferred.is_none() || self.pending.iter().any(|p| p.write.is_some())) {
            self.flush(ctx).await?;
        }
        crate::node::check_object(table, key, None)?;
        let st = self.store_table(table);
        let protocol = self.protocol(ctx, table).await?;
        self.observe(table, protocol, None);
        if protocol != Effective::ReadOptimized {
            // A read of the store's newest version sees the instance's own writes.
            self.store_latest().await?;
        }
        let store = self.svc.store.clone();
        match protocol {
            Effective::Unsafe => Ok(store.get_latest(&st, key).await?.and_then(|(_, v)| v)),
            Effective::ReadOptimized => {
                if let Some(value) = self.read_deferred(ctx, table, key).await? {
                    return Ok(value);
                }
                let visible = visible_write(&self.svc, ctx, self.book, table, key, self.cursor).await?;
                match visible {
                    Some(w) => Ok(written_value(&*store, &st, table, key, &w.written).await?),
                    None => {
                        self.check_unfinished(ctx).await?;
                        Ok(None)
                    }
                }
            }
            Effective::WriteOptimized | Effective::Symmetric | Effective::Transitional => {
                // A logged read past the recorded history is taken to go in the next
                // record, as clock readings are (`take_clocks`): nothing outside the
                // instance depends on the value before that record, since every
                // operation but a read-optimized write (which goes in the same record,
                // after it) logs the pending steps before it acts. A re-execution after
                // a crash in between reads again; a peer that logged another value here
                // stops this execution when it logs (`take_recorded_pending`).
                let live = self.steps.get(self.next).is_none();
                if live {
                    self.take_clocks(ctx).await?;
                    self.step_gate(ctx).await?;
                } else {
                    self.log_clocks(ctx).await?;
                }
                let asked = Step::Read { table: table.to_string(), key: Bytes::copy_from_slice(key), value: None };
                let value = match self.recorded(&asked)? {
                    Some(_) => None,
                    None if protocol == Effective::Transitional => {
                        fresher_value(&self.svc, ctx, self.book, &st, table, key).await?
                    }
                    None => store.get_latest(&st, key).await?.and_then(|(_, v)| v),
                };
                let step = Step::Read { table: table.to_string(), key: Bytes::copy_from_slice(key), value };
                if live && self.steps.get(self.next).is_none() && self.readings_fit(&step) {
                    let Step::Read { value, .. } = &step else { unreachable!("built above") };
                    let value = value.clone();
                    self.take_pending(ctx, step, None).await?;
                    return Ok(value);
                }
                match self.log_step(ctx, step, &[]).await?.step {
                    Step::Read { value, .. } => Ok(value),
                    _ => unreachable!("log_step checks the kind"),
                }
            }
        }
    }

    /// A read-optimized read taken as a step: one that a re-execution finds recorded
    /// (after the clock readings before it), or, while the Init is deferred, the newest
    /// write at the index's end, taken to go in the Init's record. `None` for a read at
    /// the cursor: past the deferred Init, or for a value stored as its version (the
    /// record would not hold it), after which the Init is logged.
    async fn read_deferred(&mut self, ctx: &mut Context, table: &str, key: &[u8]) -> Result<Option<Option<Bytes>>, Abort> {
        let is_read = |r: Option<&Recorded>| matches!(r, Some(Recorded { step: Step::Read { table: t, key: k, .. }, .. }) if t == table && k == key);
        let clocks_first = matches!(self.steps.get(self.next), Some(Recorded { step: Step::Clocks { .. }, .. }));
        if is_read(self.steps.get(self.next)) || (clocks_first && is_read(self.steps.get(self.next + 1))) {
            self.log_clocks(ctx).await?;
            if let Some(Recorded { step: Step::Read { value, .. }, seqnum }) = self.steps.get(self.next).cloned() {
                self.take(seqnum);
                return Ok(Some(value));
            }
            // Recorded clock readings this execution did not take there.
            return Err(Abort::NonDeterministic(format!("step {} of {} was clock readings", self.next, self.id)));
        }
        if self.deferred.is_none() {
            return Ok(None);
        }
        // The readings before the read go before it, as before any step.
        self.take_clocks(ctx).await?;
        if self.deferred.is_none() {
            return Ok(None);
        }
        let value = match visible_write(&self.svc, ctx, self.book, table, key, u64::MAX).await? {
            None => None,
            Some(w) => match w.written.value {
                Some(value) => value,
                None => {
                    self.flush(ctx).await?;
                    return Ok(None);
                }
            },
        };
        let step = Step::Read { table: table.to_string(), key: Bytes::copy_from_slice(key), value: value.clone() };
        self.take_pending(ctx, step, None).await?;
        Ok(Some(value))
    }

    /// Sets (or, with `None`, deletes) the value of `(table, key)`.
    pub async fn put(&mut self, ctx: &mut Context, table: &str, key: &[u8], value: Option<Bytes>) -> Result<(), Abort> {
        crate::node::check_object(table, key, value.as_deref())?;
        let st = self.store_table(table);
        let store = self.svc.store.clone();
        let protocol = self.protocol(ctx, table).await?;
        // A read-optimized write whose record carries its value stores nothing that a
        // reader looks at before that record, so the readings before it may wait for
        // the record too. One whose version is stored first waits for none.
        let inline = !value.as_ref().is_some_and(|v| v.len() > record::PUT_INLINE_MAX);
        self.observe(table, protocol, Some(!inline));
        let readings_pending = self.pending.iter().any(|p| p.write.is_none());
        match protocol {
            // Its steps before it are logged; the writes taken before it wait with it.
            Effective::WriteOptimized if !self.pending.is_empty() => self.flush(ctx).await?,
            Effective::WriteOptimized => {}
            Effective::ReadOptimized if inline || !readings_pending => {}
            _ => self.flush(ctx).await?,
        }
        match protocol {
            Effective::Unsafe => {}
            Effective::ReadOptimized if inline => self.take_clocks(ctx).await?,
            _ => self.log_clocks(ctx).await?,
        }
        match protocol {
            Effective::Unsafe => {
                store.put_latest(&st, key, value).await?;
                self.effect()
            }
            Effective::ReadOptimized => {
                // The version comes from the instance ID and the step (Halfmoon §4.1), the
                // same in every execution. The write is taken now and logged with the
                // next record of the step log (`flush`), its version stored just before:
                // nothing outside the instance can see it before that, and everything
                // the instance does next that could reveal it flushes first. A crash
                // before then loses the write as one before its record always did.
                // A small value goes in the record itself (`Step::Put`): readers take it
                // from there, and its version is stored without a sync.
                self.step_gate(ctx).await?;
                let version = version_of(&self.id, self.next, inline);
                let key_bytes = Bytes::copy_from_slice(key);
                let (t, k) = (table.to_string(), key_bytes.clone());
                let write = match inline {
                    true => Step::Put { table: t, key: k, version, value: value.clone() },
                    false => Step::Write { table: t, key: k, version, migrated_from: None },
                };
                if let Some(r) = self.recorded(&write)? {
                    self.take(r.seqnum);
                    return Ok(());
                }
                let object = self.svc.tags.object(table, key);
                let taken = PendingWrite { object, st, key: key_bytes, value, stored: false };
                self.take_pending(ctx, write, Some(taken)).await
            }
            Effective::Transitional => {
                let step = self.next;
                let version = version_of(&self.id, step, false);
                let key_bytes = Bytes::copy_from_slice(key);
                let write = Step::Write { table: table.to_string(), key: key_bytes, version, migrated_from: None };
                if self.recorded(&write)?.is_none() {
                    store.put_version(&st, key, version, value.clone()).await?;
                    self.effect()?;
                }
                let object = self.svc.tags.object(table, key);
                let logged = self.log_step(ctx, write, &[object]).await?.seqnum;
                if protocol == Effective::Transitional {
                    // Visible to write-optimized readers too, ordered by the write log.
                    store.put_if_newer(&st, key, Version { cursor: logged, counter: 0 }, value).await?;
                    self.effect()?;
                }
                Ok(())
            }
            Effective::WriteOptimized => {
                // Taken now, stored with the writes around it before anything could
                // reveal it (`store_latest`): every record of the step log (the next
                // one may be this invocation's result), a read of a logged table, any
                // other operation that flushes. Nothing outside the instance sees it
                // before; a crash before then loses it, and the re-execution takes it
                // again under the same version (cursor and counter follow the steps).
                self.counter += 1;
                let version = Version { cursor: self.cursor, counter: self.counter };
                self.latest.push(LatestPut { table: st, key: Bytes::copy_from_slice(key), version, value });
                let held: usize = self.latest.iter().map(|w| w.key.len() + w.value.as_ref().map_or(0, |v| v.len())).sum();
                if self.latest.len() >= PENDING_MAX || held >= PENDING_BYTES_MAX {
                    self.store_latest().await?;
                }
                Ok(())
            }
            Effective::Symmetric => {
                let step = Step::LoggedWrite { table: table.to_string(), key: Bytes::copy_from_slice(key), value };
                let r = self.log_step(ctx, step, &[]).await?;
                let Step::LoggedWrite { value, .. } = r.step else { unreachable!("log_step checks the kind") };
                store.put_if_newer(&st, key, Version { cursor: r.seqnum, counter: 0 }, value).await?;
                self.effect()
            }
        }
    }

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
        let now_ms = self.recorder.read(GuestClock::Wall, self.svc.clock.wall_ms().saturating_mul(1_000_000)) / 1_000_000;
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
        let step = Step::Sleep { until_ms, root: self.id.root() };
        let until_ms = match self.log_step(ctx, step, &[INSTANCES]).await?.step {
            Step::Sleep { until_ms, .. } => until_ms,
            _ => unreachable!("log_step checks the kind"),
        };
        if until_ms > self.svc.clock.wall_ms() {
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
        let promise = self.svc.tags.promise_id(self.book, &self.id, self.promises);
        let stream = self.svc.tags.promise(&promise);
        self.log_step(ctx, Step::Promise { promise: promise.clone(), root: self.id.root() }, &[stream]).await?;
        self.promises += 1;
        Ok(promise)
    }

    /// The JSON text at `path` of durable object `object` (`objects.rs`): in a
    /// transaction, at its snapshot with its own writes; otherwise at `cursorTS`, so
    /// every execution reads the same. `None` if there is nothing there.
    pub async fn object_get(&mut self, ctx: &mut Context, object: &str, path: &str) -> Result<Option<String>, Abort> {
        self.flush(ctx).await?;
        objects::check_name(object).map_err(Abort::Refused)?;
        objects::parse_path(path).map_err(Abort::Refused)?;
        self.init_checked(ctx).await?;
        if self.txn.is_some() {
            let txn = self.txn.as_ref().expect("checked");
            if !txn.reads.contains(object) && txn.reads.len() >= objects::TXN_READS_MAX {
                return Err(too_many_objects("reads", objects::TXN_READS_MAX));
            }
            self.txn_view(ctx, object).await?;
            let txn = self.txn.as_mut().expect("checked");
            txn.reads.insert(object.to_string());
            return Ok(objects::text_at(&txn.views[object].value, path)?);
        }
        let value = objects::view_at(&self.svc, ctx, self.book, object, self.cursor).await?;
        Ok(objects::text_at(&value, path)?)
    }

    /// Updates durable object `object` with `op`: in a transaction, buffered until its
    /// commit; otherwise an `ObjectWrite` step, also in the object's stream. Refused if
    /// the operation does not fit the object as this instance sees it.
    pub async fn object_update(&mut self, ctx: &mut Context, object: &str, op: ObjOp) -> Result<(), Abort> {
        self.flush(ctx).await?;
        objects::check_name(object).map_err(Abort::Refused)?;
        op.check().map_err(Abort::Refused)?;
        self.init_checked(ctx).await?;
        if let Some(txn) = &self.txn {
            if txn.read_only {
                return Err(Abort::Refused(Error::InvalidArgument("the transaction is read-only".into())));
            }
            if txn.ops >= objects::TXN_OPS_MAX {
                return Err(Abort::Refused(Error::InvalidArgument(format!(
                    "a transaction makes at most {} operations",
                    objects::TXN_OPS_MAX
                ))));
            }
            self.txn_view(ctx, object).await?;
            let txn = self.txn.as_mut().expect("checked");
            if !txn.writes.contains_key(object) && txn.writes.len() >= objects::TXN_WRITES_MAX {
                return Err(too_many_objects("writes", objects::TXN_WRITES_MAX));
            }
            txn.views.get_mut(object).expect("loaded").apply(&op).map_err(refused)?;
            txn.writes.entry(object.to_string()).or_default().push(op);
            txn.ops += 1;
            return Ok(());
        }
        // The clock readings first: a re-execution finds them recorded before the step.
        self.log_clocks(ctx).await?;
        let asked = Step::ObjectWrite { object: object.to_string(), ops: vec![op] };
        if self.recorded(&asked)?.is_none() {
            let mut view = objects::Folding::new(objects::view_at(&self.svc, ctx, self.book, object, self.cursor).await?, 4);
            let Step::ObjectWrite { ops, .. } = &asked else { unreachable!() };
            view.apply(&ops[0]).map_err(refused)?;
        }
        let tag = self.svc.tags.bokistore(object);
        self.log_step(ctx, asked, &[tag]).await?;
        Ok(())
    }

    /// Loads `object` into the transaction at its snapshot, once.
    async fn txn_view(&mut self, ctx: &mut Context, object: &str) -> Result<(), Abort> {
        let txn = self.txn.as_ref().expect("in a transaction");
        if txn.views.contains_key(object) {
            return Ok(());
        }
        let start = txn.start;
        let value = objects::view_at(&self.svc, ctx, self.book, object, start).await?;
        let len = objects::json_len(&value);
        let txn = self.txn.as_mut().expect("checked");
        if txn.bytes.saturating_add(len) > objects::TXN_BYTES_MAX {
            return Err(Abort::Refused(Error::TooLarge {
                what: "a transaction's objects",
                size: Some(txn.bytes.saturating_add(len) as u64),
                limit: objects::TXN_BYTES_MAX as u64,
            }));
        }
        txn.bytes += len;
        txn.views.insert(object.to_string(), objects::Folding::new(value, len));
        Ok(())
    }

    /// Begins a transaction on durable objects at the instance's `cursorTS` (nothing is
    /// logged). Refused inside another.
    pub async fn txn_begin(&mut self, ctx: &mut Context, read_only: bool) -> Result<(), Abort> {
        self.flush(ctx).await?;
        self.init_checked(ctx).await?;
        if self.txn.is_some() {
            return Err(Abort::Refused(Error::InvalidArgument("a transaction is in progress already".into())));
        }
        self.txn = Some(Txn::new(self.cursor, read_only));
        Ok(())
    }

    /// Ends the transaction in progress: a read-only one, or one that wrote nothing,
    /// commits with nothing logged; otherwise its commit record is logged as a step
    /// (also in the stream of every object it writes) and decided. Returns
    /// whether it committed.
    pub async fn txn_commit(&mut self, ctx: &mut Context) -> Result<bool, Abort> {
        self.flush(ctx).await?;
        let Some(txn) = self.txn.take() else {
            return Err(Abort::Refused(Error::InvalidArgument("no transaction is in progress".into())));
        };
        if txn.writes.is_empty() {
            return Ok(true);
        }
        let step = txn.commit_step();
        let size = record::encode(&step).len();
        if size > crate::node::PAYLOAD_MAX {
            return Err(Abort::Refused(Error::TooLarge {
                what: "a transaction's writes",
                size: Some(size as u64),
                limit: crate::node::PAYLOAD_MAX as u64,
            }));
        }
        // In the streams of the objects it writes: a reader of one of them applies it,
        // and a later commit that read one finds it in its window. (An object it only
        // read has nothing to learn from it.)
        let tags: Vec<Tag> = txn.writes.keys().map(|o| self.svc.tags.bokistore(o)).collect();
        self.log_clocks(ctx).await?;
        let r = self.log_step(ctx, step, &tags).await?;
        let Step::TxnCommit { start, reads, .. } = &r.step else { unreachable!("log_step checks the kind") };
        self.last_commit = r.seqnum;
        objects::decide(&self.svc, ctx, self.book, r.seqnum, *start, reads, None).await
    }

    /// Drops the transaction in progress: nothing of it was logged.
    pub fn txn_abort(&mut self) -> Result<(), Abort> {
        match self.txn.take() {
            Some(_) => Ok(()),
            None => Err(Abort::Refused(Error::InvalidArgument("no transaction is in progress".into()))),
        }
    }

    /// Pushes `message` to `queue` (`queues.rs`): a step, in this instance's shard.
    pub async fn queue_push(&mut self, ctx: &mut Context, queue: &str, message: Bytes) -> Result<(), Abort> {
        self.flush(ctx).await?;
        queues::check_name(queue).map_err(Abort::Refused)?;
        if message.len() > crate::node::VALUE_MAX {
            return Err(Abort::Refused(Error::TooLarge {
                what: "a message",
                size: Some(message.len() as u64),
                limit: crate::node::VALUE_MAX as u64,
            }));
        }
        self.init_checked(ctx).await?;
        let shard = queues::shard_of(&self.id);
        let step = Step::QueuePush { queue: queue.to_string(), shard, message };
        self.log_clocks(ctx).await?;
        self.log_step(ctx, step, &[self.svc.tags.queue_shard(queue, shard)]).await?;
        self.svc.completions.notify(&queues::wake_key(self.book, queue));
        Ok(())
    }

    /// Pops the oldest message of a shard of `queue`, waiting up to `timeout_ms` (and
    /// not past the attempt's deadline) for one: every pop that finds one is a step,
    /// and so is the last, empty one, so that every execution returns the same.
    pub async fn queue_pop(
        &mut self,
        ctx: &mut Context,
        queue: &str,
        timeout_ms: u64,
        deadline_ms: u64,
    ) -> Result<Option<Bytes>, Abort> {
        self.flush(ctx).await?;
        queues::check_name(queue).map_err(Abort::Refused)?;
        self.init_checked(ctx).await?;
        let now = self.svc.clock.now_ms();
        let until = now.saturating_add(timeout_ms).min(deadline_ms.saturating_sub(IN_PLACE_MARGIN_MS)).max(now);
        let own = queues::shard_of(&self.id);
        let wake = queues::wake_key(self.book, queue);
        self.log_clocks(ctx).await?;
        loop {
            let asked = Step::QueuePop { queue: queue.to_string(), shard: own, last: false };
            let r = match self.recorded(&asked)? {
                Some(r) => {
                    self.take(r.seqnum);
                    r
                }
                None => {
                    let mut found = None;
                    for k in 0..queues::SHARDS {
                        let shard = (own + k) % queues::SHARDS;
                        if queues::shard_at(&self.svc, ctx, self.book, queue, shard, u64::MAX).await?.pending > 0 {
                            found = Some(shard);
                            break;
                        }
                    }
                    let now = self.svc.clock.now_ms();
                    if found.is_none() && now < until {
                        let look = self.svc.clock.sleep((until - now).min(queues::POLL_MS));
                        futures_util::future::select(look, self.svc.completions.wait(&wake)).await;
                        continue;
                    }
                    let shard = found.unwrap_or(own);
                    let step = Step::QueuePop { queue: queue.to_string(), shard, last: found.is_none() };
                    self.log_step(ctx, step, &[self.svc.tags.queue_shard(queue, shard)]).await?
                }
            };
            let Step::QueuePop { shard, last, .. } = r.step else { unreachable!("recorded checks the kind") };
            let view = queues::shard_at(&self.svc, ctx, self.book, queue, shard, r.seqnum).await?;
            match view.popped {
                Some(push) => return Ok(Some(queues::message_at(&self.svc, ctx, self.book, queue, shard, push).await?)),
                None if last => return Ok(None),
                // Another pop got there first: look again.
                None => {}
            }
        }
    }

    /// Takes `lock` for this instance, waiting up to `timeout_ms` (and not past the
    /// attempt's deadline) while another holds it: each try made is a step, and the
    /// last one is made even when the lock looks held, so that every execution returns
    /// the same. True at once for a lock the instance holds.
    pub async fn lock_acquire(
        &mut self,
        ctx: &mut Context,
        lock: LockId,
        timeout_ms: u64,
        deadline_ms: u64,
    ) -> Result<bool, Abort> {
        self.flush(ctx).await?;
        if let LockId::Named(name) = &lock {
            locks::check_name(name).map_err(Abort::Refused)?;
        }
        self.init_checked(ctx).await?;
        if self.held.contains(&lock) {
            return Ok(true);
        }
        let now = self.svc.clock.now_ms();
        let until = now.saturating_add(timeout_ms).min(deadline_ms.saturating_sub(IN_PLACE_MARGIN_MS)).max(now);
        let holder = self.id.to_string();
        let wake = locks::wake_key(self.book, &lock);
        // The state this wait first saw: a holder that keeps it all along is run again.
        let mut first_seen: Option<u64> = None;
        self.log_clocks(ctx).await?;
        loop {
            let asked = Step::LockTry { lock: lock.clone(), holder: holder.clone(), root: self.id.root(), prev: 0, last: false };
            let r = match self.recorded(&asked)? {
                Some(r) => {
                    self.take(r.seqnum);
                    r
                }
                None => {
                    let view = locks::lock_at(&self.svc, ctx, self.book, &lock, u64::MAX).await?;
                    let now = self.svc.clock.now_ms();
                    let first = *first_seen.get_or_insert(view.tail);
                    if view.holder.is_some() && now < until {
                        let look = self.svc.clock.sleep((until - now).min(locks::POLL_MS));
                        futures_util::future::select(look, self.svc.completions.wait(&wake)).await;
                        continue;
                    }
                    if let (Some(root), true) = (&view.root, view.tail == first) {
                        self.svc.kick_holder(ctx, self.book, root);
                    }
                    let last = view.holder.is_some();
                    let (root, prev) = (self.id.root(), view.tail);
                    let step = Step::LockTry { lock: lock.clone(), holder: holder.clone(), root, prev, last };
                    self.log_step(ctx, step, &[self.svc.tags.lock(&lock)]).await?
                }
            };
            let Step::LockTry { last, .. } = r.step else { unreachable!("recorded checks the kind") };
            let view = locks::lock_at(&self.svc, ctx, self.book, &lock, r.seqnum).await?;
            if view.holder.as_ref() == Some(&holder) {
                self.held.insert(lock);
                return Ok(true);
            }
            if last {
                return Ok(false);
            }
        }
    }

    /// Releases `lock`, which this instance holds: a step.
    pub async fn lock_release(&mut self, ctx: &mut Context, lock: LockId) -> Result<(), Abort> {
        self.flush(ctx).await?;
        if let LockId::Named(name) = &lock {
            locks::check_name(name).map_err(Abort::Refused)?;
        }
        self.init_checked(ctx).await?;
        if !self.held.contains(&lock) {
            return Err(Abort::Refused(Error::InvalidArgument(format!("this invocation does not hold {lock}"))));
        }
        let holder = self.id.to_string();
        self.log_clocks(ctx).await?;
        let asked = Step::LockRelease { lock: lock.clone(), holder: holder.clone(), prev: 0 };
        let step = match self.recorded(&asked)? {
            Some(_) => asked,
            None => {
                let view = locks::lock_at(&self.svc, ctx, self.book, &lock, u64::MAX).await?;
                if view.holder.as_ref() != Some(&holder) {
                    return Err(Abort::internal(format!("{lock} is held by {:?}, not by its holder", view.holder)));
                }
                Step::LockRelease { lock: lock.clone(), holder, prev: view.tail }
            }
        };
        let tag = self.svc.tags.lock(&lock);
        self.log_step(ctx, step, &[tag]).await?;
        self.held.remove(&lock);
        self.svc.completions.notify(&locks::wake_key(self.book, &lock));
        Ok(())
    }

    /// The key the invocation is addressed to, once `init` has read it.
    pub fn key(&self) -> Option<&InvocationKey> {
        self.key.as_ref()
    }

    /// Before the guest of a keyed invocation runs: an exclusive one takes its key's
    /// lock (`LockId::Key`), waiting in place at most `in_place_ms` (a caller that
    /// waits for the answer waits that long; a background run holds no slot of the
    /// node for long) and not past `deadline_ms`, then suspending for [`KEY_RETRY_MS`]
    /// to try again (each try that waited its whole time is a step). A shared one takes
    /// nothing.
    pub async fn enter_key(&mut self, ctx: &mut Context, deadline_ms: u64, in_place_ms: u64) -> Result<(), Abort> {
        self.flush(ctx).await?;
        let Some(InvocationKey { key, exclusive: true }) = self.key.clone() else { return Ok(()) };
        let lock = LockId::Key { function: self.function.clone(), key };
        loop {
            // A try an earlier execution logged and lost: that execution tried again.
            let replayed = self.steps.get(self.next).is_some();
            if self.lock_acquire(ctx, lock.clone(), in_place_ms, deadline_ms).await? {
                return Ok(());
            }
            if !replayed {
                return Err(Abort::Suspended { wake_ms: self.svc.clock.wall_ms().saturating_add(KEY_RETRY_MS) });
            }
        }
    }

    /// Releases every lock the instance holds, before its result. For an instance that
    /// did not replay its guest (`give_up`, `finish_after_recorded`), the locks it holds
    /// are those its recorded tries took and its recorded releases did not give back.
    async fn release_held(&mut self, ctx: &mut Context, replayed: bool) -> Result<(), Abort> {
        if !replayed {
            let holder = self.id.to_string();
            let mut held = std::collections::BTreeSet::new();
            for r in self.steps.clone() {
                match r.step {
                    Step::LockTry { lock, .. } => {
                        let LockView { holder: h, .. } = locks::lock_at(&self.svc, ctx, self.book, &lock, r.seqnum).await?;
                        if h.as_ref() == Some(&holder) {
                            held.insert(lock);
                        }
                    }
                    Step::LockRelease { lock, .. } => {
                        held.remove(&lock);
                    }
                    _ => {}
                }
            }
            self.held = held;
        }
        for lock in self.held.clone() {
            self.lock_release(ctx, lock).await?;
        }
        Ok(())
    }

    /// Waits durably for the value of `promise` (`context.promise-await`), until
    /// `timeout_ms` past a recorded reading of the wall clock if given. The wait's end is
    /// logged first as a `Sleep` step (also in INSTANCES; `u64::MAX` without a timeout),
    /// then what the await got as an `Awaited` step, before the guest sees it; an await
    /// that finds neither a value nor its time up suspends the invocation until the
    /// completion wakes it (`Durable::complete_promise`) or the timeout does.
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
        let now_ns = self.recorder.read(GuestClock::Wall, self.svc.clock.wall_ms().saturating_mul(1_000_000));
        let until_ms = timeout_ms.map_or(u64::MAX, |t| (now_ns / 1_000_000).saturating_add(t.min(SLEEP_MAX_MS)));
        self.log_clocks(ctx).await?;
        // An earlier execution waited here (Sleep), or got its outcome (Awaited).
        if let Some(outcome) = self.recorded_awaited(promise)? {
            return Ok(outcome);
        }
        let (until_ms, waited) = match self.steps.get(self.next).map(|r| (r.seqnum, r.step.clone())) {
            Some((seqnum, Step::Sleep { until_ms, .. })) => {
                self.take(seqnum);
                (until_ms, true)
            }
            _ => (until_ms, false),
        };
        let outcome = match self.promise_value(ctx, promise).await? {
            Some(outcome) => outcome,
            None if self.svc.clock.wall_ms() >= until_ms => Awaited::TimedOut,
            None => {
                if !waited {
                    // About to wait: the wait's end is logged (also in INSTANCES, for the
                    // recovery scan, and among the promise's waiters, whom a completion
                    // wakes), unless a peer logged the outcome here meanwhile.
                    let step = Step::Sleep { until_ms, root: self.id.root() };
                    let waiters = self.svc.tags.promise_waiters(promise);
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
                let remaining = until_ms.saturating_sub(self.svc.clock.wall_ms());
                let in_place = remaining <= self.svc.config.sleep_in_place_max_ms
                    && self.svc.clock.now_ms().saturating_add(remaining).saturating_add(IN_PLACE_MARGIN_MS) < deadline_ms;
                let mut first = true;
                loop {
                    if let Some(outcome) = self.promise_value(ctx, promise).await? {
                        break outcome;
                    }
                    let left = until_ms.saturating_sub(self.svc.clock.wall_ms());
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
                    let look = self.svc.clock.sleep(left.min(PROMISE_POLL_MS));
                    futures_util::future::select(look, self.svc.completions.wait(promise)).await;
                }
            }
        };
        match self.log_step(ctx, Step::Awaited { promise: promise.to_string(), outcome }, &[]).await?.step {
            Step::Awaited { outcome, .. } => Ok(outcome),
            _ => unreachable!("log_step checks the kind"),
        }
    }

    /// The outcome an earlier execution (or a peer) logged for this await of `promise`,
    /// taken; `None` if the step log has none here (a recorded Sleep is the await's
    /// too); another operation recorded here is non-determinism.
    fn recorded_awaited(&mut self, promise: &str) -> Result<Option<Awaited>, Abort> {
        match self.steps.get(self.next).map(|r| (r.seqnum, r.step.clone())) {
            Some((seqnum, Step::Awaited { promise: p, outcome })) if p == promise => {
                self.take(seqnum);
                Ok(Some(outcome))
            }
            None | Some((_, Step::Sleep { .. })) => Ok(None),
            Some(_) => {
                let asked = Step::Awaited { promise: promise.to_string(), outcome: Awaited::TimedOut };
                Err(self.recorded(&asked).err().unwrap_or_else(|| Abort::internal("a recorded step vanished")))
            }
        }
    }

    /// What the stream of `promise` holds: its value once completed, `Unknown` if no
    /// promise of that ID was created in this book, `None` while it waits.
    async fn promise_value(&self, ctx: &mut Context, promise: &str) -> Result<Option<Awaited>, Abort> {
        let (book, stream) = (self.shadow(), self.svc.tags.promise(promise));
        let Some(created) = self.svc.log.read_next(ctx, book, stream, SeqNum(0)).await? else {
            return Ok(Some(Awaited::Unknown));
        };
        match self.svc.log.read_next(ctx, book, stream, SeqNum(created.seqnum.0.saturating_add(1))).await? {
            Some(r) => match record::decode::<Step>("promise", &r.data)? {
                Step::Completed { promise: p, value, .. } if p == promise => Ok(Some(Awaited::Value(value))),
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
            Some(Recorded { step: Step::Delay { until_ms, .. }, seqnum }) => {
                let (until_ms, seqnum) = (*until_ms, *seqnum);
                self.take(seqnum);
                until_ms
            }
            Some(_) => return Ok(()),
            None => {
                let Some(until_ms) = until else { return Ok(()) };
                let step = Step::Delay { until_ms, root: self.id.root() };
                match self.log_step(ctx, step, &[INSTANCES]).await {
                    Ok(Recorded { step: Step::Delay { until_ms, .. }, .. }) => until_ms,
                    Ok(_) => unreachable!("log_step checks the kind"),
                    // A peer that knew of no delay ran the guest first: it has started.
                    Err(Abort::NonDeterministic(_)) => return Ok(()),
                    Err(abort) => return Err(abort),
                }
            }
        };
        if until_ms > self.svc.clock.wall_ms() {
            self.check_cancelled(ctx).await?;
        }
        self.wait_until(until_ms, deadline_ms).await.map(|_| ())
    }

    /// Waits for `until_ms` (wall clock) in place if it is near and before
    /// `deadline_ms`, else ends the attempt suspended until then.
    async fn wait_until(&self, until_ms: u64, deadline_ms: u64) -> Result<u64, Abort> {
        let remaining = until_ms.saturating_sub(self.svc.clock.wall_ms());
        if remaining == 0 {
            return Ok(until_ms);
        }
        let near = remaining <= self.svc.config.sleep_in_place_max_ms;
        if near && self.svc.clock.now_ms().saturating_add(remaining).saturating_add(IN_PLACE_MARGIN_MS) < deadline_ms {
            self.svc.clock.sleep(remaining).await;
            return Ok(until_ms);
        }
        Err(Abort::Suspended { wake_ms: until_ms })
    }

    /// Appends `data` under `tags` to the invocation's book, once across every execution
    /// of the invocation: at offset `appends` of the mark's stream, where a re-execution
    /// or a peer finds the record an earlier execution appended and returns its seqnum
    /// (a plain append cannot fail at its offset, so every execution counts the same).
    pub async fn append(&mut self, ctx: &mut Context, tags: &[Tag], data: Bytes) -> Result<Result<SeqNum, LogError>, Abort> {
        self.flush(ctx).await?;
        if let Err(e) = guest_tags(tags) {
            return Ok(Err(e));
        }
        self.before_append(ctx).await?;
        match self.svc.log.cond_append(ctx, self.book, tags, data.clone(), self.mark(), self.appends).await {
            Ok(s) => {
                self.appends += 1;
                self.effect()?;
                Ok(Ok(s))
            }
            Err(LogError::Conflict { holder: Some(h) }) => {
                self.check_own_append(ctx, h, tags, &data).await?;
                self.appends += 1;
                Ok(Ok(h))
            }
            // The mark was retired (its offsets stay): the invocation finished long ago.
            Err(LogError::Conflict { holder: None }) => Err(Abort::Superseded),
            // Refused arguments are the guest's error (nothing was appended); any other
            // failure ends the attempt, since the append may have taken effect.
            Err(e @ (LogError::InvalidArgument(_) | LogError::TooLarge { .. })) => Ok(Err(e)),
            Err(e) => Err(e.into()),
        }
    }

    /// Appends `data` under `tags` to the invocation's book only at offset `position`
    /// of `cond_tag`'s stream, once across every execution: what it got (the record, or
    /// a conflict) is logged as a step before the guest sees it. A record holding the
    /// offset that carries the conditional mark past the last conditional append is
    /// this step's, appended by an execution that stopped before logging it.
    pub async fn cond_append(
        &mut self,
        ctx: &mut Context,
        tags: &[Tag],
        data: Bytes,
        cond_tag: Tag,
        position: u64,
    ) -> Result<Result<SeqNum, LogError>, Abort> {
        self.flush(ctx).await?;
        if let Err(e) = guest_tags(tags.iter().chain([&cond_tag])) {
            return Ok(Err(e));
        }
        if cond_tag == Tag::ALL {
            return Ok(Err(LogError::InvalidArgument("a conditional append needs a tag other than 0".into())));
        }
        self.before_append(ctx).await?;
        self.step_gate(ctx).await?;
        let data_sha256 = input_sha256(&data);
        let step = |outcome| Step::CondAppend { tag: cond_tag.0, position, data_sha256, outcome };
        let outcome = match self.recorded(&step(CondOutcome::Conflict(None)))? {
            Some(Recorded { step: Step::CondAppend { outcome, .. }, seqnum }) => {
                self.take(seqnum);
                outcome
            }
            Some(_) => unreachable!("recorded checks the kind"),
            None => {
                self.check_unfinished(ctx).await?;
                let mut marked = tags.to_vec();
                marked.push(self.cond_mark());
                let got = match self.svc.log.cond_append(ctx, self.book, &marked, data, cond_tag, position).await {
                    Ok(s) => {
                        self.effect()?;
                        CondOutcome::Appended(s.0)
                    }
                    Err(LogError::Conflict { holder: Some(h) }) if self.is_own_next(ctx, h).await? => CondOutcome::Appended(h.0),
                    Err(LogError::Conflict { holder }) => CondOutcome::Conflict(holder.map(|h| h.0)),
                    Err(e @ (LogError::InvalidArgument(_) | LogError::TooLarge { .. })) => return Ok(Err(e)),
                    Err(e) => return Err(e.into()),
                };
                match self.log_step(ctx, step(got), &[]).await?.step {
                    Step::CondAppend { outcome, .. } => outcome,
                    _ => unreachable!("log_step checks the kind"),
                }
            }
        };
        match outcome {
            CondOutcome::Appended(s) => {
                self.last_cond_append = s;
                Ok(Ok(SeqNum(s)))
            }
            CondOutcome::Conflict(holder) => Ok(Err(LogError::Conflict { holder: holder.map(SeqNum) })),
        }
    }

    /// What every append does first: the invocation must be started (so that it runs
    /// again after a crash, and its marks are collected), and the readings the guest
    /// took may decide what it appends.
    async fn before_append(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        self.init_checked(ctx).await?;
        self.log_clocks(ctx).await?;
        self.marked = true;
        Ok(())
    }

    /// Whether `holder` carries the conditional mark and comes after this instance's
    /// last conditional append: then an earlier execution appended it here. A record
    /// trimmed since cannot be told apart from another's (it only holds the offset).
    async fn is_own_next(&self, ctx: &mut Context, holder: SeqNum) -> Result<bool, Abort> {
        if holder.0 <= self.last_cond_append {
            return Ok(false);
        }
        let found = self.svc.log.read_next(ctx, self.book, self.cond_mark(), holder).await?;
        Ok(found.is_some_and(|r| r.seqnum == holder))
    }

    /// A read of the guest's book (`next`: the first record of `tag` at or after `at`;
    /// otherwise the last at or before it), the same in every execution: a replay gets
    /// the record the first execution got, as it got it; a live read is recorded
    /// (`recorder.rs`). Marks are not the guest's to see.
    pub async fn read_log(
        &mut self,
        ctx: &mut Context,
        tag: Tag,
        at: SeqNum,
        next: bool,
    ) -> Result<Result<Option<LogRecord>, LogError>, Abort> {
        self.flush(ctx).await?;
        if let Err(e) = guest_tags([&tag]) {
            return Ok(Err(e));
        }
        if let Some(replayed) = self.recorder.replayed_log_read() {
            return Ok(Ok(replayed.map(|r| LogRecord {
                seqnum: SeqNum(r.seqnum),
                tags: r.tags.into_iter().map(Tag).collect(),
                data: r.data,
                aux: r.aux,
            })));
        }
        let log = &self.svc.log;
        let found =
            if next { log.read_next(ctx, self.book, tag, at).await } else { log.read_prev(ctx, self.book, tag, at).await };
        // A failed read is not recorded: the attempt ends rather than let the guest act
        // on what a re-execution would not see.
        let found = found?.map(|mut r| {
            r.tags.retain(|t| !t.is_mark());
            r
        });
        self.recorder.log_read(found.as_ref().map(|r| ReadRecord {
            seqnum: r.seqnum.0,
            tags: r.tags.iter().map(|t| t.0).collect(),
            data: r.data.clone(),
            aux: r.aux.clone(),
        }));
        Ok(Ok(found))
    }

    /// A re-execution's append found the record at its offset of the mark: that record
    /// must be what it asks to append now, if the record is still there to compare.
    async fn check_own_append(&self, ctx: &mut Context, holder: SeqNum, tags: &[Tag], data: &[u8]) -> Result<(), Abort> {
        let Some(r) = self.svc.log.read_next(ctx, self.book, self.mark(), holder).await? else { return Ok(()) };
        if r.seqnum != holder {
            return Ok(());
        }
        let mut asked: Vec<Tag> = tags.iter().copied().filter(|&t| t != Tag::ALL).collect();
        asked.sort_unstable();
        asked.dedup();
        let theirs: Vec<Tag> = r.tags.iter().copied().filter(|&t| t != self.mark()).collect();
        if theirs != asked || r.data != data {
            return Err(Abort::NonDeterministic(format!(
                "append {} of {} was {} bytes under {} tags and is now {} bytes under {} tags",
                self.appends,
                self.id,
                r.data.len(),
                theirs.len(),
                data.len(),
                asked.len()
            )));
        }
        Ok(())
    }

    /// Before a child invocation of `function` with an input hashing to `input_sha256`:
    /// the logged outcome if an earlier execution finished it, otherwise the child's
    /// instance ID.
    pub async fn child(
        &mut self,
        ctx: &mut Context,
        function: &str,
        input_sha256: [u8; 32],
    ) -> Result<Result<Outcome, InstanceId>, Abort> {
        self.flush(ctx).await?;
        self.init_checked(ctx).await?;
        self.log_clocks(ctx).await?;
        self.step_gate(ctx).await?;
        let asked = Step::Invoke { function: function.to_string(), input_sha256, outcome: Outcome::Ok(Bytes::new()) };
        if let Some(r) = self.recorded(&asked)? {
            self.take(r.seqnum);
            let Step::Invoke { outcome, .. } = r.step else { unreachable!("recorded checks the kind") };
            return Ok(Ok(outcome));
        }
        let step = u32::try_from(self.next).map_err(|_| Abort::internal("more than 2^32 steps"))?;
        Ok(Err(self.id.child(step)))
    }

    /// After a child invocation finished for good: logs its outcome (or takes a peer's).
    pub async fn child_finished(
        &mut self,
        ctx: &mut Context,
        function: &str,
        input_sha256: [u8; 32],
        outcome: Outcome,
    ) -> Result<Outcome, Abort> {
        self.flush(ctx).await?;
        if outcome == Outcome::Cancelled {
            // The child saw its root's cancellation: so does the parent, at its next step
            // (its call gets the child's outcome, which is logged as any other).
            self.cancel_checked_ms = None;
        }
        let step = Step::Invoke { function: function.to_string(), input_sha256, outcome };
        match self.log_step(ctx, step, &[]).await?.step {
            Step::Invoke { outcome, .. } => Ok(outcome),
            _ => unreachable!("log_step checks the kind"),
        }
    }

    /// Logs `outcome` as the result of an invocation that keeps failing, after whatever
    /// steps its attempts logged (or takes the result a peer logged meanwhile).
    pub async fn give_up(&mut self, ctx: &mut Context, outcome: Outcome) -> Result<Outcome, Abort> {
        self.flush(ctx).await?;
        if let Started::Finished(logged) = self.init(ctx).await? {
            return Ok(logged);
        }
        self.load_steps(ctx, self.steps.last().map_or(0, |r| r.seqnum)).await?;
        self.next = self.steps.len();
        // Earlier attempts may have appended under the mark.
        self.marked = true;
        self.log_result(ctx, outcome, false).await
    }

    /// Logs `outcome` as the result after every step recorded so far, or returns the
    /// result logged already: for an execution that stopped short of the recorded
    /// history (a non-deterministic re-execution), whose own position is taken.
    pub async fn finish_after_recorded(&mut self, ctx: &mut Context, outcome: Outcome) -> Result<Outcome, Abort> {
        self.flush(ctx).await?;
        self.load_steps(ctx, self.steps.last().map_or(0, |r| r.seqnum)).await?;
        let logged = self.steps.iter().find_map(|r| match &r.step {
            Step::Result { outcome } => Some(outcome.clone()),
            _ => None,
        });
        if let Some(outcome) = logged {
            return Ok(outcome);
        }
        self.next = self.steps.len();
        self.marked = true;
        self.log_result(ctx, outcome, false).await
    }

    /// Logs the invocation's final outcome (or takes a peer's) and returns it, after
    /// the clock readings it may depend on.
    pub async fn finish(&mut self, ctx: &mut Context, outcome: Outcome) -> Result<Outcome, Abort> {
        if self.read_only_unlogged(ctx, &outcome).await? {
            return Ok(outcome);
        }
        self.take_clocks(ctx).await?;
        self.log_result(ctx, outcome, true).await
    }

    /// Whether the invocation may end without a record: it is forgettable
    /// (`Of::forgettable`), its Init is still deferred and everything it did since was
    /// read-optimized reads (and clock readings), which the guest returned from. Such
    /// an invocation has no effect, and nothing will ever replay it or ask for its
    /// result, so the one append that would hold its Init, reads and result only
    /// costs time. Its reads were fresh (a node alone, past its start barrier), and
    /// they stand as they were if no table it read switched protocols since it looked:
    /// what the deferred record's conditions would have checked, checked here on the
    /// index, which holds every record ordered before this call.
    async fn read_only_unlogged(&mut self, ctx: &mut Context, outcome: &Outcome) -> Result<bool, Abort> {
        if !self.forgettable {
            return Ok(false);
        }
        let Some(unchanged) = self.deferred.clone() else { return Ok(false) };
        let only_reads = self.latest.is_empty()
            && self
                .pending
                .iter()
                .skip(1)
                .all(|p| p.write.is_none() && matches!(p.step, Step::Read { .. } | Step::Clocks { .. }));
        let guest = matches!(outcome, Outcome::Ok(_) | Outcome::Failed(_));
        if !only_reads || !guest || self.cancelled || self.txn.is_some() || !self.held.is_empty() || !self.steps.is_empty() {
            return Ok(false);
        }
        for (cond, table) in unchanged.iter().zip(&self.deferred_tables) {
            let (latest, records) = self.svc.latest_transition(ctx, self.book, table).await?;
            // Unchanged: the protocol it read under (`deferred_protocol`) still holds.
            if records != cond.position || !matches!(latest, Transition::End { .. }) {
                return Ok(false);
            }
        }
        self.pending.clear();
        self.recorder.discard_fresh();
        Ok(true)
    }

    /// Logs the Result step at `next`, after releasing the locks the instance holds
    /// (`replayed`: as its guest's execution says; otherwise as its recorded steps do).
    /// Clock readings not logged by now are dropped: only a trap or a diverging
    /// re-execution gets here with some, and its outcome is not the guest's to compute
    /// from them.
    async fn log_result(&mut self, ctx: &mut Context, mut outcome: Outcome, replayed: bool) -> Result<Outcome, Abort> {
        self.recorder.discard_fresh();
        self.follow();
        if let Some(Recorded { step: Step::Cancelled, seqnum }) = self.steps.get(self.next) {
            let seqnum = *seqnum;
            self.take(seqnum);
            self.cancelled = true;
        }
        if self.cancelled {
            outcome = Outcome::Cancelled;
        }
        self.txn = None;
        self.release_held(ctx, replayed).await?;
        let tags: &[Tag] = if self.marked { &[INSTANCES, APPENDED] } else { &[INSTANCES] };
        match self.log_step(ctx, Step::Result { outcome }, tags).await?.step {
            Step::Result { outcome } => Ok(outcome),
            _ => unreachable!("log_step checks the kind"),
        }
    }
}

/// A guest names its own tags, never the platform's (marks included).
fn guest_tags<'a>(tags: impl IntoIterator<Item = &'a Tag>) -> Result<(), LogError> {
    match tags.into_iter().find(|t| t.is_reserved()) {
        Some(t) => Err(LogError::InvalidArgument(format!("tag {:#x} is reserved for the platform", t.0))),
        None => Ok(()),
    }
}

/// The version a read-optimized write at `step` of instance `id` stores: a hash, so
/// versions of one object are unique but not ordered (the write log orders them). A
/// marker's (a `Step::Put`'s: its record carries the value, and no reader looks the
/// version up) has the top bit set, a value's (a `Step::Write`'s) has it clear: an
/// execution that crashed after storing a marker, before its record, leaves the name
/// taken, and a re-execution that writes a large value at that step (its readings
/// differ) must not find its own name taken, since the first version stored under a
/// name stays.
pub(crate) fn version_of(id: &InstanceId, step: usize, marker: bool) -> u64 {
    use sha2::{Digest, Sha256};
    const MARKER: u64 = 1 << 63;
    let mut h = Sha256::new();
    h.update(id.encode());
    h.update((step as u64).to_be_bytes());
    let hash = u64::from_be_bytes(h.finalize()[..8].try_into().expect("8 bytes"));
    match marker {
        true => hash | MARKER,
        false => hash & !MARKER,
    }
}

fn effective(p: Protocol) -> Effective {
    match p {
        Protocol::ReadOptimized | Protocol::Auto => Effective::ReadOptimized,
        Protocol::WriteOptimized => Effective::WriteOptimized,
        Protocol::Symmetric => Effective::Symmetric,
        Protocol::Unsafe => Effective::Unsafe,
    }
}

fn refused(why: String) -> Abort {
    Abort::Refused(Error::InvalidArgument(format!("the operation does not fit the object: {why}")))
}

fn too_many_objects(what: &str, max: usize) -> Abort {
    Abort::Refused(Error::InvalidArgument(format!("a transaction {what} at most {max} objects")))
}
