//! The RocksDB stores: [`RocksStore`] for a storage node's records and
//! [`RocksMetalogStore`] for a sequencer's metalog replica.
//!
//! # Record store layout
//!
//! ```text
//!   column family "meta":  key = shard (u32 BE) | local id (u64 BE)   value = flag | bincode(RecordMeta)
//!   column family "data":  key = shard (u32 BE) | local id (u64 BE)   value = the record's data, raw
//!   column family "default": "format" -> FORMAT_RECORDS
//! ```
//!
//! Big-endian keys sort like [`Location`], so a scan returns records in location order
//! and a shard's suffix is one key range. The flag byte of a metadata value says whether
//! the data is still there, so [`RecordStore::recover`] scans only the small "meta" column
//! family and never reads record data. The flag is the ground truth about the data: a
//! write sets it with the data and a reclaim clears it while deleting the data, each in
//! one atomic batch, and a read looks at the flag before it fetches data.
//!
//! # Metalog store layout
//!
//! ```text
//!   column family "entries": key = term (u16 BE) | log (u8) | index (u64 BE)   value = bincode(MetalogEntry)
//!   column family "seals":   key = term (u16 BE) | log (u8)                      value = empty (sealed)
//!                            key = term (u16 BE) | log (u8) | 'L'                value = empty (led)
//!   column family "default": "format" -> FORMAT_METALOG
//! ```
//!
//! A truncation deletes the entries it drops rather than being stored, so
//! [`MetalogStore::load`] returns only entries and seals.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Mutex;

use bytes::Bytes;
use rocksdb::{
    BlockBasedOptions, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType, Direction, IteratorMode, Options, ReadOptions,
    WriteBatch, WriteOptions, DB,
};

use tally_log_core::{Error, LocalId, Location, LogId, MetalogEntry, Record, RecordMeta, Result, ShardId, Term};

use super::codec::{decode, encode};
use super::{MetalogStore, MetalogWrite, RecordStore, RecoveredRecord, StoredData};

/// When the record store fsyncs its write-ahead log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// An fsync of the WAL per group commit: records survive a power loss once
    /// acknowledged.
    #[default]
    EveryBatch,
    /// The WAL is written but not fsynced: records survive a process crash but not a
    /// power loss.
    Never,
}

impl fmt::Display for FsyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FsyncPolicy::EveryBatch => "every-batch",
            FsyncPolicy::Never => "never",
        })
    }
}

impl FromStr for FsyncPolicy {
    type Err = Error;

    fn from_str(s: &str) -> Result<FsyncPolicy> {
        match s {
            "every-batch" => Ok(FsyncPolicy::EveryBatch),
            "never" => Ok(FsyncPolicy::Never),
            _ => Err(Error::InvalidArgument(format!("unknown fsync policy {s:?}, expected \"every-batch\" or \"never\""))),
        }
    }
}

const CF_META: &str = "meta";
const CF_DATA: &str = "data";
const CF_ENTRIES: &str = "entries";
const CF_SEALS: &str = "seals";

/// Marks what a database holds, so a metalog directory is never opened as a record store
/// (or the other way round) and a later layout change is detected instead of misread.
const FORMAT_KEY: &[u8] = b"format";
const FORMAT_RECORDS: &[u8] = b"tally-records-v1";
const FORMAT_METALOG: &[u8] = b"tally-metalog-v1";

/// Upper bound on one record's encoded metadata. Metadata is a book, a few tags and a
/// condition; anything near this size is a bug upstream, and `recover` holds every
/// record's metadata in memory at once.
pub(super) const META_BYTES_MAX: u64 = 1 << 20;
/// Upper bound on one encoded metalog entry (cuts of every shard plus trim commands).
pub(super) const ENTRY_BYTES_MAX: u64 = 64 << 20;
/// Reclaims look up metadata in chunks of this many locations, to bound the memory
/// of one lookup whatever the caller passes.
pub(super) const RECLAIM_CHUNK_MAX: usize = 4096;

pub(super) const FLAG_RECLAIMED: u8 = 0;
pub(super) const FLAG_HAS_DATA: u8 = 1;

pub(super) const RECORD_KEY_LEN: usize = 12;

pub(super) fn record_key(location: Location) -> [u8; RECORD_KEY_LEN] {
    let mut key = [0u8; RECORD_KEY_LEN];
    key[..4].copy_from_slice(&location.shard.0.to_be_bytes());
    key[4..].copy_from_slice(&location.local_id.to_be_bytes());
    key
}

pub(super) fn decode_record_key(key: &[u8]) -> Result<Location> {
    let key: [u8; RECORD_KEY_LEN] =
        key.try_into().map_err(|_| Error::Storage(format!("corrupt record key of {} bytes", key.len())))?;
    let (shard, local_id) = key.split_at(4);
    Ok(Location {
        shard: ShardId(u32::from_be_bytes(shard.try_into().expect("split at 4 of 12 bytes"))),
        local_id: LocalId::from_be_bytes(local_id.try_into().expect("split at 4 of 12 bytes")),
    })
}

/// The first key after every record key of `shard`: the key of the shard's last
/// possible local id with one more byte. An exclusive range end that, unlike
/// `(shard + 1, 0)`, also exists for the last shard id.
pub(super) fn shard_end_key(shard: ShardId) -> [u8; RECORD_KEY_LEN + 1] {
    let mut key = [0u8; RECORD_KEY_LEN + 1];
    key[..RECORD_KEY_LEN].copy_from_slice(&record_key(Location { shard, local_id: LocalId::MAX }));
    key
}

pub(super) fn decode_meta_value(location: Location, value: &[u8]) -> Result<(RecordMeta, bool)> {
    let has_data = match value.first() {
        Some(&FLAG_HAS_DATA) => true,
        Some(&FLAG_RECLAIMED) => false,
        other => return Err(Error::Storage(format!("corrupt metadata flag {other:?} at {location:?}"))),
    };
    Ok((super::codec::decode_record_meta(&value[1..], META_BYTES_MAX)?, has_data))
}

pub(super) fn cf<'a>(db: &'a DB, name: &str) -> &'a ColumnFamily {
    // Every store opens its database with all its column families, so a missing one is
    // a bug in this file, not a property of the disk.
    db.cf_handle(name).unwrap_or_else(|| panic!("column family {name} was opened"))
}

/// Options shared by both stores.
fn db_options() -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    // Bounds the WAL kept for column families with little traffic: past this size
    // RocksDB flushes them so old WAL files can go.
    opts.set_max_total_wal_size(512 << 20);
    // Open files are capped because the node also holds sockets; RocksDB reopens
    // evicted table files on demand.
    opts.set_max_open_files(512);
    opts.set_max_background_jobs(4);
    // Writes dirty pages out in the background in small steps, so a flush or a WAL
    // fsync does not meet hundreds of megabytes of dirty pages at once.
    opts.set_bytes_per_sync(1 << 20);
    opts.set_wal_bytes_per_sync(1 << 20);
    // Reuses write-ahead log files once they are obsolete: writing into an existing
    // file, a WAL sync writes data only, where appending to a new file also updates
    // its size (a journal commit of the file system) on every sync.
    opts.set_recycle_log_file_num(4);
    opts.set_keep_log_file_num(8);
    opts.set_max_log_file_size(16 << 20);
    opts
}

/// Options of one column family. Compression is off: record data is the guests' bytes,
/// often already compressed; the CPU would come out of the write path; and a RocksDB
/// built by librocksdb-sys without default features links no codec at all, so asking
/// for one would fail at open on such a build.
fn cf_options(write_buffer_bytes: usize) -> Options {
    let mut opts = Options::default();
    opts.set_compression_type(DBCompressionType::None);
    opts.set_write_buffer_size(write_buffer_bytes);
    opts.set_max_write_buffer_number(4);
    opts.set_target_file_size_base(64 << 20);
    opts.set_level_compaction_dynamic_level_bytes(true);
    let mut table = BlockBasedOptions::default();
    // Point reads (one location, one metalog key) dominate, so bloom filters save a
    // disk read per level for keys that are absent there.
    table.set_bloom_filter(10.0, false);
    opts.set_block_based_table_factory(&table);
    opts
}

/// A RocksDB failure as the crate's error. A function rather than a `From` impl: the
/// error type lives in `tally-log-core`, which knows nothing of RocksDB.
pub(super) fn rocks_error(e: rocksdb::Error) -> Error {
    Error::Storage(e.into_string())
}

pub(super) fn open_db(path: &Path, families: &[(&str, usize)], format: &[u8]) -> Result<DB> {
    // RocksDB refuses to open a database without naming all its column families; a
    // directory of the other store shows up here, with a clearer message.
    if let Ok(existing) = DB::list_cf(&Options::default(), path) {
        let foreign: Vec<&String> =
            existing.iter().filter(|n| *n != "default" && !families.iter().any(|(f, _)| f == n)).collect();
        if !foreign.is_empty() {
            return Err(Error::Storage(format!(
                "{} is not a {} database: it has column families {foreign:?}",
                path.display(),
                String::from_utf8_lossy(format)
            )));
        }
    }
    let descriptors = families.iter().map(|(name, bytes)| ColumnFamilyDescriptor::new(*name, cf_options(*bytes)));
    let db = DB::open_cf_descriptors(&db_options(), path, descriptors).map_err(rocks_error)?;
    match db.get(FORMAT_KEY).map_err(rocks_error)? {
        Some(found) if found == format => {}
        Some(found) => {
            return Err(Error::Storage(format!(
                "{} holds {:?}, expected {:?}",
                path.display(),
                String::from_utf8_lossy(&found),
                String::from_utf8_lossy(format)
            )))
        }
        None => {
            let empty = families.iter().all(|(name, _)| db.iterator_cf(cf(&db, name), IteratorMode::Start).next().is_none());
            if !empty {
                return Err(Error::Storage(format!("{} holds data but no format marker", path.display())));
            }
            let mut sync = WriteOptions::default();
            sync.set_sync(true);
            db.put_opt(FORMAT_KEY, format, &sync).map_err(rocks_error)?;
        }
    }
    Ok(db)
}

/// A [`RecordStore`] in a RocksDB database. See the module documentation for the layout.
///
/// `write` appends to the WAL without an fsync; `sync` fsyncs the WAL (per
/// [`FsyncPolicy`]). Callers batch many writes per sync, see
/// [`GroupCommit`](super::GroupCommit).
pub struct RocksStore {
    db: DB,
    policy: FsyncPolicy,
    /// Serialises the store's mutations. `reclaim` reads a record's metadata and writes
    /// it back flagged, so without this a concurrent `write` or `discard` of the same
    /// location could be undone by that write-back. RocksDB serialises writers
    /// internally anyway, so the lock costs little.
    mutation: Mutex<()>,
}

impl RocksStore {
    pub fn open(path: &Path, policy: FsyncPolicy) -> Result<RocksStore> {
        // Data takes the volume, so it gets the larger memtables: fewer, larger flushes.
        let db = open_db(path, &[(CF_META, 16 << 20), (CF_DATA, 64 << 20)], FORMAT_RECORDS)?;
        tracing::info!(path = %path.display(), %policy, "opened record store");
        Ok(RocksStore { db, policy, mutation: Mutex::new(()) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        // The guarded state lives in RocksDB, whose batches are atomic, so a panic
        // while holding the lock leaves nothing half-done behind it.
        self.mutation.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write_options() -> WriteOptions {
        let mut opts = WriteOptions::default();
        opts.set_sync(false);
        opts.disable_wal(false);
        opts
    }

    fn reclaim_chunk(&self, locations: &[Location]) -> Result<()> {
        let (meta, data) = (cf(&self.db, CF_META), cf(&self.db, CF_DATA));
        let keys: Vec<[u8; RECORD_KEY_LEN]> = locations.iter().map(|l| record_key(*l)).collect();
        let _guard = self.lock();
        let found = self.db.multi_get_cf(keys.iter().map(|k| (meta, k)));
        let mut batch = WriteBatch::default();
        for ((key, value), location) in keys.iter().zip(found).zip(locations) {
            // Only records still holding data change: a missing record stays missing
            // and a reclaimed one stays as it is.
            let Some(mut value) = value.map_err(rocks_error)? else { continue };
            if value.first() != Some(&FLAG_HAS_DATA) {
                decode_meta_value(*location, &value)?;
                continue;
            }
            value[0] = FLAG_RECLAIMED;
            batch.put_cf(meta, key, value);
            batch.delete_cf(data, key);
        }
        if !batch.is_empty() {
            self.db.write_opt(batch, &Self::write_options()).map_err(rocks_error)?;
        }
        Ok(())
    }
}

impl RecordStore for RocksStore {
    fn write(&self, records: &[(Location, Record)]) -> Result<()> {
        let (meta, data) = (cf(&self.db, CF_META), cf(&self.db, CF_DATA));
        let mut batch = WriteBatch::default();
        for (location, record) in records {
            let key = record_key(*location);
            batch.put_cf(meta, key, encode("record metadata", &record.meta, META_BYTES_MAX, &[FLAG_HAS_DATA])?);
            batch.put_cf(data, key, &record.data);
        }
        let _guard = self.lock();
        self.db.write_opt(batch, &Self::write_options()).map_err(rocks_error)?;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        // A write returned after RocksDB put it in the WAL (write(2) without fsync), so
        // flushing the WAL with `sync` makes every such write durable.
        match self.policy {
            FsyncPolicy::EveryBatch => self.db.flush_wal(true).map_err(rocks_error)?,
            // A no-op while RocksDB writes the WAL on every write (no manual WAL flush);
            // kept so that the process-crash promise holds if that option changes.
            FsyncPolicy::Never => self.db.flush_wal(false).map_err(rocks_error)?,
        }
        Ok(())
    }

    fn read(&self, location: Location) -> Result<Option<StoredData>> {
        let key = record_key(location);
        // Both lookups see one snapshot, so a concurrent reclaim cannot show metadata
        // that says "data" next to data already deleted.
        let snapshot = self.db.snapshot();
        let Some(value) = snapshot.get_cf(cf(&self.db, CF_META), key).map_err(rocks_error)? else { return Ok(None) };
        let (meta, has_data) = decode_meta_value(location, &value)?;
        if !has_data {
            return Ok(Some(StoredData::Reclaimed(meta)));
        }
        match snapshot.get_cf(cf(&self.db, CF_DATA), key).map_err(rocks_error)? {
            Some(data) => Ok(Some(StoredData::Record(Record { meta, data: Bytes::from(data) }))),
            None => Err(Error::Storage(format!("metadata at {location:?} says data, but there is none"))),
        }
    }

    fn read_metas(&self, shard: ShardId, from: LocalId, to: LocalId) -> Result<Vec<RecordMeta>> {
        read_metas_in(&self.db, cf(&self.db, CF_META), shard, from, to, decode_meta_value)
    }

    fn reclaim(&self, locations: &[Location]) -> Result<()> {
        for chunk in locations.chunks(RECLAIM_CHUNK_MAX) {
            self.reclaim_chunk(chunk)?;
        }
        Ok(())
    }

    fn discard(&self, shard: ShardId, from: LocalId) -> Result<()> {
        let start = record_key(Location { shard, local_id: from });
        let end = shard_end_key(shard);
        let mut batch = WriteBatch::default();
        for name in [CF_META, CF_DATA] {
            batch.delete_range_cf(cf(&self.db, name), start.as_slice(), end.as_slice());
        }
        let _guard = self.lock();
        self.db.write_opt(batch, &Self::write_options()).map_err(rocks_error)?;
        tracing::debug!(shard = shard.0, from, "discarded records");
        Ok(())
    }

    fn recover(&self) -> Result<Vec<RecoveredRecord>> {
        recover_from(&self.db, cf(&self.db, CF_META), decode_meta_value)
    }
}

/// How a store reads its metadata values: the record's metadata and whether its data
/// is there.
pub(super) type DecodeMeta = fn(Location, &[u8]) -> Result<(RecordMeta, bool)>;

/// [`RecordStore::read_metas`] over a metadata column family keyed by [`record_key`].
pub(super) fn read_metas_in(
    db: &DB,
    family: &ColumnFamily,
    shard: ShardId,
    from: LocalId,
    to: LocalId,
    decode: DecodeMeta,
) -> Result<Vec<RecordMeta>> {
    let mut metas = Vec::new();
    let start = record_key(Location { shard, local_id: from });
    let mut options = ReadOptions::default();
    options.set_iterate_upper_bound(shard_end_key(shard).to_vec());
    let mode = IteratorMode::From(start.as_slice(), Direction::Forward);
    let mut next = from;
    for item in db.iterator_cf_opt(family, options, mode) {
        let (key, value) = item.map_err(rocks_error)?;
        let location = decode_record_key(&key)?;
        if location.local_id != next || next >= to {
            break;
        }
        metas.push(decode(location, &value)?.0);
        let Some(after) = next.checked_add(1) else { break };
        next = after;
    }
    Ok(metas)
}

/// [`RecordStore::recover`] over a metadata column family keyed by [`record_key`].
pub(super) fn recover_from(db: &DB, family: &ColumnFamily, decode: DecodeMeta) -> Result<Vec<RecoveredRecord>> {
    let mut recovered = Vec::new();
    for item in db.iterator_cf(family, IteratorMode::Start) {
        let (key, value) = item.map_err(rocks_error)?;
        let location = decode_record_key(&key)?;
        let (meta, has_data) = decode(location, &value)?;
        recovered.push(RecoveredRecord { location, meta, has_data });
    }
    Ok(recovered)
}

const METALOG_PREFIX_LEN: usize = 3;
/// The last byte of a lead mark's key in the seals column family.
pub(super) const LEAD_MARK: u8 = b'L';
const ENTRY_KEY_LEN: usize = METALOG_PREFIX_LEN + 8;

pub(super) fn metalog_prefix(term: Term, log: LogId) -> [u8; METALOG_PREFIX_LEN] {
    let [t0, t1] = term.0.to_be_bytes();
    [t0, t1, log.0]
}

pub(super) fn entry_key(term: Term, log: LogId, index: u64) -> [u8; ENTRY_KEY_LEN] {
    let mut key = [0u8; ENTRY_KEY_LEN];
    key[..METALOG_PREFIX_LEN].copy_from_slice(&metalog_prefix(term, log));
    key[METALOG_PREFIX_LEN..].copy_from_slice(&index.to_be_bytes());
    key
}

fn decode_metalog_prefix(key: &[u8]) -> Result<(Term, LogId)> {
    match key {
        [t0, t1, log, ..] => Ok((Term(u16::from_be_bytes([*t0, *t1])), LogId(*log))),
        _ => Err(Error::Storage(format!("corrupt metalog key of {} bytes", key.len()))),
    }
}

/// The seal or lead mark that a key of the seals column family stores.
pub(super) fn decode_seal_key(key: &[u8]) -> Result<(Term, LogId, MetalogWrite)> {
    let (term, log) = decode_metalog_prefix(key)?;
    Ok(match key[METALOG_PREFIX_LEN..] {
        [] => (term, log, MetalogWrite::Seal { term, log }),
        [LEAD_MARK] => (term, log, MetalogWrite::Lead { term, log }),
        _ => return Err(Error::Storage(format!("corrupt seal key of {} bytes", key.len()))),
    })
}

/// An entry's value, also as stores wrote it before configuration versions
/// (`MetalogEntryV1`, which ends where `version` begins).
fn decode_entry_value(value: &[u8]) -> Result<MetalogEntry> {
    decode("metalog entry", value, ENTRY_BYTES_MAX)
        .or_else(|e| decode::<tally_log_core::MetalogEntryV1>("", value, ENTRY_BYTES_MAX).map(MetalogEntry::from).map_err(|_| e))
}

/// The entry that a key and value of the entries column family store, which must be
/// the one its key names.
pub(super) fn decode_entry(key: &[u8], value: &[u8]) -> Result<MetalogEntry> {
    if key.len() != ENTRY_KEY_LEN {
        return Err(Error::Storage(format!("corrupt metalog key of {} bytes", key.len())));
    }
    let (term, log) = decode_metalog_prefix(key)?;
    let entry = decode_entry_value(value)?;
    let index = u64::from_be_bytes(key[METALOG_PREFIX_LEN..].try_into().expect("entry keys have 8 index bytes"));
    if (entry.term, entry.log, entry.index) != (term, log, index) {
        return Err(Error::Storage(format!("metalog entry under key {term:?} {log:?} {index} names another position")));
    }
    Ok(entry)
}

/// A [`MetalogStore`] in a RocksDB database: every `persist` is one write with an fsync.
pub struct RocksMetalogStore {
    db: DB,
}

impl RocksMetalogStore {
    pub fn open(path: &Path) -> Result<RocksMetalogStore> {
        let db = open_db(path, &[(CF_ENTRIES, 16 << 20), (CF_SEALS, 1 << 20)], FORMAT_METALOG)?;
        tracing::info!(path = %path.display(), "opened metalog store");
        Ok(RocksMetalogStore { db })
    }
}

impl MetalogStore for RocksMetalogStore {
    fn persist(&self, writes: &[MetalogWrite]) -> Result<()> {
        let mut batch = WriteBatch::default();
        for write in writes {
            match write {
                MetalogWrite::Entry(entry) => {
                    let value = encode("metalog entry", entry, ENTRY_BYTES_MAX, &[])?;
                    batch.put_cf(cf(&self.db, CF_ENTRIES), entry_key(entry.term, entry.log, entry.index), value);
                }
                MetalogWrite::Truncate { term, log, len } => {
                    // Everything from index `len` to the end of this (term, log): the end key
                    // is the last possible index's key with one more byte.
                    let start = entry_key(*term, *log, *len);
                    let mut end = [0u8; ENTRY_KEY_LEN + 1];
                    end[..ENTRY_KEY_LEN].copy_from_slice(&entry_key(*term, *log, u64::MAX));
                    batch.delete_range_cf(cf(&self.db, CF_ENTRIES), start.as_slice(), end.as_slice());
                }
                MetalogWrite::Seal { term, log } => {
                    batch.put_cf(cf(&self.db, CF_SEALS), metalog_prefix(*term, *log), []);
                }
                MetalogWrite::Lead { term, log } => {
                    let [t0, t1, l] = metalog_prefix(*term, *log);
                    batch.put_cf(cf(&self.db, CF_SEALS), [t0, t1, l, LEAD_MARK], []);
                }
                MetalogWrite::Amnesiac { .. } => {
                    return Err(Error::Storage("the RocksDB metalog store (read to import it) holds no amnesia".into()))
                }
            }
        }
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        self.db.write_opt(batch, &opts).map_err(rocks_error)?;
        Ok(())
    }

    fn load(&self) -> Result<Vec<MetalogWrite>> {
        let mut seals = Vec::new();
        for item in self.db.iterator_cf(cf(&self.db, CF_SEALS), IteratorMode::Start) {
            let (key, _) = item.map_err(rocks_error)?;
            seals.push(decode_seal_key(&key)?);
        }
        // Both column families iterate in (term, log) order, so a merge puts each seal
        // and lead mark right after the entries of its metalog.
        let mut seals = seals.into_iter().peekable();
        let mut writes = Vec::new();
        for item in self.db.iterator_cf(cf(&self.db, CF_ENTRIES), IteratorMode::Start) {
            let (key, value) = item.map_err(rocks_error)?;
            let entry = decode_entry(&key, &value)?;
            while let Some((_, _, mark)) = seals.next_if(|(t, l, _)| (*t, *l) < (entry.term, entry.log)) {
                writes.push(mark);
            }
            writes.push(MetalogWrite::Entry(entry));
        }
        writes.extend(seals.map(|(_, _, mark)| mark));
        Ok(writes)
    }

    fn read_entries(&self, term: Term, log: LogId, from: u64, to: u64) -> Result<Vec<MetalogEntry>> {
        let start = entry_key(term, log, from);
        let mut options = ReadOptions::default();
        options.set_iterate_upper_bound(entry_key(term, log, to).to_vec());
        let mode = IteratorMode::From(start.as_slice(), Direction::Forward);
        let mut entries = Vec::new();
        for item in self.db.iterator_cf_opt(cf(&self.db, CF_ENTRIES), options, mode) {
            let (_, value) = item.map_err(rocks_error)?;
            let entry = decode_entry_value(&value)?;
            if (entry.term, entry.log, entry.index) != (term, log, from + entries.len() as u64) {
                break;
            }
            entries.push(entry);
        }
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsync_policy_parses_and_prints() {
        fn check(input: &str, expect: Option<FsyncPolicy>) {
            let parsed = input.parse::<FsyncPolicy>().ok();
            assert_eq!(parsed, expect, "{input}");
            if let Some(policy) = parsed {
                assert_eq!(policy.to_string(), input);
            }
        }
        check("every-batch", Some(FsyncPolicy::EveryBatch));
        check("never", Some(FsyncPolicy::Never));
        check("Never", None);
        check("", None);
        assert_eq!(FsyncPolicy::default(), FsyncPolicy::EveryBatch);
    }

    #[test]
    fn entries_from_before_configuration_versions_read_as_they_were() {
        let entry = MetalogEntry {
            term: Term(3),
            log: LogId(0),
            index: 8,
            start_position: 2,
            prev_cut: vec![0],
            cut: vec![5],
            trims: vec![],
            version: 0,
        };
        let key = entry_key(entry.term, entry.log, entry.index);
        let old =
            super::super::codec::encode("entry", &tally_log_core::MetalogEntryV1::from(&entry), ENTRY_BYTES_MAX, &[]).unwrap();
        assert_eq!(decode_entry(&key, &old).unwrap(), entry);
        let new = MetalogEntry { version: 4, ..entry };
        let bytes = super::super::codec::encode("entry", &new, ENTRY_BYTES_MAX, &[]).unwrap();
        assert_eq!(decode_entry(&key, &bytes).unwrap(), new);
        assert!(decode_entry(&key, &bytes[..bytes.len() - 2]).is_err());
    }

    #[test]
    fn record_keys_sort_like_locations() {
        let locations = [(0, 0), (0, 1), (0, 255), (0, 256), (0, LocalId::MAX), (1, 0), (256, 0), (u32::MAX, LocalId::MAX)]
            .map(|(s, l)| Location { shard: ShardId(s), local_id: l });
        for pair in locations.windows(2) {
            assert!(record_key(pair[0]) < record_key(pair[1]), "{pair:?}");
            assert!(record_key(pair[0]).as_slice() < shard_end_key(pair[0].shard).as_slice());
        }
        for l in locations {
            assert_eq!(decode_record_key(&record_key(l)).unwrap(), l);
        }
        assert!(decode_record_key(&[0; 11]).is_err());
    }

    #[test]
    fn a_metalog_directory_is_not_opened_as_a_record_store() -> anyhow::Result<()> {
        let dir = tempfile::TempDir::new()?;
        drop(RocksMetalogStore::open(dir.path())?);
        let opened = RocksStore::open(dir.path(), FsyncPolicy::EveryBatch);
        assert!(
            matches!(opened, Err(Error::Storage(ref m)) if m.contains("not a tally-records-v1 database")),
            "{:?}",
            opened.err()
        );
        Ok(())
    }

    #[test]
    fn oversized_metadata_is_refused() -> anyhow::Result<()> {
        let dir = tempfile::TempDir::new()?;
        let store = RocksStore::open(dir.path(), FsyncPolicy::Never)?;
        let meta = RecordMeta {
            book: tally_log_core::BookId(1),
            tags: (0..200_000).map(|i| tally_log_core::Tag(u64::MAX - i)).collect(),
            cond: None,
            unchanged: vec![],
        };
        let record = Record { meta, data: Bytes::new() };
        let location = Location { shard: ShardId(1), local_id: 0 };
        assert!(matches!(store.write(&[(location, record)]), Err(Error::TooLarge { .. })));
        assert_eq!(store.read(location)?, None);
        Ok(())
    }
}
