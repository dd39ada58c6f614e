//! The decided update (the thesis's type-S update, §4.1): what one metalog entry did,
//! as an index node decided it, pushed to the function nodes, which never fetch
//! metadata or decide a condition themselves.

use serde::{Deserialize, Serialize};

use crate::types::{BookId, LogId, MetalogPosition, SeqNum, ShardId, Tag};

use crate::message::Cond;

use super::streams::{Holder, Joined};

/// One record of the entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateRecord {
    pub seqnum: SeqNum,
    pub book: BookId,
    /// Its tags, marks included.
    pub tags: Vec<Tag>,
    /// Placed: the streams it joined (ALL first, then its tags in order); failed: none.
    pub joined: Option<Vec<Joined>>,
    /// Failed: the first failing condition and who holds its offset, if the stream
    /// table knows (else the index shards' postings do).
    pub failed: Option<(Cond, Holder)>,
}

/// One entry of one physical log, decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecidedUpdate {
    pub log: LogId,
    /// The position after the log's entry before this one (what this update applies
    /// on top of: a gap shows), and the position after this entry.
    pub prev: MetalogPosition,
    pub position: MetalogPosition,
    /// The entry's first seqnum and its runs: (the storage shard, records), in slot order
    /// (what the suffix keeps).
    pub start: SeqNum,
    pub runs: Vec<(ShardId, u64)>,
    /// In seqnum order.
    pub records: Vec<UpdateRecord>,
    /// The entry's trims, applied after its records: (book, stream, point).
    pub trims: Vec<(BookId, Tag, SeqNum)>,
}

impl DecidedUpdate {
    /// About what it takes in memory and on the wire.
    pub fn bytes(&self) -> usize {
        64 + self.runs.len() * 16
            + self.trims.len() * 24
            + self
                .records
                .iter()
                .map(|r| {
                    48 + usize::from(r.failed.is_some()) * 24 + r.tags.len() * 8 + r.joined.as_ref().map_or(0, |j| j.len() * 24)
                })
                .sum::<usize>()
    }

    /// The storage shard of each of its records, in order.
    pub fn shards(&self) -> impl Iterator<Item = ShardId> + '_ {
        self.runs.iter().flat_map(|&(shard, n)| std::iter::repeat_n(shard, n as usize))
    }
}
