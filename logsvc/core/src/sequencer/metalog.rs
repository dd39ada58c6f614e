//! A sequencer's copy of one metalog (per term and log): its entries in memory from
//! some index on, what is committed and acknowledged, and the primary's state when
//! this replica leads it.

use std::collections::VecDeque;

use super::*;

pub(super) struct Inflight {
    pub(super) len: u64,
    /// The replicas holding the entry, in the order they acknowledged: this one first.
    pub(super) acks: Vec<NodeId>,
    pub(super) sent_at: Micros,
}

pub(super) struct Primary {
    /// For each shard, the prefix each replica (config order) holds, durable or being
    /// written: what the next entry may order.
    pub(super) held: Vec<Vec<LocalId>>,
    pub(super) inflight: Option<Inflight>,
    /// The backups that persist the next entry at once (the quorum's, besides this
    /// replica); the others get it as a spare.
    pub(super) eager: Vec<NodeId>,
    pub(super) trims: Vec<TrimCommand>,
    pub(super) last_push: Micros,
    /// An entry committed since the last tail push: the next one comes
    /// `tail_interval_us` after the last (the push of the entry itself may have been
    /// lost); with no news, with the next heartbeat, so an idle log costs few messages.
    pub(super) tail_news: bool,
    pub(super) stopped: bool,
}

pub(super) struct Metalog {
    /// The entries from index `first` on; the ones before are only in the store.
    pub(super) entries: VecDeque<MetalogEntry>,
    pub(super) first: u64,
    pub(super) committed_len: u64,
    pub(super) sealed: bool,
    /// Set once a configuration carries this metalog's final tail.
    pub(super) finalized: bool,
    /// This replica has led the metalog (its lead mark is persisted, or recovered).
    pub(super) led: bool,
    pub(super) primary: Option<Primary>,
    /// Spare entries held in memory only (see the module docs).
    pub(super) spares: Option<Spares>,
    /// For each shard, the durable prefix each replica (config order) reported: an
    /// entry is acknowledged (by a backup) or committed (by the primary) only once it
    /// covers the entry's records. Empty until the first report.
    pub(super) durable: Vec<Vec<LocalId>>,
    /// The longest prefix this replica acknowledged to its primary.
    pub(super) acked_len: u64,
}

/// A backup's spare entries, from index `from` on: held since `since`, to be
/// acknowledged to `primary` once persisted.
#[derive(Clone, Copy, Debug)]
pub(super) struct Spares {
    pub(super) from: u64,
    pub(super) since: Micros,
    pub(super) primary: NodeId,
}

impl Metalog {
    pub(super) fn new() -> Metalog {
        Metalog {
            entries: VecDeque::new(),
            first: 0,
            committed_len: 0,
            sealed: false,
            finalized: false,
            led: false,
            primary: None,
            spares: None,
            durable: Vec::new(),
            acked_len: 0,
        }
    }

    /// Whether the durable progress reported covers `entry`'s records.
    pub(super) fn witnessed(&self, entry: &MetalogEntry) -> bool {
        entry.prev_cut.iter().zip(&entry.cut).enumerate().all(|(j, (&prev, &cut))| {
            cut <= prev || self.durable.get(j).is_some_and(|replicas| replicas.iter().all(|&d| d >= cut))
        })
    }

    /// The longest prefix a backup may acknowledge: persisted (spares are not yet),
    /// and every entry past the committed ones witnessed durable.
    pub(super) fn ackable_len(&self) -> u64 {
        let persisted = self.spares.map_or(self.len(), |s| s.from);
        let mut len = self.committed_len.max(self.first).min(persisted);
        while len < persisted && self.get(len).is_some_and(|e| self.witnessed(e)) {
            len += 1;
        }
        len
    }

    pub(super) fn len(&self) -> u64 {
        self.first + self.entries.len() as u64
    }

    pub(super) fn last(&self) -> Option<&MetalogEntry> {
        self.entries.back()
    }

    pub(super) fn get(&self, index: u64) -> Option<&MetalogEntry> {
        self.entries.get(usize::try_from(index.checked_sub(self.first)?).ok()?)
    }

    /// Entries `from..end`, or `None` if some have left memory.
    pub(super) fn range(&self, from: u64, end: u64) -> Option<Vec<MetalogEntry>> {
        let skip = from.checked_sub(self.first)? as usize;
        Some(self.entries.iter().skip(skip).take(end.saturating_sub(from) as usize).cloned().collect())
    }

    /// Drops the entries from index `len` on (an uncommitted tail, never one that left
    /// memory).
    pub(super) fn truncate(&mut self, len: u64) {
        assert!(len >= self.first, "only entries still in memory are truncated");
        self.entries.truncate((len - self.first) as usize);
    }

    /// Lets committed entries older than the newest `kept` leave memory (the last one
    /// stays: the next entry continues its cut).
    /// Spare entries not yet persisted stay too.
    pub(super) fn forget(&mut self, kept: u64) {
        let mut keep_from = self.committed_len.saturating_sub(kept.max(1));
        if let Some(spares) = self.spares {
            keep_from = keep_from.min(spares.from);
        }
        while self.first < keep_from && self.entries.len() > 1 {
            self.entries.pop_front();
            self.first += 1;
        }
    }

    /// Appends an entry. Callers check the seal: replication refuses entries of a sealed
    /// metalog, while finalisation (and its replay after a restart) adds the last one.
    pub(super) fn push(&mut self, entry: MetalogEntry) {
        assert_eq!(entry.index, self.len(), "metalog entries are contiguous");
        if let Some(prev) = self.entries.back() {
            // A later version's shards join the cut at zero.
            let (kept, added) = entry.prev_cut.split_at(prev.cut.len().min(entry.prev_cut.len()));
            assert!(kept == prev.cut && added.iter().all(|&c| c == 0), "an entry continues the previous cut");
            assert!(entry.version >= prev.version, "versions never go back");
            assert_eq!(entry.start_position, prev.start_position + prev.record_count());
        }
        assert!(entry.cut.iter().zip(&entry.prev_cut).all(|(c, p)| c >= p), "cuts never decrease");
        self.entries.push_back(entry);
    }
}
