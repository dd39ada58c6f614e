//! The record journal's format: segment headers, frames' ops, and the metadata value
//! that says where a record's data is (the layout is in the parent module's
//! documentation).

use std::fs::File;
use std::path::{Path, PathBuf};

use tally_log_core::{Error, LocalId, Location, RecordMeta, Result, ShardId};

use crate::store::journal::{create_segment_file, whole_frame};
use crate::store::rocks::{FLAG_HAS_DATA, FLAG_RECLAIMED, META_BYTES_MAX};

pub(super) const HEADER: &[u8; 16] = b"tally-records-j1";
/// The segment header: [`HEADER`], then the sequence number of the segment's first frame.
pub(crate) const SEGMENT_HEADER: u64 = 24;
/// Upper bound on one frame's payload, and so on one `write`'s records.
pub(super) const FRAME_BYTES_MAX: u64 = 1 << 30;
pub(super) const SEGMENT_PREFIX: &str = "records-";

pub(super) const OP_WRITE: u8 = 1;
pub(super) const OP_RECLAIM: u8 = 2;
pub(super) const OP_DISCARD: u8 = 3;

/// The metadata value's fixed part: flag, segment, offset, length.
pub(super) const SLOT_BYTES: usize = 1 + 8 + 8 + 4;

/// Where a record's data is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) segment: u64,
    pub(crate) offset: u64,
    pub(crate) len: u32,
}

pub(crate) fn meta_value(flag: u8, slot: Slot, meta: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(SLOT_BYTES + meta.len());
    value.push(flag);
    value.extend_from_slice(&slot.segment.to_le_bytes());
    value.extend_from_slice(&slot.offset.to_le_bytes());
    value.extend_from_slice(&slot.len.to_le_bytes());
    value.extend_from_slice(meta);
    value
}

/// The slot of a metadata value if it says the data is there; `None` if reclaimed.
pub(crate) fn decode_slot(location: Location, value: &[u8]) -> Result<Option<Slot>> {
    let corrupt = || Error::Storage(format!("corrupt metadata of {} bytes at {location:?}", value.len()));
    let head = value.get(..SLOT_BYTES).ok_or_else(corrupt)?;
    let slot = Slot {
        segment: u64::from_le_bytes(head[1..9].try_into().expect("8 bytes")),
        offset: u64::from_le_bytes(head[9..17].try_into().expect("8 bytes")),
        len: u32::from_le_bytes(head[17..21].try_into().expect("4 bytes")),
    };
    match head[0] {
        FLAG_HAS_DATA => Ok(Some(slot)),
        FLAG_RECLAIMED => Ok(None),
        other => Err(Error::Storage(format!("corrupt metadata flag {other} at {location:?}"))),
    }
}

pub(crate) fn decode_meta(location: Location, value: &[u8]) -> Result<(RecordMeta, Option<Slot>)> {
    let slot = decode_slot(location, value)?;
    Ok((crate::store::codec::decode_record_meta(&value[SLOT_BYTES..], META_BYTES_MAX)?, slot))
}

pub(super) fn decode_meta_flag(location: Location, value: &[u8]) -> Result<(RecordMeta, bool)> {
    decode_meta(location, value).map(|(meta, slot)| (meta, slot.is_some()))
}

pub(super) fn segment_path(dir: &Path, segment: u64) -> PathBuf {
    dir.join(format!("{SEGMENT_PREFIX}{segment:010}.journal"))
}

/// The bytes `put_location` writes: an op, a shard, a local id.
pub(super) const LOCATION_BYTES: usize = 1 + 4 + 8;

/// Appends one op's location part.
pub(super) fn put_location(frame: &mut Vec<u8>, op: u8, shard: ShardId, local_id: LocalId) {
    frame.push(op);
    frame.extend_from_slice(&shard.0.to_le_bytes());
    frame.extend_from_slice(&local_id.to_le_bytes());
}

/// One op of a frame's payload, as replay reads it.
pub(crate) enum Op<'a> {
    Write { location: Location, meta: &'a [u8], data_at: usize, data_len: u32 },
    Reclaim(Location),
    Discard { shard: ShardId, from: LocalId },
}

/// Reads the ops of a payload in order; fails on anything that does not parse, which
/// in a frame whose checksum holds is corruption.
pub(super) fn parse_ops(payload: &[u8]) -> std::result::Result<Vec<Op<'_>>, String> {
    let corrupt = |at: usize| format!("corrupt journal op at byte {at} of a frame");
    let mut ops = Vec::new();
    let mut at = 0;
    let take = |at: &mut usize, n: usize| -> std::result::Result<&[u8], String> {
        let bytes = payload.get(*at..*at + n).ok_or_else(|| corrupt(*at))?;
        *at += n;
        Ok(bytes)
    };
    while at < payload.len() {
        let start = at;
        let op = take(&mut at, 1)?[0];
        let shard = ShardId(u32::from_le_bytes(take(&mut at, 4)?.try_into().expect("4 bytes")));
        let id = u64::from_le_bytes(take(&mut at, 8)?.try_into().expect("8 bytes"));
        let location = Location { shard, local_id: id };
        ops.push(match op {
            OP_WRITE => {
                let meta_len = u32::from_le_bytes(take(&mut at, 4)?.try_into().expect("4 bytes")) as usize;
                let meta = take(&mut at, meta_len)?;
                let data_len = u32::from_le_bytes(take(&mut at, 4)?.try_into().expect("4 bytes"));
                let data_at = at;
                take(&mut at, data_len as usize)?;
                Op::Write { location, meta, data_at, data_len }
            }
            OP_RECLAIM => Op::Reclaim(location),
            OP_DISCARD => Op::Discard { shard, from: id },
            _ => return Err(corrupt(start)),
        });
    }
    Ok(ops)
}

/// The sequence number of a segment's first frame, if `bytes` start with a whole
/// segment header.
pub(crate) fn segment_first_seq(bytes: &[u8]) -> Option<u64> {
    let header = bytes.get(..SEGMENT_HEADER as usize)?;
    let (magic, first_seq) = header.split_at(HEADER.len());
    (magic == HEADER).then(|| u64::from_le_bytes(first_seq.try_into().expect("8 bytes")))
}

/// The whole frames of a segment from `offset` on, the first numbered `seq`: each one's
/// offset and ops, up to the first frame that is not whole (see "Torn tails"), or why
/// a whole frame's ops do not parse. Once it ends, `offset` and `seq` are the next
/// frame's.
pub(crate) struct Frames<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) offset: u64,
    pub(crate) seq: u64,
}

impl<'a> Iterator for Frames<'a> {
    type Item = std::result::Result<(u64, Vec<Op<'a>>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        let (payload, len) = whole_frame(self.bytes, self.offset, self.seq, FRAME_BYTES_MAX)?;
        let at = self.offset;
        self.offset += len;
        self.seq += 1;
        Some(parse_ops(payload).map(|ops| (at, ops)).map_err(|e| format!("{e} at byte {at}")))
    }
}

/// Creates segment `segment` of `bytes`, durable, holding only its header.
pub(super) fn create_segment(dir: &Path, segment: u64, bytes: u64, first_seq: u64) -> Result<File> {
    let mut header = HEADER.to_vec();
    header.extend_from_slice(&first_seq.to_le_bytes());
    create_segment_file(dir, &segment_path(dir, segment), bytes, &header)
}
