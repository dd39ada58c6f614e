//! The popularity cache of a function node's partial local index (§5.1.2, Alg 2): an
//! LRU of the index tier's answers (never of local hits), bounded in bytes.
//!
//! It keeps only answers that later records cannot change: a found read_next (every
//! later record comes after it), and a found read_prev whose bound lies below the first
//! seqnum after the position P0 it was answered at. Only trims can: a trim of a tag or
//! ALL of book b drops every answer of b below its point, whatever its stream (a record
//! dies through any of its tags), and a trim of a mark drops that mark's answers below
//! its point. A hit completes at the cache's position L if L ≥ P0, else at P0.

use std::collections::{BTreeMap, HashMap};

use crate::types::{BookId, MetalogPosition, SeqNum, Tag};

/// What a kept answer costs: its entry in the three maps.
const ENTRY_BYTES: usize = 160;

/// A read: (book, stream, bound, read_next?).
pub type ReadKey = (BookId, Tag, SeqNum, bool);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Popular {
    pub seqnum: SeqNum,
    /// The storage shard that holds it (an index into the local index's table).
    pub shard: u16,
    /// The position the answer completes at.
    pub position: MetalogPosition,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    seqnum: SeqNum,
    shard: u16,
    answered_at: MetalogPosition,
    used: u64,
}

#[derive(Debug)]
pub struct PopularityCache {
    bytes_max: usize,
    entries: HashMap<ReadKey, Entry>,
    /// Per book, by answer: what a trim reaches.
    by_seqnum: BTreeMap<(BookId, SeqNum, Tag, SeqNum, bool), ()>,
    /// Least recently used first.
    by_use: BTreeMap<u64, ReadKey>,
    clock: u64,
    position: MetalogPosition,
}

impl PopularityCache {
    pub fn new(bytes_max: usize, position: MetalogPosition) -> PopularityCache {
        PopularityCache {
            bytes_max,
            entries: HashMap::new(),
            by_seqnum: BTreeMap::new(),
            by_use: BTreeMap::new(),
            clock: 0,
            position,
        }
    }

    pub fn bytes(&self) -> usize {
        self.entries.len() * ENTRY_BYTES
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Keeps the tier's answer `found` (held by `shard`) to `read`, answered as of
    /// `answered_at`, if later records cannot change it.
    pub fn insert(&mut self, read: ReadKey, found: SeqNum, shard: u16, answered_at: MetalogPosition, next_after: SeqNum) {
        let (book, tag, bound, next) = read;
        let stable = next || bound < next_after;
        if !stable || ENTRY_BYTES > self.bytes_max {
            return;
        }
        self.remove(read);
        self.clock += 1;
        self.entries.insert(read, Entry { seqnum: found, shard, answered_at, used: self.clock });
        self.by_seqnum.insert((book, found, tag, bound, next), ());
        self.by_use.insert(self.clock, read);
        while self.bytes() > self.bytes_max {
            let (_, oldest) = self.by_use.pop_first().expect("not empty while over");
            self.remove(oldest);
        }
    }

    fn remove(&mut self, read: ReadKey) {
        if let Some(e) = self.entries.remove(&read) {
            let (book, tag, bound, next) = read;
            self.by_seqnum.remove(&(book, e.seqnum, tag, bound, next));
            self.by_use.remove(&e.used);
        }
    }

    /// The kept answer to `read`, if any, and the position it completes at.
    pub fn get(&mut self, read: ReadKey) -> Option<Popular> {
        let position = self.position;
        let e = self.entries.get_mut(&read)?;
        self.by_use.remove(&e.used);
        self.clock += 1;
        e.used = self.clock;
        self.by_use.insert(self.clock, read);
        Some(Popular { seqnum: e.seqnum, shard: e.shard, position: position.max(e.answered_at) })
    }

    /// Applies a trim of the entry that ends at `at`.
    pub fn trim(&mut self, book: BookId, tag: Tag, point: SeqNum) {
        let lowest = (book, SeqNum::MIN, Tag(0), SeqNum::MIN, false);
        let highest = (book, point, Tag(0), SeqNum::MIN, false);
        let reached: Vec<ReadKey> = self
            .by_seqnum
            .range(lowest..highest)
            .filter(|((_, _, t, _, _), _)| !tag.is_mark() || *t == tag)
            .map(|(&(b, _, t, bound, next), _)| (b, t, bound, next))
            .collect();
        for read in reached {
            self.remove(read);
        }
    }

    /// The cache has applied every update through `at`.
    pub fn advance(&mut self, at: MetalogPosition) {
        self.position = at;
    }
}
