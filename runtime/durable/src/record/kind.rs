//! The kinds of step, each a type of its own, so that logging a step returns what was
//! logged, of its kind (`Instance::log`), and a variant of [`Step`] wraps one. A newtype
//! variant encodes as the struct variant it replaced (the variant's number, then the
//! fields in order), so records written before read as they did
//! (`every_step_kind_encodes_as_it_always_has`).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{CondOutcome, InvocationKey, LockId, ObjOp, Outcome, Reading, Step};
use crate::id::InstanceId;

/// The invocation started: what is needed to run it again, on the same version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Init {
    pub id: InstanceId,
    pub function: String,
    pub version: u64,
    pub input: Bytes,
}

/// A read-optimized write, also in the object's write log: from here on `version`
/// (stored before this record was appended) is the object's value for readers at or
/// past this record.
///
/// Also written outside any step log by a switch to read-optimized, to carry a
/// write-optimized value over (`migrated_from` is that value's version cursor): such
/// a record is void if the object's previous write-log record is a write newer than
/// that cursor (a transitional write that raced the migration; see `switch.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Write {
    pub table: String,
    pub key: Bytes,
    pub version: u64,
    pub migrated_from: Option<u64>,
}

/// Symmetric write: logged before the store is written; the seqnum is the version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedWrite {
    pub table: String,
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// A logged read (write-optimized, symmetric, transitional) and what it returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Read {
    pub table: String,
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// A child invocation (its function and a hash of its input) and its final outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invoke {
    pub function: String,
    pub input_sha256: [u8; 32],
    pub outcome: Outcome,
}

/// The invocation's final outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Result {
    pub outcome: Outcome,
}

/// A child refused before it ran (its function missing, its arguments refused), in
/// place of Init at step 0: its whole step log, and its outcome for every peer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    pub id: InstanceId,
    pub function: String,
    pub outcome: Outcome,
}

/// What the guest read of its clocks (and of its book, `Reading::Log`) since the
/// step before, in order, logged before the next effect that may depend on it (see
/// `recorder.rs`). Added after the other variants, so records written before it
/// existed decode as they did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clocks {
    pub readings: Vec<Reading>,
}

/// A conditional append of the guest to its user book (at offset `position` of
/// `tag`'s stream, of data hashing to `data_sha256`) and what it got: the seqnum of
/// the record, or a conflict naming the holder. Logged before the guest sees it.
/// (Plain appends need no step: the instance's mark says where each one landed.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CondAppend {
    pub tag: u64,
    pub position: u64,
    pub data_sha256: [u8; 32],
    pub outcome: CondOutcome,
}

/// A durable sleep until `until_ms` (the wall clock, in milliseconds since the Unix
/// epoch), logged before the guest waits, also in INSTANCES: the recovery scan wakes
/// `root` (whose re-execution reaches this sleep again) once it is due.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sleep {
    pub until_ms: u64,
    pub root: InstanceId,
}

/// A delayed start (`?delay_ms=`): logged by the platform as step 1, right after
/// Init and before the guest runs, which it does from `until_ms` on (wall clock,
/// milliseconds since the Unix epoch). Also in INSTANCES, as a Sleep is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delay {
    pub until_ms: u64,
    pub root: InstanceId,
}

/// A promise this instance created (also in the promise's stream, at offset 0).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Promise {
    pub promise: String,
    pub root: InstanceId,
}

/// What an await of `promise` got, logged before the guest sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Awaited {
    pub promise: String,
    pub outcome: super::Awaited,
}

/// The completion of a promise from outside: in the promise's stream at offset 1
/// (so there is one), and in INSTANCES, so that the recovery scan wakes `root` and
/// the roots in the promise's waiters stream.
/// Never a step of a step log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completed {
    pub promise: String,
    pub root: InstanceId,
    pub value: Bytes,
}

/// A request to cancel root `root` and its children: at offset 0 of the root's
/// cancel stream (one is enough), and in INSTANCES, so that the recovery scan runs
/// a sleeping root, which then sees it. Never a step of a step log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cancel {
    pub root: InstanceId,
}

/// Instance `id` trapped and runs again as attempt `attempt`, from `until_ms` on
/// (wall clock): in its retry stream (the last one counts) and in INSTANCES, so that
/// the recovery scan wakes `root` then. Never a step of a step log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retry {
    pub id: InstanceId,
    pub root: InstanceId,
    pub attempt: u32,
    pub until_ms: u64,
}

/// A plain write of a durable object (`objects.rs`): a step, also in the object's
/// stream, where `ops` apply at this record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectWrite {
    pub object: String,
    pub ops: Vec<ObjOp>,
}

/// A read-write transaction's commit (`objects.rs`): a step, also in the stream of
/// every object it writes. It committed exactly when no object of `reads`
/// was written (by a plain write or a commit that committed) after `start` and
/// before this record; then `writes` apply here, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnCommit {
    pub start: u64,
    pub reads: Vec<String>,
    pub writes: Vec<(String, Vec<ObjOp>)>,
}

/// A push of `message` to shard `shard` of queue `queue` (`queues.rs`): a step, also
/// in the shard's stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePush {
    pub queue: String,
    pub shard: u64,
    pub message: Bytes,
}

/// A pop from shard `shard` of queue `queue`: a step, also in the shard's stream. It
/// gets the oldest message of the shard not popped before it, if any. `last`: the
/// pop waits no longer (its time was up), so an empty one ends the guest's call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePop {
    pub queue: String,
    pub shard: u64,
    pub last: bool,
}

/// A pop of up to `max` messages from shard `shard` of queue `queue`, in one record: it
/// gets the oldest `max` messages of the shard not popped before it, or as many as
/// there are (none if the shard is empty); `last` as for [`QueuePop`]. Added after the
/// other variants, so that older records decode as before.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePopMany {
    pub queue: String,
    pub shard: u64,
    pub last: bool,
    pub max: u32,
}

/// A try of `holder` (an instance ID) to take `lock` (`locks.rs`): a step, also in
/// the lock's stream. It takes the lock exactly when `prev` is the seqnum of the
/// lock's last effective record (0: none) and the lock is free there. `last`: the
/// try waits no longer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockTry {
    pub lock: LockId,
    pub holder: String,
    pub root: InstanceId,
    pub prev: u64,
    pub last: bool,
}

/// A release of `lock` by its holder: a step, also in the lock's stream, effective
/// when `prev` is the lock's last effective record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRelease {
    pub lock: LockId,
    pub holder: String,
    pub prev: u64,
}

/// Init of an invocation addressed to a key (`?key=`): Init, and the key, which its
/// exclusive runs hold `LockId::Key` of while the guest runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitKeyed {
    pub id: InstanceId,
    pub function: String,
    pub version: u64,
    pub input: Bytes,
    pub key: InvocationKey,
}

/// The states of some objects, queue shards or locks after every record of their
/// streams at or below `covers` (`gc.rs`): `(stream tag, view)` each, the view
/// encoded as the stream's aux-data views are. In the checkpoint stream of each.
/// Never a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub covers: u64,
    pub views: Vec<(u64, Bytes)>,
}

/// Consecutive steps of one step log in one record, at one offset of the stream:
/// read-optimized writes an instance took without logging each (`Instance::put`),
/// then the clock readings it took after them if the result follows, and the step
/// that logged them, if it was one that may end a group ([`Step::ends_group`]). Also in each write's object
/// stream (a write log's reader takes the last write of its object), and in
/// INSTANCES if it ends with the result. Never empty ([`decode_steps`] checks) and
/// never nested: decoding refuses a group in a group before it reads the inner one, so
/// that a corrupt record cannot make it recurse until the stack overflows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Group {
    pub steps: Vec<Step>,
}

impl<'de> Deserialize<'de> for Group {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Group, D::Error> {
        /// A group as it is encoded: what `derive` would read.
        #[derive(Deserialize)]
        #[serde(rename = "Group")]
        struct Encoded {
            steps: Vec<Step>,
        }
        thread_local! {
            /// Set while this thread decodes a group's steps.
            static IN_GROUP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
        /// Clears the flag however decoding the outer group ends.
        struct Outer;
        impl Drop for Outer {
            fn drop(&mut self) {
                IN_GROUP.with(|g| g.set(false));
            }
        }
        if IN_GROUP.with(|g| g.replace(true)) {
            return Err(serde::de::Error::custom("a group nested in a group"));
        }
        let _outer = Outer;
        Encoded::deserialize(deserializer).map(|e| Group { steps: e.steps })
    }
}

/// A read-optimized write that carries its value (one of at most
/// [`PUT_INLINE_MAX`] bytes): readers at or past this record take the value from it,
/// never from the store. `version` is stored too, but only as the store's record
/// that the object exists (garbage collection pages through stored objects and
/// deletes the versions older records name), without a sync and before the record:
/// a crash may lose it, or leave another execution's value under its name, and no
/// reader looks. Added after the other variants, so that older records decode as
/// before.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Put {
    pub table: String,
    pub key: Bytes,
    pub version: u64,
    pub value: Option<Bytes>,
}

/// Outgoing call `n` of instance `id` (an HTTP request the guest sent out, say) and
/// what came back, logged before the guest sees it, at offset 0 of the call's own
/// stream (`TagKey::outcall`), not in the step log: a call is in flight while the
/// guest goes on, so its record cannot hold a place among the steps. Also in
/// INSTANCES, so that the recovery scan has garbage collection trim the call's stream
/// with the step log. `what` names the call (`POST https://host/path`); a re-execution
/// whose call `n` names another is non-deterministic. Added after the other variants,
/// so that older records decode as before.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcall {
    pub id: InstanceId,
    pub n: u64,
    pub what: String,
    pub outcome: OutcallOutcome,
}

/// What an outgoing call got: the response (as the host encodes it), or why there was
/// none (the connection failed, the upstream timed out, ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutcallOutcome {
    Response(Bytes),
    Failed(String),
}

/// A kind of step: what [`Step`] wraps it in, and the step it is, if it is one of its kind.
pub trait Kind: Into<Step> + Sized {
    fn of(step: Step) -> Option<Self>;
}

macro_rules! kinds {
    ($($kind:ident),* $(,)?) => {
        $(
            impl From<$kind> for Step {
                fn from(kind: $kind) -> Step {
                    Step::$kind(kind)
                }
            }

            impl Kind for $kind {
                fn of(step: Step) -> Option<$kind> {
                    match step {
                        Step::$kind(kind) => Some(kind),
                        _ => None,
                    }
                }
            }
        )*
    };
}

kinds!(
    Init,
    Write,
    LoggedWrite,
    Read,
    Invoke,
    Result,
    Refused,
    Clocks,
    CondAppend,
    Sleep,
    Delay,
    Promise,
    Awaited,
    Completed,
    Cancel,
    Retry,
    ObjectWrite,
    TxnCommit,
    QueuePush,
    QueuePop,
    LockTry,
    LockRelease,
    InitKeyed,
    Checkpoint,
    Group,
    Put,
    Outcall,
    QueuePopMany
);
