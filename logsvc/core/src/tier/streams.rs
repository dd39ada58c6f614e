//! The stream table of an index node: per (book, stream), what deciding every placement
//! needs, and nothing per record.
//!
//! Every index node follows the whole metalog and keeps this table whole, while its
//! postings (`postings.rs`) hold only its shard's records: a record with conditions is
//! placed only if each named stream holds exactly `position` successful records before
//! it, which no shard knows alone. The table decides exactly as [`crate::Index`] does
//! (the reference semantics, and the differential oracle of the tests), including its
//! reading of a condition on `ALL`: the book-wide row is no stream of conditions there,
//! so such a condition holds only at position 0 and never names a holder.
//!
//! A condition that fails names the record at the asked offset of its stream as the
//! stream stood just before this record. The table knows it when that is the stream's
//! last record; an older one is on the shard that indexed it ([`Holder::Lookup`]).

use std::collections::HashMap;

use crate::message::{Cond, RecordMeta};
use crate::types::{BookId, SeqNum, Tag};

use super::split::TagMap;

/// One stream of one book, as the table tells it (it keeps it packed in 24 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    /// Successful records ever: the next one's offset.
    pub count: u64,
    /// The trim point (a tag's or ALL's; a trim of a mark sets none).
    pub trim: SeqNum,
    /// The last successful record, if any.
    pub last: Option<SeqNum>,
    /// Whether `last` is still in the stream's row: live there, for a tag (and ALL); not
    /// dropped by a trim of the mark, for a mark.
    pub last_in_row: bool,
}

impl Default for Stream {
    fn default() -> Stream {
        Stream { count: 0, trim: SeqNum::MIN, last: None, last_in_row: false }
    }
}

/// A stream in the table: the count with `last_in_row` as its top bit, the trim point,
/// the last record (0 for none: no record has seqnum 0, whose term is 0).
#[derive(Clone, Copy, Debug, Default)]
struct Packed([u64; 3]);

const IN_ROW: u64 = 1 << 63;

impl From<Packed> for Stream {
    fn from(Packed([count, trim, last]): Packed) -> Stream {
        Stream {
            count: count & !IN_ROW,
            trim: SeqNum(trim),
            last: (last != 0).then_some(SeqNum(last)),
            last_in_row: count & IN_ROW != 0,
        }
    }
}

impl From<Stream> for Packed {
    fn from(s: Stream) -> Packed {
        debug_assert!(s.count < IN_ROW && s.last != Some(SeqNum(0)));
        Packed([s.count | if s.last_in_row { IN_ROW } else { 0 }, s.trim.0, s.last.map_or(0, |l| l.0)])
    }
}

/// Applies `f` to `tag`'s stream in `streams` (a new one if it has none).
fn update<T>(streams: &mut TagMap<Packed>, tag: Tag, f: impl FnOnce(&mut Stream) -> T) -> T {
    let packed = streams.entry_or_default(tag);
    let mut stream = Stream::from(*packed);
    let out = f(&mut stream);
    *packed = stream.into();
    out
}

/// A stream a placed record joined, as the decided update tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Joined {
    /// The stream: one of the record's tags or marks, or ALL.
    pub tag: Tag,
    /// The record's offset in it.
    pub offset: u64,
    /// Whether the record is in the stream's row on arrival (a trim point may already
    /// be past it; a mark's row takes every record with the mark).
    pub in_row: bool,
    /// The stream's first successful record ever.
    pub first: bool,
}

/// Who holds the offset a failed condition asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Holder {
    /// Nobody: the offset is past the stream's count, or its record left the row.
    None,
    /// This record (the stream's last).
    Known(SeqNum),
    /// An older record: the shards' postings know (`offset` of `tag`).
    Lookup,
}

/// How the table placed one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Successful: the streams it joined, ALL first, then its tags in order.
    Placed(Vec<Joined>),
    /// The first failing condition (`cond`, then `unchanged` in order) and its holder.
    Failed { cond: Cond, holder: Holder },
}

/// Per book, per stream, ALL and marks included.
#[derive(Default, Debug)]
pub struct StreamTable {
    books: HashMap<BookId, TagMap<Packed>>,
}

impl StreamTable {
    /// Every stream, sorted by book and tag, in pieces of at most `max`, for a replica
    /// that copies this one.
    pub(super) fn export(&self, max: usize, out: &mut Vec<super::ShardPiece>) {
        let mut all: Vec<(BookId, Tag, [u64; 3])> =
            self.books.iter().flat_map(|(&b, m)| m.iter().map(move |(&t, p)| (b, t, p.0))).collect();
        all.sort_unstable_by_key(|&(b, t, _)| (b, t));
        for streams in all.chunks(max.max(1)) {
            out.push(super::ShardPiece::Streams(streams.to_vec()));
        }
    }

    /// Takes in a piece of a copied table.
    pub(super) fn import(&mut self, streams: Vec<(BookId, Tag, [u64; 3])>) {
        for (book, tag, packed) in streams {
            *self.books.entry(book).or_default().entry_or_default(tag) = Packed(packed);
        }
    }

    pub fn get(&self, book: BookId, tag: Tag) -> Stream {
        self.books.get(&book).and_then(|b| b.get(&tag)).map_or_else(Stream::default, |p| Stream::from(*p))
    }

    /// About the bytes it holds: the maps' slots (key, value and control byte) at the
    /// load they grow at, and a map per book.
    pub fn bytes(&self) -> usize {
        let slots = |capacity: usize, entry: usize| capacity * 8 / 7 * (entry + 1);
        slots(self.books.capacity(), 8 + 48)
            + self.books.values().map(|b| b.bytes(8 + std::mem::size_of::<Packed>())).sum::<usize>()
    }

    /// Streams the table holds.
    pub fn streams(&self) -> usize {
        self.books.values().map(TagMap::len).sum()
    }

    /// Decides the next ordered record and, if it is placed, counts it in its streams.
    pub fn decide(&mut self, seqnum: SeqNum, meta: &RecordMeta) -> Decision {
        let book = meta.book;
        for &cond in meta.cond.iter().chain(&meta.unchanged) {
            let stream = if cond.tag == Tag::ALL { Stream::default() } else { self.get(book, cond.tag) };
            if stream.count != cond.position {
                let holder = match cond.position.checked_add(1) {
                    Some(next) if next == stream.count => match (stream.last, stream.last_in_row) {
                        (Some(last), true) => Holder::Known(last),
                        _ => Holder::None,
                    },
                    _ if cond.position < stream.count => Holder::Lookup,
                    _ => Holder::None,
                };
                return Decision::Failed { cond, holder };
            }
        }
        let all_trim = self.get(book, Tag::ALL).trim;
        let streams = self.books.entry(book).or_default();
        let mut joined = Vec::with_capacity(1 + meta.tags.len());
        let mut in_tag_rows = false;
        let mut untagged = true;
        // The record is the stream's last now.
        let join = |stream: &mut Stream, tag: Tag, in_row: bool| {
            let joined = Joined { tag, offset: stream.count, in_row, first: stream.count == 0 };
            stream.count += 1;
            stream.last = Some(seqnum);
            stream.last_in_row = in_row;
            joined
        };
        for &tag in &meta.tags {
            let mark = tag.is_mark();
            joined.push(update(streams, tag, |stream| {
                let in_row = mark || (seqnum >= all_trim && seqnum >= stream.trim);
                join(stream, tag, in_row)
            }));
            in_tag_rows |= joined.last().is_some_and(|j| j.in_row) && !mark;
            untagged &= mark;
        }
        let in_row = seqnum >= all_trim && (untagged || in_tag_rows);
        joined.insert(0, update(streams, Tag::ALL, |all| join(all, Tag::ALL, in_row)));
        Decision::Placed(joined)
    }

    /// Applies a trim command: a tag's or ALL's trim point only grows; a trim of a mark
    /// drops its records below `seqnum` from its row and sets no point.
    ///
    /// Whether ALL's last record is still in its row after a trim of one of its tags
    /// needs its other tags, which the table does not keep: `last_in_row` of ALL is only
    /// cleared by a trim of ALL. Nothing decides on it (see the module's note on ALL).
    pub fn trim(&mut self, book: BookId, tag: Tag, seqnum: SeqNum) {
        let streams = self.books.entry(book).or_default();
        // A trim of a mark drops its records below the point and sets nothing else.
        let drops_last = |s: &mut Stream| s.last_in_row &= s.last.is_some_and(|l| l >= seqnum);
        if tag.is_mark() {
            if streams.contains_key(&tag) {
                update(streams, tag, drops_last);
            }
            return;
        }
        let moved = update(streams, tag, |stream| {
            if seqnum <= stream.trim {
                return false;
            }
            stream.trim = seqnum;
            drops_last(stream);
            true
        });
        if moved && tag == Tag::ALL {
            // Every tag's last record below the point left its row.
            for (t, packed) in streams.iter_mut() {
                if !t.is_mark() {
                    let mut s = Stream::from(*packed);
                    drops_last(&mut s);
                    *packed = s.into();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{LogId, Term};

    #[test]
    fn a_stream_packs_into_24_bytes_and_back() {
        assert_eq!(std::mem::size_of::<Packed>(), 24);
        for s in [
            Stream::default(),
            Stream { count: (1 << 63) - 1, trim: SeqNum(u64::MAX), last: Some(SeqNum(u64::MAX)), last_in_row: true },
            Stream { count: 7, trim: SeqNum(3), last: Some(SeqNum::new(Term(1), LogId(0), 0)), last_in_row: false },
        ] {
            assert_eq!(Stream::from(Packed::from(s)), s);
        }
    }

    #[test]
    fn a_new_tag_per_record_costs_what_the_table_counts() {
        let mut table = StreamTable::default();
        let n = 100_000u64;
        for i in 0..n {
            let meta = RecordMeta { book: BookId(i % 10), tags: vec![Tag(1 + i)], cond: None, unchanged: vec![] };
            table.decide(SeqNum::new(Term(1), LogId(0), i), &meta);
        }
        assert_eq!(table.streams(), n as usize + 10);
        // 33 bytes a slot, and the maps' room to grow: under 80 bytes a stream.
        let per_stream = table.bytes() / table.streams();
        assert!((33..80).contains(&per_stream), "{per_stream} bytes a stream");
    }
}
