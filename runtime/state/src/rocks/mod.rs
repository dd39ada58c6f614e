//! The embedded RocksDB state store, the single-node default.
//!
//! Two column families hold the two key spaces:
//!
//! ```text
//!   versions: len(table) u32 BE | table | len(key) u32 BE | key | version u64 BE
//!             -> tag u8 (0 tombstone, 1 value) | value
//!   latest:   len(table) u32 BE | table | len(key) u32 BE | key
//!             -> cursor u64 BE | counter u32 BE | tag u8 | value
//!   replaced: len(table) u32 BE | table | len(key) u32 BE | key | cursor u64 BE
//!             -> a latest entry's value, the entry a version of that cursor replaced
//! ```
//!
//! The length prefixes make the encoding unambiguous for any bytes, so the versions of
//! one `(table, key)` are exactly the entries under its prefix, in version order; that
//! is what lets `get_at` be one `seek_for_prev`.
//!
//! Writes go to one writer thread (`tally-state-writer`), which takes every write queued
//! while it was busy, decides each in order (first-put-wins, put-if-newer and deletes read
//! what is stored, or what an earlier write of the same batch stores), and commits the
//! batch as one RocksDB write, synced unless every write of it waives that (a version put
//! not durable, a delete: `sync` makes those durable later): a write is acknowledged to the
//! protocol only once it is as durable as asked, concurrent writers share one fsync, and
//! one thread deciding in order is what makes the read-modify-write operations atomic,
//! without locks. Unsynced marker versions, which decide nothing, are written by their
//! caller when the writer has nothing queued or in hand (`RocksStateStore::queue`): the
//! same order, two thread wakeups fewer. (Before, each write took a thread of the blocking
//! pool and a lock stripe, and RocksDB's own write group made the threads wait for each
//! other.) A read runs in place when memory holds what it needs (a memtable or the block
//! cache: RocksDB's `kBlockCacheTier`, which never reads a file) and on the blocking pool
//! otherwise, so a hot read costs a lookup rather than two thread wakeups. A marker that
//! RocksDB would stall is queued instead of written in place, and after a failed commit the
//! writer refuses every later write: what reached the disk is unknown.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use bytes::Bytes;
use rocksdb::{ColumnFamilyDescriptor, ErrorKind, Options, ReadOptions, WriteBatch, WriteOptions, DB};
use tokio::sync::oneshot;

use tally_state_api::{check_table, Family, StateError, StateFuture, StateStore, Value, Version, VersionPut};

const CF_VERSIONS: &str = "versions";
const CF_LATEST: &str = "latest";
const CF_REPLACED: &str = "replaced";
/// Writes the writer commits as one batch at most: more wait for the next.
const BATCH_WRITES_MAX: usize = 1024;
/// Bytes of values one batch holds at most (a batch exceeds it by one write at most).
const BATCH_BYTES_MAX: usize = 16 << 20;
/// The families as a batch's pending writes index them.
const VERSIONS: usize = 0;
const LATEST: usize = 1;

/// A [`StateStore`] in an embedded RocksDB database.
pub struct RocksStateStore {
    inner: Arc<Inner>,
    /// The writer thread; dropping the store closes the queue and waits for the thread,
    /// which commits what was queued, so the database is closed when the drop returns.
    writer: Option<JoinHandle<()>>,
}

struct Inner {
    db: DB,
    /// Synced batches committed so far.
    syncs: std::sync::atomic::AtomicU64,
    /// Batches committed in place by their caller (see `RocksStateStore::queue`).
    in_place: std::sync::atomic::AtomicU64,
    queue: Mutex<Queue>,
    /// Signalled when a write is queued, a commit ends with writes queued, or the queue
    /// closes.
    ready: Condvar,
}

/// The writes waiting for the writer, and who commits now.
#[derive(Default)]
struct Queue {
    writes: VecDeque<Write>,
    /// A batch is being committed (by the writer, or in place by a caller).
    busy: bool,
    /// The store is being dropped: the writer ends once the queue is empty.
    closed: bool,
    /// The first failed commit: every later write is refused with it.
    failed: Option<StateError>,
}

/// Where a write's outcome goes.
type Done<T> = oneshot::Sender<Result<T, StateError>>;

/// A write for the writer thread. Keys are RocksDB keys, values encoded entries.
enum Write {
    /// Unless the version exists (a `marker` is written without looking); `sync: false`
    /// asks for no sync of its own.
    Version {
        key: Vec<u8>,
        value: Vec<u8>,
        sync: bool,
        marker: bool,
        done: Done<bool>,
    },
    /// Says whether the version was there. Asks for no sync: a `Sync` later does.
    DeleteVersion {
        key: Vec<u8>,
        done: Done<bool>,
    },
    /// Writes nothing; its batch is synced.
    Sync(Done<()>),
    /// Unless the stored version is the same or newer; says whether it wrote.
    IfNewer {
        key: Vec<u8>,
        version: Version,
        value: Vec<u8>,
        done: Done<bool>,
    },
    Latest {
        key: Vec<u8>,
        value: Vec<u8>,
        done: Done<()>,
    },
    /// Writes queued together, so that they go in one batch (`put_versions`).
    Group(Vec<Write>),
}

impl Write {
    fn refuse(self, e: &StateError) {
        match self {
            Write::Latest { done, .. } | Write::Sync(done) => drop(done.send(Err(e.clone()))),
            Write::Version { done, .. } | Write::DeleteVersion { done, .. } | Write::IfNewer { done, .. } => {
                drop(done.send(Err(e.clone())))
            }
            Write::Group(writes) => writes.into_iter().for_each(|w| w.refuse(e)),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Write::Version { key, value, .. } | Write::IfNewer { key, value, .. } | Write::Latest { key, value, .. } => {
                key.len() + value.len()
            }
            Write::DeleteVersion { key, .. } => key.len(),
            Write::Sync(_) => 0,
            Write::Group(writes) => writes.iter().map(Write::bytes).sum(),
        }
    }

    /// Adds this write to `batch`, a group's writes one by one.
    fn push_to(self, batch: &mut Vec<Write>) {
        match self {
            Write::Group(writes) => batch.extend(writes),
            write => batch.push(write),
        }
    }

    /// Whether this is marker versions asking for no sync: writes that decide
    /// nothing (a marker is written without looking) and wait for no fsync.
    fn unsynced_markers(&self) -> bool {
        match self {
            Write::Version { sync: false, marker: true, .. } => true,
            Write::Group(writes) => writes.iter().all(Write::unsynced_markers),
            _ => false,
        }
    }

    /// Adds the versions of [`Write::unsynced_markers`] to `batch`.
    fn put_markers(&self, batch: &mut WriteBatch, versions: &rocksdb::ColumnFamily) {
        match self {
            Write::Version { key, value, .. } => batch.put_cf(versions, key, value),
            Write::Group(writes) => writes.iter().for_each(|w| w.put_markers(batch, versions)),
            _ => unreachable!("only marker versions are put in place"),
        }
    }

    /// Answers the versions of [`Write::unsynced_markers`]: written.
    fn written(self) {
        match self {
            Write::Version { done, .. } => drop(done.send(Ok(true))),
            Write::Group(writes) => writes.into_iter().for_each(Write::written),
            _ => unreachable!("only marker versions are put in place"),
        }
    }
}

/// A decided write's answer, sent once its batch is committed.
enum Answer {
    Unit(Done<()>),
    Bool(Done<bool>, bool),
}

impl Answer {
    fn send(self, result: &Result<(), StateError>) {
        // A caller that went away (a cancelled invocation) does not need its answer.
        match self {
            Answer::Unit(done) => drop(done.send(result.clone())),
            Answer::Bool(done, wrote) => drop(done.send(result.clone().map(|()| wrote))),
        }
    }
}

fn writer_stopped() -> StateError {
    StateError::Backend { backend: "rocksdb", message: "the state store's writer stopped".into() }
}

impl RocksStateStore {
    /// Opens (creating if missing) the store in the directory `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StateError> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        // Reuses obsolete write-ahead log files: a sync of a write into an existing file
        // writes data only, where appending to a new one also updates its size (an
        // inode write) on every sync. As the log's record store does.
        opts.set_recycle_log_file_num(4);
        let cfs =
            [CF_VERSIONS, CF_LATEST, CF_REPLACED].into_iter().map(|name| ColumnFamilyDescriptor::new(name, Options::default()));
        let db = DB::open_cf_descriptors(&opts, path, cfs).map_err(backend)?;
        let inner = Arc::new(Inner {
            db,
            syncs: Default::default(),
            in_place: Default::default(),
            queue: Mutex::default(),
            ready: Condvar::new(),
        });
        let thread = std::thread::Builder::new()
            .name("tally-state-writer".into())
            .spawn({
                let inner = Arc::clone(&inner);
                move || inner.write_loop()
            })
            .map_err(|e| StateError::Backend { backend: "rocksdb", message: format!("starting the writer thread: {e}") })?;
        Ok(RocksStateStore { inner, writer: Some(thread) })
    }

    /// Queues the write `make` builds (once `checked` holds) and waits for its answer,
    /// which comes once its batch is committed.
    fn write<'a, T: Send + 'static>(
        &'a self,
        checked: Result<(), StateError>,
        make: impl FnOnce(Done<T>) -> Write,
    ) -> StateFuture<'a, T> {
        let (done, answer) = oneshot::channel();
        let queued = checked.and_then(|()| self.queue(make(done)));
        Box::pin(async move {
            queued?;
            answer.await.map_err(|_| writer_stopped())?
        })
    }

    /// Queues the writes `make` builds of `items` (once `checked` holds) as one message,
    /// so that the writer takes them into one batch (sent one by one, it may wake on the
    /// first and sync it alone), and waits for every answer, in order.
    fn write_group<'a, I, T: Send + 'static>(
        &'a self,
        checked: Result<(), StateError>,
        items: impl IntoIterator<Item = I>,
        make: impl Fn(I, Done<T>) -> Write,
    ) -> StateFuture<'a, Vec<T>> {
        let (writes, answers): (Vec<Write>, Vec<_>) = items
            .into_iter()
            .map(|item| {
                let (done, answer) = oneshot::channel();
                (make(item, done), answer)
            })
            .unzip();
        let queued = checked.and_then(|()| self.queue(Write::Group(writes)));
        Box::pin(async move {
            queued?;
            let mut out = Vec::with_capacity(answers.len());
            for answer in answers {
                out.push(answer.await.map_err(|_| writer_stopped())??);
            }
            Ok(out)
        })
    }

    /// Hands `write` to the writer, or commits it here: unsynced marker versions (a
    /// read-optimized write's), when nothing is queued or being committed, are a batch
    /// of their own that the writer would take next and write without looking, so
    /// writing them in place keeps the order and saves two thread wakeups (~70 us of a
    /// read-optimized bank transfer's two puts here): a memtable insert and an unsynced
    /// log write, microseconds. A write RocksDB would delay (a write stall) is queued
    /// instead, so that no caller's thread sleeps in it.
    fn queue(&self, write: Write) -> Result<(), StateError> {
        let inner = &self.inner;
        let mut queue = inner.lock_queue();
        if queue.closed {
            return Err(writer_stopped());
        }
        if let Some(e) = &queue.failed {
            write.refuse(e);
            return Ok(());
        }
        if queue.busy || !queue.writes.is_empty() || !write.unsynced_markers() {
            queue.writes.push_back(write);
            inner.ready.notify_one();
            return Ok(());
        }
        queue.busy = true;
        drop(queue);
        let mut batch = WriteBatch::default();
        write.put_markers(&mut batch, inner.cf(CF_VERSIONS));
        let mut opts = WriteOptions::default();
        opts.set_no_slowdown(true);
        match inner.db.write_opt(batch, &opts) {
            Ok(()) => {
                inner.in_place.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                write.written();
                inner.committed(Ok(()));
            }
            Err(e) if e.kind() == ErrorKind::Incomplete => {
                // Writes queued meanwhile came after this one.
                let mut queue = inner.lock_queue();
                queue.writes.push_front(write);
                drop(queue);
                inner.committed(Ok(()));
            }
            Err(e) => {
                let e = backend(e);
                write.refuse(&e);
                inner.committed(Err(e));
            }
        }
        Ok(())
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

impl Drop for RocksStateStore {
    fn drop(&mut self) {
        if let Some(thread) = self.writer.take() {
            self.inner.lock_queue().closed = true;
            self.inner.ready.notify_one();
            // The writer ends once it has committed what was queued; a panic there was
            // already reported, and left its callers with an error.
            let _ = thread.join();
        }
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

    /// The queue; a panic under its lock (none is expected) leaves it usable.
    fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A batch's commit ended with `result`: the next may start. After a failed commit
    /// every later write is refused: what the failed batch left in memory may not be
    /// durable, and a write deciding on it (a version that seems to exist) would be
    /// acknowledged as durable when it is not.
    fn committed(&self, result: Result<(), StateError>) {
        let mut queue = self.lock_queue();
        queue.busy = false;
        if let Err(e) = result {
            if queue.failed.is_none() {
                tracing::error!(error = %e, "a state store commit failed; refusing every later write");
                queue.failed = Some(e);
            }
        }
        if !queue.writes.is_empty() || queue.closed {
            self.ready.notify_one();
        }
    }

    /// The writer thread: commits what is queued, a batch at a time, until the store
    /// is dropped and its queue is empty.
    fn write_loop(&self) {
        loop {
            let mut queue = self.lock_queue();
            while queue.busy || queue.writes.is_empty() {
                if queue.closed && queue.writes.is_empty() && !queue.busy {
                    return;
                }
                queue = self.ready.wait(queue).unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            if let Some(e) = queue.failed.clone() {
                queue.writes.drain(..).for_each(|w| w.refuse(&e));
                continue;
            }
            let (mut writes, mut bytes) = (Vec::new(), 0);
            while writes.len() < BATCH_WRITES_MAX && bytes < BATCH_BYTES_MAX {
                let Some(next) = queue.writes.pop_front() else { break };
                bytes += next.bytes();
                next.push_to(&mut writes);
            }
            queue.busy = true;
            drop(queue);
            let result = self.commit(writes);
            self.committed(result);
        }
    }

    /// Decides `writes` in order and commits the ones that write as one synced batch;
    /// then answers each. A write that cannot be decided (a failed read, a corrupt
    /// entry) is answered at once and writes nothing; if the commit fails, every write
    /// of the batch gets its error, which is returned.
    fn commit(&self, writes: Vec<Write>) -> Result<(), StateError> {
        let (versions, latest) = (self.cf(CF_VERSIONS), self.cf(CF_LATEST));
        let mut batch = WriteBatch::default();
        // What the batch stores so far in each family (`VERSIONS`, `LATEST`), by key
        // (`None`: deleted): a later write of the same key decides on that, not on the
        // database.
        let mut pending: [HashMap<Vec<u8>, Option<Vec<u8>>>; 2] = Default::default();
        let stored = |pending: &[HashMap<Vec<u8>, Option<Vec<u8>>>; 2], family: usize, key: &[u8]| match pending[family].get(key)
        {
            Some(value) => Ok(value.clone()),
            None => self.db.get_cf([versions, latest][family], key).map_err(backend),
        };
        let mut answers = Vec::with_capacity(writes.len());
        // Whether a write of the batch asks for a sync, even one that writes nothing: a
        // version found may be one an unsynced write left, and a sync makes every
        // write before it durable (the write-ahead log is one sequence).
        let mut sync = false;
        for write in writes {
            sync |= !matches!(write, Write::Version { sync: false, .. } | Write::DeleteVersion { .. });
            match write {
                Write::Version { key, value, marker, done, .. } => {
                    // No reader looks a marker up: a lookup in the memtable for each
                    // would cost more than the write (~5% of a node's CPU under bank
                    // transfers).
                    let taken = if marker { Ok(None) } else { stored(&pending, VERSIONS, &key) };
                    match taken {
                        Ok(Some(_)) => answers.push(Answer::Bool(done, false)),
                        Ok(None) => {
                            batch.put_cf(versions, &key, &value);
                            pending[VERSIONS].insert(key, Some(value));
                            answers.push(Answer::Bool(done, true));
                        }
                        Err(e) => drop(done.send(Err(e))),
                    }
                }
                Write::DeleteVersion { key, done } => match stored(&pending, VERSIONS, &key) {
                    Ok(Some(_)) => {
                        batch.delete_cf(versions, &key);
                        pending[VERSIONS].insert(key, None);
                        answers.push(Answer::Bool(done, true));
                    }
                    Ok(None) => answers.push(Answer::Bool(done, false)),
                    Err(e) => drop(done.send(Err(e))),
                },
                Write::IfNewer { key, version, value, done } => {
                    // The entry replaced, kept under the cursor replacing it if that is
                    // newer (`get_latest_at`).
                    let newer = stored(&pending, LATEST, &key).and_then(|raw| match raw {
                        Some(raw) => {
                            let old = decode_latest(&raw)?.0;
                            Ok((old < version, (old.cursor < version.cursor).then_some(raw)))
                        }
                        None => Ok((true, None)),
                    });
                    match newer {
                        Ok((true, replaced)) => {
                            if let Some(raw) = replaced {
                                batch.put_cf(self.cf(CF_REPLACED), version_key(&key, version.cursor), raw);
                            }
                            batch.put_cf(latest, &key, &value);
                            pending[LATEST].insert(key, Some(value));
                            answers.push(Answer::Bool(done, true));
                        }
                        Ok((false, _)) => answers.push(Answer::Bool(done, false)),
                        Err(e) => drop(done.send(Err(e))),
                    }
                }
                Write::Latest { key, value, done } => {
                    batch.put_cf(latest, &key, &value);
                    pending[LATEST].insert(key, Some(value));
                    answers.push(Answer::Unit(done));
                }
                Write::Sync(done) => answers.push(Answer::Unit(done)),
                Write::Group(_) => unreachable!("the writer queues a group's writes one by one"),
            }
        }
        if sync {
            self.syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let result = match (batch.is_empty(), sync) {
            (true, false) => Ok(()),
            (true, true) => self.db.flush_wal(true).map_err(backend),
            (false, _) => {
                let mut opts = WriteOptions::default();
                opts.set_sync(sync);
                self.db.write_opt(batch, &opts).map_err(backend)
            }
        };
        for answer in answers {
            answer.send(&result);
        }
        result
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
    fn put_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64, value: Value) -> StateFuture<'a, bool> {
        let key = version_key(&object_key(table, key), version);
        let value = encode_value(&[], &value);
        self.write(check_table(table), |done| Write::Version { key, value, sync: true, marker: false, done })
    }

    fn delete_versions<'a>(&'a self, table: &'a str, key: &'a [u8], versions: Vec<u64>) -> StateFuture<'a, u64> {
        let prefix = object_key(table, key);
        let deleted = self.write_group(check_table(table), versions, |version, done| Write::DeleteVersion {
            key: version_key(&prefix, version),
            done,
        });
        Box::pin(async move { Ok(deleted.await?.into_iter().map(u64::from).sum()) })
    }

    fn sync(&self) -> StateFuture<'_, ()> {
        self.write(Ok(()), Write::Sync)
    }

    fn put_versions<'a>(&'a self, puts: Vec<VersionPut>, durable: bool) -> StateFuture<'a, Vec<bool>> {
        let checked = puts.iter().try_for_each(|p| check_table(&p.table));
        self.write_group(checked, puts, |p, done| Write::Version {
            key: version_key(&object_key(&p.table, &p.key), p.version),
            value: encode_value(&[], &p.value),
            sync: durable,
            marker: p.marker,
            done,
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
        let key = version_key(&object_key(table, key), version);
        self.write(check_table(table), |done| Write::DeleteVersion { key, done })
    }

    fn put_if_newer<'a>(&'a self, table: &'a str, key: &'a [u8], version: Version, value: Value) -> StateFuture<'a, bool> {
        let (key, value) = (object_key(table, key), latest_entry(version, &value));
        self.write(check_table(table), |done| Write::IfNewer { key, version, value, done })
    }

    fn put_latest<'a>(&'a self, table: &'a str, key: &'a [u8], value: Value) -> StateFuture<'a, ()> {
        let (key, value) = (object_key(table, key), latest_entry(Version { cursor: 0, counter: 0 }, &value));
        self.write(check_table(table), |done| Write::Latest { key, value, done })
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
                match family {
                    // Past every version of the key at once (its entries are its object
                    // key and 8 bytes), not one by one: a hot key has many, and the
                    // tombstones of the ones garbage collection deleted.
                    Family::Versions => {
                        let mut past = k[..table_prefix.len() + 4 + key.len()].to_vec();
                        past.extend_from_slice(&[0xff; 8]);
                        past.push(0);
                        iter.seek(&past);
                    }
                    Family::Latest => iter.next(),
                }
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

    fn get_latest_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(Version, Value)>> {
        let k = object_key(table, key);
        self.read(table, move |inner, tier| {
            let Some(raw) = inner.db.get_pinned_cf_opt(inner.cf(CF_LATEST), &k, &read_options(tier))? else { return Ok(None) };
            let stored = decode_latest(raw.as_ref())?;
            if stored.0.cursor <= at {
                return Ok(Some(stored));
            }
            // The first entry replaced after `at` is the one stored at `at`, if it was
            // written by then (`at < stored.0.cursor`, so `at + 1` does not overflow).
            let mut iter = inner.db.raw_iterator_cf_opt(inner.cf(CF_REPLACED), read_options(tier));
            iter.seek(version_key(&k, at + 1));
            let found = match (iter.key(), iter.value()) {
                (Some(key), Some(raw)) if key.len() == k.len() + 8 && key.starts_with(&k) => {
                    Some(decode_latest(raw)?).filter(|(version, _)| version.cursor <= at)
                }
                _ => None,
            };
            iter.status()?;
            Ok(found)
        })
    }

    fn trim_replaced<'a>(&'a self, table: &'a str, floor: u64) -> StateFuture<'a, u64> {
        let table_prefix = object_key(table, b"");
        let table_prefix = table_prefix[..table_prefix.len() - 4].to_vec();
        self.run(table, move |inner| {
            let cf = inner.cf(CF_REPLACED);
            let mut iter = inner.db.raw_iterator_cf(cf);
            iter.seek(&table_prefix);
            let mut batch = WriteBatch::default();
            while let Some(k) = iter.key() {
                if !k.starts_with(&table_prefix) {
                    break;
                }
                let key = stored_key(k, table_prefix.len())?;
                if decode_version_suffix(k, table_prefix.len() + 4 + key.len())? <= floor {
                    batch.delete_cf(cf, k);
                }
                iter.next();
            }
            iter.status().map_err(backend)?;
            let trimmed = batch.len() as u64;
            // Unsynced: an entry a crash brings back is trimmed again.
            if trimmed > 0 {
                inner.db.write(batch).map_err(backend)?;
            }
            Ok(trimmed)
        })
    }
}

fn backend(e: impl std::fmt::Display) -> StateError {
    StateError::Backend { backend: "rocksdb", message: e.to_string() }
}

mod codec;
pub(super) use codec::*;

#[cfg(test)]
mod tests;
