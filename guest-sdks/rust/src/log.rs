//! The book's shared log: the LogBook API of Boki (§3).
//!
//! Every invocation is bound to one book, and these calls act on it; a function never
//! names a book, so it cannot read or write another one. Seqnums are totally ordered
//! across the book; a [`Tag`] selects a sub-stream of it, and [`Tag::ALL`] is the whole
//! book.
//!
//! ```text
//!   tag 0 (ALL):  1   2   3   4   5   6   7        every record, by seqnum
//!   tag "a":      1       3           6            records that carry "a"
//!   tag "b":          2   3       5                records that carry "b"
//!                             ^
//!   read_next("a", 4) = 6     read_prev("b", 4) = 3     check_tail("a") = 6
//! ```

use crate::bindings::tally::platform::log as wit;
use crate::{Error, Result, SeqNum, Tag};

/// A record read from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record's position in the book.
    pub seqnum: SeqNum,
    /// The tags the record was appended with, sorted, without [`Tag::ALL`].
    pub tags: Vec<Tag>,
    /// The record's payload, as appended.
    pub data: Vec<u8>,
    /// Data attached later by [`set_aux_data`], if the node that served the read has
    /// it. It is a cache: it may be missing even after it was set.
    pub aux: Option<Vec<u8>>,
}

impl Record {
    fn from_wit(record: wit::LogRecord) -> Record {
        Record {
            seqnum: SeqNum::new(record.seqnum),
            tags: record.tags.into_iter().map(Tag::new).collect(),
            data: record.data,
            aux: record.aux_data,
        }
    }
}

/// Appends a record with `data` to the streams of `tags`, and returns its seqnum.
///
/// With no tags the record is only in the whole book's stream. Tags with the top bit
/// set are refused with [`Error::InvalidArgument`].
pub fn append(tags: &[Tag], data: impl AsRef<[u8]>) -> Result<SeqNum> {
    wit::append(&tag_numbers(tags), data.as_ref()).map(SeqNum::new).map_err(Error::from_wit)
}

/// Appends like [`append`], but only if the record becomes entry number `cond_pos`
/// (counting from 0) of `cond_tag`'s stream.
///
/// When another record holds that position, the append fails with
/// [`Error::Conflict`], which names the holder unless it has been trimmed since. This
/// is the building block for exactly-once steps and log-based locks; `cond_tag` must
/// not be [`Tag::ALL`].
pub fn cond_append(tags: &[Tag], data: impl AsRef<[u8]>, cond_tag: Tag, cond_pos: u64) -> Result<SeqNum> {
    wit::cond_append(&tag_numbers(tags), data.as_ref(), cond_tag.get(), cond_pos).map(SeqNum::new).map_err(Error::from_wit)
}

/// Reads the first record of `tag`'s stream at or after `min`, or `None` if there is
/// none yet.
pub fn read_next(tag: Tag, min: SeqNum) -> Result<Option<Record>> {
    wit::read_next(tag.get(), min.get()).map(|record| record.map(Record::from_wit)).map_err(Error::from_wit)
}

/// Reads the last record of `tag`'s stream at or before `max`, or `None` if there is
/// none.
pub fn read_prev(tag: Tag, max: SeqNum) -> Result<Option<Record>> {
    wit::read_prev(tag.get(), max.get()).map(|record| record.map(Record::from_wit)).map_err(Error::from_wit)
}

/// Reads the last record of `tag`'s stream, or `None` if the stream is empty.
pub fn check_tail(tag: Tag) -> Result<Option<Record>> {
    wit::check_tail(tag.get()).map(|record| record.map(Record::from_wit)).map_err(Error::from_wit)
}

/// Removes the records of `tag`'s stream before `seqnum`; with [`Tag::ALL`], the
/// records of every stream before `seqnum`.
pub fn trim(tag: Tag, seqnum: SeqNum) -> Result<()> {
    wit::trim(tag.get(), seqnum.get()).map_err(Error::from_wit)
}

/// Attaches `data` to the record `seqnum` as its aux data, a best-effort cache that
/// later reads may return in [`Record::aux`] (Boki §3).
///
/// The typical use is a snapshot of a state machine's value as of this record, so that
/// the next reader replays the log from here instead of from the start (Boki §5.4).
pub fn set_aux_data(seqnum: SeqNum, data: impl AsRef<[u8]>) -> Result<()> {
    wit::set_aux_data(seqnum.get(), data.as_ref()).map_err(Error::from_wit)
}

fn tag_numbers(tags: &[Tag]) -> Vec<u64> {
    tags.iter().map(|tag| tag.get()).collect()
}
