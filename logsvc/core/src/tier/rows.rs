//! The rows an index shard keeps its postings in, compact: a tag's or a mark's row
//! holds 40 bytes per record and ALL's row 32, where one posting shape for every row
//! held 72 (the position at which a record left its row, 16 bytes and its log, rarely
//! set and never in a live record, now lives beside the row; positions are 8 bytes).
//!
//! In a tag's or a mark's row records leave in seqnum order (trims cut prefixes), so
//! the records that left form a prefix, and one [`Cut`] per trim that took some out says
//! where they end and when they left. In ALL's row they may not (a record dies through
//! its own tags), so the ones that left are in a map by seqnum until they reach the
//! front and go.

use std::collections::{HashMap, VecDeque};

use crate::types::{Location, LogId, MetalogPosition, SeqNum, ShardId};

use super::deque::ChunkDeque;

/// A position in 8 bytes, in order: the term in the top 16 bits, the index in the low
/// 48 (an index past 2^48 - 1, 89 years of entries at 100,000 a second, is held there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Packed(u64);

const INDEX_BITS: u32 = 48;
const INDEX_MAX: u64 = (1 << INDEX_BITS) - 1;

impl Packed {
    pub fn of(p: MetalogPosition) -> Packed {
        Packed(u64::from(p.term) << INDEX_BITS | p.index.min(INDEX_MAX))
    }

    pub fn position(self) -> MetalogPosition {
        MetalogPosition { term: (self.0 >> INDEX_BITS) as u16, index: self.0 & INDEX_MAX }
    }
}

/// When a record left its row: the position after the entry whose trim took it out,
/// and that entry's log (a moved book's trims come from its new log).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Left {
    pub at: Packed,
    pub log: LogId,
}

/// A record in a tag's or a mark's row.
#[derive(Clone, Copy, Debug)]
pub struct TagPosting {
    pub seqnum: SeqNum,
    pub local_id: u64,
    /// Its offset in the stream.
    pub offset: u64,
    /// The position after the entry that ordered it.
    pub entered: Packed,
    pub shard: ShardId,
}

/// A record in ALL's row.
#[derive(Clone, Copy, Debug)]
pub struct AllPosting {
    pub seqnum: SeqNum,
    pub local_id: u64,
    pub entered: Packed,
    pub shard: ShardId,
    /// The tag rows it is still in.
    pub tag_rows: u16,
}

/// What the two kinds of row share.
pub trait Posted {
    fn seqnum(&self) -> SeqNum;
    fn entered(&self) -> Packed;
    fn location(&self) -> Location;
}

/// Both kinds of posting name their record the same way.
macro_rules! posted {
    ($($posting:ty),*) => {$(
        impl Posted for $posting {
            fn seqnum(&self) -> SeqNum {
                self.seqnum
            }
            fn entered(&self) -> Packed {
                self.entered
            }
            fn location(&self) -> Location {
                Location { shard: self.shard, local_id: self.local_id }
            }
        }
    )*};
}

posted!(TagPosting, AllPosting);

/// The records of a tag's row after the previous cut's, up to `last`, which left at `left`.
#[derive(Clone, Copy, Debug)]
struct Cut {
    last: SeqNum,
    left: Left,
}

/// A tag's or a mark's row.
#[derive(Debug, Default)]
pub struct TagRow {
    pub postings: ChunkDeque<TagPosting>,
    /// In seqnum order (and in the order of the trims).
    cuts: VecDeque<Cut>,
}

/// Bytes a cut takes.
pub const CUT_BYTES: usize = std::mem::size_of::<Cut>();

impl TagRow {
    /// When the record `seqnum` of the row left it, if it did.
    pub fn left_of(&self, seqnum: SeqNum) -> Option<Left> {
        self.cuts.get(self.cuts.partition_point(|c| c.last < seqnum)).map(|c| c.left)
    }

    /// Takes the records below `seqnum` still in the row out, calling `each` for each;
    /// returns whether any left.
    pub fn leave_below(&mut self, seqnum: SeqNum, left: Left, mut each: impl FnMut(&TagPosting)) -> bool {
        let end = from(&self.postings, seqnum);
        // Those that left earlier are a prefix: start after them.
        let start = self.cuts.back().map_or(0, |c| self.postings.partition_point(|p| p.seqnum <= c.last)).min(end);
        if start == end {
            return false;
        }
        self.postings.range(start, end).for_each(&mut each);
        let last = self.postings.get(end - 1).expect("below the row's end").seqnum;
        self.cuts.push_back(Cut { last, left });
        true
    }

    /// Adds a copied record that left at `left` (the copies come in seqnum order);
    /// returns whether that took a new cut.
    pub fn push_left(&mut self, p: TagPosting, left: Left) -> bool {
        self.postings.push_back(p);
        match self.cuts.back_mut() {
            Some(c) if c.left == left => {
                c.last = p.seqnum;
                false
            }
            _ => {
                self.cuts.push_back(Cut { last: p.seqnum, left });
                true
            }
        }
    }

    /// Drops the records that left in `log` at or before `horizon` from the front;
    /// returns how many records and cuts went.
    pub fn purge(&mut self, log: LogId, horizon: Packed) -> (usize, usize) {
        let (mut records, mut cuts) = (0, 0);
        while let Some(&c) = self.cuts.front().filter(|c| c.left.log == log && c.left.at <= horizon) {
            while self.postings.front().is_some_and(|p| p.seqnum <= c.last) {
                self.postings.pop_front();
                records += 1;
            }
            self.cuts.pop_front();
            cuts += 1;
        }
        (records, cuts)
    }

    pub fn cuts(&self) -> usize {
        self.cuts.len()
    }
}

/// ALL's row of a book.
#[derive(Debug, Default)]
pub struct AllRow {
    pub postings: ChunkDeque<AllPosting>,
    /// The records that left, until they reach the front.
    left: HashMap<SeqNum, Left>,
}

impl AllRow {
    pub fn left_of(&self, seqnum: SeqNum) -> Option<Left> {
        self.left.get(&seqnum).copied()
    }

    /// Takes the record at `i` out of the row, if it is in it (one that left earlier
    /// keeps its first exit).
    pub fn leave(&mut self, i: usize, left: Left) {
        if let Some(p) = self.postings.get(i) {
            self.left.entry(p.seqnum).or_insert(left);
        }
    }

    /// Adds a copied record, and when it left if it did.
    pub fn push(&mut self, p: AllPosting, left: Option<Left>) {
        if let Some(left) = left {
            self.left.insert(p.seqnum, left);
        }
        self.postings.push_back(p);
    }

    /// Drops the records at the front that left in `log` at or before `horizon` (one
    /// that left in the middle waits until it is at the front, as in `index.rs`);
    /// returns how many went.
    pub fn purge(&mut self, log: LogId, horizon: Packed) -> usize {
        let mut records = 0;
        while let Some(p) = self.postings.front() {
            match self.left.get(&p.seqnum) {
                Some(l) if l.log == log && l.at <= horizon => {
                    self.left.remove(&p.seqnum);
                    self.postings.pop_front();
                    records += 1;
                }
                _ => break,
            }
        }
        if self.postings.is_empty() {
            self.left = HashMap::new();
        }
        records
    }

    /// How many of its records left.
    pub fn left(&self) -> usize {
        self.left.len()
    }
}

/// The first posting of `postings` at or after `seqnum`.
pub fn from<P: Posted>(postings: &ChunkDeque<P>, seqnum: SeqNum) -> usize {
    postings.partition_point(|p| p.seqnum() < seqnum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_are_small_and_packed_positions_keep_their_order() {
        assert_eq!(std::mem::size_of::<TagPosting>(), 40);
        assert_eq!(std::mem::size_of::<AllPosting>(), 32);
        let positions = [(0, 0), (0, 1), (0, INDEX_MAX), (1, 0), (1, 7), (u16::MAX - 1, INDEX_MAX), (u16::MAX, 0)]
            .map(|(term, index)| MetalogPosition { term, index });
        for w in positions.windows(2) {
            assert!(Packed::of(w[0]) < Packed::of(w[1]), "{:?} {:?}", w[0], w[1]);
        }
        for p in positions {
            assert_eq!(Packed::of(p).position(), p);
        }
        let far = MetalogPosition { term: 3, index: u64::MAX };
        assert_eq!(Packed::of(far).position(), MetalogPosition { term: 3, index: INDEX_MAX });
    }
}
