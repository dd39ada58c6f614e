//! What an invocation is asked to run ([`Run`], [`InvokeRequest`]), where one stands
//! ([`InvocationStatus`], the listings), and the node's table of the invocations it runs
//! ([`Running`]): the data of `invoke/`, below the node that runs them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::lock::Mutex as AsyncMutex;
use tally_log_core::{BookId, Context};

use crate::abort::CrashAfter;
use crate::core::ChildCall;
use crate::error::Error;
use crate::id::InstanceId;
use crate::record::meta::TraceRef;
use crate::record::InvocationKey;

/// One invocation to run: from outside, as a child, or again after a crash.
pub(crate) struct Run {
    pub function: String,
    /// The version to run; `None` for the current one (or the one an Init names).
    pub version: Option<u64>,
    pub book: BookId,
    /// `None` for a re-execution, which takes the input from the Init record.
    pub input: Option<Bytes>,
    pub ctx: Context,
    pub depth: u32,
    /// A parent's deadline, which bounds a child's.
    pub deadline_ms: Option<u64>,
    pub id: InstanceId,
    /// Initialise the instance before running the guest (otherwise lazily, see
    /// `InvokeRequest::retry_key`): needed when the ID may have history.
    pub eager: bool,
    pub crash: Option<Arc<CrashAfter>>,
    pub attempt: u32,
    /// A delayed start (`?delay_ms=`): the guest runs from this wall-clock time on.
    pub delay_until: Option<u64>,
    /// Its Init record was just appended by this node (an asynchronous start): its
    /// first run has no retry and no cancellation to look for yet.
    pub fresh: bool,
    /// The key a fresh invocation is addressed to (`?key=`).
    pub key: Option<InvocationKey>,
    /// Nobody waits for its answer (an asynchronous start, a re-execution): a wait for
    /// its key suspends it soon rather than hold its slot.
    pub background: bool,
    /// A root invocation from outside that may defer its Init on a node alone
    /// (`Instance::begin`); an attempt that found it could not clears it.
    pub defer: bool,
    /// A synchronous root from outside with no key of any kind (`Of::forgettable`).
    pub forgettable: bool,
}

impl Run {
    /// A child invocation's first run on this node, eager (its ID is a step of its
    /// parent's, which a peer may have started).
    pub(crate) fn child(c: ChildCall) -> Run {
        let defer = c.defer;
        Run {
            function: c.function,
            version: None,
            book: c.book,
            input: Some(c.input),
            ctx: c.ctx,
            depth: c.depth,
            deadline_ms: Some(c.deadline_ms),
            id: c.id,
            // A peer may have started it (its ID is a step of its parent's), unless its
            // parent's Init is deferred: then it looks for a history before it defers.
            eager: !defer,
            crash: c.crash,
            attempt: 1,
            delay_until: None,
            fresh: false,
            key: None,
            background: false,
            defer,
            forgettable: defer,
        }
    }
}

/// Where an invocation stands, as `GET /v1/invocations/{id}` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InvocationStatus {
    Running,
    /// In a durable sleep until `wake_ms` (milliseconds since the Unix epoch).
    Sleeping {
        wake_ms: u64,
    },
    Finished(std::result::Result<Bytes, Error>),
}

/// Where a root invocation stands, as a listing shows it (no output: see
/// [`Durable::invocation`] for that).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListedStatus {
    Running,
    Sleeping {
        wake_ms: u64,
    },
    Succeeded,
    /// With the error's code.
    Failed(&'static str),
}

impl ListedStatus {
    /// The name a listing filters by and shows: `running`, `sleeping`, `succeeded` or
    /// `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            ListedStatus::Running => "running",
            ListedStatus::Sleeping { .. } => "sleeping",
            ListedStatus::Succeeded => "succeeded",
            ListedStatus::Failed(_) => "failed",
        }
    }
}

/// One root invocation of a book in a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub id: InstanceId,
    pub function: String,
    pub status: ListedStatus,
    /// The version it runs.
    pub version: u64,
    /// Its key (`?key=`), if it has one.
    pub key: Option<String>,
    /// The seqnum of its Init.
    pub seqnum: u64,
    /// When it started and ended (wall milliseconds), as its records' trailers say.
    pub started_ms: Option<u64>,
    pub ended_ms: Option<u64>,
    /// The trace of its first execution.
    pub trace: Option<TraceRef>,
    /// Where the execution that logged its Result spent its time (microseconds).
    pub parts: Vec<(String, u64)>,
}

/// What a listing of invocations keeps (every field that is set must hold).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListFilter {
    pub function: Option<String>,
    /// A [`ListedStatus::name`].
    pub status: Option<String>,
    /// The invocation's key (`?key=`) or its idempotency key.
    pub key: Option<String>,
    /// Started at or after, and before (wall milliseconds).
    pub since_ms: Option<u64>,
    pub until_ms: Option<u64>,
    /// Took at least, at most (finished invocations only).
    pub min_duration_ms: Option<u64>,
    pub max_duration_ms: Option<u64>,
    /// As of this seqnum: invocations started by it, their status there.
    pub as_of: Option<u64>,
    /// The newest first: the listing's cursor is then the seqnum to go back from.
    pub newest_first: bool,
}

/// Entries of `Running::suspended` past which wakes already past are forgotten.
pub(super) const SUSPENDED_PRUNE_AT: usize = 4_096;

/// Records of a book's INSTANCES stream one listing call reads at most, whatever it
/// finds: past them it answers with what it has and where to go on.
pub(super) const LIST_SCAN_MAX: usize = 10_000;

/// An invocation from outside.
#[derive(Clone, Debug)]
pub struct InvokeRequest {
    pub function: String,
    pub book: BookId,
    pub input: Bytes,
    /// The client's key that makes the invocation exactly-once across its retries.
    pub idempotency_key: Option<String>,
    /// A key a gateway gives an invocation it may retry on another node: the
    /// invocation's effects are exactly-once across those retries (its ID comes from the
    /// key), but it is initialised lazily like an unkeyed one, at its first `state` call
    /// (on a table that is not unsafe), call, object, queue or lock operation, append to
    /// its book, sleep or promise, so a function without effects logs nothing and may
    /// simply run again. Ignored when `idempotency_key` is given.
    pub retry_key: Option<String>,
    /// Test hook: stop after this many effects (`[state] crash_injection` only).
    pub crash_after: Option<u64>,
    /// Where the client's last invocation got to in the log: this one reads nothing
    /// older (session consistency across nodes). Empty for a client with no history.
    pub position: Context,
    /// Milliseconds to wait before the guest runs (0: none). The invocation is logged
    /// at once (so it is exactly-once and outlives the node), and waits as a durable
    /// sleep does; a retry of its key gets the start time the first request logged.
    pub delay_ms: u64,
    /// The key the invocation is addressed to (`?key=`): an exclusive keyed invocation
    /// runs alone among its function's with the key (see `Instance::enter_key`).
    pub key: Option<InvocationKey>,
}

/// What a run of a root holds while its guest runs (see `Running::running`).
pub(super) type RunLock = Arc<AsyncMutex<()>>;

/// The invocations of this node: running roots, asynchronous ones and their status.
pub(crate) struct Running {
    pub(super) id_prefix: u64,
    pub(super) next_id: AtomicU64,
    /// Running answered with their logged result, without running.
    pub(super) replayed: AtomicU64,
    /// Roots answered before their Result was logged (`Instance::end`).
    pub(super) answered_first: AtomicU64,
    /// Root invocations running on this node, each with a lock that a concurrent run of
    /// the same ID (a client's retry, the recovery scan) waits on: one node never runs
    /// the guest of one invocation twice at once.
    /// By book and ID: one ID of two books names two invocations.
    pub(super) running: Mutex<HashMap<(BookId, InstanceId), RunLock>>,
    pub(super) asyncs: Mutex<Asyncs>,
    /// Roots this node suspended, by book and ID, with their wake time: a root whose
    /// child sleeps has no Sleep of its own in its step log, so its status comes from
    /// here (on this node; others show it running).
    pub(super) suspended: Mutex<HashMap<(BookId, InstanceId), u64>>,
    /// Roots answered before their Result is logged (`Instance::end`) whose Result is
    /// still on its way: their status waits for it, so that it never says running
    /// after the answer.
    pub(super) answered: Mutex<HashSet<(BookId, InstanceId)>>,
}

#[derive(Default)]
pub(super) struct Asyncs {
    /// By book and ID: an ID names an invocation of one book only.
    pub(super) by_id: HashMap<(BookId, InstanceId), InvocationStatus>,
    /// Finished ones, oldest first, forgotten past `invocations_kept`.
    pub(super) finished: VecDeque<(BookId, InstanceId)>,
    pub(super) running: usize,
}

impl Running {
    pub(crate) fn new(id_prefix: u64) -> Running {
        Running {
            id_prefix,
            next_id: AtomicU64::new(1),
            replayed: AtomicU64::new(0),
            answered_first: AtomicU64::new(0),
            running: Mutex::new(HashMap::new()),
            asyncs: Mutex::new(Asyncs::default()),
            suspended: Mutex::new(HashMap::new()),
            answered: Mutex::default(),
        }
    }

    /// A new invocation ID, unique across nodes and restarts with high probability.
    pub(super) fn new_id(&self) -> InstanceId {
        InstanceId::generated(&format!("{:016x}{:08x}", self.id_prefix, self.next_id.fetch_add(1, Ordering::Relaxed)))
    }
}
