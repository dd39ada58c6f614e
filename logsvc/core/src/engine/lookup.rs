//! Tier reads of partial mode (the spec's item 5): a lookup as of Q over one replica of
//! every index shard, combined here ([`Aggregator`], `aggregators = 0`) or by an
//! aggregator node the lookup names (`TierDone`, `TierRestart`), and the record read
//! from storage, or sent by storage when a shard or the aggregator asked for it.

use std::collections::HashMap;

use bytes::Bytes;

use super::partial::{read_key, TierRead};
use super::{Engine, ReadOp, RecordFetch};
use crate::error::Error;
use crate::index::Found;
use crate::message::{LogRecord, Message, Reply, StoredRead};
use crate::tier::{AggregatorAction, ShardAnswer};
use crate::types::{Location, LogId, MetalogPosition, Micros, NodeId, SeqNum, ShardId};

impl Engine {
    /// Answers a read with `found` (a seqnum and its storage shard), or none, as of
    /// `at`: from the cache, else from a replica of the shard. With `sent`, an index
    /// node asked a replica already, to answer our request `sent` (type 2): we wait for
    /// that, and ask another replica only if it does not come.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read_found(
        &mut self,
        now: Micros,
        log: LogId,
        r: ReadOp,
        found: Option<(SeqNum, ShardId)>,
        at: MetalogPosition,
        aux: Option<Bytes>,
        sent: Option<u64>,
    ) {
        let Some((seqnum, shard)) = found else {
            self.deadlines.remove(&(r.deadline, r.op));
            self.complete(r.op, Ok(Reply::Read(None)), log, at);
            return;
        };
        if let Some(c) = self.cache.get(seqnum) {
            if let Some((tags, data)) = &c.record {
                let aux = aux.or_else(|| c.aux.clone());
                let record = LogRecord { seqnum, tags: tags.clone(), data: data.clone(), aux };
                self.deadlines.remove(&(r.deadline, r.op));
                self.complete(r.op, Ok(Reply::Read(Some(record))), log, at);
                return;
            }
        }
        let replicas = self.shard_replicas.get(&shard).cloned().unwrap_or_default();
        if replicas.is_empty() {
            self.deadlines.remove(&(r.deadline, r.op));
            self.complete(r.op, Err(Error::Unavailable(format!("no replicas known for {shard:?}"))), log, at);
            return;
        }
        let found = Found { seqnum, location: Location { shard, local_id: 0 } };
        let (op, request, deadline) = (r.op, r.request, r.deadline);
        if let Some(req) = sent {
            // The index node asked replica `req` (modulo); a retry starts at the next.
            let turn = req as usize + 1;
            let fetch = RecordFetch { op, log, request, found, position: at, replicas, turn, sent_at: now, deadline, aux };
            self.record_fetches.insert(req, fetch);
            return;
        }
        let req = self.next_req;
        self.next_req += 1;
        let turn = self.id.0 as usize;
        let fetch = RecordFetch { op, log, request, found, position: at, replicas, turn, sent_at: 0, deadline, aux };
        self.record_fetches.insert(req, fetch);
        self.send_record_fetch(now, req);
    }

    /// A record a storage node sent for our tier lookup `req` before the index node's
    /// answer that it would (type 2) came: kept until that answer.
    pub(super) fn early_record(&mut self, req: u64, seqnum: SeqNum, read: StoredRead) {
        let Some(t) = self.partial.as_mut().and_then(|p| p.reads.get_mut(&req)) else { return };
        if let StoredRead::Found(record) = read {
            if t.request.book() == record.meta.book {
                t.early = Some((seqnum, record));
            }
        }
    }

    /// Asks the index tier, as of Q = max(p, our metalog position).
    pub(super) fn tier_read(&mut self, now: Micros, log: LogId, r: ReadOp) {
        let q = r.wait_for.max(self.logs[usize::from(log.0)].applied);
        let req = self.next_req;
        self.next_req += 1;
        let read = read_key(&r.request);
        let fetch = self.cache.get(read.2).is_none_or(|c| c.record.is_none());
        let Some(p) = self.partial.as_mut() else { return };
        p.stats.tier_reads += 1;
        let t = TierRead { op: r.op, log, request: r.request, deadline: r.deadline, aux: HashMap::new(), fetch, early: None };
        p.reads.insert(req, t);
        let mut out = Vec::new();
        p.aggregator.start(now, req, read, q, &mut out);
        self.aggregator_actions(now, out);
    }

    pub(super) fn aggregator_actions(&mut self, now: Micros, out: Vec<AggregatorAction>) {
        for a in out {
            match a {
                AggregatorAction::Ask { lookup, round, shard, attempt, read: (book, tag, bound, next), q } => {
                    let Some(t) = self.partial.as_ref().and_then(|p| p.reads.get(&lookup)) else { continue };
                    let (log, fetch) = (t.log, t.fetch);
                    // Every shard of a round names one aggregator: the asks of a lookup
                    // go out together, so their attempts move in step.
                    let aggregator = self.tier_aggregator(lookup, attempt as usize);
                    if let Some(to) = self.tier_replica(shard, attempt as usize) {
                        let shard = shard as u16;
                        let m =
                            Message::TierLookup { req: lookup, round, shard, log, book, tag, bound, next, q, fetch, aggregator };
                        self.send(to, m);
                    }
                }
                AggregatorAction::Read { lookup, found, q } => self.tier_found(now, lookup, found, q, false, false),
                AggregatorAction::Done { lookup, found, q } => self.tier_found(now, lookup, found, q, true, true),
                AggregatorAction::None { lookup, q } => {
                    let Some(t) = self.partial.as_mut().and_then(|p| p.reads.remove(&lookup)) else { continue };
                    self.deadlines.remove(&(t.deadline, t.op));
                    self.complete(t.op, Ok(Reply::Read(None)), t.log, q);
                }
            }
        }
    }

    /// Tier read `lookup`'s answer as of `q`: `found`, which storage was asked to send
    /// us if `sent` and we asked for it (a shard holding the bound, or an aggregator).
    fn tier_found(&mut self, now: Micros, lookup: u64, found: Found, q: MetalogPosition, exact: bool, sent: bool) {
        let Some(mut t) = self.partial.as_mut().and_then(|p| p.reads.remove(&lookup)) else { return };
        let early = t.early.take();
        let sent = (sent && t.fetch).then_some(lookup);
        let aux = t.aux.get(&found.seqnum).cloned();
        let read = read_key(&t.request);
        let (_, next_after) = self.partial.as_ref().expect("partial").last_entry[usize::from(t.log.0)];
        let applied = self.logs[usize::from(t.log.0)].applied;
        let p = self.partial.as_mut().expect("partial");
        // Only an answer later records cannot change is kept (the cache checks).
        let next_after = if q == applied { next_after } else { SeqNum::MIN };
        p.feeds[usize::from(t.log.0)].index.remember(read, found.seqnum, found.location.shard, q, next_after);
        p.stats.exact_reads += u64::from(exact);
        let r = ReadOp { op: t.op, request: t.request, wait_for: q, deadline: t.deadline };
        self.read_found(now, t.log, r, Some((found.seqnum, found.location.shard)), q, aux, sent);
        if let (Some(req), Some((seqnum, record))) = (sent, early) {
            self.on_record(now, req, seqnum, StoredRead::Found(record));
        }
    }

    /// The aggregator a lookup's asks name in attempt `attempt`: round-robin per
    /// lookup, the next one on each retry; `None` with no aggregators (we aggregate).
    fn tier_aggregator(&self, lookup: u64, attempt: usize) -> Option<NodeId> {
        let aggregators = &self.config.as_ref()?.tier.as_ref()?.aggregators;
        (!aggregators.is_empty()).then(|| aggregators[(lookup as usize + attempt) % aggregators.len()])
    }

    /// An aggregator's answer to round `round` of lookup `req`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_tier_done(
        &mut self,
        now: Micros,
        req: u64,
        round: u32,
        found: Option<Found>,
        q: MetalogPosition,
        aux: Option<Bytes>,
        sent: bool,
    ) {
        let Some(p) = self.partial.as_mut() else { return };
        if p.aggregator.round(req) != Some(round) {
            return; // late, duplicate, or of an earlier round
        }
        p.aggregator.cancel(req);
        match found {
            Some(f) => {
                if let (Some(t), Some(aux)) = (p.reads.get_mut(&req), aux) {
                    t.aux.insert(f.seqnum, aux);
                }
                self.tier_found(now, req, f, q, false, sent);
            }
            None => {
                let Some(t) = p.reads.remove(&req) else { return };
                self.deadlines.remove(&(t.deadline, t.op));
                self.complete(t.op, Ok(Reply::Read(None)), t.log, q);
            }
        }
    }

    /// An aggregator met a shard that answers nothing older than `floor`: the lookup
    /// starts again as of it, every shard asked.
    pub(super) fn on_tier_restart(&mut self, now: Micros, req: u64, round: u32, floor: MetalogPosition) {
        let Some(p) = self.partial.as_mut() else { return };
        let mut out = Vec::new();
        p.aggregator.answer(now, req, round, 0, ShardAnswer::TooOld(floor), &mut out);
        self.aggregator_actions(now, out);
    }

    pub(super) fn on_tier_answer(
        &mut self,
        now: Micros,
        req: u64,
        round: u32,
        shard: u16,
        answer: ShardAnswer,
        aux: Option<Bytes>,
    ) {
        let Some(p) = self.partial.as_mut() else { return };
        if let (Some(t), Some(aux), ShardAnswer::Exact(f) | ShardAnswer::Closest(Some(f))) = (p.reads.get_mut(&req), aux, answer)
        {
            t.aux.insert(f.seqnum, aux);
        }
        let mut out = Vec::new();
        p.aggregator.answer(now, req, round, usize::from(shard), answer, &mut out);
        self.aggregator_actions(now, out);
    }
}
