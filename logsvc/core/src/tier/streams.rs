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

/// One stream of one book (32 bytes).
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    books: HashMap<BookId, HashMap<Tag, Stream>>,
}

impl StreamTable {
    pub fn get(&self, book: BookId, tag: Tag) -> Stream {
        self.books.get(&book).and_then(|b| b.get(&tag)).copied().unwrap_or_default()
    }

    /// Streams the table holds.
    pub fn streams(&self) -> usize {
        self.books.values().map(HashMap::len).sum()
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
        for &tag in &meta.tags {
            let stream = streams.entry(tag).or_default();
            let mark = tag.is_mark();
            let in_row = mark || (seqnum >= all_trim && seqnum >= stream.trim);
            joined.push(Joined { tag, offset: stream.count, in_row, first: stream.count == 0 });
            stream.count += 1;
            stream.last = Some(seqnum);
            stream.last_in_row = in_row;
            in_tag_rows |= in_row && !mark;
            untagged &= mark;
        }
        let all = streams.entry(Tag::ALL).or_default();
        let in_row = seqnum >= all_trim && (untagged || in_tag_rows);
        joined.insert(0, Joined { tag: Tag::ALL, offset: all.count, in_row, first: all.count == 0 });
        all.count += 1;
        all.last = Some(seqnum);
        all.last_in_row = in_row;
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
        if tag.is_mark() {
            if let Some(stream) = streams.get_mut(&tag) {
                stream.last_in_row &= stream.last.is_some_and(|l| l >= seqnum);
            }
            return;
        }
        let stream = streams.entry(tag).or_default();
        if seqnum <= stream.trim {
            return;
        }
        stream.trim = seqnum;
        stream.last_in_row &= stream.last.is_some_and(|l| l >= seqnum);
        if tag == Tag::ALL {
            // Every tag's last record below the point left its row.
            for (t, s) in streams.iter_mut() {
                if !t.is_mark() && s.last.is_some_and(|l| l < seqnum) {
                    s.last_in_row = false;
                }
            }
        }
    }
}
