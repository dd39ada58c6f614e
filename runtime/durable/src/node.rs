//! [`Durable`]: what the exactly-once invocations of one node share (the log, the state
//! store, time, tasks, the functions, the configuration), the platform-wide lists it
//! keeps in the log, and the read-optimized helpers the protocols share.
//!
//! Beside the parts, `Durable` keeps what the node learned and may lose: the objects known
//! to have a durable version (`durable_objects`, a memo: a read-optimized write stores its
//! object's marker version only the first time in the node's life), the completions of
//! promises made on this node (`Completions`, which wake the awaits waiting here at once),
//! and, on a node alone, `fresh_from`, a position past the node's start from which a root
//! may read before its Init is logged. `visible_write` finds the write-log record a
//! read-optimized read sees, migrations included; `Ops` counts what each protocol would
//! cost, for `auto` (`switch.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use futures_util::lock::Mutex as AsyncMutex;
use tally_log_core::{BookId, Context, Error as LogError, SeqNum};

use crate::attempt::Functions;
use crate::config::{Protocol, StateConfig};
use crate::env::{Clock, LogBook, Peers, Spawn};
use crate::error::Error;
use crate::invoke::Invocations;
use crate::memo::Memo;
use crate::record::{self, TableRef, Transition, Written};
use crate::store::{StateError, StateStore, Value};
use crate::tags::{shadow, TagKey, BOOKS, PLATFORM_BOOK, TABLES, TAG_KEY};

/// The largest input or output of an exactly-once invocation: both are logged, in one
/// record each (the engine's limit is 1 MiB).
pub const PAYLOAD_MAX: usize = 960 << 10;
/// The largest state value (a logged read carries it in one record).
pub const VALUE_MAX: usize = 512 << 10;
/// The longest state key.
pub const KEY_MAX: usize = 1024;

/// Why an attempt stops inside a protocol operation.
#[derive(Debug)]
pub enum Abort {
    /// The guest's arguments were refused; the guest gets the error and goes on.
    Refused(Error),
    /// The log or the store failed; the attempt stops and the invocation runs again.
    Transient(Error),
    /// The re-execution took another path than the recorded history.
    NonDeterministic(String),
    /// This execution is a late peer of an invocation that has finished: it stops, and
    /// the invocation's logged result stands.
    Superseded,
    /// The crash-injection hook fired.
    Crash,
    /// The invocation cannot run under its ID (its key named another request, or its
    /// result is no longer kept): the attempt ends with this error, which the caller
    /// gets, also when the guest met it at a lazy start inside a host call.
    Ended(Error),
    /// The guest sleeps durably until `wake_ms` (wall clock): the attempt ends, and the
    /// invocation runs again then, replaying to the sleep.
    Suspended { wake_ms: u64 },
}

impl Abort {
    pub(crate) fn internal(message: impl Into<String>) -> Abort {
        Abort::Transient(Error::Internal(message.into()))
    }

    /// The error the attempt ends with.
    pub fn into_error(self) -> Error {
        match self {
            Abort::Refused(e) | Abort::Transient(e) | Abort::Ended(e) => e,
            Abort::NonDeterministic(m) => Error::Trap(format!("non-deterministic re-execution: {m}")),
            Abort::Superseded => Error::Superseded,
            Abort::Crash => Error::InjectedCrash,
            // The runtime names the root invocation when it answers.
            Abort::Suspended { wake_ms } => Error::Suspended { id: String::new(), wake_ms },
        }
    }
}

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Abort::Refused(e) | Abort::Transient(e) | Abort::Ended(e) => e.fmt(f),
            Abort::NonDeterministic(m) => write!(f, "non-deterministic re-execution: {m}"),
            Abort::Superseded => f.write_str("the invocation finished meanwhile"),
            Abort::Crash => f.write_str("injected crash"),
            Abort::Suspended { wake_ms } => write!(f, "sleeping until {wake_ms} ms after the Unix epoch"),
        }
    }
}

impl std::error::Error for Abort {}

impl From<LogError> for Abort {
    fn from(e: LogError) -> Self {
        Abort::Transient(Error::from(e))
    }
}

impl From<StateError> for Abort {
    fn from(e: StateError) -> Self {
        Abort::Transient(Error::from(e))
    }
}

impl From<Error> for Abort {
    fn from(e: Error) -> Self {
        Abort::Transient(e)
    }
}

/// Table names: 1 to 64 of `a-z 0-9 - _`.
pub fn check_table(table: &str) -> Result<(), String> {
    let ok = !table.is_empty()
        && table.len() <= 64
        && table.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!("invalid table name {table:?}: 1 to 64 of a-z 0-9 - _"))
    }
}

pub(crate) fn check_object(table: &str, key: &[u8], value: Option<&[u8]>) -> Result<(), Abort> {
    check_table(table).map_err(|m| Abort::Refused(Error::InvalidArgument(m)))?;
    if key.is_empty() {
        return Err(Abort::Refused(Error::InvalidArgument("state keys must not be empty".into())));
    }
    if key.len() > KEY_MAX {
        let size = Some(key.len() as u64);
        return Err(Abort::Refused(Error::TooLarge { what: "the state key", size, limit: KEY_MAX as u64 }));
    }
    if let Some(v) = value.filter(|v| v.len() > VALUE_MAX) {
        let size = Some(v.len() as u64);
        return Err(Abort::Refused(Error::TooLarge { what: "the state value", size, limit: VALUE_MAX as u64 }));
    }
    Ok(())
}

/// The store table of `(book, table)`.
pub(crate) fn store_table(book: BookId, table: &str) -> String {
    format!("{:x}/{table}", book.0)
}

/// Operations counted on one table, and what they cost under each protocol that `auto`
/// chooses from, in log appends and synced store writes. The costs follow from the
/// order of an invocation's operations, the same under either protocol
/// (`Instance::observe`): a read-optimized write waits for the next record, and a read
/// after it logs it first; a write-optimized read waits for the next record too, and a
/// write after it logs it first (as it does a deferred Init), while the run of writes
/// is stored, synced, before the next read or record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ops {
    pub reads: u64,
    pub writes: u64,
    /// Appends a read-optimized table adds: one per read after writes.
    pub ro_appends: u64,
    /// Synced store writes a read-optimized table adds: one per run of writes with a
    /// value too large for its record.
    pub ro_syncs: u64,
    /// Appends a write-optimized table adds: one per run of writes after reads (or
    /// after a deferred Init).
    pub wo_appends: u64,
    /// Synced store writes a write-optimized table adds: one per run of writes.
    pub wo_syncs: u64,
}

/// An instance's last state operation on a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LastOp {
    Read,
    /// A write; `large` if one of the writes since the last read had a value too large
    /// for its record.
    Write {
        large: bool,
    },
}

impl Ops {
    /// A read (`None`) or a write (`Some(large)`: its value is too large for its record)
    /// after `last`, the instance's last operation on the table, if any (`init_deferred`:
    /// its Init waits for its first record): what it adds, and the last operation now.
    pub(crate) fn of(last: Option<LastOp>, write: Option<bool>, init_deferred: bool) -> (Ops, LastOp) {
        let mut ops = Ops::default();
        let now = match write {
            None => {
                ops.reads = 1;
                if matches!(last, Some(LastOp::Write { .. })) {
                    ops.ro_appends = 1;
                }
                LastOp::Read
            }
            Some(large) => {
                ops.writes = 1;
                let large_before = match last {
                    Some(LastOp::Write { large }) => large,
                    _ => {
                        ops.wo_syncs = 1;
                        if last == Some(LastOp::Read) || (last.is_none() && init_deferred) {
                            ops.wo_appends = 1;
                        }
                        false
                    }
                };
                if large && !large_before {
                    ops.ro_syncs = 1;
                }
                LastOp::Write { large: large || large_before }
            }
        };
        (ops, now)
    }

    pub(crate) fn add(&mut self, o: Ops) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.ro_appends += o.ro_appends;
        self.ro_syncs += o.ro_syncs;
        self.wo_appends += o.wo_appends;
        self.wo_syncs += o.wo_syncs;
    }
}

/// The parts a node's exactly-once layer runs on.
pub struct Parts {
    pub log: Arc<dyn LogBook>,
    pub store: Arc<dyn StateStore>,
    pub clock: Arc<dyn Clock>,
    pub spawn: Arc<dyn Spawn>,
    pub functions: Arc<dyn Functions>,
    /// Which books this node looks after (see [`Peers`]).
    pub peers: Arc<dyn Peers>,
    /// A fresh secret, proposed as the cluster's tag key if it has none yet.
    pub tag_key: TagKey,
    /// Where this node's invocation IDs start (random, so nodes and restarts differ).
    pub id_prefix: u64,
}

/// Node-wide bounds that come from outside `[state]`.
#[derive(Clone, Copy, Debug)]
pub struct NodeBounds {
    /// Nested `invoke.call`s.
    pub call_depth_max: u32,
    /// Finished asynchronous invocations whose status is kept in memory.
    pub invocations_kept: usize,
}

/// Slots of [`Durable::durable_objects`].
const DURABLE_OBJECTS_SLOTS: usize = 4096;

/// What exactly-once invocations of one node share.
pub struct Durable {
    pub(crate) log: Arc<dyn LogBook>,
    pub(crate) store: Arc<dyn StateStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) spawn: Arc<dyn Spawn>,
    pub(crate) functions: Arc<dyn Functions>,
    pub(crate) peers: Arc<dyn Peers>,
    pub config: StateConfig,
    pub(crate) bounds: NodeBounds,
    pub(crate) tags: TagKey,
    /// Objects (store table, key) of which a version is durable in `store`: a write of
    /// one stores no marker (`Instance::store_pending`). Garbage collection keeps a
    /// version of every object it collects (the visible one, whose marker it stores
    /// first), so an entry stays true; one that falls out of the memo costs a synced
    /// marker at the object's next write.
    pub(crate) durable_objects: Memo<()>,
    /// Books registered in [`BOOKS`] (by any node), and where the stream was read to.
    books: AsyncMutex<(SeqNum, BTreeSet<BookId>)>,
    /// Reads and writes of switchable tables on this node since the last look.
    rates: Mutex<BTreeMap<BookId, BTreeMap<String, Ops>>>,
    /// The TABLES stream as read so far.
    tables: AsyncMutex<(SeqNum, HashMap<BookId, BTreeSet<String>>)>,
    /// First transition records, which never change once written.
    first: Mutex<HashMap<(BookId, String), Transition>>,
    /// Per table: the seqnum of the newest transition record seen and how many records
    /// the transition log holds up to it (`latest_transition`).
    transitions: Mutex<HashMap<(BookId, String), (u64, u64)>>,
    pub(crate) invocations: Invocations,
    /// Switches this node is completing, by (book, table).
    pub(crate) completing: Mutex<BTreeSet<(BookId, String)>>,
    pub(crate) schedules: crate::schedule::Schedules,
    /// Awaits waiting in place on this node, woken by a completion made here.
    pub(crate) completions: Completions,
    /// Outcomes of transactions' commits this node decided or read (`objects.rs`).
    pub(crate) decisions: crate::objects::Decisions,
    /// Lock holders this node ran again for their waiters, and when (`locks.rs`).
    pub(crate) kicked: Mutex<HashMap<crate::id::InstanceId, u64>>,
    /// Set by [`Durable::stop`]: the background loops end at their next turn.
    stopped: AtomicBool,
    /// On a node alone ([`crate::Peers::alone`]): a position past everything logged
    /// before it started, from which its index is fresh, so that roots may defer their
    /// Init (`Instance::begin`). `None` elsewhere.
    pub(crate) fresh_from: Option<Context>,
}

impl Durable {
    /// Agrees on the cluster's tag key and reads the registered books. Background work
    /// starts with [`Durable::start_background`].
    pub async fn start(parts: Parts, config: StateConfig, bounds: NodeBounds) -> Result<Arc<Durable>, Error> {
        let tags = agree_tag_key(&*parts.log, parts.tag_key).await?;
        let fresh_from = match parts.peers.alone() {
            true => Some(barrier(&*parts.log).await?),
            false => None,
        };
        let durable = Arc::new(Durable {
            log: parts.log,
            store: Arc::new(crate::store::VersionCache::new(parts.store, config.version_cache_bytes)),
            clock: parts.clock,
            spawn: parts.spawn,
            functions: parts.functions,
            peers: parts.peers,
            config,
            bounds,
            tags,
            durable_objects: Memo::new(DURABLE_OBJECTS_SLOTS),
            books: AsyncMutex::new((SeqNum(0), BTreeSet::new())),
            rates: Mutex::new(BTreeMap::new()),
            tables: AsyncMutex::new((SeqNum(0), HashMap::new())),
            first: Mutex::new(HashMap::new()),
            transitions: Mutex::new(HashMap::new()),
            invocations: Invocations::new(parts.id_prefix),
            completing: Mutex::new(BTreeSet::new()),
            schedules: Default::default(),
            completions: Completions::default(),
            decisions: Default::default(),
            kicked: Mutex::new(HashMap::new()),
            stopped: AtomicBool::new(false),
            fresh_from,
        });
        durable.books().await?;
        Ok(durable)
    }

    /// Ends the node's background loops (the recovery scan, `auto`, the resumption of
    /// switches) at their next turn, though the node is still referenced: a node whose
    /// log is shutting down must not keep scanning it.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// The node behind a background loop's `weak`, unless it is gone or stopped.
    pub(crate) fn live(weak: &Weak<Durable>) -> Option<Arc<Durable>> {
        weak.upgrade().filter(|d| !d.stopped.load(Ordering::Acquire))
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

    /// The tables of `book` that have a transition log.
    pub async fn tables(&self, book: BookId) -> Result<BTreeSet<String>, Error> {
        let mut guard = self.tables.lock().await;
        let (next, by_book) = &mut *guard;
        let mut ctx = Context::new();
        while let Some(r) = self.log.read_next(&mut ctx, PLATFORM_BOOK, TABLES, *next).await? {
            *next = SeqNum(r.seqnum.0 + 1);
            match record::decode::<TableRef>("table listing", &r.data) {
                Ok(t) => {
                    by_book.entry(BookId(t.book)).or_default().insert(t.table);
                }
                Err(e) => tracing::error!(seqnum = %r.seqnum, "skipping a table listing: {e}"),
            }
        }
        Ok(by_book.get(&book).cloned().unwrap_or_default())
    }

    /// Lists a table whose transition log is about to be created.
    pub(crate) async fn register_table(&self, book: BookId, table: &str) -> Result<(), Abort> {
        let listing = record::encode(&TableRef { book: book.0, table: table.to_string() });
        self.log.append(&mut Context::new(), PLATFORM_BOOK, &[TABLES], listing).await?;
        Ok(())
    }

    /// The newest transition record of `table` (which has one: `first_transition`)
    /// and how many records its transition log holds: the offset a conditional append
    /// names to say that the table did not switch since. Transition logs are never
    /// trimmed, so the count is of the records read (remembered per table).
    pub(crate) async fn latest_transition(
        &self,
        ctx: &mut Context,
        book: BookId,
        table: &str,
    ) -> Result<(Transition, u64), Abort> {
        let (tag, sb) = (self.tags.transition(table), shadow(book));
        let Some(latest) = self.log.read_prev(ctx, sb, tag, SeqNum::MAX).await? else {
            return Err(Abort::internal(format!("the transition log of {table:?} is empty")));
        };
        let t: Transition = record::decode("transition", &latest.data)?;
        if t.table() != table {
            return Err(Abort::internal(format!("tables {table:?} and {:?} share a transition tag", t.table())));
        }
        let key = (book, table.to_string());
        if let Some(&(seqnum, count)) = self.transitions.lock().expect("not poisoned").get(&key) {
            if seqnum == latest.seqnum.0 {
                return Ok((t, count));
            }
        }
        let (mut count, mut at) = (0, SeqNum(0));
        while let Some(r) = self.log.read_next(ctx, sb, tag, at).await? {
            if r.seqnum > latest.seqnum {
                break;
            }
            count += 1;
            if r.seqnum == latest.seqnum {
                break;
            }
            at = SeqNum(r.seqnum.0 + 1);
        }
        self.transitions.lock().expect("not poisoned").insert(key, (latest.seqnum.0, count));
        Ok((t, count))
    }

    /// The first record of `table`'s transition log, creating it (with `declared`) if the
    /// table has none. First records never change, so they are cached.
    pub(crate) async fn first_transition(
        &self,
        ctx: &mut Context,
        book: BookId,
        table: &str,
        declared: Protocol,
    ) -> Result<Transition, Abort> {
        let cache_key = (book, table.to_string());
        if let Some(t) = self.first.lock().expect("not poisoned").get(&cache_key) {
            return Ok(t.clone());
        }
        let tag = self.tags.transition(table);
        let sb = shadow(book);
        let found = match self.log.read_next(ctx, sb, tag, SeqNum(0)).await? {
            Some(r) => r,
            None => {
                let first = Transition::End {
                    table: table.to_string(),
                    protocol: if declared == Protocol::Auto { Protocol::ReadOptimized } else { declared },
                    auto: declared == Protocol::Auto,
                };
                // Listed first, so that no table escapes garbage collection.
                self.register_table(book, table).await?;
                match self.log.cond_append(ctx, sb, &[tag], record::encode(&first), tag, 0).await {
                    Ok(_) => {
                        self.first.lock().expect("not poisoned").insert(cache_key, first.clone());
                        return Ok(first);
                    }
                    Err(LogError::Conflict { .. }) => self
                        .log
                        .read_next(ctx, sb, tag, SeqNum(0))
                        .await?
                        .ok_or_else(|| Abort::internal(format!("the transition log of {table:?} vanished")))?,
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let t: Transition = record::decode("transition", &found.data)?;
        if t.table() != table {
            return Err(Abort::internal(format!("tables {table:?} and {:?} share a transition tag", t.table())));
        }
        self.first.lock().expect("not poisoned").insert(cache_key, t.clone());
        Ok(t)
    }

    /// Counts operations on a table that could be switched, with their costs.
    pub(crate) fn observe(&self, book: BookId, table: &str, ops: Ops) {
        let mut rates = self.rates.lock().expect("not poisoned");
        let tables = rates.entry(book).or_default();
        match tables.get_mut(table) {
            Some(counted) => counted.add(ops),
            None => {
                tables.insert(table.to_string(), ops);
            }
        }
    }

    /// The operations counted since the last call, per book and table.
    pub fn take_rates(&self) -> BTreeMap<BookId, BTreeMap<String, Ops>> {
        std::mem::take(&mut *self.rates.lock().expect("not poisoned"))
    }

    /// The state store (for tests that look at what garbage collection leaves).
    pub fn store(&self) -> &Arc<dyn StateStore> {
        &self.store
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

/// One record of an object's write log: its seqnum, and the object's write it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    pub seqnum: u64,
    pub written: Written,
}

/// The last write-log record of `(table, key)` at or before `at` (skipping records of
/// other objects that share the tag).
async fn prev_write(
    d: &Durable,
    ctx: &mut Context,
    book: BookId,
    table: &str,
    key: &[u8],
    mut at: u64,
) -> Result<Option<WriteRecord>, Abort> {
    let tag = d.tags.object(table, key);
    loop {
        let Some(r) = d.log.read_prev(ctx, shadow(book), tag, SeqNum(at)).await? else {
            return Ok(None);
        };
        if let Some(written) = record::write_in(&r.data, table, key)? {
            return Ok(Some(WriteRecord { seqnum: r.seqnum.0, written }));
        }
        match r.seqnum.0.checked_sub(1) {
            Some(prev) => at = prev,
            None => return Ok(None),
        }
    }
}

/// The write-log record that gives `(table, key)` its value for a reader at `at`: the
/// last one at or before `at`, unless that is a migration voided by a newer write
/// just before it (see [`Step::Write`]).
pub(crate) async fn visible_write(
    d: &Durable,
    ctx: &mut Context,
    book: BookId,
    table: &str,
    key: &[u8],
    at: u64,
) -> Result<Option<WriteRecord>, Abort> {
    let Some(last) = prev_write(d, ctx, book, table, key, at).await? else {
        return Ok(None);
    };
    let (Some(from), Some(before)) = (last.written.migrated_from, last.seqnum.checked_sub(1)) else {
        return Ok(Some(last));
    };
    match prev_write(d, ctx, book, table, key, before).await? {
        Some(raced) if raced.written.migrated_from.is_none() && raced.seqnum > from => Ok(Some(raced)),
        _ => Ok(Some(last)),
    }
}

/// The value a write-log record gives `(table, key)`: the one it carries, else exactly
/// the version it names, which exists, since such versions are stored before the
/// record that points at them.
pub(crate) async fn written_value(
    store: &dyn StateStore,
    st: &str,
    table: &str,
    key: &[u8],
    written: &Written,
) -> Result<Value, Abort> {
    let version = written.version;
    if let Some(value) = &written.value {
        return Ok(value.clone());
    }
    match store.get_version(st, key, version).await? {
        Some(value) => Ok(value),
        None => Err(Abort::internal(format!("version {version} of {table:?}/{key:?} is missing from the store"))),
    }
}

/// A transitional read: the fresher of the single-version entry (its version cursor)
/// and the newest write-log record (its seqnum).
pub(crate) async fn fresher_value(
    d: &Durable,
    ctx: &mut Context,
    book: BookId,
    st: &str,
    table: &str,
    key: &[u8],
) -> Result<Value, Abort> {
    let latest = d.store.get_latest(st, key).await?;
    let logged = visible_write(d, ctx, book, table, key, u64::MAX).await?;
    match (latest, logged) {
        (Some((v, value)), Some(w)) if v.cursor > w.seqnum => Ok(value),
        (Some((_, value)), None) => Ok(value),
        (_, Some(w)) => written_value(&*d.store, st, table, key, &w.written).await,
        (None, None) => Ok(None),
    }
}

/// The protocol a version declares for `table`: its own declaration, else the node's
/// `[state] tables`, else the node's default.
pub(crate) fn declared_protocol(config: &StateConfig, declared: &BTreeMap<String, Protocol>, table: &str) -> Protocol {
    declared.get(table).or_else(|| config.tables.get(table)).copied().unwrap_or(config.protocol)
}

/// Awaits of promises waiting in place on this node, by promise: a completion made on
/// this node wakes them at once (one made elsewhere is seen at their next look).
#[derive(Default)]
pub(crate) struct Completions {
    next: std::sync::atomic::AtomicU64,
    waiting: Mutex<HashMap<String, Vec<(u64, std::task::Waker)>>>,
}

impl Completions {
    /// Wakes the awaits of `promise` waiting here.
    pub(crate) fn notify(&self, promise: &str) {
        let woken = self.waiting.lock().expect("not poisoned").remove(promise);
        for (_, waker) in woken.into_iter().flatten() {
            waker.wake();
        }
    }

    /// Completes when `promise` is completed on this node (or the future is dropped).
    pub(crate) fn wait<'a>(&'a self, promise: &'a str) -> Completion<'a> {
        Completion { completions: self, promise, id: None }
    }
}

/// A wait for a completion made on this node (see [`Completions::wait`]).
pub(crate) struct Completion<'a> {
    completions: &'a Completions,
    promise: &'a str,
    id: Option<u64>,
}

impl std::future::Future for Completion<'_> {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let this = self.get_mut();
        let mut waiting = this.completions.waiting.lock().expect("not poisoned");
        let id = match this.id {
            // Notified: `notify` took the entry away.
            Some(id) if !waiting.get(this.promise).is_some_and(|w| w.iter().any(|(i, _)| *i == id)) => {
                return std::task::Poll::Ready(());
            }
            Some(id) => id,
            None => {
                let id = this.completions.next.fetch_add(1, Ordering::Relaxed);
                this.id = Some(id);
                id
            }
        };
        let list = waiting.entry(this.promise.to_string()).or_default();
        list.retain(|(i, _)| *i != id);
        list.push((id, cx.waker().clone()));
        std::task::Poll::Pending
    }
}

impl Drop for Completion<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        let mut waiting = self.completions.waiting.lock().expect("not poisoned");
        if let Some(list) = waiting.get_mut(self.promise) {
            list.retain(|(i, _)| *i != id);
            if list.is_empty() {
                waiting.remove(self.promise);
            }
        }
    }
}
