//! The tier against the reference index (`index.rs`), on random logs with conditions on
//! tags and marks, trims ahead of the tail and trims of marks: the shards decide every
//! placement and holder as it does and answer every read as of every earlier position
//! as it did then (`shards.rs`); the local index answers only what it answers at the
//! position a read completes at (`local.rs`).

mod local;
mod shards;

use super::*;
use crate::index::{Found, Index, Placement};
use crate::message::Cond;
use crate::types::{ShardId, Term};

pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

pub(super) const BOOKS: [u64; 3] = [1, 2, 3];

pub(super) fn streams() -> Vec<Tag> {
    let mark = |n: u64| Tag(Tag::MARK_BITS | n);
    vec![Tag(1), Tag(2), Tag(3), mark(1), mark(2)]
}

pub(super) fn seq(position: u64) -> SeqNum {
    SeqNum::new(Term(1), LogId(0), position)
}

/// A read asked of the shards and of the reference.
#[derive(Clone, Copy, Debug)]
pub(super) struct Read {
    pub(super) book: BookId,
    pub(super) tag: Tag,
    pub(super) bound: SeqNum,
    pub(super) next: bool,
}

pub(super) fn reference(index: &Index, r: Read) -> Option<Found> {
    if r.next {
        index.read_next(r.book, r.tag, r.bound)
    } else {
        index.read_prev(r.book, r.tag, r.bound)
    }
}

/// The tier's answer: the smallest of the shards' next records, the largest of their
/// previous ones.
pub(super) fn tier(shards: &[IndexShard], r: Read, q: MetalogPosition) -> Option<Found> {
    let answers = shards.iter().filter_map(|s| {
        if r.next {
            s.postings.read_next(r.book, r.tag, r.bound, q)
        } else {
            s.postings.read_prev(r.book, r.tag, r.bound, q)
        }
    });
    if r.next {
        answers.min_by_key(|f| f.seqnum)
    } else {
        answers.max_by_key(|f| f.seqnum)
    }
}

pub(super) fn random_meta(rng: &mut Rng, index: &Index) -> RecordMeta {
    let all = streams();
    let book = BookId(BOOKS[rng.below(3) as usize]);
    let tags: Vec<Tag> = (0..rng.below(4)).map(|_| all[rng.below(all.len() as u64) as usize]).collect();
    let cond_on = |rng: &mut Rng| {
        let tag = if rng.chance(5) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
        let count = index.next_offset(book, tag);
        // Mostly right, sometimes behind (a lost race) or ahead.
        let position = match rng.below(10) {
            0..=5 => count,
            6..=8 => count.saturating_sub(1 + rng.below(4)),
            _ => count + 1,
        };
        Cond { tag, position }
    };
    let cond = rng.chance(40).then(|| cond_on(rng));
    let unchanged = (0..if rng.chance(20) { 1 + rng.below(3) } else { 0 }).map(|_| cond_on(rng)).collect();
    RecordMeta { book, tags, cond, unchanged }
}

/// What an entry did: the position after it, its records, its trims.
pub(super) type Applied = (MetalogPosition, Vec<(SeqNum, Location, RecordMeta)>, Vec<(BookId, Tag, SeqNum)>);

/// The reference's answer to `read` as of `q`, from the entries of `history` up to it.
pub(super) fn reference_at(history: &[Applied], q: MetalogPosition, read: Read) -> Option<(SeqNum, ShardId)> {
    let mut index = Index::new();
    for (_, records, trims) in history.iter().take_while(|h| h.0 <= q) {
        for (s, l, m) in records {
            index.apply_record(*s, *l, m);
        }
        for &(b, t, p) in trims {
            index.apply_trim(b, t, p);
        }
    }
    reference(&index, read).map(|f| (f.seqnum, f.location.shard))
}

/// A stream to read or trim: ALL `all_percent` of the time.
pub(super) fn random_stream(rng: &mut Rng, all_percent: u64) -> Tag {
    let all = streams();
    if rng.chance(all_percent) {
        Tag::ALL
    } else {
        all[rng.below(all.len() as u64) as usize]
    }
}

/// A read of a random book and stream, bounded anywhere in a log of `position` records.
pub(super) fn random_read(rng: &mut Rng, position: u64) -> Read {
    let tag = random_stream(rng, 20);
    Read { book: BookId(BOOKS[rng.below(3) as usize]), tag, bound: seq(rng.below(position + 2)), next: rng.chance(50) }
}

/// A trim of a random book and stream, mostly behind the tail, sometimes ahead of it.
pub(super) fn random_trim(rng: &mut Rng, position: u64) -> (BookId, Tag, SeqNum) {
    let book = BookId(BOOKS[rng.below(3) as usize]);
    (book, random_stream(rng, 25), seq(rng.below(position + 4)))
}

/// Entry `k` of a log of `position` records over `cut.len()` slots: a few records per
/// slot (their metadata per non-empty run), and now and then a trim or two.
pub(super) fn random_entry(
    rng: &mut Rng,
    k: u64,
    position: u64,
    cut: &mut [u64],
    index: &Index,
) -> (MetalogEntry, Vec<Vec<RecordMeta>>) {
    let prev_cut = cut.to_vec();
    let mut metas = Vec::new();
    for c in cut.iter_mut() {
        let n = if rng.chance(30) { 0 } else { rng.below(3) };
        *c += n;
        if n > 0 {
            metas.push((0..n).map(|_| random_meta(rng, index)).collect());
        }
    }
    let trims = (0..if rng.chance(30) { 1 + rng.below(2) } else { 0 })
        .map(|_| {
            let (book, tag, seqnum) = random_trim(rng, position);
            crate::message::TrimCommand { book, tag, seqnum, origin: None }
        })
        .collect();
    let entry = MetalogEntry {
        term: Term(1),
        log: LogId(0),
        index: k,
        start_position: position,
        prev_cut,
        cut: cut.to_vec(),
        trims,
        version: 0,
    };
    (entry, metas)
}

/// Seeds `0..n`, or `n` times more with `TALLY_TIER_SEEDS_SCALE` set (thousands on
/// demand: `TALLY_TIER_SEEDS_SCALE=20 cargo test -p tally-log-core --release tier`).
pub(super) fn seeds(n: u64) -> std::ops::Range<u64> {
    let scale = std::env::var("TALLY_TIER_SEEDS_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1u64);
    0..n * scale.max(1)
}
