//! A replica's state copied to an index node that takes a place in its shard or starts
//! again (the spec's item 9): the whole stream table and the shard's postings as of
//! one position per log, in pieces of at most [`PIECE_ITEMS`] streams or postings, so
//! no message grows with a book. The copy then follows the log from that position.
//!
//! The newcomer asks one replica at a time for one piece at a time (`ShardCopy`). The
//! first request makes the replica export its state whole, at once (one position), and
//! keep the pieces for whoever asks with that request id; the newcomer moves to the next
//! replica when one has nothing to give or stays silent (as one whose configuration does
//! not have the newcomer in the tier yet does, until it has), and replays the log from
//! its first term when none gives a copy (every replica of the shard down: a
//! whole-cluster start).
//!
//! Invariant: a copy is a replica's state at one log position, which is a pure function
//! of the log prefix; so it is the state the newcomer would have reached by replaying.

use std::collections::BTreeMap;

use crate::types::{BookId, LogId, MetalogPosition, Micros, NodeId, Tag};

use super::postings::{Posting, Progress};
use super::IndexShard;

/// Streams or postings one piece carries at most (about 50 bytes each on the wire).
pub const PIECE_ITEMS: usize = 1 << 16;

/// A piece of a replica's state.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ShardPiece {
    /// Streams of the table: book, tag and the packed stream.
    Streams(Vec<(BookId, Tag, [u64; 3])>),
    /// Postings of one row, in order (a long row comes in several pieces).
    Row { book: BookId, tag: Tag, postings: Vec<Posting> },
    /// How far each log is applied and purged.
    Logs(Vec<(LogId, Progress)>),
}

impl IndexShard {
    /// The whole state in pieces of at most `max` items (the caller notes the
    /// positions it is at).
    pub fn export(&self, max: usize) -> Vec<ShardPiece> {
        let mut out = Vec::new();
        self.streams.export(max, &mut out);
        self.postings.export_rows(max, &mut out);
        out.push(ShardPiece::Logs(self.postings.export_logs()));
        out
    }

    /// The state `pieces` make, in order.
    pub fn import(shard: usize, shards: usize, dead_keep: usize, pieces: Vec<ShardPiece>) -> IndexShard {
        let mut s = IndexShard::new(shard, shards, dead_keep);
        for piece in pieces {
            match piece {
                ShardPiece::Streams(streams) => s.streams.import(streams),
                ShardPiece::Row { book, tag, postings } => s.postings.import_row(book, tag, postings),
                ShardPiece::Logs(logs) => s.postings.import_logs(logs),
            }
        }
        s
    }
}

/// A copy a replica gives: its state as of `at`, kept while the newcomer asks for it.
pub(super) struct Export {
    pub to: NodeId,
    pub req: u64,
    pub at: Vec<MetalogPosition>,
    pub pieces: Vec<ShardPiece>,
    pub asked_at: Micros,
}

/// A newcomer's copy under way.
pub(super) struct Copying {
    pub shard: usize,
    pub shards: usize,
    /// The other replicas of the shard, asked in turn.
    pub from: Vec<NodeId>,
    pub turn: usize,
    pub req: u64,
    pub at: Vec<MetalogPosition>,
    pub pieces: BTreeMap<u32, ShardPiece>,
    pub total: Option<u32>,
    pub asked_at: Micros,
    /// When the current replica was first asked (it is given up on after a while).
    pub since: Micros,
}

impl Copying {
    pub fn new(shard: usize, shards: usize, from: Vec<NodeId>, req: u64, now: Micros) -> Copying {
        Copying {
            shard,
            shards,
            from,
            turn: 0,
            req,
            at: Vec::new(),
            pieces: BTreeMap::new(),
            total: None,
            asked_at: 0,
            since: now,
        }
    }

    /// Gives up the current replica: the next one is asked, afresh, under `req`.
    pub fn next_donor(&mut self, req: u64, now: Micros) {
        self.turn += 1;
        self.req = req;
        self.at.clear();
        self.pieces.clear();
        self.total = None;
        self.asked_at = 0;
        self.since = now;
    }

    /// The piece to ask for next: the first one missing.
    pub fn next_piece(&self) -> u32 {
        (0..).find(|p| !self.pieces.contains_key(p)).expect("u32 pieces")
    }

    pub fn donor(&self) -> Option<NodeId> {
        self.from.get(self.turn).copied()
    }

    pub fn complete(&self) -> bool {
        self.total.is_some_and(|t| self.pieces.len() as u32 == t)
    }
}
