//! Opening a record journal: replaying its frames into the metadata and dropping
//! metadata the journal does not hold (see the parent module's documentation).

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt as _;
use std::path::Path;

use rocksdb::{IteratorMode, WriteBatch, DB};

use tally_log_core::{Error, LocalId, Location, Result, ShardId};

use super::format::{decode_slot, meta_value, segment_first_seq, segment_path, Frames, Op, Slot, SEGMENT_HEADER, SEGMENT_PREFIX};
use super::meta_thread::no_wal;
use super::{CF_META, CHECKPOINT_KEY};
use crate::store::journal::{io_error, segment_numbers, sync_dir, FRAME_HEADER};
use crate::store::rocks::{
    cf, decode_record_key, record_key, rocks_error, shard_end_key, FLAG_HAS_DATA, FLAG_RECLAIMED, RECORD_KEY_LEN,
};

/// What opening found in the journal: where writing resumes, each segment's valid end,
/// and the segment replay started in.
pub(super) struct Replayed {
    pub(super) from: u64,
    pub(super) next_seq: u64,
    pub(super) ends: BTreeMap<u64, u64>,
    pub(super) capacity: u64,
}

/// Replays every segment of `dir` into the metadata, in order (see the module
/// documentation).
pub(super) fn replay(db: &DB, dir: &Path) -> Result<Replayed> {
    let meta = cf(db, CF_META);
    let numbers = segment_numbers(dir, SEGMENT_PREFIX)?;
    let checkpoint = match db.get(CHECKPOINT_KEY).map_err(rocks_error)? {
        Some(v) if v.len() == 24 => {
            Some(v.chunks(8).map(|n| u64::from_le_bytes(n.try_into().expect("8 bytes"))).collect::<Vec<_>>())
        }
        Some(v) => return Err(Error::Storage(format!("corrupt journal checkpoint of {} bytes", v.len()))),
        None => None,
    };
    // A checkpoint in a segment that is gone (never, as checkpoints precede deletions)
    // replays everything.
    let checkpoint = checkpoint.filter(|c| numbers.contains(&c[0]));
    let mut replayed =
        Replayed { from: checkpoint.as_ref().map_or(0, |c| c[0]), next_seq: 1, ends: BTreeMap::new(), capacity: 0 };
    let mut replaying = false;
    for (i, &segment) in numbers.iter().enumerate() {
        let path = segment_path(dir, segment);
        let is_last = i + 1 == numbers.len();
        if segment < replayed.from {
            // Before the checkpoint: its ops are all in the metadata, and it was synced
            // whole before the next segment started.
            let len = fs::metadata(&path).map_err(io_error("reading", &path))?.len();
            replayed.ends.insert(segment, len);
            continue;
        }
        let bytes = fs::read(&path).map_err(io_error("reading", &path))?;
        let corrupt = |what: String| Error::Storage(format!("{what} in {}", path.display()));
        let Some(first_seq) = segment_first_seq(&bytes) else {
            // A crash while the last segment was created leaves it without its header.
            if is_last && bytes.iter().all(|b| *b == 0) {
                fs::remove_file(&path).map_err(io_error("removing", &path))?;
                sync_dir(dir)?;
                break;
            }
            return Err(corrupt("no record journal header".into()));
        };
        if replaying && first_seq != replayed.next_seq {
            return Err(corrupt(format!("first frame {first_seq} where {} was expected", replayed.next_seq)));
        }
        let mut offset = SEGMENT_HEADER;
        replayed.next_seq = first_seq;
        if let Some(c) = checkpoint.as_ref().filter(|c| c[0] == segment) {
            if c[1] < SEGMENT_HEADER || c[1] > bytes.len() as u64 {
                return Err(corrupt(format!("a checkpoint at byte {}", c[1])));
            }
            (offset, replayed.next_seq) = (c[1], c[2]);
        }
        replaying = true;
        // The metadata the batch writes so far, for a reclaim of a record written in it.
        let mut batch = WriteBatch::default();
        let mut pending: HashMap<[u8; RECORD_KEY_LEN], Vec<u8>> = HashMap::new();
        let commit = |batch: &mut WriteBatch, pending: &mut HashMap<_, _>| {
            pending.clear();
            db.write_opt(std::mem::take(batch), &no_wal()).map_err(rocks_error)
        };
        let mut frames = Frames { bytes: &bytes, offset, seq: replayed.next_seq };
        for frame in frames.by_ref() {
            let (at, ops) = frame.map_err(corrupt)?;
            let payload_at = at + FRAME_HEADER;
            for op in ops {
                match op {
                    Op::Write { location, meta: m, data_at, data_len } => {
                        let slot = Slot { segment, offset: payload_at + data_at as u64, len: data_len };
                        let (key, value) = (record_key(location), meta_value(FLAG_HAS_DATA, slot, m));
                        batch.put_cf(meta, key, &value);
                        pending.insert(key, value);
                    }
                    Op::Reclaim(location) => {
                        let key = record_key(location);
                        let value = match pending.remove(&key) {
                            Some(value) => Some(value),
                            None => db.get_cf(meta, key).map_err(rocks_error)?,
                        };
                        if let Some(mut value) = value {
                            if decode_slot(location, &value)?.is_some() {
                                value[0] = FLAG_RECLAIMED;
                                batch.put_cf(meta, key, &value);
                                pending.insert(key, value);
                            }
                        }
                    }
                    Op::Discard { shard, from } => {
                        let start = record_key(Location { shard, local_id: from });
                        batch.delete_range_cf(meta, start.as_slice(), shard_end_key(shard).as_slice());
                        // Later reclaims look in the database, which has the deletion.
                        commit(&mut batch, &mut pending)?;
                    }
                }
            }
            if batch.size_in_bytes() > 4 << 20 {
                commit(&mut batch, &mut pending)?;
            }
        }
        (offset, replayed.next_seq) = (frames.offset, frames.seq);
        commit(&mut batch, &mut pending)?;
        let rest = &bytes[offset as usize..];
        if rest.iter().any(|b| *b != 0) {
            if !is_last {
                return Err(corrupt(format!("a damaged frame at byte {offset}")));
            }
            // Frames written after the last sync, reaching the disk in any order.
            tracing::warn!(path = %path.display(), offset, "record journal: dropped a torn tail (writes never synced)");
            let file = OpenOptions::new().write(true).open(&path).map_err(io_error("opening", &path))?;
            file.write_all_at(&vec![0; rest.len()], offset).map_err(io_error("zeroing", &path))?;
            file.sync_data().map_err(io_error("syncing", &path))?;
        }
        replayed.ends.insert(segment, offset);
        replayed.capacity = bytes.len() as u64;
    }
    Ok(replayed)
}

/// Drops metadata whose data is not in the journal (written by a flush after a write
/// whose frame never reached the disk), and counts the live records of each segment and
/// where each shard's stored local ids end.
pub(super) fn check_metadata(db: &DB, ends: &BTreeMap<u64, u64>) -> Result<(BTreeMap<u64, u64>, HashMap<ShardId, LocalId>)> {
    let meta = cf(db, CF_META);
    let mut live = BTreeMap::new();
    let mut fresh_from: HashMap<ShardId, LocalId> = HashMap::new();
    let mut batch = WriteBatch::default();
    let mut dropped = 0u64;
    for item in db.iterator_cf(meta, IteratorMode::Start) {
        let (key, value) = item.map_err(rocks_error)?;
        let location = decode_record_key(&key)?;
        if let Some(slot) = decode_slot(location, &value)? {
            let inside = ends.get(&slot.segment).is_some_and(|end| slot.offset.saturating_add(u64::from(slot.len)) <= *end);
            if !inside {
                batch.delete_cf(meta, &key);
                dropped += 1;
                continue;
            }
            *live.entry(slot.segment).or_insert(0) += 1;
        }
        let next = location.local_id.saturating_add(1);
        let fresh = fresh_from.entry(location.shard).or_insert(0);
        *fresh = (*fresh).max(next);
    }
    if dropped > 0 {
        tracing::warn!(records = dropped, "record journal: dropped metadata of records never synced");
        db.write_opt(batch, &no_wal()).map_err(rocks_error)?;
    }
    Ok((live, fresh_from))
}
