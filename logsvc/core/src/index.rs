//! The log index of one physical log: for every (book, tag), the seqnums of the
//! book's live records with that tag, in order.
//!
//! The index is a pure function of the log prefix it has applied: records arrive in
//! seqnum order with their metadata, trim commands arrive at their metalog position.
//! Every engine that applies the same prefix holds the same index, so conditional
//! appends are decided the same way everywhere without any messages.
//!
//! Semantics, with `tp(b, t)` the trim point of tag `t` of book `b` (0 if never
//! trimmed):
//! - A record is *successful* unless it is a conditional append one of whose
//!   conditions failed: a condition holds iff its stream holds exactly `position`
//!   successful records before this one (trimmed ones included), whether or not the
//!   record joins that stream. Failed records are in no row, on any replica, ever.
//! - The offset of a successful record in stream `t` counts every successful record
//!   of `t` before it, trimmed ones included, so trims never change offsets.
//! - A successful record `r` is live in row `t` (one of its tags) iff
//!   `r >= tp(b, t)` and `r >= tp(b, ALL)`. It is live in the book-wide row ALL iff it
//!   is live in one of its tag rows, or it has no tags and `r >= tp(b, ALL)`.
//! - Trim points only grow, and they hold for records ordered later too: a record that
//!   arrives below a trim point is trimmed on arrival.
//! - A record that is live nowhere is trimmed for good: its storage can be reclaimed.
//! - Marks ([`Tag::is_mark`]) are streams for conditions only. A mark's row holds every
//!   successful record with the mark, live or not (so a condition on it names the
//!   holder even after the record was trimmed), and keeps nothing alive: a record's
//!   liveness is decided by its other tags, and one with marks only is live as an
//!   untagged record is. Trims of other tags (`ALL` too) leave mark rows alone. A trim
//!   of a mark drops the row's seqnums below the point (a condition on their offsets
//!   then names no holder) and sets no trim point: the row keeps only its count.
//!
//! Memory: per record, the index holds one slot in its book's book-wide row (location, the
//! tag rows it is live in, a dead mark) and a seqnum in each of its tag rows. Rows are
//! `Chunks` (`chunks.rs`) whose entries are packed relative to their chunk, so a record
//! with one tag costs 15 bytes rather than 32. An index built with a `ColdIndex` (in the
//! engine's and the storage node's configs; `[node] index_resident_bytes` on real nodes)
//! keeps at most that many bytes of full chunks in memory and spills the chunks that filled
//! up first to its `ColdStore`. A failed spill leaves the chunk in memory; a failed read of
//! a spilled chunk panics the node's task, since the index cannot answer without its
//! entries (a restarted node rebuilds it from the log).
//!
//! Architecture Invariant: the index never looks at record data or at time; only at
//! seqnums, metadata and trim commands, in log order.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::chunks::{pack_delta, unpack_delta, Chunks, Cold, ColdStore, Pack};
use crate::message::{Cond, RecordMeta};
use crate::types::{BookId, LocalId, Location, SeqNum, ShardId, Tag};

/// One tag's stream of one book.
#[derive(Default, Debug)]
struct Row {
    /// Live seqnums, ascending: a record leaves its tag rows only from the front.
    live: Chunks<SeqNum>,
    /// Successful records ever added to this stream: the next record's offset.
    total: u64,
}

impl Row {
    /// Offset of `live[0]`.
    fn base(&self) -> u64 {
        self.total - self.live.len() as u64
    }
}

/// A record of the book-wide row: where it lives, and the tag rows it is still live in.
/// 24 bytes, packed into 11 in its chunk ([`PackedSlot`]).
#[derive(Clone, Copy, Debug)]
struct Slot {
    seqnum: SeqNum,
    local_id: LocalId,
    shard: ShardId,
    tag_rows: u16,
    /// Live nowhere any more; the slot stays until it reaches the front.
    dead: bool,
}

impl Slot {
    fn location(&self) -> Location {
        Location { shard: self.shard, local_id: self.local_id }
    }
}

/// What a chunk of slots keeps once: its first seqnum, and the first local id of each
/// shard its slots name (a book's records of one shard come in local id order).
#[derive(Default, Debug)]
struct SlotBase {
    seqnum: Option<u64>,
    shards: Vec<(ShardId, LocalId)>,
}

/// A slot in its chunk: its seqnum and local id past the chunk's, its shard's place in
/// the chunk's table, its tag rows with `dead` as the top bit.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
struct PackedSlot {
    seqnum: u32,
    local_id: u32,
    tag_rows: u16,
    shard: u8,
}

const DEAD: u16 = 1 << 15;

impl Pack for Slot {
    type Base = SlotBase;
    type Packed = PackedSlot;
    const ESCAPED: PackedSlot = PackedSlot { seqnum: u32::MAX, local_id: 0, tag_rows: 0, shard: 0 };

    fn pack(base: &mut SlotBase, slot: &Slot) -> Option<PackedSlot> {
        if slot.tag_rows & DEAD != 0 {
            return None;
        }
        let shard = match base.shards.iter().position(|&(s, _)| s == slot.shard) {
            Some(i) => i,
            None if base.shards.len() <= usize::from(u8::MAX) => {
                base.shards.push((slot.shard, slot.local_id));
                base.shards.len() - 1
            }
            None => return None,
        };
        let local_id = u32::try_from(slot.local_id.checked_sub(base.shards[shard].1)?).ok()?;
        Some(PackedSlot {
            seqnum: pack_delta(&mut base.seqnum, slot.seqnum.0)?,
            local_id,
            tag_rows: slot.tag_rows | if slot.dead { DEAD } else { 0 },
            shard: shard as u8,
        })
    }

    fn unpack(base: &SlotBase, p: PackedSlot) -> Option<Slot> {
        let seqnum = SeqNum(unpack_delta(base.seqnum, p.seqnum)?);
        let (shard, first) = base.shards[usize::from(p.shard)];
        Some(Slot {
            seqnum,
            local_id: first + u64::from(p.local_id),
            shard,
            tag_rows: p.tag_rows & !DEAD,
            dead: p.tag_rows & DEAD != 0,
        })
    }

    const PACKED_BYTES: usize = 11;

    fn to_bytes(p: &PackedSlot, out: &mut [u8]) {
        let PackedSlot { seqnum, local_id, tag_rows, shard } = *p;
        out[..4].copy_from_slice(&seqnum.to_le_bytes());
        out[4..8].copy_from_slice(&local_id.to_le_bytes());
        out[8..10].copy_from_slice(&tag_rows.to_le_bytes());
        out[10] = shard;
    }

    fn from_bytes(b: &[u8]) -> PackedSlot {
        PackedSlot {
            seqnum: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            local_id: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            tag_rows: u16::from_le_bytes([b[8], b[9]]),
            shard: b[10],
        }
    }
}

#[derive(Default, Debug)]
struct Book {
    /// The rows of the book's tags (the book-wide row is `all`).
    rows: HashMap<Tag, Row>,
    trim_points: HashMap<Tag, SeqNum>,
    /// The book-wide row: the records live in it when they were added, ascending
    /// (records that died since through their tag rows stay, marked, until they reach
    /// the front). One slot per record is all the index holds besides its tag rows.
    all: Chunks<Slot>,
    /// Successful records ever added to the book.
    all_total: u64,
}

impl Book {
    fn trim_point(&self, tag: Tag) -> SeqNum {
        self.trim_points.get(&tag).copied().unwrap_or(SeqNum::MIN)
    }

    /// The slot of a record of the book-wide row, dead or alive.
    fn slot(&self, seqnum: SeqNum, cold: &Cold) -> Option<usize> {
        // The newest record is the one most asked for: a storage node asks right after
        // applying it.
        let last = self.all.len().checked_sub(1)?;
        if self.all.get(last, cold).is_some_and(|s| s.seqnum == seqnum) {
            return Some(last);
        }
        self.all.binary_search_by_key(&seqnum, |s| s.seqnum, cold).ok()
    }

    fn live_slot(&self, seqnum: SeqNum, cold: &Cold) -> Option<Slot> {
        self.slot(seqnum, cold).and_then(|i| self.all.get(i, cold)).filter(|s| !s.dead)
    }

    /// Forgets a mark's seqnums below `seqnum`.
    fn pop_mark(&mut self, mark: Tag, seqnum: SeqNum, cold: &mut Cold) {
        let Some(row) = self.rows.get_mut(&mark) else { return };
        let below = row.live.partition_point(|&s| s < seqnum, cold);
        row.live.drain_front(below, cold);
    }

    /// Pops the prefix of `tag`'s row below `seqnum`; returns the records that died.
    fn pop_row(&mut self, tag: Tag, seqnum: SeqNum, died: &mut Vec<(SeqNum, Location)>, cold: &mut Cold) {
        let Some(row) = self.rows.get_mut(&tag) else { return };
        while let Some(front) = row.live.front(cold) {
            if front >= seqnum {
                break;
            }
            row.live.pop_front(cold);
            // A record live in a tag row has a live slot, unless an imported state was
            // malformed: that never panics, it only leaves the record where it was.
            let Ok(i) = self.all.binary_search_by_key(&front, |s| s.seqnum, cold) else { continue };
            let Some(mut slot) = self.all.get(i, cold).filter(|s| !s.dead) else { continue };
            slot.tag_rows = slot.tag_rows.saturating_sub(1);
            if slot.tag_rows == 0 {
                died.push((front, slot.location()));
                if i == 0 {
                    // Dead at the front: it leaves at once (no write to a cold chunk).
                    self.all.pop_front(cold);
                    Self::compact_all_row(&mut self.all, cold);
                    continue;
                }
                slot.dead = true;
            }
            self.all.set(i, slot, cold);
        }
        Self::compact_all_row(&mut self.all, cold);
    }

    /// Drops dead records from the front of the book-wide row.
    fn compact_all_row(all: &mut Chunks<Slot>, cold: &mut Cold) {
        while all.front(cold).is_some_and(|s| s.dead) {
            all.pop_front(cold);
        }
    }
}

/// How the index placed one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Indexed (or trimmed on arrival, which readers cannot tell apart).
    Placed,
    /// The condition failed; `holder` is the live record at the asked offset, if any.
    CondFailed { holder: Option<SeqNum> },
}

/// A read result from the index: the seqnum and where its data lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Found {
    pub seqnum: SeqNum,
    pub location: Location,
}

/// The whole index state of one book, as an indexer of its old log hands it to the
/// indexers of the log the book moved to (`Message::IndexExport`). Importing it gives
/// the same rows, offsets, trim points and live records as applying the book's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookState {
    pub book: BookId,
    /// Per stream, sorted by tag: successful records ever added, and the live seqnums.
    pub rows: Vec<(Tag, u64, Vec<SeqNum>)>,
    pub trim_points: Vec<(Tag, SeqNum)>,
    /// Records live in the ALL row, ascending: where they are, and the tag rows they
    /// are still live in.
    pub records: Vec<(SeqNum, Location, u16)>,
}

impl BookState {
    /// Seqnums this state carries, to size replies.
    pub fn weight(&self) -> usize {
        1 + self.records.len() + self.rows.iter().map(|r| 1 + r.2.len()).sum::<usize>()
    }
}

/// Entries of `Index::sealed` below which it is never pruned.
const SEALED_PRUNE_MIN: usize = 1024;

/// Where the indexes of a node spill the full chunks of their rows, and how many bytes
/// of them each keeps in memory ([`Index::with_cold_store`]).
#[derive(Clone)]
pub struct ColdIndex {
    pub resident_max: usize,
    /// Opens a new, empty store for one index.
    pub open: Arc<dyn Fn() -> std::io::Result<Box<dyn ColdStore>> + Send + Sync>,
}

impl std::fmt::Debug for ColdIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColdIndex").field("resident_max", &self.resident_max).finish_non_exhaustive()
    }
}

impl ColdIndex {
    /// An index over a new store of its own; held in memory if the store cannot be
    /// opened (the index is the same either way, only its memory differs).
    pub fn index(cold: Option<&ColdIndex>) -> Index {
        let Some(cold) = cold else { return Index::new() };
        match (cold.open)() {
            Ok(store) => Index::with_cold_store(store, cold.resident_max),
            Err(e) => {
                tracing::warn!(error = %e, "cannot open a cold store for an index; it stays in memory");
                Index::new()
            }
        }
    }
}

#[derive(Default, Debug)]
pub struct Index {
    books: HashMap<BookId, Book>,
    last: Option<SeqNum>,
    live_records: usize,
    /// Where full chunks of rows go when the index holds more than `resident_max`
    /// bytes of them (never, without a store).
    cold: Cold,
    resident_max: usize,
    /// Chunks that filled up, oldest first, to spill in that order: (book, tag,
    /// chunk number), the ALL tag naming the book-wide row.
    sealed: VecDeque<(BookId, Tag, u64)>,
    /// `sealed` is rid of chunks that left their rows when it grows past this.
    sealed_prune_at: usize,
    /// Chunks spilled so far.
    spills: u64,
    /// The resident bytes when a write to the cold store last failed, if none
    /// succeeded since: the next try waits until more have filled up.
    failed_at: Option<usize>,
}

impl Index {
    pub fn new() -> Index {
        Index::default()
    }

    /// An index that keeps at most about `resident_max` bytes of full chunks of its
    /// rows in memory: past that, the chunks that filled up first go to `store`. A
    /// book's newest records (its rows' last chunks) always stay.
    pub fn with_cold_store(store: Box<dyn ColdStore>, resident_max: usize) -> Index {
        Index { cold: Cold::new(store), resident_max, sealed_prune_at: SEALED_PRUNE_MIN, ..Index::default() }
    }

    /// Records live anywhere in the index.
    #[cfg(test)]
    pub fn live_records(&self) -> usize {
        self.live_records
    }

    /// Bytes of full chunks in memory, and bytes spilled.
    #[cfg(test)]
    pub(crate) fn chunk_bytes(&self) -> (usize, u64) {
        (self.cold.resident, self.cold.spilled_bytes())
    }

    /// Chunks spilled to the cold store so far.
    pub fn chunks_spilled(&self) -> u64 {
        self.spills
    }

    /// Spills the chunks that filled up first until the index is within its bound.
    fn spill_over_budget(&mut self) {
        if !self.cold.can_spill() {
            return;
        }
        if self.sealed.len() > self.sealed_prune_at {
            let books = &self.books;
            self.sealed.retain(|&(book, tag, no)| {
                books.get(&book).is_some_and(|b| match tag {
                    Tag::ALL => b.all.sealed().contains(&no),
                    _ => b.rows.get(&tag).is_some_and(|r| r.live.sealed().contains(&no)),
                })
            });
            self.sealed_prune_at = (2 * self.sealed.len()).max(SEALED_PRUNE_MIN);
        }
        if let Some(at) = self.failed_at {
            if self.cold.resident < at + (self.resident_max / 16).max(1 << 20) {
                return;
            }
        }
        while self.cold.resident > self.resident_max {
            let Some((book, tag, no)) = self.sealed.pop_front() else { return };
            let Some(b) = self.books.get_mut(&book) else { continue };
            let spilled = match tag {
                Tag::ALL => b.all.spill(no, &mut self.cold),
                _ => match b.rows.get_mut(&tag) {
                    Some(row) => row.live.spill(no, &mut self.cold),
                    None => continue,
                },
            };
            match spilled {
                Ok(true) => {
                    self.spills += 1;
                    if self.failed_at.take().is_some() {
                        tracing::info!("the index's cold store takes writes again");
                    }
                }
                Ok(false) => {}
                Err(e) => {
                    if self.failed_at.is_none() {
                        tracing::warn!(error = %e, "the index's cold store failed a write; the index stays in memory for now");
                    }
                    self.failed_at = Some(self.cold.resident);
                    self.sealed.push_front((book, tag, no));
                    return;
                }
            }
        }
    }

    /// Applies the next ordered record. Seqnums must arrive in increasing order.
    pub fn apply_record(&mut self, seqnum: SeqNum, location: Location, meta: &RecordMeta) -> Placement {
        self.apply_record_parts(seqnum, location, meta.book, &meta.tags, meta.cond.iter().chain(&meta.unchanged))
    }

    /// As [`Index::apply_record`], with the metadata in parts: `conds` are all the
    /// record's conditions (the first failing one names the holder).
    pub fn apply_record_parts<'c>(
        &mut self,
        seqnum: SeqNum,
        location: Location,
        book_id: BookId,
        tags: &[Tag],
        conds: impl IntoIterator<Item = &'c Cond>,
    ) -> Placement {
        assert!(self.last.is_none_or(|l| l < seqnum), "records must be applied in seqnum order");
        self.last = Some(seqnum);
        let Index { books, cold, sealed, .. } = self;
        let book = books.entry(book_id).or_default();
        for &Cond { tag, position } in conds {
            let row = book.rows.get(&tag);
            let total = row.map_or(0, |r| r.total);
            if total != position {
                let holder = row.and_then(|r| {
                    let i = position.checked_sub(r.base())?;
                    r.live.get(i as usize, cold)
                });
                return Placement::CondFailed { holder };
            }
        }
        let all_trim = book.trim_point(Tag::ALL);
        let mut tag_rows = 0u16;
        let mut untagged = true;
        for &tag in tags {
            debug_assert_ne!(tag, Tag::ALL, "records never carry the ALL tag");
            let mark = tag.is_mark();
            let live = !mark && seqnum >= all_trim && seqnum >= book.trim_point(tag);
            let row = book.rows.entry(tag).or_default();
            row.total += 1;
            if mark || live {
                if let Some(no) = row.live.push_back(seqnum, cold) {
                    sealed.push_back((book_id, tag, no));
                }
            }
            untagged &= mark;
            tag_rows += u16::from(live);
        }
        book.all_total += 1;
        if seqnum >= all_trim && (untagged || tag_rows > 0) {
            let Location { shard, local_id } = location;
            let slot = Slot { seqnum, local_id, shard, tag_rows, dead: false };
            if let Some(no) = book.all.push_back(slot, cold) {
                sealed.push_back((book_id, Tag::ALL, no));
            }
            self.live_records += 1;
        }
        self.spill_over_budget();
        Placement::Placed
    }

    /// Applies a trim command; returns the records that are now live nowhere.
    pub fn apply_trim(&mut self, book_id: BookId, tag: Tag, seqnum: SeqNum) -> Vec<(SeqNum, Location)> {
        let mut died = Vec::new();
        let cold = &mut self.cold;
        if tag.is_mark() {
            if let Some(book) = self.books.get_mut(&book_id) {
                book.pop_mark(tag, seqnum, cold);
            }
            return died;
        }
        let book = self.books.entry(book_id).or_default();
        let point = book.trim_points.entry(tag).or_insert(SeqNum::MIN);
        if seqnum <= *point {
            return died;
        }
        *point = seqnum;
        if tag == Tag::ALL {
            let tags: Vec<Tag> = book.rows.keys().copied().filter(|t| !t.is_mark()).collect();
            for t in tags {
                book.pop_row(t, seqnum, &mut died, cold);
            }
            // Untagged records (and any still live) below the point die with the ALL row.
            while let Some(front) = book.all.front(cold) {
                if front.seqnum >= seqnum {
                    break;
                }
                if !front.dead {
                    died.push((front.seqnum, front.location()));
                }
                book.all.pop_front(cold);
            }
        } else {
            book.pop_row(tag, seqnum, &mut died, cold);
        }
        self.live_records -= died.len();
        died
    }

    /// The first live record of (book, tag) at or after `min`.
    pub fn read_next(&self, book: BookId, tag: Tag, min: SeqNum) -> Option<Found> {
        let (b, cold) = (self.books.get(&book)?, &self.cold);
        let found = |s: Slot| Found { seqnum: s.seqnum, location: s.location() };
        if tag == Tag::ALL {
            let start = b.all.partition_point(|s| s.seqnum < min, cold);
            return b.all.range(start.., cold).find(|s| !s.dead).map(found);
        }
        let row = b.rows.get(&tag)?;
        let start = row.live.partition_point(|&s| s < min, cold);
        row.live.range(start.., cold).find_map(|s| b.live_slot(s, cold)).map(found)
    }

    /// The last live record of (book, tag) at or before `max`.
    pub fn read_prev(&self, book: BookId, tag: Tag, max: SeqNum) -> Option<Found> {
        let (b, cold) = (self.books.get(&book)?, &self.cold);
        let found = |s: Slot| Found { seqnum: s.seqnum, location: s.location() };
        if tag == Tag::ALL {
            let end = b.all.partition_point(|s| s.seqnum <= max, cold);
            return b.all.range(..end, cold).rev().find(|s| !s.dead).map(found);
        }
        let row = b.rows.get(&tag)?;
        let end = row.live.partition_point(|&s| s <= max, cold);
        row.live.range(..end, cold).rev().find_map(|s| b.live_slot(s, cold)).map(found)
    }

    /// The seqnum of the record [`Index::read_prev`] finds, from the tag's row alone: a
    /// record in a row of a tag that is not a mark is live (it dies only once every row
    /// it is in, or the book-wide trim, has popped it), so neither the book-wide row
    /// nor a location is looked up. A mark's row keeps records that died elsewhere.
    pub fn read_prev_seqnum(&self, book: BookId, tag: Tag, max: SeqNum) -> Option<SeqNum> {
        if tag == Tag::ALL || tag.is_mark() {
            return self.read_prev(book, tag, max).map(|f| f.seqnum);
        }
        let (b, cold) = (self.books.get(&book)?, &self.cold);
        let row = b.rows.get(&tag)?;
        let end = row.live.partition_point(|&s| s <= max, cold);
        end.checked_sub(1).and_then(|last| row.live.get(last, cold))
    }

    /// The offset the next successful record of `book`'s stream `tag` gets: how many
    /// it ever had, trimmed ones included.
    pub fn next_offset(&self, book: BookId, tag: Tag) -> u64 {
        let Some(b) = self.books.get(&book) else { return 0 };
        if tag == Tag::ALL {
            return b.all_total;
        }
        b.rows.get(&tag).map_or(0, |r| r.total)
    }

    /// Whether `seqnum` is a live record of `book`.
    pub fn is_live(&self, book: BookId, seqnum: SeqNum) -> bool {
        self.books.get(&book).is_some_and(|b| b.live_slot(seqnum, &self.cold).is_some())
    }

    /// The state of the books `wanted` picks, in book order, from the first after
    /// `after`, until about `weight_max` seqnums are taken. Returns them and whether
    /// books are left.
    pub fn export(&self, wanted: impl Fn(BookId) -> bool, after: Option<BookId>, weight_max: usize) -> (Vec<BookState>, bool) {
        let cold = &self.cold;
        let mut ids: Vec<BookId> = self.books.keys().copied().filter(|&b| after.is_none_or(|a| b > a) && wanted(b)).collect();
        ids.sort_unstable();
        let mut out = Vec::new();
        let mut weight = 0;
        for (i, id) in ids.iter().enumerate() {
            if weight >= weight_max {
                return (out, i < ids.len());
            }
            let b = &self.books[id];
            let records: Vec<(SeqNum, Location, u16)> =
                b.all.iter(cold).filter(|s| !s.dead).map(|s| (s.seqnum, s.location(), s.tag_rows)).collect();
            let mut rows: Vec<(Tag, u64, Vec<SeqNum>)> =
                b.rows.iter().map(|(&t, r)| (t, r.total, r.live.iter(cold).collect())).collect();
            rows.push((Tag::ALL, b.all_total, records.iter().map(|r| r.0).collect()));
            rows.sort_unstable_by_key(|r| r.0);
            let mut trim_points: Vec<(Tag, SeqNum)> = b.trim_points.iter().map(|(&t, &s)| (t, s)).collect();
            trim_points.sort_unstable();
            let state = BookState { book: *id, rows, trim_points, records };
            weight += state.weight();
            out.push(state);
        }
        (out, false)
    }

    /// Takes over a book's state from the index of its old log. The book must be new
    /// here, and every record applied later must be ordered after its records.
    pub fn import(&mut self, state: BookState) {
        assert!(!self.books.contains_key(&state.book), "book {:?} is imported once, before its records here", state.book);
        let cold = &mut self.cold;
        let mut book = Book { trim_points: state.trim_points.into_iter().collect(), ..Book::default() };
        for (tag, total, live) in state.rows {
            if tag == Tag::ALL {
                // Its live records are `state.records`.
                book.all_total = total;
            } else {
                let live = Chunks::collect(live, cold);
                self.sealed.extend(live.spillable(cold).map(|no| (state.book, tag, no)));
                book.rows.insert(tag, Row { live, total });
            }
        }
        let mut records = state.records;
        records.sort_unstable_by_key(|r| r.0);
        let slots = records.into_iter().map(|(seqnum, Location { shard, local_id }, tag_rows)| Slot {
            seqnum,
            local_id,
            shard,
            tag_rows,
            dead: false,
        });
        book.all = Chunks::collect(slots, cold);
        self.sealed.extend(book.all.spillable(cold).map(|no| (state.book, Tag::ALL, no)));
        self.live_records += book.all.len();
        self.books.insert(state.book, book);
        self.spill_over_budget();
    }
}

#[cfg(test)]
mod tests;
