//! One instance of an exactly-once invocation: its step log, `cursorTS`, and the
//! protocols' reads and writes (Halfmoon Figures 5 and 7, Boki Figure 6).
//!
//! Invariants, for every instance ID:
//! - The step log is a sequence of records, each only ever appended by a conditional
//!   append at the next offset of `step(id)`, so peer instances of one invocation (a
//!   retry racing a re-execution, two nodes) agree on every step: the loser of a race
//!   adopts the winner's record, values included. A record holds one step, or a
//!   [`Step::Group`] of consecutive ones: read-optimized writes and small queue pushes
//!   taken since the last record (pending: nothing outside the instance sees them
//!   before that record, and every other operation logs them first) and the step that
//!   logs them. A pending step that a peer's record does not hold exactly, at its
//!   place, stops the execution, since its guest went on from it.
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
//!
//! A table's protocol, as of the instance's start (`state.rs`), decides what its
//! operations log: read-optimized appends a write record tagged with the object (its
//! write log) and reads log-free at `cursorTS`; write-optimized logs its reads and
//! writes log-free, `put_if_newer` at `(cursor, counter)` on single-version entries;
//! symmetric (Boki) logs both; unsafe logs nothing. A transitional instance (one that
//! started during a switch, `switch.rs`) logs its reads and writes both stores.
//!
//! Step kinds are types: `record/kind.rs` has one struct per kind, which a variant of
//! [`Step`] wraps (`Step::Read(kind::Read { .. })`). The instance logs a step with
//! `Instance::log` or `log_seqnum` (`steps.rs`), which return what holds the step's
//! place (the step, or what an earlier execution or a peer logged there) as a value of
//! its kind, so no caller has to match the kinds it did not log.
//!
//! The module's files:
//! - `init.rs`: the Init record, logged, recovered, or deferred to the first record of a
//!   lazily started root on a node alone.
//! - `steps.rs`: taking recorded steps, logging new ones, the pending writes and
//!   readings, and the step gate.
//! - `state.rs`: `state.get`, `put` and `delete` under each table protocol, and a
//!   table's protocol as of the instance's start; `observe` counts for `auto`.
//! - `log.rs`: the guest's marked appends, conditional appends and recorded reads.
//! - `waits.rs`: durable sleeps, delayed starts, promises.
//! - `cancel.rs`: the cancel stream and `Cancelled` steps.
//! - `children.rs`, `holds.rs`, `messages.rs`, `transactions.rs`: child calls, locks and
//!   keys, queue pushes and pops, durable objects and their transactions, each as steps.
//! - `outcalls.rs`: requests the guest sends out, each logged in a stream of its own.
//! - `snapshot.rs`: reads of objects at a snapshot while the Init is deferred.
//! - `finish.rs`: the result record, or none for a forgettable root; a root answered
//!   before its result is logged.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use tally_log_core::{BookId, Cond, Context, Error as LogError, LogRecord, SeqNum, Tag, UNCHANGED_MAX};

use crate::abort::{Abort, CrashAfter};
use crate::config::Protocol;
use crate::core::{Core, Pin};
use crate::error::Error;
use crate::locks::{self, LockView};
use crate::objects::{self, ObjOp, Txn};
use crate::queues;
use crate::record::kind::{self, Kind};
use crate::record::{
    self, input_sha256, Awaited, CondOutcome, InvocationKey, LockId, Outcome, ReadRecord, Reading, Step, Transition,
};
use crate::recorder::{GuestClock, Recorder};
use crate::store::{LatestPut, Version, VersionPut};
use crate::table::{fresher_value, visible_write, written_value, LastOp, Ops};
use crate::tags::{shadow, APPENDED, INSTANCES};
use crate::InstanceId;

mod cancel;
mod children;
mod finish;
mod holds;
mod init;
mod log;
mod messages;
mod outcalls;
mod snapshot;
mod state;
mod steps;
mod transactions;
mod waits;

pub use finish::Ending;
pub use outcalls::{Outcall, OutcallSlot};

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

/// The largest input whose Init may be deferred (`Instance::begin`): it is one of the
/// pending steps, of which a record holds `PENDING_MAX` (the assertions below).
const DEFER_INPUT_MAX: usize = record::PUT_INLINE_MAX;

/// Steps (read-optimized writes, small queue pushes, and the clock readings before a
/// result) an instance takes before it logs them (see `Instance::put`).
const PENDING_MAX: usize = 32;
/// The bytes of values and readings it holds at most before it logs them.
const PENDING_BYTES_MAX: usize = 1 << 20;
/// The largest readings it takes with the result rather than logging them at once, and
/// the most bytes of pending readings: a group stays well inside a record.
const PENDING_READINGS_MAX: usize = 64 << 10;
const PENDING_READINGS_TOTAL_MAX: usize = 256 << 10;
// A group's tags: the step log's, one per write or push, a result's INSTANCES and
// APPENDED, and LIBRARIES.
const _: () = assert!(PENDING_MAX + 4 <= crate::env::TAGS_MAX);
// A pending push (a queue name and a message of at most `PUT_INLINE_MAX`) takes no more
// of a record than a pending write.
const _: () = assert!(crate::queues::QUEUE_NAME_MAX <= crate::KEY_MAX);
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

/// A step taken and not logged yet: a read-optimized write, a small queue push, a
/// lock's try or release, or the clock readings before the result.
struct Pending {
    step: Step,
    /// What a write stores; `None` for readings.
    write: Option<PendingWrite>,
    /// What the step adds to its record, about.
    record_bytes: usize,
    /// The condition its record carries: a lock's try taken on the lock's state as the
    /// instance looked (`Instance::lock_acquire`) holds only if the lock's stream did
    /// not change since.
    cond: Option<Cond>,
}

/// A pending write's object write log, and the value to store as its version before the
/// record that makes it visible.
struct PendingWrite {
    object: Tag,
    st: String,
    key: Bytes,
    value: Option<Bytes>,
    /// The version its step names, and whether that is a marker (a `Put`'s: the value
    /// is in the record) rather than the stored value (a `Write`'s).
    version: u64,
    marker: bool,
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
    core: Arc<Core>,
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
    /// Outgoing calls so far: the next one's number (`outcalls.rs`).
    outcalls: u64,
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
    /// When this execution began (wall milliseconds), kept with the Init it logs.
    started_ms: u64,
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
    /// Where it read objects while its Init was deferred (`snapshot.rs`).
    snapshot: Option<Pin>,
    /// Whether a plain read or a read-only transaction read at `snapshot` (not only
    /// read-write transactions, whose commit records where they began).
    snapshot_read: bool,
    /// A child of a parent whose Init is deferred, deferred too: it may log nothing
    /// (`Instance::defer_under_parent`).
    under_deferred: bool,
    /// Whether a lock's try may ride the next record (`Instance::lock_acquire`); an
    /// attempt after one that stopped with `Superseded` takes its locks one append
    /// each (`Instance::take_locks_eagerly`).
    speculate: bool,
    /// The last state operation on each switchable table used so far, for `auto`'s
    /// costs (`observe`).
    last_ops: BTreeMap<String, LastOp>,
    /// Set once the invocation was answered before its Result (`finish.rs`): what that
    /// Result's trailer says of the execution.
    answered: Option<finish::Answered>,
}

impl Instance {
    pub(crate) fn new(core: Arc<Core>, of: Of) -> Instance {
        let step_tag = core.tags.step(&of.id);
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
            outcalls: 0,
            last_cond_append: 0,
            marked: false,
            promises: 0,
            cancelled: false,
            cancel_checked_ms: Some(core.clock.now_ms()),
            started_ms: core.clock.wall_ms(),
            txn: None,
            last_commit: 0,
            held: Default::default(),
            key: of.key,
            may_defer: of.defer_init,
            deferred: None,
            deferred_tables: Vec::new(),
            forgettable: of.forgettable,
            snapshot: None,
            snapshot_read: false,
            under_deferred: false,
            speculate: true,
            last_ops: BTreeMap::new(),
            answered: None,
            core,
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
        *self.marks.get_or_init(|| self.core.tags.marks(self.step_tag))
    }

    /// The next bytes of the invocation's random stream: the same in every execution.
    pub fn random(&mut self, out: &mut [u8]) {
        let (tags, book, id) = (&self.core.tags, self.book, &self.id);
        self.recorder.random(|| tags.random_seed(book, id), out);
    }

    /// The invocation's `wasi:random/insecure-seed`.
    pub fn insecure_seed(&self) -> (u64, u64) {
        Recorder::insecure_seed(self.core.tags.random_seed(self.book, &self.id))
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
                Some(r @ Recorded { step: Step::Clocks(kind::Clocks { .. }), .. }) if self.recorder.read_at_step() => {
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
        let logged = self.log_step(ctx, Step::Clocks(kind::Clocks { readings: readings.clone() }), &[]).await?;
        match logged.step {
            Step::Clocks(kind::Clocks { readings: theirs }) if theirs == readings => Ok(()),
            // A peer logged its own readings here first: what this execution read is not
            // the invocation's, so it stops before acting on it and runs again.
            _ => Err(Abort::Superseded),
        }
    }

    /// What the steps this instance keeps take, encoded: see [`Step::shed`].
    #[cfg(test)]
    pub(crate) fn kept_step_bytes(&self) -> usize {
        self.steps.iter().map(|r| record::encoded_len(&r.step)).sum()
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
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
}

/// A guest names its own tags, never the platform's (marks included).
pub(crate) fn guest_tags<'a>(tags: impl IntoIterator<Item = &'a Tag>) -> Result<(), LogError> {
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
