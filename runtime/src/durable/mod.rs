//! Exactly-once state and invocations: Halfmoon's protocols (SOSP '23, §4-§5) in the
//! host, so every guest language gets them without code of its own.
//!
//! ```text
//!   invocation ──> Instance (instance.rs)            one per execution attempt
//!                    │ init: cond-append Init at step 0, or read back the step log
//!                    │ get/put/delete: per table protocol, decided at first use from
//!                    │   the table's transition log as of the instance's start
//!                    │ invoke: child ID = "<id>.<step>", outcome logged as a step
//!                    │ finish: Result logged as the last step
//!                    ▼
//!   platform-tagged records in the invocation's own book (record.rs)
//!   state store (crate::state): multi-version (read-optimized), conditional (write-
//!   optimized, symmetric), raw (unsafe); tables are "<book hex>/<table>"
//! ```
//!
//! Which invocations are exactly-once: those given an `Idempotency-Key`, asynchronous
//! ones, children, and any other as soon as it uses `state` or `invoke` (its init
//! record is appended then; what ran before touched nothing durable). The runtime
//! re-executes an attempt that trapped (up to `retries` times at once) and, through
//! the recovery scan, invocations whose process died.

mod gc;
mod instance;
pub mod record;
pub mod recovery;
pub mod switch;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use tally_logsvc::{BookId, Context, Error as LogError, LogClient, SeqNum, Tag};

use self::instance::Effective;
use self::record::{object_tag, Step};

pub use self::instance::{CrashAfter, Instance, Of};
use crate::config::{Config, StateConfig, StoreKind};
use crate::error::RuntimeError;
use crate::registry::REGISTRY_BOOK;
use crate::state::{PgStateStore, RocksStateStore, StateError, StateStore, Value};

/// The largest input or output of an exactly-once invocation: both are logged, in one
/// record each (the engine's limit is 1 MiB).
pub const PAYLOAD_MAX: usize = 960 << 10;
/// The largest state value (a logged read carries it in one record).
pub const VALUE_MAX: usize = 512 << 10;
/// The longest state key.
pub const KEY_MAX: usize = 1024;
/// The longest `Idempotency-Key`.
pub const IDEMPOTENCY_KEY_MAX: usize = 256;

/// Books with exactly-once invocations, in the registry's platform book: the recovery
/// scan reads each of them.
const BOOKS: Tag = Tag(Tag::RESERVED_BIT | 2);
/// Tables with a transition log, `(book, table)` per record, in the registry's book:
/// garbage collection walks them.
const TABLES: Tag = Tag(Tag::RESERVED_BIT | 4);

/// Why an attempt stops inside a protocol operation.
#[derive(Debug)]
pub enum Abort {
    /// The guest's arguments were refused; the guest gets the error and goes on.
    Refused(RuntimeError),
    /// The log or the store failed; the attempt stops and the invocation runs again.
    Transient(RuntimeError),
    /// The re-execution took another path than the recorded history.
    NonDeterministic(String),
    /// The crash-injection hook fired.
    Crash,
}

impl Abort {
    fn internal(message: impl Into<String>) -> Abort {
        Abort::Transient(RuntimeError::Internal(message.into()))
    }

    /// The error the attempt ends with.
    pub fn into_error(self) -> RuntimeError {
        match self {
            Abort::Refused(e) | Abort::Transient(e) => e,
            Abort::NonDeterministic(m) => RuntimeError::Trap(format!("non-deterministic re-execution: {m}")),
            Abort::Crash => RuntimeError::InjectedCrash,
        }
    }
}

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Abort::Refused(e) | Abort::Transient(e) => e.fmt(f),
            Abort::NonDeterministic(m) => write!(f, "non-deterministic re-execution: {m}"),
            Abort::Crash => f.write_str("injected crash"),
        }
    }
}

impl std::error::Error for Abort {}

impl From<LogError> for Abort {
    fn from(e: LogError) -> Self {
        Abort::Transient(RuntimeError::from(e))
    }
}

impl From<StateError> for Abort {
    fn from(e: StateError) -> Self {
        Abort::Transient(RuntimeError::from(e))
    }
}

impl From<RuntimeError> for Abort {
    fn from(e: RuntimeError) -> Self {
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

fn check_object(table: &str, key: &[u8], value: Option<&[u8]>) -> Result<(), Abort> {
    check_table(table).map_err(|m| Abort::Refused(RuntimeError::InvalidArgument(m)))?;
    if key.is_empty() {
        return Err(Abort::Refused(RuntimeError::InvalidArgument("state keys must not be empty".into())));
    }
    if key.len() > KEY_MAX {
        let size = Some(key.len() as u64);
        return Err(Abort::Refused(RuntimeError::TooLarge { what: "the state key", size, limit: KEY_MAX as u64 }));
    }
    if let Some(v) = value.filter(|v| v.len() > VALUE_MAX) {
        let size = Some(v.len() as u64);
        return Err(Abort::Refused(RuntimeError::TooLarge { what: "the state value", size, limit: VALUE_MAX as u64 }));
    }
    Ok(())
}

/// What exactly-once invocations of one node share: the platform log client, the
/// state store and the configuration.
pub struct Durable {
    pub log: LogClient,
    pub store: Arc<dyn StateStore>,
    pub config: StateConfig,
    /// Books registered in [`BOOKS`] (by any node).
    books: tokio::sync::Mutex<(SeqNum, BTreeSet<BookId>)>,
    /// Reads and writes of switchable tables on this node since the last look.
    rates: Mutex<HashMap<BookId, HashMap<String, Ops>>>,
    /// The TABLES stream as read so far.
    tables: tokio::sync::Mutex<(SeqNum, HashMap<BookId, BTreeSet<String>>)>,
}

/// Operations counted on one table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ops {
    pub reads: u64,
    pub writes: u64,
}

impl Durable {
    /// Opens the configured store and reads the registered books.
    pub async fn start(config: &Config, log: LogClient) -> anyhow::Result<Arc<Durable>> {
        let store: Arc<dyn StateStore> = match config.state.store {
            StoreKind::Rocksdb => Arc::new(RocksStateStore::open(config.data_dir.join("state"))?),
            StoreKind::Postgres => Arc::new(PgStateStore::connect(&config.state.postgres).await?),
        };
        let durable = Arc::new(Durable {
            log,
            store,
            config: config.state.clone(),
            books: tokio::sync::Mutex::new((SeqNum(0), BTreeSet::new())),
            rates: Mutex::new(HashMap::new()),
            tables: tokio::sync::Mutex::new((SeqNum(0), HashMap::new())),
        });
        durable.books().await?;
        Ok(durable)
    }

    /// Every book registered so far (by any node): what this node knew, and what was
    /// appended since it last looked.
    pub async fn books(&self) -> Result<BTreeSet<BookId>, RuntimeError> {
        let mut guard = self.books.lock().await;
        let (next, books) = &mut *guard;
        let mut ctx = Context::new();
        while let Some(r) = self.log.read_next(&mut ctx, REGISTRY_BOOK, BOOKS, *next).await? {
            *next = SeqNum(r.seqnum.0 + 1);
            let raw: [u8; 8] = r.data[..].try_into().map_err(|_| RuntimeError::Internal("corrupt book record".into()))?;
            books.insert(BookId(u64::from_be_bytes(raw)));
        }
        Ok(books.clone())
    }

    /// Where the invocation `id` on `book` stands: `None` if it never started, then
    /// its logged outcome if it has one.
    pub async fn status(&self, book: BookId, id: &str) -> Result<Option<Option<record::Outcome>>, RuntimeError> {
        let tag = record::step_tag(id);
        let mut ctx = Context::new();
        let Some(first) = self.log.read_next(&mut ctx, book, tag, SeqNum(0)).await? else {
            return Ok(None);
        };
        match record::decode::<record::Step>("step", &first.data)? {
            record::Step::Init { id: found, .. } if found == id => {}
            _ => return Ok(None),
        }
        let last = self.log.check_tail(&mut ctx, book, tag).await?;
        match last.map(|r| record::decode::<record::Step>("step", &r.data)).transpose()? {
            Some(record::Step::Result { outcome }) => Ok(Some(Some(outcome))),
            _ => Ok(Some(None)),
        }
    }

    /// The tables of `book` that have a transition log (every table but `unsafe` ones).
    pub async fn tables(&self, book: BookId) -> Result<BTreeSet<String>, RuntimeError> {
        let mut guard = self.tables.lock().await;
        let (next, by_book) = &mut *guard;
        let mut ctx = Context::new();
        while let Some(r) = self.log.read_next(&mut ctx, REGISTRY_BOOK, TABLES, *next).await? {
            *next = SeqNum(r.seqnum.0 + 1);
            match serde_json::from_slice::<(u64, String)>(&r.data) {
                Ok((b, table)) => {
                    by_book.entry(BookId(b)).or_default().insert(table);
                }
                Err(e) => tracing::error!(seqnum = %r.seqnum, "skipping a malformed table listing: {e}"),
            }
        }
        Ok(by_book.get(&book).cloned().unwrap_or_default())
    }

    /// Lists a table whose transition log was just created.
    async fn register_table(&self, book: BookId, table: &str) -> Result<(), Abort> {
        let listing = bytes::Bytes::from(serde_json::to_vec(&(book.0, table)).expect("encodes"));
        self.log.append(&mut Context::new(), REGISTRY_BOOK, &[TABLES], listing).await?;
        Ok(())
    }

    /// Counts an operation on a table that could be switched.
    fn observe(&self, book: BookId, table: &str, protocol: Effective, write: bool) {
        if matches!(protocol, Effective::Unsafe | Effective::Symmetric) {
            return;
        }
        let mut rates = self.rates.lock().expect("not poisoned");
        let tables = rates.entry(book).or_default();
        let ops = match tables.get_mut(table) {
            Some(ops) => ops,
            None => tables.entry(table.to_string()).or_default(),
        };
        if write {
            ops.writes += 1;
        } else {
            ops.reads += 1;
        }
    }

    /// The operations counted since the last call, per book and table.
    pub fn take_rates(&self) -> HashMap<BookId, HashMap<String, Ops>> {
        std::mem::take(&mut *self.rates.lock().expect("not poisoned"))
    }

    /// Makes sure the recovery scan will look at `book`.
    async fn register_book(&self, book: BookId) -> Result<(), Abort> {
        let mut guard = self.books.lock().await;
        let books = &mut guard.1;
        if books.contains(&book) {
            return Ok(());
        }
        let data = bytes::Bytes::copy_from_slice(&book.0.to_be_bytes());
        self.log.append(&mut Context::new(), REGISTRY_BOOK, &[BOOKS], data).await?;
        books.insert(book);
        Ok(())
    }
}

/// One record of an object's write log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    pub seqnum: u64,
    pub version: u64,
    pub migrated_from: Option<u64>,
}

/// The last write-log record of `(table, key)` at or before `at` (skipping records of
/// other objects that share the tag).
async fn prev_write(
    log: &LogClient,
    ctx: &mut Context,
    book: BookId,
    table: &str,
    key: &[u8],
    mut at: u64,
) -> Result<Option<WriteRecord>, Abort> {
    let tag = object_tag(table, key);
    loop {
        let Some(r) = log.read_prev(ctx, book, tag, SeqNum(at)).await? else {
            return Ok(None);
        };
        if let Step::Write { table: t, key: k, version, migrated_from } = record::decode("write-log", &r.data)? {
            if t == table && k == key {
                return Ok(Some(WriteRecord { seqnum: r.seqnum.0, version, migrated_from }));
            }
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
pub async fn visible_write(
    log: &LogClient,
    ctx: &mut Context,
    book: BookId,
    table: &str,
    key: &[u8],
    at: u64,
) -> Result<Option<WriteRecord>, Abort> {
    let Some(last) = prev_write(log, ctx, book, table, key, at).await? else {
        return Ok(None);
    };
    let (Some(from), Some(before)) = (last.migrated_from, last.seqnum.checked_sub(1)) else {
        return Ok(Some(last));
    };
    match prev_write(log, ctx, book, table, key, before).await? {
        Some(raced) if raced.migrated_from.is_none() && raced.seqnum > from => Ok(Some(raced)),
        _ => Ok(Some(last)),
    }
}

/// The value of exactly `version` of `(table, key)`: it exists, since versions are
/// stored before the write-log record that points at them.
async fn version_value(store: &dyn StateStore, st: &str, table: &str, key: &[u8], version: u64) -> Result<Value, Abort> {
    match store.get_at(st, key, version).await? {
        Some((v, value)) if v == version => Ok(value),
        other => Err(Abort::internal(format!(
            "version {version} of {table:?}/{key:?} is missing from the store (found {:?})",
            other.map(|(v, _)| v)
        ))),
    }
}

/// A transitional read: the fresher of the single-version entry (its version cursor)
/// and the newest write-log record (its seqnum).
async fn fresher_value(
    svc: &Durable,
    ctx: &mut Context,
    book: BookId,
    st: &str,
    table: &str,
    key: &[u8],
) -> Result<Value, Abort> {
    let latest = svc.store.get_latest(st, key).await?;
    let logged = visible_write(&svc.log, ctx, book, table, key, u64::MAX).await?;
    match (latest, logged) {
        (Some((v, value)), Some(w)) if v.cursor > w.seqnum => Ok(value),
        (Some((_, value)), None) => Ok(value),
        (_, Some(w)) => version_value(&*svc.store, st, table, key, w.version).await,
        (None, None) => Ok(None),
    }
}
