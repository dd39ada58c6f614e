//! Metalog entries waiting for the metadata (book, tags, conditions) of their records,
//! per physical log, in order, and the fetches of what is missing from a replica of each
//! run's shard: what an indexer needs before it applies an entry.
//!
//! The caller knows its own records' metadata and hands the other runs' replicas; a
//! fetch goes to one replica at a time, in turn, asks again for what a partial reply
//! left out, and is resent after `fetch_retry_us` (at once after `MetaUnavailable`).
//! Replies for an entry no longer queued, of another shard or not at the run's next
//! record are stale and dropped.

use std::collections::{BTreeMap, VecDeque};

use crate::message::{Message, MetalogEntry, RecordMeta};
use crate::types::{LocalId, Location, LogId, Micros, NextTick, NodeId, ShardId, Term};

/// An entry waiting for its records' metadata, with what the caller keeps beside it.
pub(crate) struct Assembling<T> {
    pub entry: MetalogEntry,
    /// Per run: the location of its first record, its count, and the metas once known.
    pub runs: Vec<(Location, u64, Option<Vec<RecordMeta>>)>,
    pub extra: T,
}

impl<T> Assembling<T> {
    fn ready(&self) -> bool {
        self.runs.iter().all(|(_, c, m)| m.as_ref().is_some_and(|m| m.len() as u64 == *c))
    }
}

struct MetaFetch {
    log: LogId,
    entry: (Term, u64),
    run: usize,
    replicas: Vec<NodeId>,
    turn: usize,
    sent_at: Micros,
}

pub(crate) struct Assembly<T> {
    queues: Vec<VecDeque<Assembling<T>>>,
    fetches: BTreeMap<u64, MetaFetch>,
}

impl<T> Assembly<T> {
    pub fn new() -> Assembly<T> {
        Assembly { queues: Vec::new(), fetches: BTreeMap::new() }
    }

    fn queue(&mut self, log: LogId) -> &mut VecDeque<Assembling<T>> {
        let i = usize::from(log.0);
        if self.queues.len() <= i {
            self.queues.resize_with(i + 1, VecDeque::new);
        }
        &mut self.queues[i]
    }

    /// Whether no entry of `log` is waiting.
    pub fn is_empty(&self, log: LogId) -> bool {
        self.queues.get(usize::from(log.0)).is_none_or(VecDeque::is_empty)
    }

    /// What `log` waits for, for a log line: entries queued, and the first one's
    /// fetches in flight (replica asked last, times asked).
    pub fn describe(&self, log: LogId) -> String {
        let queued = self.queues.get(usize::from(log.0)).map_or(0, VecDeque::len);
        let fetches: Vec<String> = self
            .fetches
            .values()
            .filter(|f| f.log == log)
            .take(3)
            .map(|f| format!("{}.{} run {} of {:?} x{}", f.entry.0 .0, f.entry.1, f.run, f.replicas, f.turn))
            .collect();
        format!("{queued} queued, fetching [{}]", fetches.join(", "))
    }

    /// Queues `a` behind the log's earlier entries and fetches its runs `fetch` names
    /// (run, the replicas of its shard), numbering requests from `next_req`.
    pub fn push(
        &mut self,
        now: Micros,
        a: Assembling<T>,
        fetch: Vec<(usize, Vec<NodeId>)>,
        next_req: &mut u64,
    ) -> Vec<(NodeId, Message)> {
        let (log, entry) = (a.entry.log, (a.entry.term, a.entry.index));
        self.queue(log).push_back(a);
        let mut out = Vec::new();
        for (run, replicas) in fetch {
            let req = *next_req;
            *next_req += 1;
            self.fetches.insert(req, MetaFetch { log, entry, run, replicas, turn: 0, sent_at: 0 });
            out.extend(self.request(now, req));
        }
        out
    }

    /// The next request of fetch `req`, to the next replica in turn.
    fn request(&mut self, now: Micros, req: u64) -> Option<(NodeId, Message)> {
        let f = self.fetches.get_mut(&req)?;
        f.sent_at = now;
        let to = f.replicas[f.turn % f.replicas.len()];
        f.turn += 1;
        let (log, key, run) = (f.log, f.entry, f.run);
        let queue = self.queues.get(usize::from(log.0));
        let Some(a) = queue.and_then(|q| q.iter().find(|a| (a.entry.term, a.entry.index) == key)) else {
            self.fetches.remove(&req);
            return None;
        };
        let (first, count, ref metas) = a.runs[run];
        // Ask for what is still missing of the run (replies may cover part of it).
        let have = metas.as_ref().map_or(0, |m| m.len() as u64);
        let from = first.local_id + have;
        Some((to, Message::FetchMeta { req, shard: first.shard, from, to: first.local_id + count }))
    }

    /// Fetches not answered within `retry_us`, asked again of the next replica.
    pub fn retry(&mut self, now: Micros, retry_us: Micros) -> Vec<(NodeId, Message)> {
        let stale: Vec<u64> = self.fetches.iter().filter(|(_, f)| now >= f.sent_at + retry_us).map(|(r, _)| *r).collect();
        stale.into_iter().filter_map(|req| self.request(now, req)).collect()
    }

    /// When the fetches in flight fall due for a retry.
    pub fn next_due(&self, retry_us: Micros, next: &mut NextTick) {
        self.fetches.values().for_each(|f| next.at(f.sent_at + retry_us));
    }

    /// The replica asked cannot serve fetch `req`: the next tick asks the next one.
    pub fn unavailable(&mut self, req: u64) {
        if let Some(f) = self.fetches.get_mut(&req) {
            f.sent_at = 0;
        }
    }

    /// A reply to fetch `req`: the log whose entry it completed, if any, and the request
    /// for the rest of a partial reply.
    pub fn on_meta(
        &mut self,
        now: Micros,
        req: u64,
        shard: ShardId,
        start: LocalId,
        metas: Vec<RecordMeta>,
    ) -> (Option<LogId>, Option<(NodeId, Message)>) {
        let Some(f) = self.fetches.get(&req) else { return (None, None) };
        let (log, key, run) = (f.log, f.entry, f.run);
        let queue = self.queues.get_mut(usize::from(log.0));
        let Some(a) = queue.and_then(|q| q.iter_mut().find(|a| (a.entry.term, a.entry.index) == key)) else {
            self.fetches.remove(&req);
            return (None, None);
        };
        let (first, count, ref mut have) = a.runs[run];
        let got = have.get_or_insert_with(Vec::new);
        if shard != first.shard || start != first.local_id + got.len() as u64 {
            return (None, None); // a stale or duplicate reply
        }
        let room = (count - got.len() as u64) as usize;
        got.extend(metas.into_iter().take(room));
        if got.len() as u64 == count {
            self.fetches.remove(&req);
            return (Some(log), None);
        }
        // Partial reply: ask for the rest from the same replica.
        if let Some(f) = self.fetches.get_mut(&req) {
            f.turn = f.turn.saturating_sub(1);
        }
        (None, self.request(now, req))
    }

    /// The log's next entry, if its metadata is complete.
    pub fn pop_ready(&mut self, log: LogId) -> Option<Assembling<T>> {
        let queue = self.queues.get_mut(usize::from(log.0))?;
        if !queue.front()?.ready() {
            return None;
        }
        queue.pop_front()
    }
}
