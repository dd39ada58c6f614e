//! The engine in partial mode (INDILOG, the spec's items 3-7): no complete index, no
//! metadata fetches, no conditions decided here.
//!
//! The engine still follows every metalog (its plain appends complete at their entry,
//! its trims at theirs), and keeps per log a bounded local index fed by the index
//! nodes' decided updates ([`UpdateFeed`]): pushed by the first replica of each entry's
//! index shard, fetched from any index node when one is missing, and when they are
//! gone the local index starts again, empty, at the engine's metalog position.
//!
//! A read at the caller's position p (never below the read floor) waits for the local
//! index to reach p, at most `local_wait_us`; a local hit completes at the position the
//! local index answers at. Otherwise the engine aggregates a lookup as of
//! Q = max(p, its metalog position) over one replica of every index shard
//! ([`Aggregator`]), reads the record from a replica of its storage shard, and completes
//! at Q. Aux data goes to every replica of every shard; the one that holds the record
//! live in the caller's book at Q keeps it. A conditional append completes when the
//! decided update of its entry arrives: placed, or failed with the holder the stream
//! table names or the shards' postings hold (a holder lookup).

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use super::{Engine, OpId, ReadOp};
use crate::config::Configuration;
use crate::error::Error;
use crate::message::{Cond, LogRecord, Message, Record, Reply, Request};
use crate::tier::{Aggregator, DecidedUpdate, FeedNeed, Holder, LocalBounds, LocalRead, LookupId, UpdateFeed};
use crate::types::{BookId, LogId, MetalogPosition, Micros, NextTick, NodeId, SeqNum, ShardId, Tag};

/// Updates kept ahead of the engine's metalog position for its own conditional appends.
const EARLY_MAX: usize = 4096;

/// Reads answered per path, for metrics and the simulator's sweep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartialStats {
    pub tag_hits: u64,
    pub popularity_hits: u64,
    pub tier_reads: u64,
    /// Tier reads a shard holding the bound answered (type 2).
    pub exact_reads: u64,
    /// Lookups asked again of shards that were silent for `lookup_retry_us`.
    pub tier_resends: u64,
    pub local_restarts: u64,
    pub holder_lookups: u64,
    /// Logs this node started following mid-term (it joined through a version).
    pub mid_term_starts: u64,
}

impl PartialStats {
    pub fn add(&mut self, other: &PartialStats) {
        self.tag_hits += other.tag_hits;
        self.popularity_hits += other.popularity_hits;
        self.tier_reads += other.tier_reads;
        self.exact_reads += other.exact_reads;
        self.tier_resends += other.tier_resends;
        self.local_restarts += other.local_restarts;
        self.holder_lookups += other.holder_lookups;
        self.mid_term_starts += other.mid_term_starts;
    }
}

pub(super) struct TierRead {
    pub(super) op: OpId,
    pub(super) log: LogId,
    pub(super) request: Request,
    pub(super) deadline: Micros,
    /// Aux data the shards sent with their candidates.
    pub(super) aux: HashMap<SeqNum, Bytes>,
    /// Whether a shard holding the bound should have storage send us the record (not
    /// when our cache has it).
    pub(super) fetch: bool,
    /// That record, when storage sent it before the shard's answer came.
    pub(super) early: Option<(SeqNum, Record)>,
}

/// A conditional append of ours, ordered, waiting for its entry's decided update.
struct CondWait {
    op: OpId,
    log: LogId,
    book: BookId,
    tags: Vec<Tag>,
    data: Bytes,
    /// The position after the log's entry before (what to fetch the update after).
    prev: MetalogPosition,
    asked_at: Micros,
}

/// A failed condition whose holder the shards' postings know.
struct HolderWait {
    op: OpId,
    log: LogId,
    seqnum: SeqNum,
    cond: Cond,
    book: BookId,
    at: MetalogPosition,
    answers: Vec<Option<Option<SeqNum>>>,
    attempt: usize,
    sent_at: Micros,
}

struct AuxWait {
    op: OpId,
    log: LogId,
    book: BookId,
    seqnum: SeqNum,
    aux: Bytes,
    q: MetalogPosition,
    answers: Vec<Option<bool>>,
    sent_at: Micros,
}

pub(super) struct Partial {
    bounds: Option<LocalBounds>,
    pub(super) feeds: Vec<UpdateFeed>,
    /// Per log: the position after the last entry delivered, and the seqnum after it.
    pub(super) last_entry: Vec<(MetalogPosition, SeqNum)>,
    /// Per log: the update fetch in flight (request, when sent), and when the local
    /// index last moved.
    fetching: Vec<Option<(u64, Micros)>>,
    /// Update fetches not answered yet, by request: any of them may answer (a fetch to
    /// a replica that is down must not hide the answer of one that is up).
    outstanding: BTreeMap<u64, LogId>,
    moved_at: Vec<Micros>,
    fetch_turn: usize,
    pub(super) aggregator: Aggregator,
    // Ordered maps: what a tick resends goes out in one order, so a seed replays.
    pub(super) reads: BTreeMap<LookupId, TierRead>,
    /// Reads waiting for the local index to reach their position, until a time.
    local_waits: Vec<(LogId, ReadOp, Micros)>,
    conds: BTreeMap<SeqNum, CondWait>,
    /// Decided updates of entries not delivered yet that order records of ours.
    early: BTreeMap<(LogId, MetalogPosition), DecidedUpdate>,
    holders: BTreeMap<u64, HolderWait>,
    auxes: BTreeMap<u64, AuxWait>,
    pub stats: PartialStats,
}

impl Partial {
    pub(super) fn new(shards: usize, bounds: Option<LocalBounds>, retry_us: Micros) -> Partial {
        Partial {
            bounds,
            feeds: Vec::new(),
            last_entry: Vec::new(),
            fetching: Vec::new(),
            outstanding: BTreeMap::new(),
            moved_at: Vec::new(),
            fetch_turn: 0,
            aggregator: Aggregator::new(shards, retry_us),
            reads: BTreeMap::new(),
            local_waits: Vec::new(),
            conds: BTreeMap::new(),
            early: BTreeMap::new(),
            holders: BTreeMap::new(),
            auxes: BTreeMap::new(),
            stats: PartialStats::default(),
        }
    }

    /// The local index of `log`, if the engine keeps one.
    pub fn local(&self, log: LogId) -> Option<&crate::tier::LocalIndex> {
        self.bounds.and(self.feeds.get(usize::from(log.0)).map(|f| &f.index))
    }

    /// Bytes of the local index of `log`: suffix, tag cache, popularity cache.
    pub fn local_bytes(&self, log: LogId) -> Option<(usize, usize, usize)> {
        self.feeds.get(usize::from(log.0)).map(|f| f.index.bytes())
    }
}

/// Bounds of a local index that holds nothing: a node without one still follows the
/// decided updates' positions.
const NO_LOCAL: LocalBounds = LocalBounds { suffix_bytes: 0, tag_cache_bytes: 0, tag_bytes_max: 0, popularity_bytes: 0 };

impl Engine {
    /// Sets partial mode up for a configuration with an index tier (its new logs too).
    pub(super) fn partial_on_config(&mut self, config: &Configuration) {
        let Some(tier) = &config.tier else { return };
        let shards = tier.shards.len();
        let p = self.partial.get_or_insert_with(|| Partial::new(shards, self.cfg.local_index, self.cfg.lookup_retry_us));
        while p.feeds.len() < usize::from(config.n_logs) {
            let log = LogId(p.feeds.len() as u8);
            let first = config.first_term_of(log).expect("the configuration has its logs");
            let at = MetalogPosition::new(first, 0);
            let next = SeqNum::new(first, log, 0);
            p.feeds.push(UpdateFeed::new(log, p.bounds.unwrap_or(NO_LOCAL), at, next));
            p.last_entry.push((at, next));
            p.fetching.push(None);
            p.moved_at.push(0);
        }
    }

    /// The follower found `log`'s start at `at` (the next record: `next`): the local
    /// index starts there, empty, and answers nothing before it.
    pub(super) fn partial_anchored(&mut self, log: LogId, at: MetalogPosition, next: SeqNum) {
        let Some(p) = self.partial.as_mut() else { return };
        p.stats.mid_term_starts += u64::from(at.index > 0);
        let i = usize::from(log.0);
        p.feeds[i].restart(at, next);
        p.last_entry[i] = (at, next);
    }

    pub(super) fn tier_replica(&self, shard: usize, attempt: usize) -> Option<NodeId> {
        let replicas = self.config.as_ref()?.tier.as_ref()?.shards.get(shard)?;
        replicas.get((attempt + self.id.0 as usize) % replicas.len().max(1)).copied()
    }

    fn tier_shards(&self) -> usize {
        self.config.as_ref().and_then(|c| c.tier.as_ref()).map_or(0, |t| t.shards.len())
    }

    /// The follower delivered an entry of `log` ending at `at`, whose seqnums end
    /// before `next`; `ours` are our conditional records it orders.
    pub(super) fn partial_delivered(
        &mut self,
        now: Micros,
        log: LogId,
        at: MetalogPosition,
        next: SeqNum,
        ours: Vec<(SeqNum, OpId, BookId, Vec<Tag>, Bytes)>,
    ) {
        let Some(p) = self.partial.as_mut() else { return };
        let prev = p.last_entry[usize::from(log.0)].0;
        p.last_entry[usize::from(log.0)] = (at, next);
        for (seqnum, op, book, tags, data) in ours {
            p.conds.insert(seqnum, CondWait { op, log, book, tags, data, prev, asked_at: now });
        }
        if let Some(update) = p.early.remove(&(log, at)) {
            self.settle_conds(now, &update);
        }
        let p = self.partial.as_mut().expect("checked");
        p.early.retain(|&(l, pos), _| l != log || pos > at);
    }

    /// The follower passed the end of a sealed term of `log`: with every entry before
    /// applied, the local index moves to `at` too.
    pub(super) fn partial_reached(&mut self, now: Micros, log: LogId, at: MetalogPosition) {
        let Some(p) = self.partial.as_mut() else { return };
        let i = usize::from(log.0);
        if p.feeds[i].index.position() >= p.last_entry[i].0 {
            let need = p.feeds[i].reach(at);
            self.feed_need(now, log, need);
            self.run_local_waits(now, log);
        }
    }

    /// A decided update arrived (pushed or fetched).
    fn on_update(&mut self, now: Micros, update: DecidedUpdate) {
        let log = update.log;
        // An entry of a term this engine has no configuration for: books may have moved
        // to a log added there, so the local index must not answer for them past it.
        // Dropped; it is fetched again once the follower delivers that term.
        let current = self.config.as_ref().map_or(0, |c| c.current().term.0);
        // Seeking its start, the follower has delivered nothing to measure it against:
        // the local index starts, empty, where the follower does.
        if update.position.term > current || self.follower.seeking(log) {
            return;
        }
        let Some(p) = self.partial.as_mut() else { return };
        let i = usize::from(log.0);
        if i >= p.feeds.len() {
            return; // a log this engine has not heard of yet
        }
        // Our conditional appends in it: settled now, or kept until their entry comes.
        if update.position > p.last_entry[i].0 {
            let ours: Vec<ShardId> = self.logs.iter().flat_map(|l| l.shard.iter().chain(&l.retiring)).map(|s| s.shard).collect();
            let p = self.partial.as_mut().expect("checked");
            if update.runs.iter().any(|(s, _)| ours.contains(s)) && p.early.len() < EARLY_MAX {
                p.early.insert((log, update.position), update.clone());
            }
        } else {
            self.settle_conds(now, &update);
        }
        let p = self.partial.as_mut().expect("checked");
        let before = p.feeds[i].index.position();
        let need = p.feeds[i].offer(update);
        if p.feeds[i].index.position() > before {
            p.moved_at[i] = now;
            // At the last entry delivered, with the follower past a sealed term's end.
            let (last, _) = p.last_entry[i];
            let delivered = self.follower.delivered(log);
            let p = self.partial.as_mut().expect("checked");
            if p.feeds[i].index.position() >= last && delivered > last {
                p.feeds[i].reach(delivered);
            }
        }
        self.feed_need(now, log, need);
        self.run_local_waits(now, log);
    }

    fn feed_need(&mut self, now: Micros, log: LogId, need: FeedNeed) {
        let FeedNeed::Fetch(after) = need else { return };
        if self.follower.seeking(log) {
            return; // the local index starts where the follower does
        }
        let i = usize::from(log.0);
        let Some(p) = self.partial.as_ref() else { return };
        if p.fetching[i].is_some_and(|(_, at)| now < at + self.cfg.lookup_retry_us) {
            return;
        }
        self.fetch_updates(now, log, after);
    }

    fn fetch_updates(&mut self, now: Micros, log: LogId, after: MetalogPosition) {
        let shards = self.tier_shards();
        let Some(p) = self.partial.as_mut() else { return };
        p.fetch_turn += 1;
        let turn = p.fetch_turn;
        let Some(to) = self.tier_replica(turn % shards.max(1), turn / shards.max(1)) else { return };
        let req = self.next_req;
        self.next_req += 1;
        let p = self.partial.as_mut().expect("checked");
        p.fetching[usize::from(log.0)] = Some((req, now));
        // Requests of replicas that never answered are forgotten past a bound.
        if p.outstanding.len() >= 64 {
            p.outstanding.pop_first();
        }
        p.outstanding.insert(req, log);
        self.send(to, Message::UpdateFetch { req, log, after });
    }

    fn on_updates_fetched(&mut self, now: Micros, req: u64, log: LogId, updates: Option<Vec<DecidedUpdate>>) {
        let Some(p) = self.partial.as_mut() else { return };
        let i = usize::from(log.0);
        if p.outstanding.remove(&req) != Some(log) {
            return;
        }
        if p.fetching.get(i).copied().flatten().is_some_and(|f| f.0 == req) {
            p.fetching[i] = None;
        }
        match updates {
            Some(updates) => {
                for u in updates {
                    self.on_update(now, u);
                }
            }
            None => {
                // Gone: the local index starts again, empty, at our metalog position.
                let (at, next) = p.last_entry[i];
                let delivered = self.follower.delivered(log);
                let p = self.partial.as_mut().expect("checked");
                p.feeds[i].restart(at, next);
                p.stats.local_restarts += 1;
                p.moved_at[i] = now;
                if delivered > at {
                    p.feeds[i].reach(delivered);
                }
                self.run_local_waits(now, log);
            }
        }
    }

    /// Completes our conditional appends that `update` decides.
    fn settle_conds(&mut self, now: Micros, update: &DecidedUpdate) {
        for r in &update.records {
            let Some(p) = self.partial.as_mut() else { return };
            let Some(c) = p.conds.remove(&r.seqnum) else { continue };
            if !self.appends_in_flight.contains_key(&c.op) {
                continue; // timed out
            }
            match (&r.joined, r.failed) {
                (Some(_), _) => {
                    self.appends_in_flight.remove(&c.op);
                    self.cache.put_record(r.seqnum, c.book, c.tags.clone(), c.data.clone());
                    self.complete(c.op, Ok(Reply::Appended(r.seqnum)), c.log, update.position);
                }
                (None, Some((_, Holder::None))) | (None, None) => {
                    self.appends_in_flight.remove(&c.op);
                    self.complete(c.op, Err(Error::Conflict { holder: None }), c.log, update.position);
                }
                (None, Some((_, Holder::Known(holder)))) => {
                    self.appends_in_flight.remove(&c.op);
                    self.complete(c.op, Err(Error::Conflict { holder: Some(holder) }), c.log, update.position);
                }
                (None, Some((cond, Holder::Lookup))) => {
                    let shards = self.tier_shards();
                    let req = self.next_req;
                    self.next_req += 1;
                    let (op, log, seqnum, book, at) = (c.op, c.log, r.seqnum, r.book, update.position);
                    let h = HolderWait { op, log, seqnum, cond, book, at, answers: vec![None; shards], attempt: 0, sent_at: now };
                    let p = self.partial.as_mut().expect("checked");
                    p.stats.holder_lookups += 1;
                    p.holders.insert(req, h);
                    self.send_holder_lookups(now, req);
                }
            }
        }
    }

    fn send_holder_lookups(&mut self, now: Micros, req: u64) {
        let Some(h) = self.partial.as_mut().and_then(|p| p.holders.get_mut(&req)) else { return };
        h.sent_at = now;
        h.attempt += 1;
        let (attempt, log, book, tag, offset, before, at) =
            (h.attempt, h.log, h.book, h.cond.tag, h.cond.position, h.seqnum, h.at);
        let missing: Vec<usize> = h.answers.iter().enumerate().filter(|(_, a)| a.is_none()).map(|(s, _)| s).collect();
        for s in missing {
            if let Some(to) = self.tier_replica(s, attempt) {
                let shard = s as u16;
                self.send(to, Message::HolderLookup { req, shard, log, book, tag, offset, before, at });
            }
        }
    }

    fn on_holder_answer(&mut self, req: u64, shard: u16, holder: Option<SeqNum>) {
        let Some(h) = self.partial.as_mut().and_then(|p| p.holders.get_mut(&req)) else { return };
        let Some(a) = h.answers.get_mut(usize::from(shard)) else { return };
        *a = Some(holder);
        if h.answers.iter().any(Option::is_none) {
            return;
        }
        let h = self.partial.as_mut().expect("checked").holders.remove(&req).expect("found");
        let holder = h.answers.iter().find_map(|a| a.flatten());
        if self.appends_in_flight.remove(&h.op).is_some() {
            self.complete(h.op, Err(Error::Conflict { holder }), h.log, h.at);
        }
    }

    /// Starts a read or aux data of `log` in partial mode: the local index first.
    pub(super) fn partial_start(&mut self, now: Micros, log: LogId, r: ReadOp) {
        if matches!(r.request, Request::SetAux { .. }) {
            self.tier_set_aux(now, log, r);
            return;
        }
        let local = self.partial.as_ref().is_some_and(|p| p.bounds.is_some());
        if !local {
            self.tier_read(now, log, r);
            return;
        }
        let p = self.partial.as_mut().expect("partial");
        match p.feeds[usize::from(log.0)].index.read(read_key(&r.request), r.wait_for) {
            LocalRead::Wait => {
                let until = now + self.cfg.local_wait_us;
                self.partial.as_mut().expect("partial").local_waits.push((log, r, until));
            }
            LocalRead::Miss => self.tier_read(now, log, r),
            LocalRead::Hit { found, at, path } => {
                match path {
                    crate::tier::LocalPath::TagCache => p.stats.tag_hits += 1,
                    crate::tier::LocalPath::Popularity => p.stats.popularity_hits += 1,
                }
                self.read_found(now, log, r, found, at, None, None);
            }
        }
    }

    /// Reads waiting for the local index of `log`: those it has reached, and those
    /// that waited long enough, go on.
    fn run_local_waits(&mut self, now: Micros, log: LogId) {
        let Some(p) = self.partial.as_mut() else { return };
        let at = p.feeds[usize::from(log.0)].index.position();
        let (go, stay): (Vec<_>, Vec<_>) =
            p.local_waits.drain(..).partition(|(l, r, until)| (*l == log && r.wait_for <= at) || now >= *until);
        p.local_waits = stay;
        for (log, r, until) in go {
            if now >= until && r.wait_for > at {
                self.tier_read(now, log, r);
            } else {
                self.partial_start(now, log, r);
            }
        }
    }

    /// Aux data: to every replica of every index shard, as of Q.
    fn tier_set_aux(&mut self, now: Micros, log: LogId, r: ReadOp) {
        let Request::SetAux { book, seqnum, aux } = r.request else { unreachable!("aux data") };
        let q = r.wait_for.max(self.logs[usize::from(log.0)].applied);
        let shards = self.tier_shards();
        let req = self.next_req;
        self.next_req += 1;
        let Some(p) = self.partial.as_mut() else { return };
        p.auxes.insert(req, AuxWait { op: r.op, log, book, seqnum, aux, q, answers: vec![None; shards], sent_at: now });
        self.send_aux(now, req);
    }

    fn send_aux(&mut self, now: Micros, req: u64) {
        let Some(a) = self.partial.as_mut().and_then(|p| p.auxes.get_mut(&req)) else { return };
        a.sent_at = now;
        let (log, book, seqnum, aux, q) = (a.log, a.book, a.seqnum, a.aux.clone(), a.q);
        let missing: Vec<usize> = a.answers.iter().enumerate().filter(|(_, a)| a.is_none()).map(|(s, _)| s).collect();
        let tier = self.config.as_ref().and_then(|c| c.tier.clone());
        for s in missing {
            for &to in tier.iter().flat_map(|t| &t.shards[s]) {
                let msg = Message::TierSetAux { req, shard: s as u16, log, book, seqnum, aux: aux.clone(), q };
                self.send(to, msg);
            }
        }
    }

    fn on_aux_set(&mut self, req: u64, shard: u16, kept: bool) {
        let Some(a) = self.partial.as_mut().and_then(|p| p.auxes.get_mut(&req)) else { return };
        let Some(slot) = a.answers.get_mut(usize::from(shard)) else { return };
        *slot = Some(slot.unwrap_or(false) || kept);
        let any = a.answers.contains(&Some(true));
        if !any && a.answers.iter().any(Option::is_none) {
            return;
        }
        let a = self.partial.as_mut().expect("checked").auxes.remove(&req).expect("found");
        let deadline = self.deadlines.iter().find(|((_, op), _)| *op == a.op).map(|(k, _)| *k);
        if let Some(k) = deadline {
            self.deadlines.remove(&k);
        }
        if any {
            let attached = self.cache.put_aux(a.seqnum, a.book, a.aux);
            debug_assert!(attached, "the cache holds {} as another book's record", a.seqnum);
            self.complete(a.op, Ok(Reply::AuxSet), a.log, a.q);
        } else {
            let e = Error::InvalidArgument(format!("seqnum {} is not a live record of book {}", a.seqnum, a.book.0));
            self.complete(a.op, Err(e), a.log, a.q);
        }
    }

    fn on_tier_refused(&mut self, req: u64, error: Error) {
        // Unavailable (an index node not configured yet): the retry asks another.
        if matches!(error, Error::Unavailable(_)) {
            return;
        }
        let Some(p) = self.partial.as_mut() else { return };
        let (op, log) = if let Some(t) = p.reads.remove(&req) {
            p.aggregator.cancel(req);
            (t.op, t.log)
        } else if let Some(a) = p.auxes.remove(&req) {
            (a.op, a.log)
        } else if let Some(h) = p.holders.remove(&req) {
            if self.appends_in_flight.remove(&h.op).is_none() {
                return;
            }
            (h.op, h.log)
        } else {
            return;
        };
        let deadline = self.deadlines.iter().find(|((_, o), _)| *o == op).map(|(k, _)| *k);
        if let Some(k) = deadline {
            self.deadlines.remove(&k);
        }
        self.complete(op, Err(error), log, MetalogPosition::ZERO);
    }

    /// Handles a message of the index tier; false if `msg` is not one.
    pub(super) fn partial_message(&mut self, now: Micros, from: NodeId, msg: &mut Option<Message>) -> bool {
        let tier = self.config.as_ref().and_then(|c| c.tier.as_ref());
        let from_tier = tier.is_some_and(|t| t.nodes().chain(t.aggregators.iter().copied()).any(|n| n == from));
        let Some(m) = msg.take() else { return false };
        if !from_tier {
            *msg = Some(m);
            return false;
        }
        match m {
            Message::UpdatePush { update } => self.on_update(now, update),
            Message::UpdateFetched { req, log, updates } => self.on_updates_fetched(now, req, log, updates),
            Message::TierAnswer { req, round, shard, answer, aux } => self.on_tier_answer(now, req, round, shard, answer, aux),
            Message::TierDone { req, round, found, q, aux, sent } => self.on_tier_done(now, req, round, found, q, aux, sent),
            Message::TierRestart { req, round, floor } => self.on_tier_restart(now, req, round, floor),
            Message::HolderAnswer { req, shard, holder } => self.on_holder_answer(req, shard, holder),
            Message::TierAuxSet { req, shard, kept } => self.on_aux_set(req, shard, kept),
            Message::TierRefused { req, error } => self.on_tier_refused(req, error),
            other => {
                *msg = Some(other);
                return false;
            }
        }
        true
    }

    /// Retries of partial mode: updates the local index lacks, lookups, holder
    /// lookups and aux data without answers, and reads that waited long enough.
    pub(super) fn partial_tick(&mut self, now: Micros, next: &mut NextTick) {
        let Some(p) = self.partial.as_mut() else { return };
        let retry = self.cfg.lookup_retry_us;
        let mut out = Vec::new();
        p.aggregator.tick(now, &mut out);
        let behind: Vec<(LogId, MetalogPosition)> = (0..p.feeds.len())
            .filter(|&i| p.feeds[i].index.position() < p.last_entry[i].0 && now >= p.moved_at[i] + retry)
            .filter(|&i| p.fetching[i].is_none_or(|(_, at)| now >= at + retry))
            .map(|i| (LogId(i as u8), p.feeds[i].index.position()))
            .collect();
        let holders: Vec<u64> = p.holders.iter().filter(|(_, h)| now >= h.sent_at + retry).map(|(r, _)| *r).collect();
        let auxes: Vec<u64> = p.auxes.iter().filter(|(_, a)| now >= a.sent_at + retry).map(|(r, _)| *r).collect();
        // One fetch per log, from the oldest entry a waiting append needs.
        let mut conds: BTreeMap<LogId, MetalogPosition> = BTreeMap::new();
        for c in p.conds.values_mut().filter(|c| now >= c.asked_at + retry) {
            c.asked_at = now;
            let after = conds.entry(c.log).or_insert(c.prev);
            *after = (*after).min(c.prev);
        }
        for w in &p.local_waits {
            next.at(w.2);
        }
        let waited = p.local_waits.iter().any(|w| now >= w.2);
        next.at(now + retry);
        self.aggregator_actions(now, out);
        for (log, after) in behind {
            self.fetch_updates(now, log, after);
        }
        // An update of our conditional append lost: fetched from the entry before.
        for (log, after) in conds {
            self.fetch_updates(now, log, after);
        }
        for req in holders {
            self.send_holder_lookups(now, req);
        }
        for req in auxes {
            self.send_aux(now, req);
        }
        if waited {
            for l in 0..self.partial.as_ref().map_or(0, |p| p.feeds.len()) {
                self.run_local_waits(now, LogId(l as u8));
            }
        }
    }

    /// Gives up whatever partial mode runs for `op` (it timed out): `None` if it ran
    /// nothing for it, `Some(Some(Unavailable))` if the index tier never answered.
    pub(super) fn partial_cancel(&mut self, op: OpId) -> Option<Option<Error>> {
        let p = self.partial.as_mut()?;
        let unavailable = || Some(Error::Unavailable("no replica of an index shard answered; the index tier is down".into()));
        if let Some(i) = p.local_waits.iter().position(|w| w.1.op == op) {
            p.local_waits.swap_remove(i);
            return Some(None);
        }
        if let Some(req) = p.reads.iter().find(|(_, t)| t.op == op).map(|(r, _)| *r) {
            p.reads.remove(&req);
            let silent = p.aggregator.cancel(req);
            let tier = self.config.as_ref().and_then(|c| c.tier.as_ref());
            let shards: Vec<String> = silent
                .iter()
                .map(|&(s, asked)| {
                    let replicas = tier
                        .and_then(|t| t.shards.get(s))
                        .map_or(String::new(), |r| r.iter().map(|n| format!("n{}", n.0)).collect::<Vec<_>>().join(", "));
                    format!("shard {s} ({replicas}) asked {asked} times")
                })
                .collect();
            let e = format!("no replica of an index shard answered: {}; the index tier is down", shards.join("; "));
            return Some(Some(Error::Unavailable(e)));
        }
        if let Some(req) = p.auxes.iter().find(|(_, a)| a.op == op).map(|(r, _)| *r) {
            p.auxes.remove(&req);
            return Some(unavailable());
        }
        None
    }

    /// Gives up the holder lookup of `op`'s failed condition, if one runs: its record
    /// is decided (it failed), but no replica of some index shard answered.
    pub(super) fn partial_holder_cancel(&mut self, op: OpId) -> Option<Error> {
        let p = self.partial.as_mut()?;
        let req = p.holders.iter().find(|(_, h)| h.op == op).map(|(r, _)| *r)?;
        p.holders.remove(&req);
        Some(Error::Unavailable("the condition failed; no replica of an index shard answered for its holder".into()))
    }

    /// A read answered in place from the local index and the cache, if it can be.
    pub(super) fn partial_read_now(
        &mut self,
        log: LogId,
        p: MetalogPosition,
        request: &Request,
    ) -> Option<(Result<Reply, Error>, LogId, MetalogPosition)> {
        let part = self.partial.as_mut()?;
        part.bounds?;
        let LocalRead::Hit { found, at, path } = part.feeds[usize::from(log.0)].index.read(read_key(request), p) else {
            return None;
        };
        let record = match found {
            None => None,
            Some((seqnum, _)) => {
                let c = self.cache.get(seqnum)?;
                let (tags, data) = c.record.as_ref()?;
                Some(LogRecord { seqnum, tags: tags.clone(), data: data.clone(), aux: c.aux.clone() })
            }
        };
        let stats = &mut self.partial.as_mut().expect("checked").stats;
        match path {
            crate::tier::LocalPath::TagCache => stats.tag_hits += 1,
            crate::tier::LocalPath::Popularity => stats.popularity_hits += 1,
        }
        Some((Ok(Reply::Read(record)), log, at))
    }
}

pub(super) fn read_key(request: &Request) -> (BookId, Tag, SeqNum, bool) {
    match *request {
        Request::ReadNext { book, tag, min } => (book, tag, min, true),
        Request::ReadPrev { book, tag, max } => (book, tag, max, false),
        _ => unreachable!("reads only"),
    }
}
