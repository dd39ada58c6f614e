//! The nouns of the shared log, each with one meaning wherever it is used
//! (`../shared/design.md` §2 says where they come from):
//!
//! - *book* ([`BookId`]): a user-facing LogBook. Many books are multiplexed onto one
//!   *physical log* ([`LogId`]), which `book_to_log` picks by jump hashing.
//! - *tag* ([`Tag`]): a sub-stream of a book; tag 0 is all of it. Reserved tags are the
//!   platform's, and *marks* are reserved tags that count records for conditions without
//!   keeping them alive.
//! - *shard* ([`ShardId`]): the records one engine appends to one physical log in one term,
//!   numbered by dense local ids; (shard, local id) is a record's [`Location`] for ever.
//! - *cut*: how many records of each shard are ordered, computed by the primary sequencer
//!   from the storage nodes' progress.
//! - *metalog*: per (term, log), the replicated sequence of entries (cuts and trims) that
//!   orders records; a [`MetalogPosition`] is how much of it an index or a caller has seen.
//! - *seqnum* ([`SeqNum`]): the name of an ordered record, `term(16) | log(8) |
//!   position(40)`; its documentation says what happens when a field would overflow.
//! - *term* ([`Term`]): the span between two reconfigurations. To *seal* a term's metalogs
//!   is to have a quorum of each log's sequencers promise to accept no more of their
//!   entries, so that the controller can fix their final tails.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A user-facing LogBook. Many books share one physical log ([`LogId`]).
///
/// Books with the top bit set belong to the platform (the function registry, ...): a
/// user client refuses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BookId(pub u64);

impl BookId {
    pub const RESERVED_BIT: u64 = 1 << 63;

    pub fn is_reserved(self) -> bool {
        self.0 & Self::RESERVED_BIT != 0
    }

    /// A platform book: `value` with the reserved bit set.
    pub fn platform(value: u64) -> BookId {
        BookId(value | Self::RESERVED_BIT)
    }
}

/// Selects a sub-stream of a book.
///
/// Tag 0 ([`Tag::ALL`]) is the stream of every record of the book; it is never stored
/// on a record. Tags with the top bit set are reserved for the platform (step logs,
/// write logs): the user client of `tally-logsvc` refuses them, see [`Tag::is_reserved`].
///
/// Reserved tags whose next two bits are `01` are *marks* ([`Tag::is_mark`]): streams
/// that count records for conditional appends without keeping them alive. The platform
/// puts a mark on the records an exactly-once invocation appends to a user book, so a
/// re-execution finds its own append at the mark's offset; the index's module doc says
/// how marks differ from other tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Tag(pub u64);

impl Tag {
    pub const ALL: Tag = Tag(0);
    pub const RESERVED_BIT: u64 = 1 << 63;

    pub fn is_reserved(self) -> bool {
        self.0 & Self::RESERVED_BIT != 0
    }

    /// The bits that make a tag a mark: reserved, bit 62 clear, bit 61 set.
    pub const MARK_BITS: u64 = Self::RESERVED_BIT | (1 << 61);

    /// Whether records with this tag are only counted in its stream, never kept alive
    /// by it (see the index).
    pub fn is_mark(self) -> bool {
        self.0 >> 61 == Self::MARK_BITS >> 61
    }

    /// A platform tag: `value` with the reserved bit set.
    pub fn platform(value: u64) -> Tag {
        Tag(value | Self::RESERVED_BIT)
    }

    /// The user tag of a name: FNV-1a (64 bit) of its UTF-8 bytes with the reserved
    /// bit cleared, and 1 instead of 0. The guest SDKs compute the same function, so
    /// `?tag=orders` on the gateway names what `Tag::named("orders")` did in a guest.
    pub fn from_name(name: &str) -> Tag {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in name.as_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        match h & !Self::RESERVED_BIT {
            0 => Tag(1),
            t => Tag(t),
        }
    }
}

/// A term: the span between two reconfigurations. Terms start at 1; 0 means "before
/// the first term" and only appears in [`MetalogPosition::ZERO`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Term(pub u16);

/// A physical log, onto which books are multiplexed by consistent hashing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LogId(pub u8);

/// A shard of a physical log in one term: the records appended by one engine, in
/// `local_id` order. Shard ids are unique across terms and logs (the controller hands
/// them out from one counter), so `(ShardId, LocalId)` names a record for ever.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ShardId(pub u32);

/// Dense per-shard record number assigned by the appending engine, starting at 0.
pub type LocalId = u64;

/// Where a record lives on storage nodes, before and after it is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Location {
    pub shard: ShardId,
    pub local_id: LocalId,
}

/// Identifies a process of the cluster (sequencer, storage node, engine or controller).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// The unique, monotonic name of an ordered record: `term | log | position`, high to
/// low bits.
///
/// ```text
///  63            48 47       40 39                                      0
/// +----------------+-----------+-----------------------------------------+
/// |   term (16)    |  log (8)  |            position (40)                |
/// +----------------+-----------+-----------------------------------------+
/// ```
///
/// Within a book seqnums increase with the order of the log but are not dense: other
/// books' records sit in between. Overflow behaviour:
/// - position: 2^40 records per physical log per term (12 days at a million appends a
///   second). A primary sequencer never orders a record past [`SeqNum::POSITION_MAX`];
///   it stops issuing metalog entries and reports that the log needs a new term, which
///   restarts positions at 0.
/// - log: at most 256 physical logs ([`LogId`] is a `u8`).
/// - term: 65,535 reconfigurations. The controller refuses to install a term past
///   `u16::MAX` and says so; the cluster then stays sealed rather than reuse seqnums.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SeqNum(pub u64);

impl SeqNum {
    pub const POSITION_BITS: u32 = 40;
    pub const POSITION_MAX: u64 = (1 << Self::POSITION_BITS) - 1;
    pub const MIN: SeqNum = SeqNum(0);
    pub const MAX: SeqNum = SeqNum(u64::MAX);

    pub fn new(term: Term, log: LogId, position: u64) -> SeqNum {
        assert!(position <= Self::POSITION_MAX, "position {position} overflows the seqnum");
        SeqNum((term.0 as u64) << 48 | (log.0 as u64) << 40 | position)
    }

    pub fn term(self) -> Term {
        Term((self.0 >> 48) as u16)
    }

    pub fn log(self) -> LogId {
        LogId((self.0 >> 40) as u8)
    }

    pub fn position(self) -> u64 {
        self.0 & Self::POSITION_MAX
    }
}

impl fmt::Display for SeqNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.term().0, self.log().0, self.position())
    }
}

/// A version of a physical log's index: every entry of every earlier term, then the
/// first `index` entries of `term`'s metalog. Positions compare term first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MetalogPosition {
    pub term: u16,
    pub index: u64,
}

impl MetalogPosition {
    pub const ZERO: MetalogPosition = MetalogPosition { term: 0, index: 0 };

    pub fn new(term: Term, index: u64) -> MetalogPosition {
        MetalogPosition { term: term.0, index }
    }
}

impl fmt::Display for MetalogPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.term, self.index)
    }
}

/// Maps a book to its physical log with jump consistent hashing (Lamping and Veach):
/// uniform, and when `n_logs` grows only `1/n_logs` of the books move.
pub fn book_to_log(book: BookId, n_logs: u8) -> LogId {
    assert!(n_logs > 0);
    let mut key = book.0;
    let (mut b, mut j): (i64, i64) = (-1, 0);
    while j < n_logs as i64 {
        b = j;
        key = key.wrapping_mul(2862933555777941757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    LogId(b as u8)
}

/// Time in microseconds. The simulator's clock or the driver's monotonic clock.
pub type Micros = u64;

/// The longest a state machine goes without a tick: what `NextTick` says when no timer
/// is due sooner.
pub const TICK_MAX_US: Micros = 1_000_000;

/// When a state machine's `on_tick` must run again: the earliest time one of its timers
/// falls due, and at most [`TICK_MAX_US`] away. Every `on_tick` returns one, built while
/// it checks its timers, so that a driver with no input sleeps until then instead of
/// ticking on a fixed period. Ticking earlier is always allowed, and needed after an
/// input, which may have started a timer (drivers tick soon after inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextTick(Micros);

impl NextTick {
    /// No timer due before `now + TICK_MAX_US` yet.
    pub fn after(now: Micros) -> NextTick {
        NextTick(now.saturating_add(TICK_MAX_US))
    }

    /// A timer falls due at `at`.
    pub fn at(&mut self, at: Micros) {
        self.0 = self.0.min(at);
    }

    /// When to tick next.
    pub fn due(self) -> Micros {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_names_hash_to_the_shared_vectors() {
        // Every guest SDK's `Tag.named` tests the same file.
        let file: serde_json::Value =
            serde_json::from_str(include_str!("../../../guest-sdks/test-vectors/tags.json")).expect("the vectors are JSON");
        let vectors = file["vectors"].as_array().expect("a list of vectors");
        assert!(vectors.len() >= 10);
        for vector in vectors {
            let name = vector["name"].as_str().expect("a name");
            let tag: u64 = vector["tag"].as_str().and_then(|t| t.parse().ok()).expect("a decimal tag");
            assert_eq!(Tag::from_name(name), Tag(tag), "{name:?}");
            assert!(!Tag::from_name(name).is_reserved());
        }
    }

    #[test]
    fn seqnum_fields_round_trip_and_order_by_term_first() {
        let cases = [(1, 0, 0), (1, 3, 17), (2, 0, 0), (65535, 255, SeqNum::POSITION_MAX)];
        for (t, l, p) in cases {
            let s = SeqNum::new(Term(t), LogId(l), p);
            assert_eq!((s.term(), s.log(), s.position()), (Term(t), LogId(l), p));
        }
        assert!(SeqNum::new(Term(1), LogId(9), SeqNum::POSITION_MAX) < SeqNum::new(Term(2), LogId(0), 0));
    }

    #[test]
    #[should_panic(expected = "overflows")]
    fn seqnum_position_overflow_is_refused() {
        SeqNum::new(Term(1), LogId(0), SeqNum::POSITION_MAX + 1);
    }

    #[test]
    fn positions_order_term_before_index() {
        assert!(MetalogPosition { term: 1, index: 900 } < MetalogPosition { term: 2, index: 0 });
        assert!(MetalogPosition::ZERO < MetalogPosition { term: 1, index: 0 });
    }

    #[test]
    fn books_spread_over_logs_and_move_little_when_logs_grow() {
        let mut counts = [0u32; 4];
        let mut moved = 0;
        for b in 0..40_000u64 {
            let l4 = book_to_log(BookId(b), 4);
            counts[l4.0 as usize] += 1;
            if book_to_log(BookId(b), 5) != l4 {
                moved += 1;
            }
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
        assert!((7_000..9_000).contains(&moved), "{moved} books moved");
    }

    #[test]
    fn reserved_tags_are_recognised() {
        assert!(Tag::platform(5).is_reserved());
        assert!(!Tag(5).is_reserved());
        assert!(!Tag::ALL.is_reserved());
        assert!(Tag(Tag::MARK_BITS | 77).is_mark() && Tag(Tag::MARK_BITS).is_reserved());
        for not_mark in [Tag(5), Tag::platform(5), Tag(Tag::MARK_BITS | 1 << 62), Tag(1 << 61), Tag::ALL] {
            assert!(!not_mark.is_mark(), "{not_mark:?}");
        }
    }
}
