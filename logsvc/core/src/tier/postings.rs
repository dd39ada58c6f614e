//! The postings of one index shard: its own entries' records, per (book, stream), each
//! with where it lives, its offset in the stream, and the positions at which it entered
//! and left the stream's row, so that the shard answers as of any position Q it has
//! applied, back to the last `dead_keep` it purged.
//!
//! Membership follows `index.rs` exactly: a record is in tag row t from its entry on if
//! it arrived at or above the trim points of t and ALL, and leaves it at the first trim
//! of t or ALL past it; it is in a mark's row from its entry on and leaves it at the
//! first trim of the mark past it; it is in ALL's row while it is in one of its tag
//! rows (or, with no tags or marks only, while at or above ALL's trim point). A read of
//! a tag or ALL returns records in that row; a read of a mark returns records in the
//! mark's row that are also in ALL's (live), as the reference index does.
//!
//! The rows themselves are in `rows.rs`.

use std::collections::{HashMap, VecDeque};

use crate::index::Found;
use crate::types::{BookId, Location, LogId, MetalogPosition, SeqNum, Tag};

use super::rows::{from, AllPosting, AllRow, Left, Packed, Posted, TagPosting, TagRow, CUT_BYTES};
use super::split::TagMap;
use super::streams::Joined;
use super::ShardPiece;

/// A position that is never reached: a copied posting still in its row.
const NEVER: MetalogPosition = MetalogPosition { term: u16::MAX, index: u64::MAX };

/// A posting as a copy carries it (the rows keep it in less: `rows.rs`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Posting {
    seqnum: SeqNum,
    location: Location,
    /// Its offset in a tag's or a mark's stream (0 in ALL's row: no condition names
    /// ALL's offsets).
    offset: u64,
    /// The position after the entry that ordered it.
    entered: MetalogPosition,
    /// The position after the entry whose trim took it out of the row, or [`NEVER`],
    /// and the log of that entry.
    left: MetalogPosition,
    left_in: LogId,
    /// In ALL's row: the tag rows it is still in.
    tag_rows: u16,
}

impl Posting {
    fn left(&self) -> Option<Left> {
        (self.left != NEVER).then_some(Left { at: Packed::of(self.left), log: self.left_in })
    }

    fn of<P: Posted>(p: &P, offset: u64, left: Option<Left>, tag_rows: u16) -> Posting {
        let (left, left_in) = left.map_or((NEVER, LogId(0)), |l| (l.at.position(), l.log));
        Posting { seqnum: p.seqnum(), location: p.location(), offset, entered: p.entered().position(), left, left_in, tag_rows }
    }
}

/// A book's rows on one shard.
#[derive(Debug, Default)]
struct Book {
    all: AllRow,
    tags: TagMap<TagRow>,
}

impl Book {
    fn is_empty(&self) -> bool {
        self.all.postings.is_empty() && self.tags.is_empty()
    }
}

/// One shard's postings.
///
/// Positions compare term first, so a moved book's postings, entered in its old log
/// before the term that added its new one, compare rightly with positions of the new
/// log; what is kept per log is how far each has been applied and purged.
#[derive(Debug)]
pub struct Postings {
    books: HashMap<BookId, Book>,
    /// What the rows hold, counted as they change: a scrape reads it with no walk.
    held: Held,
    /// How many applied entries of its log a posting that left its row is kept for.
    dead_keep: usize,
    logs: HashMap<LogId, Progress>,
}

/// What a shard's rows hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    pub books: usize,
    /// Tag and mark rows.
    pub rows: usize,
    pub tag_postings: usize,
    pub all_postings: usize,
    /// Postings of ALL's rows that left, and cuts of the other rows.
    pub left: usize,
    pub cuts: usize,
}

impl Held {
    /// About the heap bytes: each posting, cut and left posting, and each map slot at
    /// the load maps grow at (a row's last chunk, partly empty, is not counted).
    pub fn bytes(&self) -> usize {
        let slot = |entry: usize| (entry + 1) * 8 / 7;
        self.books * slot(8 + std::mem::size_of::<Book>())
            + self.rows * (slot(8 + std::mem::size_of::<TagRow>()) + std::mem::size_of::<Vec<TagPosting>>())
            + self.tag_postings * std::mem::size_of::<TagPosting>()
            + self.all_postings * std::mem::size_of::<AllPosting>()
            + self.left * slot(std::mem::size_of::<(SeqNum, Left)>())
            + self.cuts * CUT_BYTES
    }
}

/// How far the postings have followed one log.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    applied: MetalogPosition,
    /// The position after its last applied entry (`applied` may be past it: the start
    /// of a term whose earlier one ended).
    last_entry: MetalogPosition,
    /// The positions after its last applied entries, oldest first.
    recent: VecDeque<MetalogPosition>,
    /// Lookups as of a position of this log below this one get `TooOld`: postings that
    /// left their rows at or before it may be gone.
    floor: MetalogPosition,
    /// The rows whose postings left in this log's entries, in log order: what a purge
    /// visits (no walk over every row).
    leaving: VecDeque<(MetalogPosition, BookId, Tag)>,
}

impl Postings {
    /// About the heap bytes it holds ([`Held::bytes`]) and each log's progress, with no
    /// walk over the rows.
    pub fn bytes(&self) -> usize {
        let logs: usize = self
            .logs
            .values()
            .map(|p| {
                p.recent.capacity() * std::mem::size_of::<MetalogPosition>()
                    + p.leaving.capacity() * std::mem::size_of::<(MetalogPosition, BookId, Tag)>()
            })
            .sum();
        self.held.bytes() + logs
    }

    /// What the rows hold.
    pub fn held(&self) -> Held {
        self.held
    }

    /// What the rows hold, counted by a walk over them (to check [`Postings::held`]).
    pub fn walk(&self) -> Held {
        let mut h = Held { books: self.books.len(), ..Held::default() };
        for b in self.books.values() {
            h.all_postings += b.all.postings.len();
            h.left += b.all.left();
            h.rows += b.tags.len();
            for (_, r) in b.tags.iter() {
                h.tag_postings += r.postings.len();
                h.cuts += r.cuts();
            }
        }
        h
    }

    pub fn new(dead_keep: usize) -> Postings {
        Postings { books: HashMap::new(), held: Held::default(), dead_keep: dead_keep.max(1), logs: HashMap::new() }
    }

    /// Every row, sorted by book and tag, in pieces of at most `max` postings (a long
    /// row in several, in order), for a replica that copies this one.
    pub(super) fn export_rows(&self, max: usize, out: &mut Vec<ShardPiece>) {
        let mut books: Vec<(&BookId, &Book)> = self.books.iter().collect();
        books.sort_unstable_by_key(|(b, _)| **b);
        let mut pieces = |book: BookId, tag: Tag, all: Vec<Posting>| {
            for postings in all.chunks(max.max(1)) {
                out.push(ShardPiece::Row { book, tag, postings: postings.to_vec() });
            }
        };
        for (&book, rows) in books {
            let all = &rows.all;
            let postings = all.postings.range(0, all.postings.len());
            pieces(book, Tag::ALL, postings.map(|p| Posting::of(p, 0, all.left_of(p.seqnum), p.tag_rows)).collect());
            let mut tags: Vec<(&Tag, &TagRow)> = rows.tags.iter().collect();
            tags.sort_unstable_by_key(|(t, _)| **t);
            for (&tag, row) in tags {
                let postings = row.postings.range(0, row.postings.len());
                pieces(book, tag, postings.map(|p| Posting::of(p, p.offset, row.left_of(p.seqnum), 0)).collect());
            }
        }
    }

    /// How far each log is applied and purged, for a replica that copies this one.
    pub(super) fn export_logs(&self) -> Vec<(LogId, Progress)> {
        let mut logs: Vec<(LogId, Progress)> = self.logs.iter().map(|(l, p)| (*l, p.clone())).collect();
        logs.sort_unstable_by_key(|(l, _)| *l);
        logs
    }

    /// Appends a piece of a copied row.
    pub(super) fn import_row(&mut self, book: BookId, tag: Tag, postings: Vec<Posting>) {
        let held = &mut self.held;
        let rows = self.books.entry(book).or_insert_with(|| {
            held.books += 1;
            Book::default()
        });
        for p in postings {
            let (seqnum, shard, local_id, entered) = (p.seqnum, p.location.shard, p.location.local_id, Packed::of(p.entered));
            held.left += usize::from(p.left().is_some());
            if tag == Tag::ALL {
                rows.all.push(AllPosting { seqnum, local_id, entered, shard, tag_rows: p.tag_rows }, p.left());
                held.all_postings += 1;
                continue;
            }
            held.rows += usize::from(!rows.tags.contains_key(&tag));
            let row = rows.tags.entry_or_default(tag);
            let posting = TagPosting { seqnum, local_id, offset: p.offset, entered, shard };
            held.tag_postings += 1;
            match p.left() {
                Some(left) => {
                    held.left -= 1;
                    held.cuts += usize::from(row.push_left(posting, left));
                }
                None => row.postings.push_back(posting),
            }
        }
        if rows.is_empty() {
            self.books.remove(&book);
            held.books -= 1;
        }
    }

    pub(super) fn import_logs(&mut self, logs: Vec<(LogId, Progress)>) {
        self.logs.extend(logs);
    }

    /// The oldest position of `log` this shard answers as of.
    pub fn floor(&self, log: LogId) -> MetalogPosition {
        self.logs.get(&log).map_or(MetalogPosition::ZERO, |p| p.floor)
    }

    /// The position up to which `log` is applied.
    pub fn applied(&self, log: LogId) -> MetalogPosition {
        self.logs.get(&log).map_or(MetalogPosition::ZERO, |p| p.applied)
    }

    /// The position after the last entry of `log` applied (what the next decided
    /// update of the log follows).
    pub fn last_entry(&self, log: LogId) -> MetalogPosition {
        self.logs.get(&log).map_or(MetalogPosition::ZERO, |p| p.last_entry)
    }

    /// Every entry of `log` before `at` is applied, with none after the last one (the
    /// follower passed the end of a sealed term): lookups as of `at` may be answered.
    pub fn reach(&mut self, log: LogId, at: MetalogPosition) {
        let progress = self.logs.entry(log).or_default();
        progress.applied = progress.applied.max(at);
    }

    /// Indexes a placed record of this shard's entry that ends at `at` (the position
    /// after it), with the streams the stream table says it joined.
    pub fn add(&mut self, at: MetalogPosition, seqnum: SeqNum, location: Location, book: BookId, joined: &[Joined]) {
        let held = &mut self.held;
        let rows = self.books.entry(book).or_insert_with(|| {
            held.books += 1;
            Book::default()
        });
        let tag_rows = joined.iter().filter(|j| j.tag != Tag::ALL && !j.tag.is_mark() && j.in_row).count();
        let (shard, local_id, entered) = (location.shard, location.local_id, Packed::of(at));
        // A mark's row takes every record with the mark; other rows take the ones in
        // them on arrival.
        for j in joined.iter().filter(|j| j.in_row) {
            if j.tag == Tag::ALL {
                rows.all.push(AllPosting { seqnum, local_id, entered, shard, tag_rows: tag_rows as u16 }, None);
                held.all_postings += 1;
            } else {
                held.rows += usize::from(!rows.tags.contains_key(&j.tag));
                let posting = TagPosting { seqnum, local_id, offset: j.offset, entered, shard };
                rows.tags.entry_or_default(j.tag).postings.push_back(posting);
                held.tag_postings += 1;
            }
        }
        if rows.is_empty() {
            self.books.remove(&book);
            held.books -= 1;
        }
    }

    /// Applies a trim of the entry of `log` that ends at `at`. Every shard applies every
    /// trim.
    pub fn trim(&mut self, log: LogId, at: MetalogPosition, book: BookId, tag: Tag, seqnum: SeqNum) {
        let left = Left { at: Packed::of(at), log };
        let Some(rows) = self.books.get_mut(&book) else { return };
        let leaving = &mut self.logs.entry(log).or_default().leaving;
        let held = &mut self.held;
        if tag.is_mark() {
            if let Some(row) = rows.tags.get_mut(&tag) {
                if row.leave_below(seqnum, left, |_| {}) {
                    leaving.push_back((at, book, tag));
                    held.cuts += 1;
                }
            }
            return;
        }
        let tags: Vec<Tag> =
            if tag == Tag::ALL { rows.tags.keys().copied().filter(|t| !t.is_mark()).collect() } else { vec![tag] };
        let mut died_in_tag_rows = Vec::new();
        for t in tags {
            if let Some(row) = rows.tags.get_mut(&t) {
                if row.leave_below(seqnum, left, |p| died_in_tag_rows.push(p.seqnum)) {
                    leaving.push_back((at, book, t));
                    held.cuts += 1;
                }
            }
        }
        let all = &mut rows.all;
        let left_before = all.left();
        died_in_tag_rows.sort_unstable();
        for s in died_in_tag_rows {
            let i = from(&all.postings, s);
            if all.postings.get(i).is_some_and(|p| p.seqnum == s) && all.left_of(s).is_none() {
                let p = all.postings.get_mut(i).expect("found");
                p.tag_rows = p.tag_rows.saturating_sub(1);
                if p.tag_rows == 0 {
                    all.leave(i, left);
                }
            }
        }
        if tag == Tag::ALL {
            // Untagged records (and records with marks only) below the point.
            for i in 0..from(&all.postings, seqnum) {
                all.leave(i, left);
            }
        }
        if all.left() > left_before {
            leaving.push_back((at, book, Tag::ALL));
            held.left += all.left() - left_before;
        }
    }

    /// Marks every entry of `log` up to `at` applied: postings that left their rows in
    /// that log more than `dead_keep` of its entries ago go (from the front of their rows:
    /// one that left in the middle of ALL's row waits there, as in `index.rs`), and its
    /// floor rises past them.
    pub fn applied_through(&mut self, log: LogId, at: MetalogPosition) {
        let dead_keep = self.dead_keep;
        let progress = self.logs.entry(log).or_default();
        progress.applied = at;
        progress.last_entry = at;
        progress.recent.push_back(at);
        if progress.recent.len() <= dead_keep {
            return;
        }
        let horizon = progress.recent.pop_front().expect("longer than dead_keep");
        progress.floor = progress.floor.max(horizon);
        while progress.leaving.front().is_some_and(|&(left, _, _)| left <= horizon) {
            let (_, book, tag) = progress.leaving.pop_front().expect("checked");
            let Some(rows) = self.books.get_mut(&book) else { continue };
            let held = &mut self.held;
            if tag == Tag::ALL {
                let records = rows.all.purge(log, Packed::of(horizon));
                held.all_postings -= records;
                held.left -= records;
            } else if let Some(row) = rows.tags.get_mut(&tag) {
                let (records, cuts) = row.purge(log, Packed::of(horizon));
                held.tag_postings -= records;
                held.cuts -= cuts;
                if row.postings.is_empty() {
                    held.cuts -= row.cuts();
                    rows.tags.remove(&tag);
                    held.rows -= 1;
                }
            }
            if rows.is_empty() {
                self.books.remove(&book);
                held.books -= 1;
            }
        }
    }

    /// Whether `seqnum`'s posting in `book`'s ALL row is in the row at `q` (the record
    /// is live in the book, if this shard indexed it).
    pub fn live_at(&self, book: BookId, seqnum: SeqNum, q: MetalogPosition) -> bool {
        let Some(all) = self.books.get(&book).map(|b| &b.all) else { return false };
        let q = Packed::of(q);
        all.postings
            .get(from(&all.postings, seqnum))
            .is_some_and(|p| p.seqnum == seqnum && in_row_at(p.entered, all.left_of(seqnum), q))
    }

    /// This shard's first record of (book, tag) at or after `min`, as of `q`.
    pub fn read_next(&self, book: BookId, tag: Tag, min: SeqNum, q: MetalogPosition) -> Option<Found> {
        let rows = self.books.get(&book)?;
        let packed = Packed::of(q);
        if tag == Tag::ALL {
            let all = &rows.all;
            let mut postings = all.postings.range(from(&all.postings, min), all.postings.len());
            return postings.find(|p| in_row_at(p.entered, all.left_of(p.seqnum), packed)).map(found);
        }
        let row = rows.tags.get(&tag)?;
        let mut postings = row.postings.range(from(&row.postings, min), row.postings.len());
        postings.find(|p| self.readable(book, tag, row, p, q)).map(found)
    }

    /// This shard's last record of (book, tag) at or before `max`, as of `q`.
    pub fn read_prev(&self, book: BookId, tag: Tag, max: SeqNum, q: MetalogPosition) -> Option<Found> {
        let rows = self.books.get(&book)?;
        let packed = Packed::of(q);
        if tag == Tag::ALL {
            let all = &rows.all;
            let mut postings = all.postings.range(0, all.postings.partition_point(|p| p.seqnum <= max)).rev();
            return postings.find(|p| in_row_at(p.entered, all.left_of(p.seqnum), packed)).map(found);
        }
        let row = rows.tags.get(&tag)?;
        let mut postings = row.postings.range(0, row.postings.partition_point(|p| p.seqnum <= max)).rev();
        postings.find(|p| self.readable(book, tag, row, p, q)).map(found)
    }

    /// A posting of a tag's or a mark's row that a read as of `q` returns (a mark's only
    /// while the record is live).
    fn readable(&self, book: BookId, tag: Tag, row: &TagRow, p: &TagPosting, q: MetalogPosition) -> bool {
        in_row_at(p.entered, row.left_of(p.seqnum), Packed::of(q)) && (!tag.is_mark() || self.live_at(book, p.seqnum, q))
    }

    /// The record at `offset` of (book, tag) if this shard indexed it and it was in the
    /// stream's row just before `before`, a record of the entry that ends at `at`: the
    /// trims of earlier entries applied, none of that entry's.
    pub fn holder(&self, book: BookId, tag: Tag, offset: u64, before: SeqNum, at: MetalogPosition) -> Option<SeqNum> {
        let row = self.books.get(&book)?.tags.get(&tag)?;
        let i = row.postings.partition_point(|p| p.offset < offset);
        let p = row.postings.get(i).filter(|p| p.offset == offset && p.seqnum < before)?;
        // In the row until a trim of an entry before this one took it out.
        row.left_of(p.seqnum).is_none_or(|l| l.at >= Packed::of(at)).then_some(p.seqnum)
    }
}

/// Whether a posting that entered at `entered` and left at `left` is in its row at `q`.
fn in_row_at(entered: Packed, left: Option<Left>, q: Packed) -> bool {
    entered <= q && left.is_none_or(|l| q < l.at)
}

fn found<P: Posted>(p: &P) -> Found {
    Found { seqnum: p.seqnum(), location: p.location() }
}
