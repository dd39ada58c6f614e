//! [`JournalStore`]: a storage node's records in append-only journal files, with their
//! metadata in RocksDB (Boki's JournalStore, §6.1).
//!
//! ```text
//!   dir/                         RocksDB: column family "meta" only, written without its WAL
//!       meta:  key = shard (u32 BE) | local id (u64 BE)
//!              value = flag | segment (u64 LE) | offset (u64 LE) | len (u32 LE) | bincode(RecordMeta)
//!   dir/journal/records-0000000001.journal   HEADER | first seq (u64 LE) | frame | frame | ... | zeros
//!
//!   frame = len (u32 LE) | crc32 (u32 LE) of the rest | seq (u64 LE) | payload: len bytes of ops
//!   op    = 1 | shard (u32 LE) | local id (u64 LE) | meta len (u32 LE) | meta | data len (u32 LE) | data
//!         | 2 | shard | local id                      reclaim
//!         | 3 | shard | from (u64 LE)                 discard
//! ```
//!
//! **Writes.** A [`RecordStore::write`] is one frame appended where the last one ended
//! (one `pwrite` into a preallocated segment, so a sync writes no file size), and one
//! RocksDB batch of the records' metadata, each with the place of its data. `sync` is one
//! `fdatasync` of the segment. Record data is written once, where RocksDB would write it
//! to its WAL, then to a memtable, a level-0 file and each compaction after.
//!
//! The metadata batch is applied by a thread of the store's own, in the order of the
//! frames, so that a `write` followed by a `sync` runs the `fdatasync` while RocksDB
//! takes the batch rather than after it (on the group commit's path, a RocksDB write
//! costs a third of an fsync). Everything that reads or writes the metadata (a read,
//! `sync`'s return, a checkpoint, a reclaim, a discard, an overwrite's lookup) first
//! waits for the batches handed over before it, so none sees the metadata behind the
//! journal.
//!
//! **The journal is the metadata's write-ahead log.** RocksDB writes the metadata
//! without a WAL of its own, so after a crash it holds what its last flush wrote, which
//! may be older or (a flush after a write whose frame was never synced) newer than the
//! journal. Opening replays every frame of every segment into it, in order, then drops
//! metadata whose data lies past the journal's end: such a record was never synced, so
//! never acknowledged. Replaying is idempotent: every op sets the state of its locations
//! from what the op says and what ops before it did, and all ops after any flushed state
//! are replayed.
//!
//! **Checkpoints.** Replaying the whole journal at every open would read every record
//! ever kept. So now and then the store syncs the journal up to where it is, flushes the
//! metadata, and then stores that position (`"journal-replay-from"` in the default
//! column family): every op before it is on disk and in RocksDB's files, so an open
//! replays from there on. Before deleting segments it does so and waits; once the
//! journal grew by [`CHECKPOINT_SEGMENTS`] segments since the last checkpoint, a sync
//! (which made the journal durable up to its position) asks for the flush without
//! waiting, and a later sync that finds it done stores the position. A checkpoint is
//! stored without a sync of its own: a lost one leaves an earlier one, and only more to
//! replay.
//!
//! **Reclaiming space.** A segment is deleted once no record's data in it is live (every
//! record in it reclaimed, discarded or overwritten), it is not the segment being
//! written, and every segment before it is deleted too: segments go in order, so a
//! replay always starts from a prefix's end. Before deleting, the metadata is flushed,
//! so the segment's ops are never needed again. An overwritten record's old copy counts
//! as live until the sync after the overwrite, so that a crash before that sync, which
//! loses the new copy, finds the old one. A record that is never trimmed keeps its
//! segment, and every later one, on disk.
//!
//! **Torn tails.** Frames written between two syncs may reach the disk in any order,
//! so after a crash the last segment ends with frames that are whole, then anything.
//! Opening stops at the first frame that is not whole (its checksum, or its sequence
//! number, which must follow its predecessor's) and zeroes the rest. In an earlier
//! segment, which was synced before the next was started, such a frame is corruption
//! and fails the open. After a failed write or sync the store refuses every later
//! write: what reached the disk is unknown.

pub(super) mod format;
mod meta_thread;
mod replay;

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use bytes::Bytes;
use rocksdb::{Direction, IteratorMode, ReadOptions, WriteBatch, DB};

use tally_log_core::{Error, LocalId, Location, Record, RecordMeta, Result, ShardId};

use crate::store::codec::encode;
use crate::store::journal::{io_error, seal_frame, sync_dir, FRAME_HEADER};
use crate::store::rocks::{
    cf, decode_record_key, open_db, read_metas_in, record_key, recover_from, rocks_error, shard_end_key, FLAG_HAS_DATA,
    FLAG_RECLAIMED, META_BYTES_MAX, RECLAIM_CHUNK_MAX, RECORD_KEY_LEN,
};
use crate::store::{FsyncPolicy, RecordStore, RecoveredRecord, StoredData};
use format::{
    create_segment, decode_meta, decode_meta_flag, decode_slot, meta_value, put_location, segment_path, Slot, FRAME_BYTES_MAX,
    LOCATION_BYTES, OP_DISCARD, OP_RECLAIM, OP_WRITE, SEGMENT_HEADER,
};
use meta_thread::{no_wal, MetaThread};
use replay::{check_metadata, replay};

const CF_META: &str = "meta";
const FORMAT: &[u8] = b"tally-records-journal-v1";
const SEGMENT_BYTES: u64 = 64 << 20;

/// Where replay starts: segment, offset, sequence number (u64 LE each).
const CHECKPOINT_KEY: &[u8] = b"journal-replay-from";
/// The journal grows by this many segments between two checkpoints, at most.
const CHECKPOINT_SEGMENTS: u64 = 8;

/// The largest frame buffer a store keeps for its next write: a burst of large records
/// does not hold its memory after it.
const FRAME_KEPT_MAX: usize = 4 << 20;

struct Writer {
    /// The segment being written, its number, where the next frame goes, its size.
    file: Arc<File>,
    segment: u64,
    end: u64,
    capacity: u64,
    next_seq: u64,
    /// Records whose data is live, by segment: every segment the store holds has an
    /// entry, the one being written included.
    live: BTreeMap<u64, u64>,
    /// Per shard, the first local id at and after which nothing is stored: a write at
    /// or past it overwrites nothing, so it needs no lookup.
    fresh_from: HashMap<ShardId, LocalId>,
    /// Segments of overwritten copies, released (no longer live) at the next sync.
    released: Vec<u64>,
    /// Set by a failed write or sync: every later write fails with it.
    failed: Option<String>,
    /// The segment of the last checkpoint, begun or stored.
    checkpointed: u64,
    /// A checkpoint whose flush was asked for and may still run: stored once it is done.
    pending_checkpoint: Option<[u64; 3]>,
    /// The last checkpoint stored: a later one never goes back behind it.
    stored_checkpoint: [u64; 2],
}

/// A [`RecordStore`] in journal files. See the module documentation for the layout.
pub struct JournalStore {
    db: Arc<DB>,
    /// Applies the metadata of writes while the journal syncs.
    meta: MetaThread,
    dir: PathBuf,
    policy: FsyncPolicy,
    segment_bytes: u64,
    writer: Mutex<Writer>,
    /// The buffer the frame of a write is built in (`RecordStore::write`).
    frame: Mutex<Vec<u8>>,
    /// Every segment the store holds, open for reads.
    files: RwLock<BTreeMap<u64, Arc<File>>>,
    /// Serialises the deletion of segments.
    collect: Mutex<()>,
}

impl JournalStore {
    pub fn open(path: &Path, policy: FsyncPolicy) -> Result<JournalStore> {
        Self::open_with(path, policy, SEGMENT_BYTES)
    }

    /// [`Self::open`] with segments of `segment_bytes` (tests use small ones).
    pub fn open_with(path: &Path, policy: FsyncPolicy, segment_bytes: u64) -> Result<JournalStore> {
        let db = open_db(path, &[(CF_META, 16 << 20)], FORMAT)?;
        let dir = path.join("journal");
        fs::create_dir_all(&dir).map_err(io_error("creating", &dir))?;
        let replayed = replay(&db, &dir)?;
        let mut files = BTreeMap::new();
        for &segment in replayed.ends.keys() {
            let path = segment_path(&dir, segment);
            let file = OpenOptions::new().read(true).write(true).open(&path).map_err(io_error("opening", &path))?;
            files.insert(segment, Arc::new(file));
        }
        let (live, fresh_from) = check_metadata(&db, &replayed.ends)?;
        let (segment, end, capacity, file) = match replayed.ends.last_key_value() {
            Some((&segment, &end)) => (segment, end, replayed.capacity, files[&segment].clone()),
            None => {
                let file = Arc::new(create_segment(&dir, 1, segment_bytes, replayed.next_seq)?);
                files.insert(1, file.clone());
                (1, SEGMENT_HEADER, segment_bytes, file)
            }
        };
        let mut live = live;
        for &s in files.keys() {
            live.entry(s).or_insert(0);
        }
        let writer = Writer {
            file,
            segment,
            end,
            capacity,
            next_seq: replayed.next_seq,
            live,
            fresh_from,
            released: Vec::new(),
            failed: None,
            checkpointed: replayed.from,
            pending_checkpoint: None,
            stored_checkpoint: [replayed.from, 0],
        };
        let db = Arc::new(db);
        let store = JournalStore {
            meta: MetaThread::start(db.clone())?,
            db,
            dir,
            policy,
            segment_bytes,
            writer: Mutex::new(writer),
            frame: Mutex::new(Vec::new()),
            files: RwLock::new(files),
            collect: Mutex::new(()),
        };
        store.collect()?;
        tracing::info!(path = %path.display(), %policy, "opened journal record store");
        Ok(store)
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn meta_cf(&self) -> &rocksdb::ColumnFamily {
        cf(&self.db, CF_META)
    }

    /// Appends `frame` (its header still zero) as the next frame: to a new segment if
    /// it does not fit. Returns the segment and offset it went to.
    fn append(&self, w: &mut Writer, frame: &mut [u8]) -> Result<(u64, u64)> {
        if let Some(failed) = &w.failed {
            return Err(Error::Storage(format!("the record journal failed earlier: {failed}")));
        }
        let payload = frame.len() as u64 - FRAME_HEADER;
        if payload > FRAME_BYTES_MAX {
            return Err(Error::TooLarge {
                what: "record journal frame".into(),
                size: payload as usize,
                limit: FRAME_BYTES_MAX as usize,
            });
        }
        seal_frame(frame, w.next_seq);
        let len = frame.len() as u64;
        let result = (|| {
            if w.end + len > w.capacity {
                // The full segment is synced before the next one starts: only the last
                // segment may end torn.
                let path = segment_path(&self.dir, w.segment);
                w.file.sync_data().map_err(io_error("syncing", &path))?;
                let segment = w.segment + 1;
                let capacity = self.segment_bytes.max(SEGMENT_HEADER + len);
                let file = Arc::new(create_segment(&self.dir, segment, capacity, w.next_seq)?);
                self.files.write().unwrap_or_else(|e| e.into_inner()).insert(segment, file.clone());
                w.live.insert(segment, 0);
                (w.file, w.segment, w.end, w.capacity) = (file, segment, SEGMENT_HEADER, capacity);
            }
            let path = segment_path(&self.dir, w.segment);
            w.file.write_all_at(frame, w.end).map_err(io_error("writing", &path))
        })();
        if let Err(e) = result {
            w.failed = Some(e.to_string());
            return Err(e);
        }
        let at = (w.segment, w.end);
        w.end += len;
        w.next_seq += 1;
        Ok(at)
    }

    /// Where the data of `location` is now, if it is there.
    fn stored_slot(&self, location: Location) -> Result<Option<Slot>> {
        self.meta.settle()?;
        match self.db.get_cf(self.meta_cf(), record_key(location)).map_err(rocks_error)? {
            Some(value) => decode_slot(location, &value),
            None => Ok(None),
        }
    }

    fn reclaim_chunk(&self, locations: &[Location]) -> Result<()> {
        let keys: Vec<[u8; RECORD_KEY_LEN]> = locations.iter().map(|l| record_key(*l)).collect();
        let mut w = self.lock();
        // Under the writer lock: the batches in flight go to RocksDB before this one.
        self.meta.settle()?;
        let found = self.db.multi_get_cf(keys.iter().map(|k| (self.meta_cf(), k)));
        let mut batch = WriteBatch::default();
        let mut frame = vec![0u8; FRAME_HEADER as usize];
        let mut freed = Vec::new();
        let mut reclaimed = std::collections::HashSet::new();
        for ((key, value), location) in keys.iter().zip(found).zip(locations) {
            let Some(mut value) = value.map_err(rocks_error)? else { continue };
            // A location named twice is released once.
            let Some(slot) = decode_slot(*location, &value)?.filter(|_| reclaimed.insert(*key)) else { continue };
            value[0] = FLAG_RECLAIMED;
            batch.put_cf(self.meta_cf(), key, value);
            put_location(&mut frame, OP_RECLAIM, location.shard, location.local_id);
            freed.push(slot.segment);
        }
        if freed.is_empty() {
            return Ok(());
        }
        self.append(&mut w, &mut frame)?;
        self.db.write_opt(batch, &no_wal()).map_err(rocks_error)?;
        release(&mut w.live, &freed);
        Ok(())
    }

    /// Deletes the oldest segments while no live data is in them (see the module
    /// documentation), after flushing the metadata their ops wrote.
    fn collect(&self) -> Result<()> {
        let _collecting = self.collect.lock().unwrap_or_else(|e| e.into_inner());
        let dead: Vec<u64> = {
            let w = self.lock();
            w.live.iter().take_while(|(s, n)| **s < w.segment && **n == 0).map(|(s, _)| *s).collect()
        };
        if dead.is_empty() {
            return Ok(());
        }
        self.checkpoint()?;
        for &segment in &dead {
            let path = segment_path(&self.dir, segment);
            fs::remove_file(&path).map_err(io_error("removing", &path))?;
            self.files.write().unwrap_or_else(|e| e.into_inner()).remove(&segment);
            self.lock().live.remove(&segment);
        }
        sync_dir(&self.dir)?;
        tracing::debug!(segments = ?dead, "deleted journal segments without live records");
        Ok(())
    }

    /// Flushes the metadata, then stores the journal position reached before the flush
    /// as where replay starts (see the module documentation).
    fn checkpoint(&self) -> Result<()> {
        let (file, segment, offset, seq) = {
            let mut w = self.lock();
            w.checkpointed = w.segment;
            w.pending_checkpoint = None;
            (w.file.clone(), w.segment, w.end, w.next_seq)
        };
        // The frames before the checkpoint are never replayed again, so none of them may
        // be lost in a crash: their metadata is about to be flushed.
        if self.policy == FsyncPolicy::EveryBatch {
            file.sync_data().map_err(io_error("syncing", &segment_path(&self.dir, segment)))?;
        }
        self.meta.settle()?;
        self.db.flush_cf(self.meta_cf()).map_err(rocks_error)?;
        self.store_checkpoint([segment, offset, seq])
    }

    /// Stores `position` as where replay starts, unless a later one is stored. Needs
    /// no sync: a lost checkpoint leaves an earlier one, and only more to replay.
    fn store_checkpoint(&self, position: [u64; 3]) -> Result<()> {
        let mut w = self.lock();
        if [position[0], position[1]] <= w.stored_checkpoint {
            return Ok(());
        }
        let value: Vec<u8> = position.iter().flat_map(|n| n.to_le_bytes()).collect();
        self.db.put(CHECKPOINT_KEY, value).map_err(rocks_error)?;
        w.stored_checkpoint = [position[0], position[1]];
        Ok(())
    }

    /// The group commit thread's checkpoint, which must not wait for a flush: at a
    /// sync that made the journal durable up to `position`, asks for a flush of the
    /// metadata without waiting; at a later sync that finds the flush done (no
    /// immutable memtable left), stores the position.
    fn checkpoint_in_background(&self, position: [u64; 3], due: bool) -> Result<()> {
        let pending = self.lock().pending_checkpoint;
        if let Some(pending) = pending {
            let flushing = self
                .db
                .property_int_value_cf(self.meta_cf(), "rocksdb.num-immutable-mem-table")
                .map_err(rocks_error)?
                .unwrap_or(1);
            if flushing == 0 {
                self.lock().pending_checkpoint = None;
                self.store_checkpoint(pending)?;
            }
        } else if due {
            let mut no_wait = rocksdb::FlushOptions::default();
            no_wait.set_wait(false);
            {
                let mut w = self.lock();
                w.checkpointed = position[0];
                w.pending_checkpoint = Some(position);
            }
            // Every op before `position` is in the memtable this flush makes immutable.
            self.db.flush_cf_opt(self.meta_cf(), &no_wait).map_err(rocks_error)?;
        }
        Ok(())
    }

    /// Writes the metadata in memory to RocksDB's files, as a flush of a full memtable
    /// would: a crash test's way to get metadata ahead of the journal.
    #[cfg(test)]
    pub(super) fn flush_metadata(&self) -> Result<()> {
        self.meta.settle()?;
        self.db.flush_cf(self.meta_cf()).map_err(rocks_error)
    }

    /// Keeps the metadata thread from applying batches while the guard lives.
    #[cfg(test)]
    pub(super) fn pause_metadata(&self) -> MutexGuard<'_, ()> {
        self.meta.paused.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The segment replay starts from at the next open (0: the first one).
    #[cfg(test)]
    pub(super) fn replay_from(&self) -> u64 {
        self.lock().stored_checkpoint[0]
    }

    /// The segments the store holds and the live records in each.
    #[cfg(test)]
    pub(super) fn segments(&self) -> Vec<(u64, u64)> {
        self.lock().live.iter().map(|(s, n)| (*s, *n)).collect()
    }
}

fn release(live: &mut BTreeMap<u64, u64>, segments: &[u64]) {
    for s in segments {
        if let Some(n) = live.get_mut(s) {
            *n = n.saturating_sub(1);
        }
    }
}

impl RecordStore for JournalStore {
    fn write(&self, records: &[(Location, Record)]) -> Result<()> {
        // An empty frame would read as the journal's end (a frame's length is never 0),
        // hiding every frame after it from replay.
        if records.is_empty() {
            return Ok(());
        }
        let metas =
            records.iter().map(|(_, r)| encode("record metadata", &r.meta, META_BYTES_MAX, &[])).collect::<Result<Vec<_>>>()?;
        // The frame is built in a buffer kept across writes: a batch's frame can be
        // hundreds of KiB, which the allocator would map, zero and unmap every time.
        let mut frame = self.frame.lock().unwrap_or_else(|e| e.into_inner());
        let body: usize = records.iter().zip(&metas).map(|((_, r), meta)| LOCATION_BYTES + 8 + meta.len() + r.data.len()).sum();
        frame.clear();
        frame.reserve(FRAME_HEADER as usize + body);
        frame.resize(FRAME_HEADER as usize, 0);
        // Per record: its encoded metadata and its data's offset in the frame.
        let mut placed = Vec::with_capacity(records.len());
        for ((location, record), meta) in records.iter().zip(metas) {
            let data_len = u32::try_from(record.data.len()).map_err(|_| Error::TooLarge {
                what: "record data".into(),
                size: record.data.len(),
                limit: u32::MAX as usize,
            })?;
            put_location(&mut frame, OP_WRITE, location.shard, location.local_id);
            frame.extend_from_slice(&(meta.len() as u32).to_le_bytes());
            frame.extend_from_slice(&meta);
            frame.extend_from_slice(&data_len.to_le_bytes());
            placed.push((meta, frame.len() as u64, data_len));
            frame.extend_from_slice(&record.data);
        }
        let mut w = self.lock();
        // Overwritten copies: a write below where its shard's stored ids end may have
        // one, in the database or earlier in this batch.
        let mut overwritten = Vec::new();
        for (i, (location, _)) in records.iter().enumerate() {
            let fresh = w.fresh_from.entry(location.shard).or_insert(0);
            if location.local_id >= *fresh {
                *fresh = location.local_id.saturating_add(1);
                continue;
            }
            if records[..i].iter().any(|(l, _)| l == location) {
                overwritten.push(None);
            } else if let Some(old) = self.stored_slot(*location)? {
                overwritten.push(Some(old.segment));
            }
        }
        let (segment, offset) = self.append(&mut w, &mut frame)?;
        if frame.capacity() > FRAME_KEPT_MAX {
            *frame = Vec::new();
        }
        drop(frame);
        let mut batch = WriteBatch::default();
        for ((location, _), (meta, at, len)) in records.iter().zip(&placed) {
            let slot = Slot { segment, offset: offset + at, len: *len };
            batch.put_cf(self.meta_cf(), record_key(*location), meta_value(FLAG_HAS_DATA, slot, meta));
        }
        if let Err(e) = self.meta.apply(batch) {
            w.failed = Some(e.to_string());
            return Err(e);
        }
        *w.live.entry(segment).or_insert(0) += records.len() as u64;
        // A copy earlier in this batch is in this segment.
        w.released.extend(overwritten.into_iter().map(|s| s.unwrap_or(segment)));
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let (file, segment, released, position) = {
            let mut w = self.lock();
            if let Some(failed) = &w.failed {
                return Err(Error::Storage(format!("the record journal failed earlier: {failed}")));
            }
            (w.file.clone(), w.segment, std::mem::take(&mut w.released), [w.segment, w.end, w.next_seq])
        };
        if self.policy == FsyncPolicy::EveryBatch {
            // Earlier segments were synced when the next one started.
            if let Err(e) = file.sync_data() {
                let e = io_error("syncing", &segment_path(&self.dir, segment))(e);
                self.lock().failed = Some(e.to_string());
                return Err(e);
            }
        }
        // The metadata of the writes synced went to RocksDB meanwhile.
        if let Err(e) = self.meta.settle() {
            self.lock().failed = Some(e.to_string());
            return Err(e);
        }
        let due = {
            let mut w = self.lock();
            release(&mut w.live, &released);
            w.segment >= w.checkpointed + CHECKPOINT_SEGMENTS
        };
        // With `Never`, `position` is not synced, and only a process crash is survived,
        // which loses nothing written.
        self.checkpoint_in_background(position, due)?;
        if released.is_empty() {
            return Ok(());
        }
        self.collect()
    }

    fn read(&self, location: Location) -> Result<Option<StoredData>> {
        self.meta.settle()?;
        let key = record_key(location);
        for _ in 0..2 {
            let Some(value) = self.db.get_cf(self.meta_cf(), key).map_err(rocks_error)? else { return Ok(None) };
            let (meta, slot) = decode_meta(location, &value)?;
            let Some(slot) = slot else { return Ok(Some(StoredData::Reclaimed(meta))) };
            let file = self.files.read().unwrap_or_else(|e| e.into_inner()).get(&slot.segment).cloned();
            // A segment is deleted only once its records are reclaimed: the metadata,
            // looked at again, says so.
            let Some(file) = file else { continue };
            let mut data = vec![0u8; slot.len as usize];
            let path = segment_path(&self.dir, slot.segment);
            file.read_exact_at(&mut data, slot.offset).map_err(io_error("reading", &path))?;
            return Ok(Some(StoredData::Record(Record { meta, data: Bytes::from(data) })));
        }
        Err(Error::Storage(format!("the metadata at {location:?} names a deleted journal segment")))
    }

    fn read_metas(&self, shard: ShardId, from: LocalId, to: LocalId) -> Result<Vec<RecordMeta>> {
        self.meta.settle()?;
        read_metas_in(&self.db, self.meta_cf(), shard, from, to, decode_meta_flag)
    }

    fn reclaim(&self, locations: &[Location]) -> Result<()> {
        for chunk in locations.chunks(RECLAIM_CHUNK_MAX) {
            self.reclaim_chunk(chunk)?;
        }
        self.collect()
    }

    fn discard(&self, shard: ShardId, from: LocalId) -> Result<()> {
        let start = record_key(Location { shard, local_id: from });
        let end = shard_end_key(shard);
        let mut w = self.lock();
        self.meta.settle()?;
        let mut freed = Vec::new();
        let mut options = ReadOptions::default();
        options.set_iterate_upper_bound(end.to_vec());
        let mode = IteratorMode::From(start.as_slice(), Direction::Forward);
        for item in self.db.iterator_cf_opt(self.meta_cf(), options, mode) {
            let (key, value) = item.map_err(rocks_error)?;
            if let Some(slot) = decode_slot(decode_record_key(&key)?, &value)? {
                freed.push(slot.segment);
            }
        }
        let mut frame = vec![0u8; FRAME_HEADER as usize];
        put_location(&mut frame, OP_DISCARD, shard, from);
        self.append(&mut w, &mut frame)?;
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(self.meta_cf(), start.as_slice(), end.as_slice());
        self.db.write_opt(batch, &no_wal()).map_err(rocks_error)?;
        release(&mut w.live, &freed);
        if let Some(fresh) = w.fresh_from.get_mut(&shard) {
            *fresh = (*fresh).min(from);
        }
        drop(w);
        tracing::debug!(shard = shard.0, from, "discarded records");
        self.collect()
    }

    fn recover(&self) -> Result<Vec<RecoveredRecord>> {
        self.meta.settle()?;
        recover_from(&self.db, self.meta_cf(), decode_meta_flag)
    }
}
