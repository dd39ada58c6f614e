//! [`Core`]: what the exactly-once protocols of one node run on and share: the parts
//! (the log, the state store, time, tasks, ownership), the configuration, the cluster's
//! tag key, and what the node learned and may lose: the registered books, the tables'
//! transition logs as read so far (`table/` keeps them), the objects known to have a
//! durable version (`durable_objects`, a memo: a read-optimized write stores its object's
//! marker version only the first time in the node's life), the outcomes of transactions
//! (`objects.rs`), the completions of promises made here (`completions.rs`, which wake
//! the awaits waiting here at once), and, on a node alone, `fresh_from`, a position past
//! the node's start from which a root may read before its Init is logged, and the
//! positions such roots read objects at (`pins.rs`), which garbage collection keeps.
//!
//! An instance holds the core, not the node: what it needs of the invocation layer above
//! (a child call, running a lock's holder again) it asks through [`Invoker`], which
//! [`crate::Durable`] implements.

mod completions;
mod pins;
mod views;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use bytes::Bytes;
use futures_util::lock::Mutex as AsyncMutex;
use tally_log_core::{BookId, Context, Error as LogError, SeqNum};

use crate::abort::{Abort, CrashAfter};
use crate::config::StateConfig;
use crate::env::{BoxFuture, Clock, LogBook, Observe, Peers, Spawn};
use crate::error::{Error, Result};
use crate::id::InstanceId;
use crate::memo::Memo;
use crate::record::{self, Transition};
use crate::store::StateStore;
use crate::table::costs::Ops;
use crate::tags::{TagKey, BOOKS, PLATFORM_BOOK, TAG_KEY};

pub(crate) use completions::Completions;
pub(crate) use pins::{Pin, Pins};
pub(crate) use views::View;

/// The parts the core runs on ([`crate::Parts`] without what only the layer above uses).
pub(crate) struct CoreParts {
    pub log: Arc<dyn LogBook>,
    pub store: Arc<dyn StateStore>,
    pub clock: Arc<dyn Clock>,
    pub spawn: Arc<dyn Spawn>,
    pub peers: Arc<dyn Peers>,
    pub observe: Arc<dyn Observe>,
    /// A fresh secret, proposed as the cluster's tag key if it has none yet.
    pub tag_key: TagKey,
}

/// Node-wide bounds that come from outside `[state]`.
#[derive(Clone, Copy, Debug)]
pub struct NodeBounds {
    /// Nested `invoke.call`s.
    pub call_depth_max: u32,
    /// Finished asynchronous invocations whose status is kept in memory.
    pub invocations_kept: usize,
}

/// Slots of [`Core::durable_objects`].
const DURABLE_OBJECTS_SLOTS: usize = 4096;
/// Slots of [`Core::snapshots_refused`].
const SNAPSHOTS_REFUSED_SLOTS: usize = 1024;
/// Transaction outcomes a node remembers ([`Decisions`]).
const DECISIONS_KEPT: usize = 65_536;

/// What the exactly-once protocols of one node share.
pub(crate) struct Core {
    pub(crate) log: Arc<dyn LogBook>,
    pub(crate) store: Arc<dyn StateStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) spawn: Arc<dyn Spawn>,
    pub(crate) peers: Arc<dyn Peers>,
    pub(crate) observe: Arc<dyn Observe>,
    pub(crate) config: StateConfig,
    pub(crate) bounds: NodeBounds,
    pub(crate) tags: TagKey,
    /// Books registered in [`BOOKS`] (by any node), and where the stream was read to.
    books: AsyncMutex<(SeqNum, BTreeSet<BookId>)>,
    /// What this node read of the tables' transition logs, and the operations it counted
    /// (`table/`).
    pub(crate) tables: TableMemo,
    /// Objects (store table, key) of which a version is durable in `store`: a write of
    /// one stores no marker (`Instance::store_pending`). Garbage collection keeps a
    /// version of every object it collects (the visible one, whose marker it stores
    /// first), so an entry stays true; one that falls out of the memo costs a synced
    /// marker at the object's next write.
    pub(crate) durable_objects: Memo<()>,
    /// Awaits waiting in place on this node, woken by a completion made here.
    pub(crate) completions: Completions,
    /// Outcomes of transactions' commits this node decided or read (`objects.rs`).
    pub(crate) decisions: Decisions,
    /// Objects' states this node parsed, by the record they follow (`views.rs`).
    pub(crate) views: views::Views,
    /// What this node's pops are taking of each queue shard now (`queues/claims.rs`).
    pub(crate) claims: crate::queues::Claims,
    /// On a node alone ([`crate::Peers::alone`]): a position past everything logged
    /// before it started, from which its index is fresh, so that roots may defer their
    /// Init (`Instance::begin`). `None` elsewhere.
    pub(crate) fresh_from: Option<Context>,
    /// Where instances of this node read before their Init is logged: garbage
    /// collection keeps what they may read (`pins.rs`).
    pub(crate) pins: Pins,
    /// Functions (name, version) whose instance read at a snapshot before its Init and
    /// then had to log something other than its result: their instances log the Init
    /// before such a read (`instance/snapshot.rs`).
    pub(crate) snapshots_refused: Memo<()>,
    /// The invocation layer above, set once it exists.
    invoker: OnceLock<Weak<dyn Invoker>>,
}

/// The tables' part of the core: what `table/` read of the transition logs, and the
/// operations counted for `auto`.
pub(crate) struct TableMemo {
    /// Reads and writes of switchable tables on this node since the last look.
    pub(crate) rates: Mutex<BTreeMap<BookId, BTreeMap<String, Ops>>>,
    /// The TABLES stream as read so far.
    pub(crate) listing: AsyncMutex<(SeqNum, HashMap<BookId, BTreeSet<String>>)>,
    /// First transition records, which never change once written.
    pub(crate) first: Mutex<HashMap<(BookId, String), Transition>>,
    /// Per table: the seqnum of the newest transition record seen and how many records
    /// the transition log holds up to it (`latest_transition`).
    pub(crate) transitions: Mutex<HashMap<(BookId, String), (u64, u64)>>,
}

impl Default for TableMemo {
    fn default() -> TableMemo {
        TableMemo {
            rates: Mutex::new(BTreeMap::new()),
            listing: AsyncMutex::new((SeqNum(0), HashMap::new())),
            first: Mutex::new(HashMap::new()),
            transitions: Mutex::new(HashMap::new()),
        }
    }
}

/// A transaction's outcome cache on this node: outcomes never change.
#[derive(Default)]
pub(crate) struct Decisions(Mutex<HashMap<(BookId, u64), bool>>);

impl Decisions {
    pub(crate) fn get(&self, book: BookId, seqnum: u64) -> Option<bool> {
        self.0.lock().expect("not poisoned").get(&(book, seqnum)).copied()
    }

    pub(crate) fn put(&self, book: BookId, seqnum: u64, committed: bool) {
        let mut m = self.0.lock().expect("not poisoned");
        if m.len() >= DECISIONS_KEPT {
            m.clear();
        }
        m.insert((book, seqnum), committed);
    }
}

/// A child invocation, as an instance asks the layer above to run it.
pub(crate) struct ChildCall {
    pub function: String,
    pub book: BookId,
    pub input: Bytes,
    /// The parent's context, for the child to start from.
    pub ctx: Context,
    pub depth: u32,
    /// The parent's deadline, which bounds the child's.
    pub deadline_ms: u64,
    pub id: InstanceId,
    pub crash: Option<Arc<CrashAfter>>,
    /// The parent's Init is deferred (a node alone): the child defers its own too, and
    /// one that only read logs nothing; the parent takes its outcome as a pending step
    /// (`instance/children.rs`).
    pub defer: bool,
}

/// The invocation layer, as the core's instances reach it.
pub(crate) trait Invoker: Send + Sync {
    /// Runs a child invocation to its end (or its suspension): its result, and the
    /// context it ended at.
    fn call(self: Arc<Self>, child: ChildCall) -> BoxFuture<'static, (Result<Vec<u8>>, Context)>;

    /// Runs `root` again (the holder of a lock or key that a waiter has seen keep it),
    /// unless it ran again lately or sleeps.
    fn kick_holder(self: Arc<Self>, ctx: &Context, book: BookId, root: &InstanceId);
}

impl Core {
    /// Agrees on the cluster's tag key and reads the registered books.
    pub(crate) async fn start(parts: CoreParts, config: StateConfig, bounds: NodeBounds) -> Result<Core> {
        let tags = agree_tag_key(&*parts.log, parts.tag_key).await?;
        let fresh_from = match parts.peers.alone() {
            true => Some(barrier(&*parts.log).await?),
            false => None,
        };
        let store = Arc::new(crate::store::VersionCache::new(parts.store, config.version_cache_bytes));
        let views = views::Views::new(config.views_bytes);
        let core = Core {
            log: parts.log,
            store,
            clock: parts.clock,
            spawn: parts.spawn,
            peers: parts.peers,
            observe: parts.observe,
            config,
            bounds,
            tags,
            books: AsyncMutex::new((SeqNum(0), BTreeSet::new())),
            tables: TableMemo::default(),
            durable_objects: Memo::new(DURABLE_OBJECTS_SLOTS),
            completions: Completions::default(),
            decisions: Decisions::default(),
            views,
            claims: crate::queues::Claims::default(),
            fresh_from,
            pins: Pins::default(),
            snapshots_refused: Memo::new(SNAPSHOTS_REFUSED_SLOTS),
            invoker: OnceLock::new(),
        };
        core.books().await?;
        Ok(core)
    }

    /// Names the invocation layer above (once).
    pub(crate) fn set_invoker(&self, invoker: Weak<dyn Invoker>) {
        let _ = self.invoker.set(invoker);
    }

    /// The invocation layer above, while it lives.
    pub(crate) fn invoker(&self) -> Result<Arc<dyn Invoker>, Abort> {
        self.invoker.get().and_then(Weak::upgrade).ok_or_else(|| Abort::internal("the invocation layer of this node is gone"))
    }

    /// Every book registered so far (by any node): what this node knew, and what was
    /// appended since it last looked.
    pub async fn books(&self) -> Result<BTreeSet<BookId>, Error> {
        let mut guard = self.books.lock().await;
        let (next, books) = &mut *guard;
        let mut ctx = Context::new();
        while let Some(r) = self.log.read_next(&mut ctx, PLATFORM_BOOK, BOOKS, *next).await? {
            *next = SeqNum(r.seqnum.0 + 1);
            match record::decode::<u64>("book listing", &r.data) {
                Ok(b) if !BookId(b).is_reserved() => {
                    books.insert(BookId(b));
                }
                Ok(b) => tracing::error!(seqnum = %r.seqnum, "skipping a listed platform book {b:#x}"),
                Err(e) => tracing::error!(seqnum = %r.seqnum, "skipping a book listing: {e}"),
            }
        }
        Ok(books.clone())
    }

    /// Makes sure the recovery scan will look at `book`.
    pub(crate) async fn register_book(&self, book: BookId) -> Result<(), Abort> {
        let mut guard = self.books.lock().await;
        if guard.1.contains(&book) {
            return Ok(());
        }
        if guard.1.len() >= self.config.books_max {
            return Err(Abort::Refused(Error::InvalidArgument(format!(
                "this cluster keeps exactly-once state in at most {} books (`[state] books_max`)",
                self.config.books_max
            ))));
        }
        self.log.append(&mut Context::new(), PLATFORM_BOOK, &[BOOKS], record::encode(&book.0)).await?;
        guard.1.insert(book);
        Ok(())
    }
}

/// The cluster's tag key: the first TAG_KEY record, which this node proposes `mine` for
/// if there is none yet (a conditional append at offset 0: one proposal wins).
async fn agree_tag_key(log: &dyn LogBook, mine: TagKey) -> Result<TagKey, Error> {
    let mut ctx = Context::new();
    let existing = log.read_next(&mut ctx, PLATFORM_BOOK, TAG_KEY, SeqNum(0)).await?;
    let record = match existing {
        Some(r) => r,
        None => {
            let data = Bytes::copy_from_slice(mine.as_bytes());
            match log.cond_append(&mut ctx, PLATFORM_BOOK, &[TAG_KEY], data, TAG_KEY, 0).await {
                Ok(_) => return Ok(mine),
                Err(LogError::Conflict { .. }) => log
                    .read_next(&mut ctx, PLATFORM_BOOK, TAG_KEY, SeqNum(0))
                    .await?
                    .ok_or_else(|| Error::Internal("the tag key vanished".into()))?,
                Err(e) => return Err(e.into()),
            }
        }
    };
    TagKey::from_slice(&record.data).ok_or_else(|| Error::Internal(format!("the tag key record has {} bytes", record.data.len())))
}

/// A position past everything the log ordered before: that of a conditional append that
/// cannot hold (offset 0 of the tag key's stream is taken), which is ordered like any
/// append and places nothing.
async fn barrier(log: &dyn LogBook) -> Result<Context, Error> {
    let mut ctx = Context::new();
    match log.cond_append(&mut ctx, PLATFORM_BOOK, &[TAG_KEY], Bytes::new(), TAG_KEY, 0).await {
        Err(LogError::Conflict { .. }) => Ok(ctx),
        Ok(_) => Err(Error::Internal("the tag key's stream was empty after the key was agreed".into())),
        Err(e) => Err(e.into()),
    }
}
