//! The state store contract: where functions' durable objects live, behind one trait
//! that the exactly-once core (`tally-durable`) calls and the backends implement. The
//! backends (embedded RocksDB, PostgreSQL) live in `tally-state`; [`MemStateStore`] here
//! serves the simulator and unit tests. Neither side depends on the other: both depend
//! on this crate.
//!
//! The store knows nothing of the log, of invocations or of which protocol a table
//! uses: the Halfmoon protocols above it decide which family of operations to call and
//! which versions to pass. Store tables are named `<book in hex>/<table>` (`store_table`
//! in `tally-durable`'s `node.rs`), so one store serves every book. Every backend is
//! checked by the one suite in [`conformance`].

mod cache;
pub mod conformance;
mod mem;

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

pub use cache::VersionCache;
pub use mem::MemStateStore;

/// A stored value; `None` is a tombstone (the object was deleted at that version).
pub type Value = Option<Bytes>;

/// The future every [`StateStore`] method returns: boxed so the trait stays object-safe.
pub type StateFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StateError>> + Send + 'a>>;

/// The version of a single-version (Halfmoon-write) entry: the writer's `cursorTS` and
/// its per-invocation write counter, ordered lexicographically (cursor first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub cursor: u64,
    pub counter: u32,
}

impl Version {
    /// The version of unconditional writes ([`StateStore::put_latest`]).
    pub const ZERO: Version = Version { cursor: 0, counter: 0 };
}

/// One version for [`StateStore::put_versions`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionPut {
    pub table: String,
    pub key: Bytes,
    pub version: u64,
    pub value: Value,
    /// No reader looks this version up (a `Step::Put`'s: its record carries the value;
    /// the version only tells garbage collection that the object exists), and its name
    /// is never a value's: the store may write it without looking whether the name is
    /// taken, and overwrite what is there.
    pub marker: bool,
}

/// One write of [`StateStore::put_if_newer_all`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatestPut {
    pub table: String,
    pub key: Bytes,
    pub version: Version,
    pub value: Value,
}

/// The two key spaces of a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Written by `put_version`.
    Versions,
    /// Written by `put_if_newer` and `put_latest`.
    Latest,
}

/// A durable key-value store for function state.
///
/// Keys are `(table, key)`: `table` is a non-empty name without NUL characters, `key`
/// is any bytes (zero bytes included). Values are bytes; a `None` value is a tombstone.
/// There are two families of operations, and each has its own key space: an object
/// written with [`put_version`](Self::put_version) is invisible to
/// [`get_latest`](Self::get_latest) and the other way round.
///
/// **Multi-version** (Halfmoon-read: log-free reads of the version a write-log record
/// names; versions are numbers the protocol derives, ordered by the log, not by value):
///
/// ```text
///   versions of (table, key):   3        7              12
///                               |        |              |
///   get_at(at = 9)         ─────────────>7   (newest version <= at; the protocol
///   get_at(at = 7)         ─────────────>7    asks for exact versions and checks)
///   get_at(at = 2)         None              (nothing that old)
///   delete_version(3): 7 and 12 stay
/// ```
///
/// - `put_version` is idempotent in the strong sense that re-executed writers need:
///   the first put of a version wins and a later put of the same version, whatever
///   its value, succeeds without changing anything.
/// - Once `put_version` returns, the version survives a crash of the process.
///
/// **Single-version, conditional** (Halfmoon-write: logged reads, log-free writes that
/// only land if they are newer than what is stored):
///
/// - `put_if_newer` writes only if the stored version is absent or strictly older, and
///   says whether it wrote. It is atomic: of any set of concurrent callers the one with
///   the greatest version ends up stored, whatever the interleaving.
/// - `put_latest` writes unconditionally (the `unsafe` protocol's raw write).
/// - `get_latest` returns the stored version and value.
///
/// Errors are [`StateError`]s; a failed call may or may not have taken effect, and the
/// protocols above recover by repeating it, which both families make safe.
pub trait StateStore: Send + Sync {
    /// Stores `value` as `version` of `(table, key)` unless that version exists already;
    /// says whether this call stored it (`false`: the version was there, and keeps its
    /// value).
    fn put_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64, value: Value) -> StateFuture<'a, bool>;

    /// Stores each of `puts` as [`put_version`](Self::put_version) would, in order, and says for
    /// each whether this call stored it. A backend that can makes them durable together
    /// (the embedded store: one synced batch), where the default puts them one by one,
    /// concurrently; either way a failure may leave some stored, which a repeat makes
    /// whole. Unless `durable`, the backend need not make them survive a crash of the
    /// process when it returns (the embedded store writes them without a sync; a later
    /// synced write makes them durable): for versions that the caller keeps elsewhere.
    /// A [`marker`](VersionPut::marker) may be stored without looking whether its name
    /// is taken (the embedded store does: one lookup less per write), and says `true`.
    fn put_versions<'a>(&'a self, puts: Vec<VersionPut>, durable: bool) -> StateFuture<'a, Vec<bool>> {
        let _ = durable;
        Box::pin(async move {
            let stored = puts.iter().map(|p| self.put_version(&p.table, &p.key, p.version, p.value.clone()));
            futures_util::future::join_all(stored).await.into_iter().collect()
        })
    }

    /// The newest version `<= at` of `(table, key)` and its value, if there is one.
    fn get_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(u64, Value)>>;

    /// Exactly `version` of `(table, key)`, if it is stored: what a read-optimized read
    /// asks for, since the write log names the version. By default `get_at(version)`,
    /// checked; a backend with a cheaper point lookup overrides it.
    fn get_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64) -> StateFuture<'a, Option<Value>> {
        Box::pin(async move {
            let found = self.get_at(table, key, version).await?;
            Ok(found.and_then(|(v, value)| (v == version).then_some(value)))
        })
    }

    /// Deletes `version` of `(table, key)`; says whether it was there. Readers miss it
    /// once this returns; a crash of the machine may bring it back until the next
    /// [`sync`](Self::sync) returns.
    fn delete_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64) -> StateFuture<'a, bool>;

    /// Deletes each of `versions` of `(table, key)` as [`delete_version`](Self::delete_version)
    /// would; says how many were there. A backend that can deletes them in one write
    /// (the embedded store: one batch), where the default deletes them one by one; a
    /// failure may leave some deleted.
    fn delete_versions<'a>(&'a self, table: &'a str, key: &'a [u8], versions: Vec<u64>) -> StateFuture<'a, u64> {
        Box::pin(async move {
            let mut deleted = 0;
            for version in versions {
                deleted += u64::from(self.delete_version(table, key, version).await?);
            }
            Ok(deleted)
        })
    }

    /// Makes every write acknowledged before this call durable, those that did not ask
    /// to be (deletes, puts not `durable`). The default does nothing: for a backend
    /// whose every write is durable once acknowledged (PostgreSQL commits each).
    fn sync(&self) -> StateFuture<'_, ()> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Stores `(version, value)` for `(table, key)` if nothing is stored or the stored
    /// version is strictly older; returns whether it wrote.
    fn put_if_newer<'a>(&'a self, table: &'a str, key: &'a [u8], version: Version, value: Value) -> StateFuture<'a, bool>;

    /// Does [`put_if_newer`](Self::put_if_newer) for each of `puts`: of several puts to
    /// one key, the newest version stays, whatever their order. A backend that can
    /// makes them durable together (PostgreSQL: one statement, so one commit), where the
    /// default puts them one by one, concurrently (the embedded store's writer then
    /// takes them into one synced batch); either way a failure may leave some stored,
    /// which a repeat makes whole.
    fn put_if_newer_all<'a>(&'a self, puts: &'a [LatestPut]) -> StateFuture<'a, ()> {
        Box::pin(async move {
            let stored = puts.iter().map(|p| self.put_if_newer(&p.table, &p.key, p.version, p.value.clone()));
            for stored in futures_util::future::join_all(stored).await {
                stored?;
            }
            Ok(())
        })
    }

    /// Stores `value` for `(table, key)` at [`Version::ZERO`] whatever is stored: the
    /// raw write of the `unsafe` protocol. Not ordered against a concurrent
    /// `put_if_newer` on the same key (no table mixes the two).
    fn put_latest<'a>(&'a self, table: &'a str, key: &'a [u8], value: Value) -> StateFuture<'a, ()>;

    /// The stored version and value of the single-version entry `(table, key)`.
    fn get_latest<'a>(&'a self, table: &'a str, key: &'a [u8]) -> StateFuture<'a, Option<(Version, Value)>>;

    /// The single-version entry of `(table, key)` as it stood at seqnum `at`: the newest
    /// stored version whose cursor is at most `at`. When `put_if_newer` replaces an entry
    /// with one of a greater cursor, the store keeps the replaced one in the same write
    /// (the *replaced* entries, keyed by the cursor that replaced them), until
    /// [`trim_replaced`](Self::trim_replaced) drops it: what `AS OF` queries read.
    /// `None` if no version that old is stored (none was written by then, or it was
    /// trimmed: the caller keeps the floor it trimmed at).
    fn get_latest_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(Version, Value)>>;

    /// Drops the replaced entries of `table` that no read at `floor` or later needs: those
    /// replaced by a version whose cursor is at most `floor`. Says how many went.
    fn trim_replaced<'a>(&'a self, table: &'a str, floor: u64) -> StateFuture<'a, u64>;

    /// Up to `limit` distinct keys of `table` in `family`, in the store's own order,
    /// after `after` (a key this method returned before; `None` starts at the first).
    /// Protocol switches and garbage collection page through tables with it.
    fn list_keys<'a>(
        &'a self,
        table: &'a str,
        family: Family,
        after: Option<&'a [u8]>,
        limit: usize,
    ) -> StateFuture<'a, Vec<Bytes>>;
}

/// A shared store is a store: the protocols, the simulator's fault injection and the
/// tests hold stores behind `Arc`s.
impl<S: StateStore + ?Sized> StateStore for std::sync::Arc<S> {
    fn put_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64, value: Value) -> StateFuture<'a, bool> {
        (**self).put_version(table, key, version, value)
    }

    fn put_versions<'a>(&'a self, puts: Vec<VersionPut>, durable: bool) -> StateFuture<'a, Vec<bool>> {
        (**self).put_versions(puts, durable)
    }

    fn get_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(u64, Value)>> {
        (**self).get_at(table, key, at)
    }

    fn get_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64) -> StateFuture<'a, Option<Value>> {
        (**self).get_version(table, key, version)
    }

    fn delete_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64) -> StateFuture<'a, bool> {
        (**self).delete_version(table, key, version)
    }

    fn delete_versions<'a>(&'a self, table: &'a str, key: &'a [u8], versions: Vec<u64>) -> StateFuture<'a, u64> {
        (**self).delete_versions(table, key, versions)
    }

    fn sync(&self) -> StateFuture<'_, ()> {
        (**self).sync()
    }

    fn put_if_newer<'a>(&'a self, table: &'a str, key: &'a [u8], version: Version, value: Value) -> StateFuture<'a, bool> {
        (**self).put_if_newer(table, key, version, value)
    }

    fn put_if_newer_all<'a>(&'a self, puts: &'a [LatestPut]) -> StateFuture<'a, ()> {
        (**self).put_if_newer_all(puts)
    }

    fn put_latest<'a>(&'a self, table: &'a str, key: &'a [u8], value: Value) -> StateFuture<'a, ()> {
        (**self).put_latest(table, key, value)
    }

    fn get_latest<'a>(&'a self, table: &'a str, key: &'a [u8]) -> StateFuture<'a, Option<(Version, Value)>> {
        (**self).get_latest(table, key)
    }

    fn get_latest_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(Version, Value)>> {
        (**self).get_latest_at(table, key, at)
    }

    fn trim_replaced<'a>(&'a self, table: &'a str, floor: u64) -> StateFuture<'a, u64> {
        (**self).trim_replaced(table, floor)
    }

    fn list_keys<'a>(
        &'a self,
        table: &'a str,
        family: Family,
        after: Option<&'a [u8]>,
        limit: usize,
    ) -> StateFuture<'a, Vec<Bytes>> {
        (**self).list_keys(table, family, after, limit)
    }
}

/// What can go wrong in a state store. Backend errors are carried as text so that no
/// backend's types leak into the API; all of them convert to
/// [`Error::Internal`](crate::Error::Internal), because the guest can do nothing about
/// them but fail and be re-executed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// The caller passed a table name the store cannot hold.
    #[error("invalid table name {0:?}: it must be non-empty and contain no NUL")]
    InvalidTable(String),
    /// The backend failed or could not be reached.
    #[error("{backend} state store: {message}")]
    Backend { backend: &'static str, message: String },
    /// The backend returned an entry this code did not write.
    #[error("corrupt state entry: {0}")]
    Corrupt(String),
}

/// The boundary check every backend applies before touching storage.
pub fn check_table(table: &str) -> Result<(), StateError> {
    if table.is_empty() || table.contains('\0') {
        return Err(StateError::InvalidTable(table.to_owned()));
    }
    Ok(())
}
