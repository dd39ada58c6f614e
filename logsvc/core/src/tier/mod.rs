//! INDILOG's index tier (the thesis's ch. 5; `../shared/specs/indilog.md` in the
//! project's design notes): index shards that each keep the whole stream table and the
//! postings of their own metalog entries only, and answer reads as of a position.
//!
//! ```text
//!   metalog entry k of log l ──► every index node: StreamTable::decide (placements, the
//!                                 decided update's streams) and trims
//!                             └──► index shard (k + l) mod S: Postings::add
//!   lookup as of Q ──► every shard: read_next / read_prev in its postings at Q
//!                      ──► the smallest (next) or largest (prev) answer is the log's
//! ```
//!
//! Every part is a pure function of the prefix of the log it applied: `index.rs` is the
//! reference semantics, and the tests check the shards against it at every position.

mod aggregator;
mod copy;
mod deque;
mod feed;
mod gatherer;
mod local;
mod node;
mod popularity;
mod postings;
mod rows;
mod split;
mod streams;
mod suffix;
mod tags;
mod update;

pub use aggregator::{Aggregator, AggregatorAction, LookupId, ShardAnswer};
pub use copy::{ShardPiece, PIECE_ITEMS};
pub use feed::{FeedNeed, Since, UpdateFeed, UpdateLog};
pub use gatherer::{AggregatorConfig, AggregatorNode, AggregatorStats};
pub use local::{LocalBounds, LocalIndex, LocalPath, LocalRead};
pub use node::{IndexNode, IndexNodeAction, IndexNodeConfig, IndexNodeReport, IndexNodeStats};
pub use popularity::{Popular, PopularityCache, ReadKey};
pub use postings::Postings;
pub use streams::{Decision, Holder, Joined, Stream, StreamTable};
pub use suffix::Suffix;
pub use tags::{Local, TagBounds, TagCache};
pub use update::{DecidedUpdate, UpdateRecord};

use crate::message::{MetalogEntry, RecordMeta};
use crate::types::{BookId, Location, LogId, MetalogPosition, SeqNum, ShardId, Tag};

/// The index shard that indexes entry `index` of log `log` among `shards`.
pub fn shard_of(log: LogId, index: u64, shards: usize) -> usize {
    ((index + u64::from(log.0)) % shards.max(1) as u64) as usize
}

/// One replica of one index shard: the whole stream table, its own postings.
#[derive(Debug)]
pub struct IndexShard {
    pub shard: usize,
    pub shards: usize,
    pub streams: StreamTable,
    pub postings: Postings,
}

impl IndexShard {
    pub fn new(shard: usize, shards: usize, dead_keep: usize) -> IndexShard {
        IndexShard { shard, shards, streams: StreamTable::default(), postings: Postings::new(dead_keep) }
    }

    /// Decides a record of entry `index` of `log`, which ends at `at`, and indexes it if
    /// it is placed and the entry is this shard's.
    pub fn apply_record(
        &mut self,
        log: LogId,
        index: u64,
        at: MetalogPosition,
        seqnum: SeqNum,
        location: Location,
        meta: &RecordMeta,
    ) -> Decision {
        let decision = self.streams.decide(seqnum, meta);
        if let Decision::Placed(joined) = &decision {
            if shard_of(log, index, self.shards) == self.shard {
                self.postings.add(at, seqnum, location, meta.book, joined);
            }
        }
        decision
    }

    /// Applies a whole metalog entry whose runs' records have the metadata `metas` (one
    /// list per non-empty run, in order), slot j being storage shard `shard_ids[j]`:
    /// every record's decision, and the decided update of the entry.
    pub fn apply_entry(
        &mut self,
        entry: &MetalogEntry,
        shard_ids: &[ShardId],
        metas: &[Vec<RecordMeta>],
    ) -> (Vec<(SeqNum, Location, Decision)>, DecidedUpdate) {
        let at = entry.position_after();
        let mut decisions = Vec::new();
        let mut update = DecidedUpdate {
            log: entry.log,
            prev: self.postings.last_entry(entry.log),
            position: at,
            start: entry.seqnum_at(entry.start_position),
            runs: Vec::new(),
            records: Vec::new(),
            trims: Vec::new(),
        };
        for ((slot, local_ids, first), metas) in entry.runs().zip(metas) {
            let shard = shard_ids.get(slot).copied().unwrap_or(ShardId(slot as u32));
            update.runs.push((shard, local_ids.end - local_ids.start));
            for (k, meta) in metas.iter().enumerate() {
                let seqnum = entry.seqnum_at(first + k as u64);
                let location = Location { shard, local_id: local_ids.start + k as u64 };
                let decision = self.apply_record(entry.log, entry.index, at, seqnum, location, meta);
                let (joined, failed) = match &decision {
                    Decision::Placed(joined) => (Some(joined.clone()), None),
                    Decision::Failed { cond, holder } => (None, Some((*cond, *holder))),
                };
                update.records.push(UpdateRecord { seqnum, book: meta.book, tags: meta.tags.clone(), joined, failed });
                decisions.push((seqnum, location, decision));
            }
        }
        for t in &entry.trims {
            self.apply_trim(entry.log, at, t.book, t.tag, t.seqnum);
            update.trims.push((t.book, t.tag, t.seqnum));
        }
        self.end_entry(entry.log, at);
        (decisions, update)
    }

    /// Applies a trim of the entry of `log` that ends at `at` (after the entry's
    /// records).
    pub fn apply_trim(&mut self, log: LogId, at: MetalogPosition, book: BookId, tag: Tag, seqnum: SeqNum) {
        self.streams.trim(book, tag, seqnum);
        self.postings.trim(log, at, book, tag, seqnum);
    }

    /// Ends an entry of `log`: everything of it up to `at` is applied.
    pub fn end_entry(&mut self, log: LogId, at: MetalogPosition) {
        self.postings.applied_through(log, at);
    }

    /// This shard's answer to `read` as of `q`, a position of `log` (the book's), or
    /// `None` while it has not applied every entry of it before `q` (the lookup waits:
    /// the hold rule).
    pub fn lookup(&self, log: LogId, read: ReadKey, q: MetalogPosition) -> Option<ShardAnswer> {
        let (book, tag, bound, next) = read;
        let floor = self.postings.floor(log);
        if q < floor {
            return Some(ShardAnswer::TooOld(floor));
        }
        if q > self.postings.applied(log) {
            return None;
        }
        let found =
            if next { self.postings.read_next(book, tag, bound, q) } else { self.postings.read_prev(book, tag, bound, q) };
        Some(match found {
            Some(f) if f.seqnum == bound => ShardAnswer::Exact(f),
            other => ShardAnswer::Closest(other),
        })
    }
}

#[cfg(test)]
mod tests;
