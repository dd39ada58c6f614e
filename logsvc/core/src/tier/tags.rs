//! The tag cache of a function node's partial local index (§5.1.3, Alg 3, Fig 5.2), for
//! one physical log, bounded in bytes, fed by decided updates.
//!
//! Per (book, stream), ALL and marks included: the stream's most recent live seqnums,
//! `last_access` (the position of its last insert or hit), `covered_from` (it holds every
//! live record of the stream from there up to the cache's position L) and `complete` (it
//! holds the stream since its first record and evicted nothing of it). Per cached record:
//! its tags and the tag rows it is still live in, so that a trim of a stream the cache
//! does not hold still kills it; a record that dies leaves every cached stream. A trim of
//! a mark drops that mark's seqnums below the point and kills nothing.
//!
//! The watermark W is the first seqnum after the node's start position, raised past the
//! last seqnum of every stream evicted whole; a stream entering the cache is covered from
//! W. Answers at L (anything else is a miss, for the index tier):
//! - read_next(b, t, B): if the stream is cached and `complete` or B ≥ `covered_from`, the
//!   first cached seqnum ≥ B, or none; a stream not cached, with B ≥ W: none.
//! - read_prev(b, t, B): the last cached seqnum ≤ B if there is one; none if `complete`.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::types::{BookId, MetalogPosition, SeqNum, Tag};

use super::update::DecidedUpdate;

/// Bytes a cached stream costs besides its seqnums: its entry in the map and in the
/// order of last access, with the containers' own overhead.
const STREAM_BYTES: usize = 144;
/// Bytes a cached record costs besides its tags.
const RECORD_BYTES: usize = 64;

#[derive(Debug)]
struct Cached {
    seqnums: VecDeque<SeqNum>,
    /// Beside each seqnum, the storage slot that holds it.
    slots: VecDeque<u16>,
    last_access: MetalogPosition,
    covered_from: SeqNum,
    complete: bool,
}

impl Cached {
    fn bytes(&self) -> usize {
        STREAM_BYTES + self.seqnums.capacity() * 8 + self.slots.capacity() * 2
    }

    fn remove(&mut self, i: usize) {
        self.seqnums.remove(i);
        self.slots.remove(i);
    }

    /// Drops the seqnums below `point`, returning them.
    fn drain_below(&mut self, point: SeqNum) -> Vec<SeqNum> {
        let below = self.seqnums.partition_point(|s| *s < point);
        self.slots.drain(..below);
        self.seqnums.drain(..below).collect()
    }
}

#[derive(Debug)]
struct Record {
    tags: Vec<Tag>,
    /// The tags (not marks) whose rows it is still live in.
    live_in: Vec<Tag>,
    /// Live in ALL (no trim killed it).
    alive: bool,
    /// Cached streams that hold it.
    held: u16,
}

fn record_bytes(r: &Record) -> usize {
    RECORD_BYTES + (r.tags.capacity() + r.live_in.capacity()) * 8
}

/// A local answer (the record and the storage slot that holds it, or none), or a miss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Local {
    Hit(Option<(SeqNum, u16)>),
    Miss,
}

/// The bounds of a tag cache.
#[derive(Clone, Copy, Debug)]
pub struct TagBounds {
    /// All streams together.
    pub cache_bytes: usize,
    /// One stream.
    pub stream_bytes: usize,
}

#[derive(Debug)]
pub struct TagCache {
    bounds: TagBounds,
    streams: HashMap<(BookId, Tag), Cached>,
    records: BTreeMap<(BookId, SeqNum), Record>,
    /// The streams by last access, least recent first: what goes when it is full.
    by_access: BTreeSet<(MetalogPosition, BookId, Tag)>,
    /// W: no stream the cache does not hold has a live record at or after it.
    watermark: SeqNum,
    position: MetalogPosition,
    bytes: usize,
    /// Streams evicted whole so far.
    pub evicted_streams: u64,
}

impl TagCache {
    /// An empty cache of a node that starts at `position`, whose next seqnum is
    /// `watermark`.
    pub fn new(bounds: TagBounds, position: MetalogPosition, watermark: SeqNum) -> TagCache {
        TagCache {
            bounds,
            streams: HashMap::new(),
            records: BTreeMap::new(),
            by_access: BTreeSet::new(),
            watermark,
            position,
            bytes: 0,
            evicted_streams: 0,
        }
    }

    /// L: the position up to which the cache has applied updates.
    pub fn position(&self) -> MetalogPosition {
        self.position
    }

    pub fn watermark(&self) -> SeqNum {
        self.watermark
    }

    /// Every cached stream, for checks: (book, tag, covered_from, complete, its seqnums).
    pub fn cached(&self) -> impl Iterator<Item = (BookId, Tag, SeqNum, bool, Vec<SeqNum>)> + '_ {
        self.streams.iter().map(|(&(b, t), c)| (b, t, c.covered_from, c.complete, c.seqnums.iter().copied().collect()))
    }

    /// The bytes the cache counts, within `bounds.cache_bytes` after every update.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// L moves to `at` without an entry (the start of a term after a sealed one).
    pub fn reach(&mut self, at: MetalogPosition) {
        self.position = self.position.max(at);
    }

    /// Applies the next entry's decided update: its placed records, then its trims.
    /// `slots` names the storage shard of each record, in order (an index into the
    /// local index's table of shards).
    pub fn apply(&mut self, update: &DecidedUpdate, slots: &[u16]) {
        for (i, r) in update.records.iter().enumerate() {
            let slot = slots.get(i).copied().unwrap_or(0);
            let Some(joined) = &r.joined else { continue };
            let live_in_all = joined.first().is_some_and(|j| j.tag == Tag::ALL && j.in_row);
            let mut record = Record {
                tags: r.tags.clone(),
                live_in: joined.iter().filter(|j| j.tag != Tag::ALL && !j.tag.is_mark() && j.in_row).map(|j| j.tag).collect(),
                alive: live_in_all,
                held: 0,
            };
            for j in joined {
                let key = (r.book, j.tag);
                if !self.streams.contains_key(&key) {
                    self.bytes += STREAM_BYTES;
                    let cached = Cached {
                        seqnums: VecDeque::new(),
                        slots: VecDeque::new(),
                        last_access: update.position,
                        covered_from: self.watermark,
                        complete: j.first,
                    };
                    self.streams.insert(key, cached);
                    self.by_access.insert((update.position, key.0, key.1));
                }
                self.touch(key, update.position);
                let cached = self.streams.get_mut(&key).expect("inserted above");
                // A mark's stream holds the records with the mark that are live.
                let kept = if j.tag.is_mark() { live_in_all } else { j.in_row };
                if kept {
                    let before = cached.bytes();
                    cached.seqnums.push_back(r.seqnum);
                    cached.slots.push_back(slot);
                    self.bytes = self.bytes + cached.bytes() - before;
                    record.held += 1;
                }
            }
            if record.held > 0 {
                self.bytes += record_bytes(&record);
                self.records.insert((r.book, r.seqnum), record);
            }
            for j in joined {
                self.bound_stream((r.book, j.tag));
            }
        }
        for &(book, tag, point) in &update.trims {
            self.trim(book, tag, point);
        }
        self.position = update.position;
        self.bound_cache();
    }

    fn trim(&mut self, book: BookId, tag: Tag, point: SeqNum) {
        // The trimmed stream's row loses its records below the point (for a mark, that is
        // all the trim does).
        if let Some(cached) = self.streams.get_mut(&(book, tag)) {
            for s in cached.drain_below(point) {
                self.release(book, s);
            }
        }
        if tag.is_mark() {
            return;
        }
        // Records of the book below the point that were live in the trimmed rows.
        let mut died = Vec::new();
        for (&(_, s), r) in self.records.range_mut((book, SeqNum::MIN)..(book, point)) {
            if !r.alive {
                continue;
            }
            let was_in = r.live_in.len();
            r.live_in.retain(|t| *t != tag && tag != Tag::ALL);
            // A trim of ALL kills it; a trim of a tag when it was live in that tag's row
            // only.
            if tag == Tag::ALL || (r.live_in.is_empty() && was_in > 0) {
                r.alive = false;
                died.push(s);
            }
        }
        for s in died {
            self.kill(book, s);
        }
    }

    /// A record died: it leaves every cached stream (its tags, its marks, ALL).
    fn kill(&mut self, book: BookId, seqnum: SeqNum) {
        let Some(r) = self.records.get(&(book, seqnum)) else { return };
        let streams: Vec<Tag> = std::iter::once(Tag::ALL).chain(r.tags.iter().copied()).collect();
        for t in streams {
            if let Some(cached) = self.streams.get_mut(&(book, t)) {
                if let Ok(i) = cached.seqnums.binary_search(&seqnum) {
                    cached.remove(i);
                    self.release(book, seqnum);
                }
            }
        }
    }

    /// A cached stream let go of `seqnum`: the record goes when none holds it.
    fn release(&mut self, book: BookId, seqnum: SeqNum) {
        let Some(r) = self.records.get_mut(&(book, seqnum)) else { return };
        r.held = r.held.saturating_sub(1);
        if r.held == 0 {
            let r = self.records.remove(&(book, seqnum)).expect("found above");
            self.bytes -= record_bytes(&r);
        }
    }

    /// Evicts a stream's oldest seqnums past `stream_bytes`.
    fn bound_stream(&mut self, key: (BookId, Tag)) {
        let Some(cached) = self.streams.get_mut(&key) else { return };
        let mut evicted = Vec::new();
        while STREAM_BYTES + cached.seqnums.len() * 8 > self.bounds.stream_bytes && !cached.seqnums.is_empty() {
            let s = cached.seqnums.pop_front().expect("not empty");
            cached.slots.pop_front();
            cached.covered_from = cached.covered_from.max(SeqNum(s.0 + 1));
            cached.complete = false;
            evicted.push(s);
        }
        if cached.bytes() > self.bounds.stream_bytes {
            let before = cached.bytes();
            cached.seqnums.shrink_to_fit();
            cached.slots.shrink_to_fit();
            self.bytes -= before - cached.bytes();
        }
        for s in evicted {
            self.release(key.0, s);
        }
    }

    /// `key`'s stream was inserted into or hit at `at`.
    fn touch(&mut self, key: (BookId, Tag), at: MetalogPosition) {
        let Some(c) = self.streams.get_mut(&key) else { return };
        if c.last_access != at {
            self.by_access.remove(&(c.last_access, key.0, key.1));
            c.last_access = at;
            self.by_access.insert((at, key.0, key.1));
        }
    }

    /// Past `cache_bytes`, evicts whole streams, least recently accessed first.
    fn bound_cache(&mut self) {
        while self.bytes > self.bounds.cache_bytes {
            let Some((_, book, tag)) = self.by_access.pop_first() else { return };
            let key = (book, tag);
            let cached = self.streams.remove(&key).expect("listed");
            self.bytes -= cached.bytes();
            // Past every live record of the stream: those it holds, and those it evicted
            // before `covered_from`.
            let past = cached.seqnums.back().map_or(cached.covered_from, |last| SeqNum(last.0 + 1));
            self.watermark = self.watermark.max(past).max(cached.covered_from);
            self.evicted_streams += 1;
            for s in cached.seqnums {
                self.release(key.0, s);
            }
        }
    }

    /// The first record of (book, tag) at or after `min`, at L.
    pub fn read_next(&mut self, book: BookId, tag: Tag, min: SeqNum) -> Local {
        let answer = match self.streams.get(&(book, tag)) {
            Some(c) if c.complete || min >= c.covered_from => {
                let i = c.seqnums.partition_point(|s| *s < min);
                Local::Hit(c.seqnums.get(i).map(|&s| (s, c.slots[i])))
            }
            None if min >= self.watermark => return Local::Hit(None),
            _ => return Local::Miss,
        };
        self.touch((book, tag), self.position);
        answer
    }

    /// The last record of (book, tag) at or before `max`, at L.
    pub fn read_prev(&mut self, book: BookId, tag: Tag, max: SeqNum) -> Local {
        let Some(c) = self.streams.get(&(book, tag)) else { return Local::Miss };
        let end = c.seqnums.partition_point(|s| *s <= max);
        let answer = match end.checked_sub(1).map(|i| (c.seqnums[i], c.slots[i])) {
            Some(s) => Local::Hit(Some(s)),
            None if c.complete => Local::Hit(None),
            None => return Local::Miss,
        };
        self.touch((book, tag), self.position);
        answer
    }
}
