//! A function node's partial local index of one physical log (§5.1): the suffix, the
//! tag cache and the popularity cache, fed by decided updates, bounded in bytes, and the
//! first step of the read path (§5.4, the spec's item 5.1).
//!
//! It starts empty at the node's start position (no replay): the tag cache's watermark is
//! the first seqnum after it. A read at the caller's position p waits until the index's
//! position L reaches p; then the tag cache answers at L, or the popularity cache at
//! max(L, P0); a hit below p would break monotonic reads and is a miss. The caches keep a
//! record's storage shard as an index into one small table of shards, so evicting one
//! structure touches nothing in another.

use crate::types::{MetalogPosition, SeqNum, ShardId};

use super::popularity::{PopularityCache, ReadKey};
use super::suffix::Suffix;
use super::tags::{Local, TagBounds, TagCache};
use super::update::DecidedUpdate;

/// The bounds of a local index (`[index.local]`), the thesis's §7.1 defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalBounds {
    pub suffix_bytes: usize,
    pub tag_cache_bytes: usize,
    pub tag_bytes_max: usize,
    pub popularity_bytes: usize,
}

impl Default for LocalBounds {
    fn default() -> Self {
        LocalBounds { suffix_bytes: 2 << 20, tag_cache_bytes: 16 << 20, tag_bytes_max: 128 << 10, popularity_bytes: 1 << 20 }
    }
}

/// Which structure answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalPath {
    TagCache,
    Popularity,
}

/// A local read's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalRead {
    /// The index has not reached the caller's position yet.
    Wait,
    /// Answered: the record and its storage shard, or none, complete at `at`.
    Hit { found: Option<(SeqNum, ShardId)>, at: MetalogPosition, path: LocalPath },
    /// The index tier must answer.
    Miss,
}

#[derive(Debug)]
pub struct LocalIndex {
    suffix: Suffix,
    tags: TagCache,
    popularity: PopularityCache,
    /// The storage shards the caches name, by index.
    shards: Vec<ShardId>,
    position: MetalogPosition,
}

impl LocalIndex {
    /// An empty index of a node that starts at `position`, where the log's next seqnum
    /// is `next`.
    pub fn new(bounds: LocalBounds, position: MetalogPosition, next: SeqNum) -> LocalIndex {
        LocalIndex {
            suffix: Suffix::new(bounds.suffix_bytes),
            tags: TagCache::new(
                TagBounds { cache_bytes: bounds.tag_cache_bytes, stream_bytes: bounds.tag_bytes_max },
                position,
                next,
            ),
            popularity: PopularityCache::new(bounds.popularity_bytes, position),
            shards: Vec::new(),
            position,
        }
    }

    /// L.
    pub fn position(&self) -> MetalogPosition {
        self.position
    }

    /// The tag cache, for checks.
    pub fn tags(&self) -> &TagCache {
        &self.tags
    }

    /// Bytes per structure: suffix, tag cache, popularity cache.
    pub fn bytes(&self) -> (usize, usize, usize) {
        (self.suffix.bytes(), self.tags.bytes(), self.popularity.bytes())
    }

    fn shard_index(&mut self, shard: ShardId) -> u16 {
        match self.shards.iter().position(|&s| s == shard) {
            Some(i) => i as u16,
            None => {
                self.shards.push(shard);
                (self.shards.len() - 1) as u16
            }
        }
    }

    /// Applies the next entry's decided update (entries at or before L are duplicates,
    /// dropped).
    pub fn apply(&mut self, update: &DecidedUpdate) {
        if update.position <= self.position {
            return;
        }
        let runs: Vec<(u16, u64)> = update.runs.iter().map(|&(shard, n)| (self.shard_index(shard), n)).collect();
        let slots: Vec<u16> = runs.iter().flat_map(|&(slot, n)| std::iter::repeat_n(slot, n as usize)).collect();
        self.suffix.push(update.start, runs);
        self.tags.apply(update, &slots);
        for &(book, tag, point) in &update.trims {
            self.popularity.trim(book, tag, point);
        }
        self.popularity.advance(update.position);
        self.position = update.position;
    }

    /// Every entry before `at` is applied and none after the last one (a sealed term
    /// ended there): L moves to `at`.
    pub fn reach(&mut self, at: MetalogPosition) {
        if at > self.position {
            self.tags.reach(at);
            self.popularity.advance(at);
            self.position = at;
        }
    }

    /// The local answer to `read` for a caller at `p`. Below p, only a popularity hit
    /// answered at p or later can answer; otherwise the caller waits for L to reach p (at
    /// most `local_wait_us`, then the tier).
    pub fn read(&mut self, read: ReadKey, p: MetalogPosition) -> LocalRead {
        let behind = self.position < p;
        if !behind {
            let (book, tag, bound, next) = read;
            let local = if next { self.tags.read_next(book, tag, bound) } else { self.tags.read_prev(book, tag, bound) };
            if let Local::Hit(found) = local {
                let found = found.map(|(s, i)| (s, self.shards[usize::from(i)]));
                return LocalRead::Hit { found, at: self.position, path: LocalPath::TagCache };
            }
        }
        match self.popularity.get(read) {
            Some(hit) if hit.position >= p => LocalRead::Hit {
                found: Some((hit.seqnum, self.shards[usize::from(hit.shard)])),
                at: hit.position,
                path: LocalPath::Popularity,
            },
            _ if behind => LocalRead::Wait,
            _ => LocalRead::Miss,
        }
    }

    /// Keeps the tier's answer `found` in `shard` to `read`, answered as of `q`, where
    /// the first seqnum after `q` is `next_after`. An answer as of a position the index
    /// has passed is not kept: the trims between were applied before it came, so nothing
    /// would invalidate it.
    pub fn remember(&mut self, read: ReadKey, found: SeqNum, shard: ShardId, q: MetalogPosition, next_after: SeqNum) {
        if q < self.position {
            return;
        }
        let i = self.shard_index(shard);
        self.popularity.insert(read, found, i, q, next_after);
    }

    /// The storage shard of a recent seqnum, if the suffix reaches it.
    pub fn shard_of(&self, seqnum: SeqNum) -> Option<ShardId> {
        self.suffix.slot_of(seqnum).map(|i| self.shards[usize::from(i)])
    }
}
