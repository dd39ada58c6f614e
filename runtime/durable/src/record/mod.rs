//! What the exactly-once protocols write to the log.
//!
//! Every record is one [`Step`], [`Transition`], listing (a book, a [`TableRef`]) or
//! schedule state, encoded as one format byte ([`FORMAT`]) and bincode. A node refuses a
//! record of a format it does not know with a clear error instead of misreading it; a
//! new format is added as a new number, and old ones stay readable. Records go under the
//! platform tags of [`crate::tags`], in the shadow of the invocation's book unless they
//! are platform-wide:
//!
//! ```text
//!   step(id)                     the instance's step log: Init (InitKeyed, or a refused child's Refused), then
//!                                one record per logged step or Group of steps
//!   object(table, key)           the read-optimized write log of one object (Write and Put, Groups holding them)
//!   transition(table)            the table's protocol history (Transition records)
//!   migration(begin, table, key) a switch's one migration record of that key (a Write, also in the write log)
//!   promise(p)                   Promise at offset 0, its one Completed at offset 1
//!   promise_waiters(p)           the Sleep steps of awaits of p that would suspend: a completion wakes their roots
//!   cancel(root)                 Cancel at offset 0: the root and its children are cancelled
//!   retry(id)                    the Retry records of an instance that trapped (the last one counts)
//!   bokistore(object)            a durable object's ObjectWrite steps and the TxnCommit steps that write it
//!   queue_shard(queue, shard)    a queue shard's QueuePush, QueuePop and QueuePopMany steps
//!   lock(lock)                   a lock's LockTry and LockRelease steps
//!   checkpoint(stream)           Checkpoints of an object's, a queue shard's or a lock's stream (gc.rs)
//!   INSTANCES                    every Init (or Refused) and Result of the book, and what wakes a root: Sleep,
//!                                Delay, Completed, Cancel, Retry (the recovery scan reads it)
//!   APPENDED                     the Results (also in INSTANCES) of instances that appended to their user book
//!   LIBRARIES                    every record of an object's, a queue shard's or a lock's stream (gc.rs walks it)
//!
//!   platform-wide, in PLATFORM_BOOK:
//!   schedule(name)               a schedule's whole state after each change
//!   SCHEDULES                    the definitions and deletions of schedules (those records of schedule(name))
//!   SCHEDULES_COMPACTED          where SCHEDULES was trimmed below (a u64), the last one kept
//!   BOOKS, TABLES, SWITCHES      listings: books with exactly-once invocations, tables with a transition log,
//!                                switches started
//!   MANIFESTS, TAG_KEY           the registry's manifests (JSON) and the cluster's tag key: not of this format
//! ```
//!
//! Every record names what it is about (the instance ID, the table and key), and readers
//! skip or refuse records that are not theirs. A step names its operation (table and
//! key, callee and a hash of its input, ...), and [`Step::same_operation`] compares what
//! a re-execution asks for with the record in all of it. Each kind of step is a struct
//! of [`kind`], which a variant of [`Step`] wraps (`Step::Read(kind::Read { .. })`), so
//! that logging a step returns what was logged, of its kind (`Instance::log` and
//! `log_seqnum` in `instance/steps.rs`). A new variant of [`Step`] or [`Transition`]
//! goes after the others, since bincode encodes a variant by its number: older records
//! then decode as they did.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::Protocol;
use crate::error::Error;

pub mod kind;
pub mod meta;
#[cfg(any(test, feature = "fuzzing"))]
pub mod samples;

/// The format of every record this node writes.
pub const FORMAT: u8 = 1;

/// One record of an instance's step log. The position of a record in the step log is
/// its step number; `Init` is step 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    /// [`kind::Init`].
    Init(kind::Init),
    /// [`kind::Write`].
    Write(kind::Write),
    /// [`kind::LoggedWrite`].
    LoggedWrite(kind::LoggedWrite),
    /// [`kind::Read`].
    Read(kind::Read),
    /// [`kind::Invoke`].
    Invoke(kind::Invoke),
    /// [`kind::Result`].
    Result(kind::Result),
    /// [`kind::Refused`].
    Refused(kind::Refused),
    /// [`kind::Clocks`].
    Clocks(kind::Clocks),
    /// [`kind::CondAppend`].
    CondAppend(kind::CondAppend),
    /// [`kind::Sleep`].
    Sleep(kind::Sleep),
    /// [`kind::Delay`].
    Delay(kind::Delay),
    /// [`kind::Promise`].
    Promise(kind::Promise),
    /// [`kind::Awaited`].
    Awaited(kind::Awaited),
    /// [`kind::Completed`].
    Completed(kind::Completed),
    /// [`kind::Cancel`].
    Cancel(kind::Cancel),
    /// The instance saw its cancellation here: the guest got a `cancelled` error from
    /// the host call that would have logged this step, and from every step-logging call
    /// after it, and the invocation's outcome is `Cancelled`.
    Cancelled,
    /// [`kind::Retry`].
    Retry(kind::Retry),
    /// [`kind::ObjectWrite`].
    ObjectWrite(kind::ObjectWrite),
    /// [`kind::TxnCommit`].
    TxnCommit(kind::TxnCommit),
    /// [`kind::QueuePush`].
    QueuePush(kind::QueuePush),
    /// [`kind::QueuePop`].
    QueuePop(kind::QueuePop),
    /// [`kind::LockTry`].
    LockTry(kind::LockTry),
    /// [`kind::LockRelease`].
    LockRelease(kind::LockRelease),
    /// [`kind::InitKeyed`].
    InitKeyed(kind::InitKeyed),
    /// [`kind::Checkpoint`].
    Checkpoint(kind::Checkpoint),
    /// [`kind::Group`].
    Group(kind::Group),
    /// [`kind::Put`].
    Put(kind::Put),
    /// [`kind::Outcall`].
    Outcall(kind::Outcall),
    /// [`kind::QueuePopMany`].
    QueuePopMany(kind::QueuePopMany),
}

/// One update of a durable object, at a JSON pointer (RFC 6901) into it, as object writes
/// and commits log it (its checks and how it applies are `objects.rs`'s).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjOp {
    /// Sets the value at `path` (JSON text), making missing parent objects.
    Set { path: String, json: String },
    /// Adds `by` to the number at `path` (missing: 0). Integers saturate.
    Incr { path: String, by: i64 },
    /// Appends a value (JSON text) to the array at `path` (missing: an empty one).
    Push { path: String, json: String },
    /// Removes the field or array element at `path` (nothing if it is missing).
    Remove { path: String },
}

/// The largest value a read-optimized write carries in its record ([`Step::Put`]); a
/// larger one is stored as its version, synced, before a [`Step::Write`] names it.
pub const PUT_INLINE_MAX: usize = 8 << 10;

/// The write of one object that a write-log record holds ([`write_in`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The version it names in the store.
    pub version: u64,
    /// The cursor of the write-optimized value a migration carried over.
    pub migrated_from: Option<u64>,
    /// The value, if the record carries it ([`Step::Put`]); else it is the store's
    /// `version`.
    pub value: Option<Option<Bytes>>,
}

impl std::fmt::Display for LockId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockId::Named(name) => write!(f, "lock {name:?}"),
            LockId::Key { function, key } => write!(f, "key {key:?} of {function}"),
        }
    }
}

/// The key an invocation is addressed to (`?key=`): an exclusive one runs alone among
/// its function's invocations with the key; a shared one runs concurrently with any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvocationKey {
    pub key: String,
    pub exclusive: bool,
}

/// The longest invocation key, in bytes.
pub const INVOCATION_KEY_MAX: usize = 256;

impl InvocationKey {
    pub fn new(key: String, exclusive: bool) -> Result<InvocationKey, Error> {
        if key.is_empty() || key.len() > INVOCATION_KEY_MAX {
            return Err(Error::InvalidArgument(format!("a key is 1 to {INVOCATION_KEY_MAX} bytes, not {}", key.len())));
        }
        Ok(InvocationKey { key, exclusive })
    }
}

/// A lock: one a guest names, or the one a keyed invocation of `function` holds while
/// it runs (`?key=`), which no guest can name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum LockId {
    Named(String),
    Key { function: String, key: String },
}

/// What an await of a promise got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Awaited {
    Value(Bytes),
    TimedOut,
    /// No promise of this ID was created in the book.
    Unknown,
}

/// What a conditional append of a guest got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CondOutcome {
    Appended(u64),
    /// The offset is held, by this record if the index still has it.
    Conflict(Option<u64>),
}

/// One reading of a guest from outside its step log: a clock (in nanoseconds), its
/// book or its settings. New variants go last.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reading {
    /// `wasi:clocks/wall-clock`: since the Unix epoch.
    Wall(u64),
    /// `wasi:clocks/monotonic-clock`.
    Monotonic(u64),
    /// A read of the guest's book (`log.read-next`, `read-prev`, `check-tail`): the
    /// record it returned, if any, as the guest got it (so a replay needs no record
    /// that may have been trimmed since).
    Log(Option<ReadRecord>),
    /// The version of the function's settings (`wasi:config`, the environment) the
    /// execution reads: the registry's position of their last change, 0 for none.
    Settings(u64),
}

/// A record of the guest's book as a read returned it (platform marks left out).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRecord {
    pub seqnum: u64,
    pub tags: Vec<u64>,
    pub data: Bytes,
    pub aux: Option<Bytes>,
}

impl Step {
    /// Whether a recorded step is the one an execution asks for now: the same operation
    /// on the same table and key (and, for a child, the same function and input). The
    /// results (a read's value, a child's outcome) are the record's to give.
    pub fn same_operation(&self, asked: &Step) -> bool {
        match (self, asked) {
            // A write taken again is the same write whatever its value (as the store's
            // first put of a version stays), and whether or not it carries the value.
            (
                Step::Write(kind::Write { table: t, key: k, version: v, .. })
                | Step::Put(kind::Put { table: t, key: k, version: v, .. }),
                Step::Write(kind::Write { table, key, version, .. }) | Step::Put(kind::Put { table, key, version, .. }),
            ) => t == table && k == key && v == version,
            (
                Step::LoggedWrite(kind::LoggedWrite { table: t, key: k, value: v }),
                Step::LoggedWrite(kind::LoggedWrite { table, key, value }),
            ) => t == table && k == key && v == value,
            (Step::Read(kind::Read { table: t, key: k, .. }), Step::Read(kind::Read { table, key, .. })) => {
                t == table && k == key
            }
            (
                Step::Invoke(kind::Invoke { function: f, input_sha256: i, .. }),
                Step::Invoke(kind::Invoke { function, input_sha256, .. }),
            ) => f == function && i == input_sha256,
            (Step::Result(kind::Result { .. }), Step::Result(kind::Result { .. })) => true,
            // The readings are the record's to give; the recorder compares them.
            (Step::Clocks(kind::Clocks { .. }), Step::Clocks(kind::Clocks { .. })) => true,
            (
                Step::CondAppend(kind::CondAppend { tag: t, position: p, data_sha256: d, .. }),
                Step::CondAppend(kind::CondAppend { tag, position, data_sha256, .. }),
            ) => t == tag && p == position && d == data_sha256,
            (Step::Sleep(kind::Sleep { until_ms: u, .. }), Step::Sleep(kind::Sleep { until_ms, .. })) => u == until_ms,
            // The recorded start time is the invocation's, whoever asked.
            (Step::Delay(kind::Delay { .. }), Step::Delay(kind::Delay { .. })) => true,
            (Step::Promise(kind::Promise { promise: p, .. }), Step::Promise(kind::Promise { promise, .. })) => p == promise,
            (Step::Awaited(kind::Awaited { promise: p, .. }), Step::Awaited(kind::Awaited { promise, .. })) => p == promise,
            (Step::Cancelled, Step::Cancelled) => true,
            (a @ Step::ObjectWrite(kind::ObjectWrite { .. }), b @ Step::ObjectWrite(kind::ObjectWrite { .. })) => a == b,
            (a @ Step::TxnCommit(kind::TxnCommit { .. }), b @ Step::TxnCommit(kind::TxnCommit { .. })) => a == b,
            (a @ Step::QueuePush(kind::QueuePush { .. }), b @ Step::QueuePush(kind::QueuePush { .. })) => a == b,
            // The shard and whether it is the last try are the record's to give.
            (Step::QueuePop(kind::QueuePop { queue: q, .. }), Step::QueuePop(kind::QueuePop { queue, .. })) => q == queue,
            (
                Step::QueuePopMany(kind::QueuePopMany { queue: q, max: m, .. }),
                Step::QueuePopMany(kind::QueuePopMany { queue, max, .. }),
            ) => q == queue && m == max,
            (Step::LockTry(kind::LockTry { lock: l, holder: h, .. }), Step::LockTry(kind::LockTry { lock, holder, .. })) => {
                l == lock && h == holder
            }
            (
                Step::LockRelease(kind::LockRelease { lock: l, holder: h, .. }),
                Step::LockRelease(kind::LockRelease { lock, holder, .. }),
            ) => l == lock && h == holder,
            _ => false,
        }
    }

    /// Whether the step is a record of an object's, a queue shard's or a lock's stream
    /// (and so also in [`crate::tags::LIBRARIES`]).
    pub fn is_library(&self) -> bool {
        matches!(
            self,
            Step::ObjectWrite(kind::ObjectWrite { .. })
                | Step::TxnCommit(kind::TxnCommit { .. })
                | Step::QueuePush(kind::QueuePush { .. })
                | Step::QueuePop(kind::QueuePop { .. })
                | Step::QueuePopMany(kind::QueuePopMany { .. })
                | Step::LockTry(kind::LockTry { .. })
                | Step::LockRelease(kind::LockRelease { .. })
        )
    }

    /// What the step does, for error messages.
    pub fn describe(&self) -> String {
        match self {
            Step::Init(kind::Init { function, version, .. }) | Step::InitKeyed(kind::InitKeyed { function, version, .. }) => {
                format!("init of {function} version {version}")
            }
            Step::Write(kind::Write { table, key, .. }) | Step::Put(kind::Put { table, key, .. }) => {
                format!("write of {table}/{}", printable(key))
            }
            Step::LoggedWrite(kind::LoggedWrite { table, key, .. }) => format!("logged write of {table}/{}", printable(key)),
            Step::Read(kind::Read { table, key, .. }) => format!("read of {table}/{}", printable(key)),
            Step::Invoke(kind::Invoke { function, .. }) => format!("call of {function}"),
            Step::Result(kind::Result { .. }) => "result".to_string(),
            Step::Refused(kind::Refused { function, .. }) => format!("refusal of {function}"),
            Step::Clocks(kind::Clocks { readings }) => format!("readings of the clocks and the book ({})", readings.len()),
            Step::CondAppend(kind::CondAppend { tag, position, .. }) => {
                format!("conditional append at offset {position} of tag {tag:#x}")
            }
            Step::Sleep(kind::Sleep { until_ms, .. }) => format!("sleep until {until_ms} ms after the Unix epoch"),
            Step::Delay(kind::Delay { until_ms, .. }) => format!("start delayed until {until_ms} ms after the Unix epoch"),
            Step::Promise(kind::Promise { promise, .. }) => format!("creation of promise {promise}"),
            Step::Awaited(kind::Awaited { promise, .. }) => format!("await of promise {promise}"),
            Step::Completed(kind::Completed { promise, .. }) => format!("completion of promise {promise}"),
            Step::Cancel(kind::Cancel { root }) => format!("cancellation of {root}"),
            Step::Cancelled => "cancellation".to_string(),
            Step::Retry(kind::Retry { id, attempt, .. }) => format!("retry of {id} as attempt {attempt}"),
            Step::QueuePush(kind::QueuePush { queue, .. }) => format!("push to queue {queue:?}"),
            Step::QueuePop(kind::QueuePop { queue, .. }) => format!("pop from queue {queue:?}"),
            Step::QueuePopMany(kind::QueuePopMany { queue, max, .. }) => format!("pop of up to {max} from queue {queue:?}"),
            Step::LockTry(kind::LockTry { lock, .. }) => format!("try of {lock}"),
            Step::LockRelease(kind::LockRelease { lock, .. }) => format!("release of {lock}"),
            Step::ObjectWrite(kind::ObjectWrite { object, ops }) => {
                format!("write of object {object:?} ({} operations)", ops.len())
            }
            Step::TxnCommit(kind::TxnCommit { reads, writes, .. }) => {
                format!("commit of a transaction reading {} objects and writing {}", reads.len(), writes.len())
            }
            Step::Checkpoint(kind::Checkpoint { covers, views }) => format!("checkpoint of {} streams at {covers}", views.len()),
            Step::Group(kind::Group { steps }) => format!("group of {} steps", steps.len()),
            Step::Outcall(kind::Outcall { n, what, .. }) => format!("outgoing call {n} ({what})"),
        }
    }

    /// Drops what the step carries that no one reads once the instance has passed it:
    /// the values of reads and writes, pushed messages, object operations, a child's or
    /// an await's output, clock readings. An instance keeps every step of its attempt
    /// (`Instance::steps`), and only the step at its place is compared with what the
    /// guest asks for; what it keeps of the steps behind it (their kinds and names, a
    /// result, lock tries) stays, so an attempt's memory grows with its steps, not with
    /// the bytes they moved.
    pub fn shed(&mut self) {
        match self {
            Step::Read(kind::Read { value, .. }) | Step::LoggedWrite(kind::LoggedWrite { value, .. }) => *value = None,
            Step::Put(kind::Put { value, .. }) => *value = None,
            Step::QueuePush(push) => push.message = Bytes::new(),
            Step::ObjectWrite(write) => write.ops = Vec::new(),
            Step::TxnCommit(commit) => {
                commit.reads = Vec::new();
                commit.writes = Vec::new();
            }
            Step::Awaited(kind::Awaited { outcome: Awaited::Value(v), .. }) => *v = Bytes::new(),
            Step::Invoke(kind::Invoke { outcome: Outcome::Ok(v), .. }) => *v = Bytes::new(),
            Step::Clocks(clocks) => clocks.readings = Vec::new(),
            Step::Group(group) => group.steps.iter_mut().for_each(Step::shed),
            _ => {}
        }
    }

    /// Whether the step may end a [`Step::Group`] after taken steps: a step of the step
    /// log only (clock readings, a cancellation), the result, one of a queue shard's
    /// stream (a push, a pop) or a lock's release, so that only step-log, write-log,
    /// queue-shard, lock and INSTANCES readers meet groups (objects' readers never do).
    pub fn ends_group(&self) -> bool {
        self.is_taken()
            || matches!(
                self,
                Step::Clocks(kind::Clocks { .. })
                    | Step::Cancelled
                    | Step::Result(kind::Result { .. })
                    | Step::QueuePop(kind::QueuePop { .. })
                    | Step::QueuePopMany(kind::QueuePopMany { .. })
            )
    }

    /// Whether the step is one an instance takes without logging it at once, to ride its
    /// next record: a read-optimized write, a push (a small one is taken; a large one
    /// is logged at once, and may end a group as well), a lock's try (one made on a lock
    /// seen free; one made after a wait is logged at once, and may end a group as well)
    /// or a lock's release.
    pub fn is_taken(&self) -> bool {
        self.is_taken_write()
            || matches!(
                self,
                Step::QueuePush(kind::QueuePush { .. })
                    | Step::LockTry(kind::LockTry { .. })
                    | Step::LockRelease(kind::LockRelease { .. })
            )
    }

    /// Whether the step is a read-optimized write of a step log, which an instance takes
    /// without logging it at once: a [`Step::Put`], or a [`Step::Write`] that is no
    /// migration.
    pub fn is_taken_write(&self) -> bool {
        matches!(self, Step::Write(kind::Write { migrated_from: None, .. }) | Step::Put(kind::Put { .. }))
    }

    /// Whether the step is a reading taken to go with the next record: clock readings, or
    /// a read logged with its value.
    pub fn is_reading(&self) -> bool {
        matches!(self, Step::Clocks(kind::Clocks { .. }) | Step::Read(kind::Read { .. }))
    }

    /// The steps a record holds: a group's, or the one.
    pub fn as_steps(&self) -> &[Step] {
        match self {
            Step::Group(kind::Group { steps }) => steps,
            one => std::slice::from_ref(one),
        }
    }

    /// The steps a step-log record holds, in order: a group's, or the step itself.
    pub fn into_steps(self) -> Vec<Step> {
        match self {
            Step::Group(kind::Group { steps }) => steps,
            step => vec![step],
        }
    }

    /// The Init (or InitKeyed) a step-log record begins with, and its last step if that
    /// is another: a root whose Init was deferred logs it in a group with its first
    /// steps, up to its result (`Instance::begin`), and readers of INSTANCES see both.
    pub fn into_init_and_last(self) -> (Option<Step>, Option<Step>) {
        match self {
            step @ (Step::Init(kind::Init { .. }) | Step::InitKeyed(kind::InitKeyed { .. })) => (Some(step), None),
            Step::Group(kind::Group { mut steps }) if steps.first().is_some_and(Step::is_init) => {
                let last = steps.pop();
                (Some(steps.swap_remove(0)), last)
            }
            step => (None, Some(step.into_last())),
        }
    }

    /// Whether the record whose step this is belongs to the stream of a library other
    /// than the one `mine` says a step of is in: a queue shard's (a push or a pop) or
    /// a lock's (a try or a release). Such a record keeps no view in its aux data,
    /// which names nothing, lest a reader of one stream take the other's view for its
    /// own (a relay's push riding its pop, a release riding a push; the simulator
    /// found a relayed message lost that way). Locks' views name their lock, so a
    /// record of several locks alone keeps each (`locks::LockViews`).
    pub fn in_other_library_streams(&self, mine: impl Fn(&Step) -> bool) -> bool {
        let library = |s: &Step| {
            matches!(
                s,
                Step::QueuePush(kind::QueuePush { .. })
                    | Step::QueuePop(kind::QueuePop { .. })
                    | Step::QueuePopMany(kind::QueuePopMany { .. })
                    | Step::LockTry(kind::LockTry { .. })
                    | Step::LockRelease(kind::LockRelease { .. })
            )
        };
        match self {
            Step::Group(kind::Group { steps }) => steps.iter().any(|s| library(s) && !mine(s)),
            step => library(step) && !mine(step),
        }
    }

    pub fn is_init(&self) -> bool {
        matches!(self, Step::Init(kind::Init { .. }) | Step::InitKeyed(kind::InitKeyed { .. }))
    }

    /// The last step a step-log record holds.
    pub fn into_last(self) -> Step {
        match self {
            Step::Group(kind::Group { mut steps }) => steps.pop().expect("decode_steps refuses an empty group"),
            step => step,
        }
    }
}

/// Decodes a step-log record: one step, or a group of them, which holds at least one
/// step (after an Init, a deferred one), only taken steps before its last (writes,
/// clock readings and reads: the read-optimized reads taken before a deferred Init was
/// logged, logged reads taken to go with the next record, and the outcomes of calls
/// made while the Init was deferred), and ends with a step that may end a group, or
/// one of those reads, or a transaction's commit after nothing but clock readings and
/// reads (`Instance::may_end_group`).
pub fn decode_steps(what: &str, bytes: &[u8]) -> Result<Step, Error> {
    let step: Step = decode(what, bytes)?;
    if let Step::Group(kind::Group { steps }) = &step {
        let rest = match steps.split_first() {
            Some((first, rest)) if first.is_init() => rest,
            _ => &steps[..],
        };
        // Reads, and calls whose outcome a deferred Init's record holds.
        let read = |t: &Step| matches!(t, Step::Read(kind::Read { .. }) | Step::Invoke(kind::Invoke { .. }));
        let well_formed = rest.split_last().is_some_and(|(last, taken)| match last {
            Step::TxnCommit(kind::TxnCommit { .. }) => taken.iter().all(Step::is_reading),
            _ => (last.ends_group() || read(last)) && taken.iter().all(|t| t.is_taken() || t.is_reading() || read(t)),
        });
        if !well_formed {
            return Err(Error::Internal(format!("a {what} record holds a malformed group of {} steps", steps.len())));
        }
    }
    Ok(step)
}

/// The last step of a step-log record (a group's last).
pub fn decode_last(what: &str, bytes: &[u8]) -> Result<Step, Error> {
    decode_steps(what, bytes).map(Step::into_last)
}

/// The write of `(table, key)` that a write-log record holds, read in place (a read-
/// optimized read does this for every record it looks at, and a group may hold many
/// writes): its version, the cursor a migration carried over, and the value if the
/// record carries it (a slice of `bytes`). That is the record's own write, or the last
/// of a group's writes of the object (the one an instance stores; see `Instance::put`).
/// `None` for a record of another object, or of no write.
pub fn write_in(bytes: &Bytes, table: &str, key: &[u8]) -> Result<Option<Written>, Error> {
    use std::sync::OnceLock;
    static VARIANTS: OnceLock<(u32, u32, u32)> = OnceLock::new();
    let &(write, put, group) = VARIANTS.get_or_init(|| {
        let variant = |step: &Step| u32::from_le_bytes(encode(step)[1..5].try_into().expect("a variant"));
        let w = Step::Write(kind::Write { table: String::new(), key: Bytes::new(), version: 0, migrated_from: None });
        let p = Step::Put(kind::Put { table: String::new(), key: Bytes::new(), version: 0, value: None });
        (variant(&w), variant(&p), variant(&Step::Group(kind::Group { steps: Vec::new() })))
    });
    let malformed = || Error::Internal("a write-log record is malformed".into());
    let mut r = Reader(bytes);
    if r.take(1) != Some(&[FORMAT][..]) {
        // A clear error for a format this node does not know.
        return decode::<Step>("write-log", bytes).map(|_| None);
    }
    let first = r.u32().ok_or_else(malformed)?;
    let count = match first {
        v if v == write || v == put => 1,
        v if v == group => r.u64().ok_or_else(malformed)?,
        _ => return Ok(None),
    };
    let mut found = None;
    for i in 0..count {
        let variant = if first == group { r.u32().ok_or_else(malformed)? } else { first };
        if variant != write && variant != put {
            if i + 1 == count {
                // What ends a group is no write.
                break;
            }
            // Clock readings among the writes: read the whole record.
            let steps = decode_steps("write-log", bytes)?.into_steps();
            return Ok(steps.into_iter().rev().find_map(|s| match s {
                Step::Write(kind::Write { table: t, key: k, version, migrated_from }) if t == table && k == key => {
                    Some(Written { version, migrated_from, value: None })
                }
                Step::Put(kind::Put { table: t, key: k, version, value }) if t == table && k == key => {
                    Some(Written { version, migrated_from: None, value: Some(value) })
                }
                _ => None,
            }));
        }
        let (t, k, version) = (r.bytes(), r.bytes(), r.u64());
        let (Some(t), Some(k), Some(version)) = (t, k, version) else { return Err(malformed()) };
        let (migrated_from, value) = match (variant == put, r.take(1).ok_or_else(malformed)?) {
            (_, [0]) => (None, None),
            (false, [1]) => (Some(r.u64().ok_or_else(malformed)?), None),
            (true, [1]) => (None, Some(bytes.slice_ref(r.bytes().ok_or_else(malformed)?))),
            _ => return Err(malformed()),
        };
        if t == table.as_bytes() && k == key {
            let value = (variant == put).then_some(value);
            found = Some(Written { version, migrated_from, value });
        }
    }
    Ok(found)
}

/// Reads bincode's fixed-width little-endian encoding in place.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    /// A length-prefixed string or byte string.
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }
}

fn printable(key: &[u8]) -> String {
    let shown: String = String::from_utf8_lossy(&key[..key.len().min(64)]).into_owned();
    format!("{shown:?}{}", if key.len() > 64 { "..." } else { "" })
}

/// The hash of a child's input that its Invoke step records.
pub fn input_sha256(input: &[u8]) -> [u8; 32] {
    Sha256::digest(input).into()
}

/// A final outcome, as logged: a re-execution or a retried request gets it back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Ok(Bytes),
    Failed(String),
    Trap(String),
    MemoryLimit(u64),
    TooLarge {
        size: Option<u64>,
        limit: u64,
    },
    Timeout(u64),
    /// A child's function did not exist when the child was called.
    NotFound(String),
    /// The invocation was refused before it ran (bad arguments, nesting too deep).
    Refused(String),
    /// The invocation was cancelled (`DELETE /v1/invocations/{id}`).
    Cancelled,
}

impl Outcome {
    /// The outcome of a finished attempt, or `None` when the error is transient (the
    /// invocation should run again rather than have it as its result). Outputs over
    /// [`PAYLOAD_MAX`](crate::PAYLOAD_MAX) become `TooLarge` (the result is logged in
    /// one record) and messages are cut to [`MESSAGE_MAX`] bytes.
    pub fn of_final(result: &Result<Vec<u8>, Error>) -> Option<Outcome> {
        let limit = crate::PAYLOAD_MAX;
        match result {
            Ok(out) if out.len() > limit => Some(Outcome::TooLarge { size: Some(out.len() as u64), limit: limit as u64 }),
            Ok(out) => Some(Outcome::Ok(Bytes::copy_from_slice(out))),
            Err(Error::Failed(m)) => Some(Outcome::Failed(cut(m))),
            Err(Error::MemoryLimit(n)) => Some(Outcome::MemoryLimit(*n)),
            Err(Error::TooLarge { size, limit, .. }) => Some(Outcome::TooLarge { size: *size, limit: *limit }),
            Err(Error::FunctionNotFound(name)) => Some(Outcome::NotFound(cut(name))),
            Err(Error::InvalidArgument(m)) => Some(Outcome::Refused(cut(m))),
            Err(Error::Cancelled) => Some(Outcome::Cancelled),
            _ => None,
        }
    }

    /// A failure logged as the result once retrying it is given up.
    pub fn of_given_up(e: &Error) -> Outcome {
        match e {
            Error::Timeout(ms) => Outcome::Timeout(*ms),
            Error::Trap(m) => Outcome::Trap(cut(m)),
            other => Outcome::of_final(&Err(other.clone())).unwrap_or_else(|| Outcome::Failed(cut(&format!("gave up: {other}")))),
        }
    }

    pub fn into_result(self) -> Result<Vec<u8>, Error> {
        match self {
            Outcome::Ok(b) => Ok(b.to_vec()),
            Outcome::Failed(m) => Err(Error::Failed(m)),
            Outcome::Trap(m) => Err(Error::Trap(m)),
            Outcome::MemoryLimit(n) => Err(Error::MemoryLimit(n)),
            Outcome::TooLarge { size, limit } => Err(Error::TooLarge { what: "the response", size, limit }),
            Outcome::Timeout(ms) => Err(Error::Timeout(ms)),
            Outcome::NotFound(name) => Err(Error::FunctionNotFound(name)),
            Outcome::Refused(m) => Err(Error::InvalidArgument(m)),
            Outcome::Cancelled => Err(Error::Cancelled),
        }
    }
}

/// The longest error message logged as an outcome.
pub const MESSAGE_MAX: usize = 16 << 10;

/// `m`, cut at a character boundary to at most [`MESSAGE_MAX`] bytes.
pub fn cut(m: &str) -> String {
    if m.len() <= MESSAGE_MAX {
        return m.to_string();
    }
    let mut end = MESSAGE_MAX;
    while !m.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &m[..end])
}

/// One record of a table's transition log (Halfmoon §4.7). An instance uses the
/// protocol of the last record at or before its init record (the first record if none:
/// nobody used the table before it existed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Transition {
    /// `protocol` from here on; `auto` lets the runtime switch it from observed rates.
    End { table: String, protocol: Protocol, auto: bool },
    /// A switch from `from` to `to` began: instances starting now use the transitional
    /// protocol, until the End that follows once every earlier instance finished.
    Begin { table: String, from: Protocol, to: Protocol, auto: bool },
}

impl Transition {
    pub fn table(&self) -> &str {
        match self {
            Transition::End { table, .. } | Transition::Begin { table, .. } => table,
        }
    }
}

/// An entry of the platform-wide TABLES and SWITCHES lists.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TableRef {
    pub book: u64,
    pub table: String,
}

/// Records are small: a bincode limit just over the engine's record limit turns a
/// corrupt length prefix into an error instead of an allocation.
const RECORD_LIMIT: u64 = 2 << 20;

pub fn encode<T: Serialize>(value: &T) -> Bytes {
    let mut out = vec![FORMAT];
    bincode::serialize_into(&mut out, value).expect("records always encode");
    Bytes::from(out)
}

/// The length of `value`'s record, without encoding it.
pub fn encoded_len<T: Serialize>(value: &T) -> usize {
    let len = bincode::serialized_size(value).expect("records always encode");
    usize::try_from(len).unwrap_or(usize::MAX).saturating_add(1)
}

/// [`encoded_len`] of the [`Step`] that wraps `kind`, without making it: bincode puts the
/// variant's number, a `u32`, before the fields.
pub fn step_len<K: kind::Kind + Serialize>(kind: &K) -> usize {
    encoded_len(kind).saturating_add(4)
}

pub fn decode<'a, T: serde::Deserialize<'a>>(what: &str, bytes: &'a [u8]) -> Result<T, Error> {
    use bincode::Options as _;
    match bytes.first() {
        Some(&FORMAT) => {}
        Some(other) => {
            return Err(Error::Internal(format!(
                "a {what} record has format {other}, which this node does not know (written by a newer node?)"
            )))
        }
        None => return Err(Error::Internal(format!("an empty {what} record"))),
    }
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .allow_trailing_bytes()
        .with_limit(RECORD_LIMIT)
        .deserialize(&bytes[1..])
        .map_err(|e| Error::Internal(format!("corrupt {what} record: {e}")))
}

#[cfg(test)]
mod tests;
