//! The stores' decoders as `tally-fuzz` calls them: every value, key and file a store
//! reads back from the disk, read by the functions an open, a read or a recovery uses,
//! and the encoders that wrote them.

use std::collections::BTreeMap;
use std::path::Path;

use tally_log_core::{Configuration, Location, LogId, MetalogEntry, Record, RecordMeta, Result, Term};

use super::codec::{decode_record_meta as decode_meta_bytes, encode};
use super::journal::{scan_segment, Metalog, FRAME_HEADER, HEADER as METALOG_HEADER, MARK_EVERY};
use super::journal_records::format::{decode_meta, meta_value, segment_first_seq, Frames, Op, Slot, SEGMENT_HEADER};
use super::rocks::{decode_entry, decode_meta_value, decode_record_key, decode_seal_key, entry_key, record_key as key_of};
use super::rocks::{metalog_prefix, ENTRY_BYTES_MAX, FLAG_HAS_DATA, FLAG_RECLAIMED, LEAD_MARK, META_BYTES_MAX};
use super::{FsyncPolicy, JournalMetalogStore, JournalStore, MetalogStore, MetalogWrite, RecordStore};

/// A record's metadata as every store encodes it.
pub fn encode_record_meta(meta: &RecordMeta) -> Result<Vec<u8>> {
    encode("record metadata", meta, META_BYTES_MAX, &[])
}

/// A record's metadata, in this encoding or the one before it.
pub fn decode_record_meta(bytes: &[u8]) -> Result<RecordMeta> {
    decode_meta_bytes(bytes, META_BYTES_MAX)
}

/// The key of a record's metadata (and, in a `RocksStore`, its data).
pub fn record_key(location: Location) -> Vec<u8> {
    key_of(location).to_vec()
}

pub fn decode_location(key: &[u8]) -> Result<Location> {
    decode_record_key(key)
}

/// A `RocksStore`'s metadata value: the flag, then the metadata.
pub fn rocks_meta_value(meta: &RecordMeta, has_data: bool) -> Result<Vec<u8>> {
    encode("record metadata", meta, META_BYTES_MAX, &[if has_data { FLAG_HAS_DATA } else { FLAG_RECLAIMED }])
}

pub fn decode_rocks_meta_value(value: &[u8]) -> Result<(RecordMeta, bool)> {
    decode_meta_value(Location { shard: tally_log_core::ShardId(0), local_id: 0 }, value)
}

/// Where a `JournalStore` keeps a record's data: segment, offset, length.
pub type JournalSlot = (u64, u64, u32);

/// A `JournalStore`'s metadata value: where the data is, or `None` once reclaimed,
/// then the metadata.
pub fn journal_meta_value(meta: &RecordMeta, slot: Option<JournalSlot>) -> Result<Vec<u8>> {
    let flag = if slot.is_some() { FLAG_HAS_DATA } else { FLAG_RECLAIMED };
    let (segment, offset, len) = slot.unwrap_or_default();
    Ok(meta_value(flag, Slot { segment, offset, len }, &encode_record_meta(meta)?))
}

pub fn decode_journal_meta_value(value: &[u8]) -> Result<(RecordMeta, Option<JournalSlot>)> {
    let location = Location { shard: tally_log_core::ShardId(0), local_id: 0 };
    let (meta, slot) = decode_meta(location, value)?;
    Ok((meta, slot.map(|s| (s.segment, s.offset, s.len))))
}

/// A `RocksMetalogStore`'s entry: its key and value.
pub fn rocks_metalog_entry(entry: &MetalogEntry) -> Result<(Vec<u8>, Vec<u8>)> {
    let value = encode("metalog entry", entry, ENTRY_BYTES_MAX, &[])?;
    Ok((entry_key(entry.term, entry.log, entry.index).to_vec(), value))
}

pub fn decode_rocks_metalog_entry(key: &[u8], value: &[u8]) -> Result<MetalogEntry> {
    decode_entry(key, value)
}

/// The key a `RocksMetalogStore` keeps a seal (`lead: false`) or a lead mark under.
pub fn rocks_seal_key(term: Term, log: LogId, lead: bool) -> Vec<u8> {
    let mut key = metalog_prefix(term, log).to_vec();
    if lead {
        key.push(LEAD_MARK);
    }
    key
}

pub fn decode_rocks_seal_key(key: &[u8]) -> Result<MetalogWrite> {
    decode_seal_key(key).map(|(_, _, write)| write)
}

/// The controller's configuration file.
pub fn configuration_file(config: &Configuration) -> Result<Vec<u8>> {
    super::file::encode_file(config)
}

pub fn decode_configuration_file(bytes: &[u8]) -> Result<Configuration> {
    super::file::decode_file(bytes)
}

/// One op of a record journal's frame, as replay reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalOp {
    Write { location: Location, meta: Vec<u8>, data: std::ops::Range<u64> },
    Reclaim(Location),
    Discard { location: Location },
}

/// What an open of a `JournalStore` reads of one segment: the first frame's sequence
/// number, every whole frame's ops (the data of a write as a range of `bytes`), and
/// where the frames end; `Err` for a segment the open refuses as corrupt. Whether the
/// bytes after the frames are zeros is the caller's to say, as only the last segment
/// may end in a torn frame.
pub fn read_record_segment(bytes: &[u8]) -> std::result::Result<(u64, Vec<JournalOp>, u64), String> {
    let first_seq = segment_first_seq(bytes).ok_or("no record journal header")?;
    let mut frames = Frames { bytes, offset: SEGMENT_HEADER, seq: first_seq };
    let mut ops = Vec::new();
    for frame in frames.by_ref() {
        let (at, parsed) = frame?;
        let payload_at = at + FRAME_HEADER;
        ops.extend(parsed.into_iter().map(|op| match op {
            Op::Write { location, meta, data_at, data_len } => {
                let start = payload_at + data_at as u64;
                JournalOp::Write { location, meta: meta.to_vec(), data: start..start + u64::from(data_len) }
            }
            Op::Reclaim(location) => JournalOp::Reclaim(location),
            Op::Discard { shard, from } => JournalOp::Discard { location: Location { shard, local_id: from } },
        }));
    }
    Ok((first_seq, ops, frames.offset))
}

/// The first segment of a `JournalStore` in `dir` (a new directory) after it wrote each
/// batch of `writes`, reclaimed `reclaims` and synced; segments of `segment_bytes`.
pub fn record_segment(
    dir: &Path,
    writes: &[Vec<(Location, Record)>],
    reclaims: &[Location],
    segment_bytes: u64,
) -> Result<Vec<u8>> {
    let store = JournalStore::open_with(dir, FsyncPolicy::Never, segment_bytes)?;
    for batch in writes {
        store.write(batch)?;
    }
    store.reclaim(reclaims)?;
    store.sync()?;
    drop(store);
    let path = dir.join("journal").join("records-0000000001.journal");
    std::fs::read(&path).map_err(|e| tally_log_core::Error::Storage(format!("reading {}: {e}", path.display())))
}

/// The length of every metalog a journal holds.
pub type MetalogLens = BTreeMap<(Term, LogId), u64>;

/// What an open of a `JournalMetalogStore` reads of its only segment (the last one if
/// `is_last`): where its frames end and the length of every metalog; `Err` for a
/// segment the open refuses as corrupt. Checks the places the store keeps: a read of
/// entries looks one up for every `MARK_EVERY`-th entry.
pub fn read_metalog_segment(bytes: &[u8], is_last: bool) -> std::result::Result<(u64, MetalogLens), String> {
    let mut metalogs: BTreeMap<(Term, LogId), Metalog> = BTreeMap::new();
    let mut next_seq = 1;
    if bytes.get(..METALOG_HEADER.len()) != Some(METALOG_HEADER.as_slice()) {
        return Err("not a tally metalog journal".into());
    }
    let end = scan_segment(bytes, 1, is_last, false, &mut next_seq, &mut metalogs)?;
    let lens = metalogs.iter().map(|(key, m)| (*key, m.len)).collect();
    for (key, m) in &metalogs {
        assert_eq!(
            m.marks.len() as u64,
            m.len.div_ceil(MARK_EVERY),
            "the places of {key:?}: {} for {} entries",
            m.marks.len(),
            m.len
        );
    }
    Ok((end, lens))
}

/// The first segment of a `JournalMetalogStore` in `dir` (a new directory) after it
/// persisted each batch of `writes`.
pub fn metalog_segment(dir: &Path, writes: &[Vec<MetalogWrite>], segment_bytes: u64) -> Result<Vec<u8>> {
    let store = JournalMetalogStore::open_with(dir, segment_bytes)?;
    for batch in writes {
        store.persist(batch)?;
    }
    drop(store);
    let path = dir.join("metalog-0000000001.journal");
    std::fs::read(&path).map_err(|e| tally_log_core::Error::Storage(format!("reading {}: {e}", path.display())))
}
