//! Decided updates in transit (the spec's item 3): an index node keeps its recent ones,
//! within a byte budget (`update_keep_bytes`), for function nodes that missed some; a
//! function node applies them to its local index in order, whatever order, duplicates or
//! gaps the network brings, fetches what is missing, and when that is gone, drops its
//! local index and starts it again, empty, at its current position: the local index is a
//! cache, never ground truth.

use std::collections::{BTreeMap, VecDeque};

use crate::types::{LogId, MetalogPosition, SeqNum};

use super::local::{LocalBounds, LocalIndex};
use super::update::DecidedUpdate;

/// An index node's recent decided updates of one log.
#[derive(Debug)]
pub struct UpdateLog {
    bytes_max: usize,
    bytes: usize,
    kept: VecDeque<DecidedUpdate>,
}

/// What an index node answers a fetch of the updates after a position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Since {
    /// The updates after it, in order (none if it is the newest).
    Updates(Vec<DecidedUpdate>),
    /// Some of them are no longer kept.
    Gone,
}

impl UpdateLog {
    pub fn new(bytes_max: usize) -> UpdateLog {
        UpdateLog { bytes_max, bytes: 0, kept: VecDeque::new() }
    }

    /// Keeps the newest update, letting the oldest go past the budget.
    pub fn push(&mut self, update: DecidedUpdate) {
        self.bytes += update.bytes();
        self.kept.push_back(update);
        while self.bytes > self.bytes_max && self.kept.len() > 1 {
            let old = self.kept.pop_front().expect("more than one");
            self.bytes -= old.bytes();
        }
    }

    /// The updates after `after`, at most `max` of them.
    pub fn since(&self, after: MetalogPosition, max: usize) -> Since {
        if self.kept.is_empty() {
            return Since::Gone;
        }
        // The first kept update after `after` must follow it (or the last entry before
        // it, when `after` is a term's start): else some are gone.
        let from = self.kept.partition_point(|u| u.position <= after);
        match self.kept.get(from) {
            Some(u) if u.prev > after => Since::Gone,
            _ => Since::Updates(self.kept.range(from..).take(max).cloned().collect()),
        }
    }
}

/// What the feed asks of its driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedNeed {
    Nothing,
    /// Fetch the updates after this position from any index node.
    Fetch(MetalogPosition),
}

/// A function node's local index of one log, fed by decided updates.
#[derive(Debug)]
pub struct UpdateFeed {
    pub log: LogId,
    bounds: LocalBounds,
    pub index: LocalIndex,
    /// Updates that arrived ahead of a gap, by the position they follow.
    ahead: BTreeMap<MetalogPosition, DecidedUpdate>,
    /// How many updates it keeps ahead of a gap at most.
    ahead_max: usize,
    /// Restarts of the local index so far (updates were gone).
    pub restarts: u64,
}

impl UpdateFeed {
    /// A feed whose index starts empty at `position`, where `next` is the log's next
    /// seqnum.
    pub fn new(log: LogId, bounds: LocalBounds, position: MetalogPosition, next: SeqNum) -> UpdateFeed {
        UpdateFeed {
            log,
            bounds,
            index: LocalIndex::new(bounds, position, next),
            ahead: BTreeMap::new(),
            ahead_max: 1024,
            restarts: 0,
        }
    }

    /// An update arrived: applied if it is the next one (and those it unblocks), kept if
    /// it is ahead of a gap, dropped if it is old.
    pub fn offer(&mut self, update: DecidedUpdate) -> FeedNeed {
        let at = self.index.position();
        if update.position <= at {
            return FeedNeed::Nothing;
        }
        if update.prev > at {
            if self.ahead.len() < self.ahead_max {
                self.ahead.insert(update.prev, update);
            }
            return FeedNeed::Fetch(at);
        }
        self.index.apply(&update);
        self.apply_ahead()
    }

    /// Every entry before `at` is applied and none came after the last one (the
    /// follower passed a sealed term's end): L moves there.
    pub fn reach(&mut self, at: MetalogPosition) -> FeedNeed {
        self.index.reach(at);
        self.apply_ahead()
    }

    /// Applies the updates kept ahead that now follow L.
    fn apply_ahead(&mut self) -> FeedNeed {
        loop {
            let at = self.index.position();
            let Some((&prev, _)) = self.ahead.range(..=at).next_back() else { break };
            let next = self.ahead.remove(&prev).expect("found");
            if next.position > at {
                self.index.apply(&next);
            }
        }
        let at = self.index.position();
        self.ahead.retain(|_, u| u.position > at);
        if self.ahead.is_empty() {
            FeedNeed::Nothing
        } else {
            FeedNeed::Fetch(at)
        }
    }

    /// The updates it needed are gone: the local index starts again, empty, at
    /// `position` (the node's metalog position), where `next` is the log's next seqnum.
    pub fn restart(&mut self, position: MetalogPosition, next: SeqNum) {
        self.index = LocalIndex::new(self.bounds, position, next);
        self.ahead.retain(|_, u| u.position > position);
        self.restarts += 1;
    }
}
