//! The embedded RocksDB state store, the single-node default.
//!
//! Two column families hold the two key spaces:
//!
//! ```text
//!   versions: len(table) u32 BE | table | len(key) u32 BE | key | version u64 BE
//!             -> tag u8 (0 tombstone, 1 value) | value
//!   latest:   len(table) u32 BE | table | len(key) u32 BE | key
//!             -> cursor u64 BE | counter u32 BE | tag u8 | value
//! ```
//!
//! The length prefixes make the encoding unambiguous for any bytes, so the versions of
//! one `(table, key)` are exactly the entries under its prefix, in version order; that
//! is what lets `get_at` be one `seek_for_prev`.
//!
//! Read-modify-write operations (first-put-wins, put-if-newer, deletes) hold the mutex of
//! their `(table, key)`'s stripe, one of `LOCK_STRIPES`, so operations on other keys
//! write at the same time and RocksDB syncs their writes together (its write group
//! commits concurrent synced writes with one WAL sync). RocksDB calls block, so writes
//! run in `spawn_blocking`; a read runs in place when memory holds what it needs (a
//! memtable or the block cache: RocksDB's `kBlockCacheTier`, which never reads a file)
//! and on the blocking pool otherwise, so a hot read costs a lookup rather than two
//! thread wakeups. Writes are synced: a log-free write is acknowledged to the protocol
//! only once it is durable.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use rocksdb::{ColumnFamilyDescriptor, ErrorKind, Options, ReadOptions, WriteBatch, WriteOptions, DB};

use tally_durable::store::{check_table, Family, StateError, StateFuture, StateStore, Value, Version};

const CF_VERSIONS: &str = "versions";
const CF_LATEST: &str = "latest";
const TAG_TOMBSTONE: u8 = 0;
const TAG_VALUE: u8 = 1;
/// Read-modify-write locks, picked by a hash of the `(table, key)`: concurrent writers
/// of different keys rarely share one.
const LOCK_STRIPES: usize = 256;

/// A [`StateStore`] in an embedded RocksDB database.
pub struct RocksStateStore {
    inner: Arc<Inner>,
}

struct Inner {
    db: DB,
    /// Serialise read-modify-write operations of one `(table, key)` (and of the other
    /// keys of its stripe); plain reads do not take them.
    stripes: Vec<Mutex<()>>,
}

impl RocksStateStore {
    /// Opens (creating if missing) the store in the directory `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StateError> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let cfs = [CF_VERSIONS, CF_LATEST].into_iter().map(|name| ColumnFamilyDescriptor::new(name, Options::default()));
        let db = DB::open_cf_descriptors(&opts, path, cfs).map_err(backend)?;
        let stripes = (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect();
        Ok(RocksStateStore { inner: Arc::new(Inner { db, stripes }) })
    }

    /// Runs `op` on the blocking pool after checking the table name.
    fn run<'a, T: Send + 'static>(
        &'a self,
        table: &str,
        op: impl FnOnce(&Inner) -> Result<T, StateError> + Send + 'static,
    ) -> StateFuture<'a, T> {
        let checked = check_table(table);
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            checked?;
            tokio::task::spawn_blocking(move || op(&inner))
                .await
                .map_err(|e| StateError::Backend { backend: "rocksdb", message: e.to_string() })?
        })
    }

    /// Runs the read `op` in place if memory holds what it needs, else on the blocking
    /// pool (see the module documentation). `op` gets the tier it may read from.
    fn read<'a, T: Send + 'static>(
        &'a self,
        table: &str,
        op: impl Fn(&Inner, Tier) -> Result<T, ReadError> + Send + 'static,
    ) -> StateFuture<'a, T> {
        let checked = check_table(table);
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            checked?;
            match op(&inner, Tier::Memory) {
                Err(ReadError::Rocks(e)) if e.kind() == ErrorKind::Incomplete => {}
                done => return done.map_err(StateError::from),
            }
            tokio::task::spawn_blocking(move || op(&inner, Tier::All).map_err(StateError::from))
                .await
                .map_err(|e| StateError::Backend { backend: "rocksdb", message: e.to_string() })?
        })
    }
}

/// A read's failure: RocksDB's (which may say that memory did not hold enough), or a
/// corrupt entry's.
enum ReadError {
    Rocks(rocksdb::Error),
    State(StateError),
}

impl From<rocksdb::Error> for ReadError {
    fn from(e: rocksdb::Error) -> ReadError {
        ReadError::Rocks(e)
    }
}

impl From<StateError> for ReadError {
    fn from(e: StateError) -> ReadError {
        ReadError::State(e)
    }
}

impl From<ReadError> for StateError {
    fn from(e: ReadError) -> StateError {
        match e {
            ReadError::Rocks(e) => backend(e),
            ReadError::State(e) => e,
        }
    }
}

/// Where a read may look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tier {
    /// Memtables and the block cache only: what needs a file fails as `Incomplete`.
    Memory,
    All,
}

// The transmute's target cannot be annotated: rocksdb 0.21 does not export `ReadTier`.
#[allow(clippy::missing_transmute_annotations)]
fn read_options(tier: Tier) -> ReadOptions {
    let mut opts = ReadOptions::default();
    if tier == Tier::Memory {
        // SAFETY: rocksdb 0.21's `set_read_tier` takes its `ReadTier`, which it does not
        // export: a `#[repr(i32)]` enum whose `BlockCache` (RocksDB's kBlockCacheTier) is
        // 1, so the transmute makes that variant. The test
        // `a_read_in_memory_refuses_what_only_a_file_holds` checks it still means that.
        opts.set_read_tier(unsafe { std::mem::transmute::<i32, _>(1) });
    }
    opts
}

impl Inner {
    fn cf(&self, name: &str) -> &rocksdb::ColumnFamily {
        self.db.cf_handle(name).expect("column family created at open")
    }

    /// The lock of `object` (an `object_key`).
    fn lock(&self, object: &[u8]) -> MutexGuard<'_, ()> {
        let stripe = BuildHasherDefault::<DefaultHasher>::default().hash_one(object) as usize % self.stripes.len();
        // The lock guards no data, so a panic while holding it leaves nothing torn.
        self.stripes[stripe].lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self, batch: WriteBatch) -> Result<(), StateError> {
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        self.db.write_opt(batch, &opts).map_err(backend)
    }

    /// The newest version `<= at` under `prefix`, with its raw entry value.
    fn newest_at(&self, prefix: &[u8], at: u64, tier: Tier) -> Result<Option<(u64, Vec<u8>)>, ReadError> {
        let mut iter = self.db.raw_iterator_cf_opt(self.cf(CF_VERSIONS), read_options(tier));
        iter.seek_for_prev(version_key(prefix, at));
        let found = match (iter.key(), iter.value()) {
            (Some(k), Some(v)) if k.len() == prefix.len() + 8 && k.starts_with(prefix) => {
                Some((decode_version_suffix(k, prefix.len())?, v.to_vec()))
            }
            _ => None,
        };
        iter.status()?;
        Ok(found)
    }
}

impl StateStore for RocksStateStore {
    fn put_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64, value: Value) -> StateFuture<'a, ()> {
        let object = object_key(table, key);
        let k = version_key(&object, version);
        self.run(table, move |inner| {
            let _guard = inner.lock(&object);
            let cf = inner.cf(CF_VERSIONS);
            if inner.db.get_pinned_cf(cf, &k).map_err(backend)?.is_some() {
                return Ok(());
            }
            let mut batch = WriteBatch::default();
            batch.put_cf(cf, &k, encode_value(&[], &value));
            inner.write(batch)
        })
    }

    fn get_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(u64, Value)>> {
        let prefix = object_key(table, key);
        self.read(table, move |inner, tier| match inner.newest_at(&prefix, at, tier)? {
            Some((version, raw)) => Ok(Some((version, decode_value(&raw)?))),
            None => Ok(None),
        })
    }

    fn get_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64) -> StateFuture<'a, Option<Value>> {
        let k = version_key(&object_key(table, key), version);
        self.read(table, move |inner, tier| match inner.db.get_pinned_cf_opt(inner.cf(CF_VERSIONS), &k, &read_options(tier))? {
            Some(raw) => Ok(Some(decode_value(raw.as_ref())?)),
            None => Ok(None),
        })
    }

    fn delete_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64) -> StateFuture<'a, bool> {
        let object = object_key(table, key);
        let k = version_key(&object, version);
        self.run(table, move |inner| {
            let _guard = inner.lock(&object);
            let cf = inner.cf(CF_VERSIONS);
            if inner.db.get_pinned_cf(cf, &k).map_err(backend)?.is_none() {
                return Ok(false);
            }
            let mut batch = WriteBatch::default();
            batch.delete_cf(cf, &k);
            inner.write(batch)?;
            Ok(true)
        })
    }

    fn put_if_newer<'a>(&'a self, table: &'a str, key: &'a [u8], version: Version, value: Value) -> StateFuture<'a, bool> {
        let k = object_key(table, key);
        self.run(table, move |inner| {
            let _guard = inner.lock(&k);
            let cf = inner.cf(CF_LATEST);
            if let Some(raw) = inner.db.get_pinned_cf(cf, &k).map_err(backend)? {
                let (stored, _) = decode_latest(&raw)?;
                if stored >= version {
                    return Ok(false);
                }
            }
            let mut header = Vec::with_capacity(12);
            header.extend_from_slice(&version.cursor.to_be_bytes());
            header.extend_from_slice(&version.counter.to_be_bytes());
            let mut batch = WriteBatch::default();
            batch.put_cf(cf, &k, encode_value(&header, &value));
            inner.write(batch)?;
            Ok(true)
        })
    }

    fn put_latest<'a>(&'a self, table: &'a str, key: &'a [u8], value: Value) -> StateFuture<'a, ()> {
        let k = object_key(table, key);
        self.run(table, move |inner| {
            let mut batch = WriteBatch::default();
            batch.put_cf(inner.cf(CF_LATEST), &k, encode_value(&[0; 12], &value));
            inner.write(batch)
        })
    }

    fn list_keys<'a>(
        &'a self,
        table: &'a str,
        family: Family,
        after: Option<&'a [u8]>,
        limit: usize,
    ) -> StateFuture<'a, Vec<Bytes>> {
        let table_prefix = object_key(table, b"");
        let table_prefix = table_prefix[..table_prefix.len() - 4].to_vec();
        // Every entry of a key sorts after `object_key(table, key)` and before the next
        // key's, so seeking there and skipping that key's entries starts after it.
        let start = after.map(|a| object_key(table, a));
        let skip = after.map(<[u8]>::to_vec);
        self.run(table, move |inner| {
            let cf = inner.cf(match family {
                Family::Versions => CF_VERSIONS,
                Family::Latest => CF_LATEST,
            });
            let mut iter = inner.db.raw_iterator_cf(cf);
            iter.seek(start.as_deref().unwrap_or(&table_prefix));
            let mut keys: Vec<Bytes> = Vec::new();
            while let Some(k) = iter.key() {
                if keys.len() >= limit || !k.starts_with(&table_prefix) {
                    break;
                }
                let key = stored_key(k, table_prefix.len())?;
                let seen = keys.last().is_some_and(|last| last[..] == *key) || skip.as_deref() == Some(key);
                if !seen {
                    keys.push(Bytes::copy_from_slice(key));
                }
                iter.next();
            }
            iter.status().map_err(backend)?;
            Ok(keys)
        })
    }

    fn get_latest<'a>(&'a self, table: &'a str, key: &'a [u8]) -> StateFuture<'a, Option<(Version, Value)>> {
        let k = object_key(table, key);
        self.read(table, move |inner, tier| match inner.db.get_pinned_cf_opt(inner.cf(CF_LATEST), &k, &read_options(tier))? {
            Some(raw) => Ok(Some(decode_latest(raw.as_ref())?)),
            None => Ok(None),
        })
    }
}

/// The key part of a stored entry's RocksDB key under the table prefix `table_prefix`
/// (`len(key) | key [| version]`).
fn stored_key(raw: &[u8], table_prefix: usize) -> Result<&[u8], StateError> {
    let rest = &raw[table_prefix..];
    let len = rest
        .get(..4)
        .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or_else(|| StateError::Corrupt("a key without its length".into()))?;
    rest.get(4..4 + len).ok_or_else(|| StateError::Corrupt("a key shorter than its length".into()))
}

fn backend(e: impl std::fmt::Display) -> StateError {
    StateError::Backend { backend: "rocksdb", message: e.to_string() }
}

fn object_key(table: &str, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + table.len() + key.len() + 8);
    for part in [table.as_bytes(), key] {
        let len = u32::try_from(part.len()).expect("table and key are under 4 GiB");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

fn version_key(prefix: &[u8], version: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + 8);
    out.extend_from_slice(prefix);
    out.extend_from_slice(&version.to_be_bytes());
    out
}

fn decode_version_suffix(k: &[u8], prefix_len: usize) -> Result<u64, StateError> {
    let suffix: [u8; 8] =
        k[prefix_len..].try_into().map_err(|_| StateError::Corrupt(format!("version key of {} bytes", k.len())))?;
    Ok(u64::from_be_bytes(suffix))
}

fn encode_value(header: &[u8], value: &Value) -> Vec<u8> {
    let len = value.as_ref().map_or(0, Bytes::len);
    let mut out = Vec::with_capacity(header.len() + 1 + len);
    out.extend_from_slice(header);
    match value {
        Some(bytes) => {
            out.push(TAG_VALUE);
            out.extend_from_slice(bytes);
        }
        None => out.push(TAG_TOMBSTONE),
    }
    out
}

fn decode_value(raw: &[u8]) -> Result<Value, StateError> {
    match raw.split_first() {
        Some((&TAG_VALUE, rest)) => Ok(Some(Bytes::copy_from_slice(rest))),
        Some((&TAG_TOMBSTONE, [])) => Ok(None),
        _ => Err(StateError::Corrupt(format!("value entry of {} bytes", raw.len()))),
    }
}

fn decode_latest(raw: &[u8]) -> Result<(Version, Value), StateError> {
    if raw.len() < 12 {
        return Err(StateError::Corrupt(format!("latest entry of {} bytes", raw.len())));
    }
    let cursor = u64::from_be_bytes(raw[..8].try_into().expect("8 bytes"));
    let counter = u32::from_be_bytes(raw[8..12].try_into().expect("4 bytes"));
    Ok((Version { cursor, counter }, decode_value(&raw[12..])?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read limited to memory is refused (`Incomplete`) for a key only a table file
    /// holds, and served once a read from the file put its block in the cache; so the
    /// tier `read_options` makes is RocksDB's kBlockCacheTier, and a read in place never
    /// touches a file.
    #[test]
    fn a_read_in_memory_refuses_what_only_a_file_holds() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        {
            let mut opts = Options::default();
            opts.create_if_missing(true);
            let db = DB::open(&opts, dir.path()).expect("opening");
            db.put(b"key", b"value").expect("writing");
            db.flush().expect("flushing the memtable to a table file");
        }
        let db = DB::open(&Options::default(), dir.path()).expect("reopening");
        match db.get_pinned_opt(b"key", &read_options(Tier::Memory)) {
            Err(e) => assert_eq!(e.kind(), ErrorKind::Incomplete, "{e}"),
            Ok(found) => panic!("a read in memory found {:?} in a table file", found.map(|v| v.to_vec())),
        }
        let value = db.get_pinned_opt(b"key", &read_options(Tier::All)).expect("reading the file");
        assert_eq!(value.as_deref(), Some(&b"value"[..]));
        let cached = db.get_pinned_opt(b"key", &read_options(Tier::Memory)).expect("reading the cached block");
        assert_eq!(cached.as_deref(), Some(&b"value"[..]));
    }
}
