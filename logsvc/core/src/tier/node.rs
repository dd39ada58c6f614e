//! An index node of the index tier (the spec's item 2): a replica of one index shard.
//!
//! It follows every physical log's metalog, fetches every record's metadata from
//! storage as an indexer engine does, and applies every entry to its [`IndexShard`]:
//! the whole stream table (so it decides every placement exactly as `index.rs` does) and
//! the postings of its own shard's entries. For each entry of its shard the first
//! replica pushes the decided update to every function node; every index node keeps
//! the recent updates of every entry within `update_keep_bytes`, for function nodes that
//! missed some.
//!
//! Lookups as of Q, holder lookups and aux data are held until the node has applied
//! every entry of the log before Q (the hold rule), then answered from the postings.
//! A log added in term T applies nothing before every older log is through T-1, so a
//! moved book's old postings are in place before its new log's lookups are answered.
//!
//! Invariant: an index node's state is a pure function of the log prefix it applied;
//! its answers, of that and the asked position.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;

use crate::assembly::{Assembling, Assembly};
use crate::config::Configuration;
use crate::error::Error;
use crate::follower::{Followed, Follower, FollowerConfig};
use crate::index::{Found, Placement};
use crate::message::{Message, MetalogEntry, RecordMeta};
use crate::types::{BookId, LogId, MetalogPosition, Micros, NextTick, NodeId, SeqNum, ShardId, Tag};
use crate::IndexedRecord;

use super::copy::{Copying, Export};
use super::feed::{Since, UpdateLog};
use super::popularity::ReadKey;
use super::streams::{Decision, Holder};
use super::{shard_of, IndexShard};

#[derive(Clone, Debug)]
pub struct IndexNodeConfig {
    /// Entries of its log a posting that left its row is kept for (lookups as of older
    /// positions get `TooOld`).
    pub dead_keep_entries: usize,
    /// Decided updates kept for function nodes that missed some, in bytes.
    pub update_keep_bytes: usize,
    /// Aux data kept for the records of this shard, in bytes.
    pub aux_bytes_max: usize,
    /// Lookups held for a position not yet applied, at most; the oldest go first.
    pub held_max: usize,
    /// A held lookup is dropped after this long (its caller has given up).
    pub hold_us: Micros,
    pub fetch_retry_us: Micros,
    pub heartbeat_interval_us: Micros,
    pub follower: FollowerConfig,
    /// A replica that gives no piece of its state for this long is given up on: the
    /// copy asks the next one (see `copy.rs`).
    pub copy_give_up_us: Micros,
    /// Streams or postings a piece of a copy carries at most.
    pub copy_piece_items: usize,
}

impl Default for IndexNodeConfig {
    fn default() -> Self {
        IndexNodeConfig {
            dead_keep_entries: 16_384,
            update_keep_bytes: 64 << 20,
            aux_bytes_max: 16 << 20,
            held_max: 100_000,
            hold_us: 10_000_000,
            fetch_retry_us: 50_000,
            heartbeat_interval_us: 100_000,
            follower: FollowerConfig::default(),
            copy_give_up_us: 2_000_000,
            copy_piece_items: super::PIECE_ITEMS,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum IndexNodeAction {
    Send(NodeId, Message),
    /// Observation: the node applied an entry, with every record's decision; the
    /// failed ones whose holder the postings know (not the stream table) are listed
    /// in `holder_lookups` and carry `holder: None` here.
    Applied {
        log: LogId,
        position: MetalogPosition,
        records: Vec<IndexedRecord>,
        holder_lookups: Vec<SeqNum>,
    },
}

/// Whether `node` has a role other than a function node's (a function node that
/// registered after the last term is in none yet, and may read).
fn is_infrastructure(config: &Configuration, node: NodeId) -> bool {
    config.tier.as_ref().is_some_and(|t| t.nodes().any(|n| n == node))
        || config.terms.iter().any(|t| t.storage.contains(&node) || t.logs.iter().any(|l| l.sequencers.contains(&node)))
}

/// A request waiting for the node to apply its log up to a position.
#[derive(Debug)]
enum Held {
    Lookup {
        from: NodeId,
        req: u64,
        round: u32,
        log: LogId,
        read: ReadKey,
        q: MetalogPosition,
        fetch: bool,
        aggregator: Option<NodeId>,
    },
    Holder {
        from: NodeId,
        req: u64,
        log: LogId,
        book: BookId,
        tag: Tag,
        offset: u64,
        before: SeqNum,
        at: MetalogPosition,
    },
    Aux {
        from: NodeId,
        req: u64,
        log: LogId,
        book: BookId,
        seqnum: SeqNum,
        aux: Bytes,
        q: MetalogPosition,
    },
}

impl Held {
    fn caller(&self) -> (NodeId, u64) {
        match *self {
            Held::Lookup { from, req, .. } | Held::Holder { from, req, .. } | Held::Aux { from, req, .. } => (from, req),
        }
    }

    fn waits_for(&self) -> (LogId, MetalogPosition) {
        match *self {
            Held::Lookup { log, q, .. } | Held::Aux { log, q, .. } => (log, q),
            Held::Holder { log, at, .. } => (log, at),
        }
    }
}

/// Aux data of this shard's records, oldest out first past its budget.
#[derive(Debug, Default)]
struct AuxCache {
    kept: HashMap<SeqNum, (BookId, Bytes)>,
    order: VecDeque<SeqNum>,
    bytes: usize,
}

impl AuxCache {
    fn put(&mut self, seqnum: SeqNum, book: BookId, aux: Bytes, bytes_max: usize) {
        self.bytes += aux.len();
        if let Some((_, old)) = self.kept.insert(seqnum, (book, aux)) {
            self.bytes -= old.len();
        } else {
            self.order.push_back(seqnum);
        }
        while self.bytes > bytes_max {
            let Some(old) = self.order.pop_front() else { break };
            if let Some((_, a)) = self.kept.remove(&old) {
                self.bytes -= a.len();
            }
        }
    }

    fn get(&self, seqnum: SeqNum) -> Option<Bytes> {
        self.kept.get(&seqnum).map(|(_, a)| a.clone())
    }
}

/// What an index node did with the requests of function nodes, since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexNodeStats {
    /// Lookups, holder lookups and aux data received.
    pub requests: u64,
    pub answered: u64,
    pub refused: u64,
    /// Held past `hold_us` or pushed out past `held_max`, unanswered.
    pub expired: u64,
    /// Records this node asked storage to send a lookup's caller (type 2).
    pub storage_reads: u64,
    /// The time answered requests waited here for the node to reach their position.
    pub held_us: u64,
    /// Copies of this node's state given to a replica, copies it took from one, and
    /// replays of the whole log (no replica gave a copy).
    pub copies_given: u64,
    pub copies_taken: u64,
    pub replays: u64,
}

/// An index node's counters and sizes, for `/metrics`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexNodeReport {
    pub id: NodeId,
    pub stats: IndexNodeStats,
    /// Its index shard; `None` for a spare.
    pub shard: Option<usize>,
    pub streams: usize,
    pub stream_table_bytes: usize,
    pub postings_bytes: usize,
    /// Requests held now, waiting for the node to reach their position.
    pub held: usize,
}

pub struct IndexNode {
    id: NodeId,
    pub stats: IndexNodeStats,
    controllers: Vec<NodeId>,
    incarnation: u64,
    cfg: IndexNodeConfig,
    config: Option<Arc<Configuration>>,
    follower: Follower,
    assembly: Assembly<()>,
    /// Set once a configuration names this node in the tier (and its copy is done).
    shard: Option<IndexShard>,
    /// The copy of a replica's state under way, while `shard` is `None`.
    copying: Option<Copying>,
    /// The state this node gives a replica that copies it.
    export: Option<Export>,
    updates: Vec<UpdateLog>,
    held: VecDeque<(Micros, Held)>,
    aux: AuxCache,
    next_req: u64,
    last_heartbeat: Option<Micros>,
    out: Vec<IndexNodeAction>,
}

impl IndexNode {
    pub fn new(id: NodeId, controllers: Vec<NodeId>, incarnation: u64, cfg: IndexNodeConfig) -> IndexNode {
        IndexNode {
            id,
            stats: IndexNodeStats::default(),
            controllers,
            incarnation,
            follower: Follower::new(cfg.follower.clone()),
            cfg,
            config: None,
            assembly: Assembly::new(),
            shard: None,
            copying: None,
            export: None,
            updates: Vec::new(),
            held: VecDeque::new(),
            aux: AuxCache::default(),
            next_req: 0,
            last_heartbeat: None,
            out: Vec::new(),
        }
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    pub fn take_actions(&mut self) -> Vec<IndexNodeAction> {
        std::mem::take(&mut self.out)
    }

    /// The index shard it replicates, once configured.
    pub fn shard(&self) -> Option<&IndexShard> {
        self.shard.as_ref()
    }

    /// What `/metrics` shows of this node (no walk over its postings; the stream
    /// table's maps, one per book).
    pub fn report(&self) -> IndexNodeReport {
        let shard = self.shard.as_ref();
        IndexNodeReport {
            id: self.id,
            stats: self.stats,
            shard: shard.map(|s| s.shard),
            streams: shard.map_or(0, |s| s.streams.streams()),
            stream_table_bytes: shard.map_or(0, |s| s.streams.bytes()),
            postings_bytes: shard.map_or(0, |s| s.postings.bytes()),
            held: self.held.len(),
        }
    }

    /// The position up to which `log` is applied.
    pub fn applied(&self, log: LogId) -> MetalogPosition {
        self.shard.as_ref().map_or(MetalogPosition::ZERO, |s| s.postings.applied(log))
    }

    /// A report for the log when a request has been held for `after_us` or longer (the
    /// node does not reach the position it waits for): what waits, and where every log
    /// stands.
    pub fn stall_report(&self, now: Micros, after_us: Micros) -> Option<String> {
        let (since, oldest) = self.held.front()?;
        if now < since + after_us {
            return None;
        }
        let (log, at) = oldest.waits_for();
        let mut out = format!(
            "index node {} holds {} requests; the oldest, {} ms old, waits for log {} at {at}",
            self.id.0,
            self.held.len(),
            (now - since) / 1000,
            log.0
        );
        let config = self.config.as_ref().map_or("none".into(), |c| format!("{}.v{}", c.current().term.0, c.current().version));
        out += &format!("; configuration {config}");
        for l in 0..self.updates.len() {
            let log = LogId(l as u8);
            out += &format!(
                "; log {l}: applied {}, follower {}, assembly {}",
                self.applied(log),
                self.follower.describe(log),
                self.assembly.describe(log)
            );
        }
        Some(out)
    }

    fn send(&mut self, to: NodeId, msg: Message) {
        self.out.push(IndexNodeAction::Send(to, msg));
    }

    pub fn on_tick(&mut self, now: Micros) -> NextTick {
        let mut next = NextTick::after(now);
        if self.last_heartbeat.is_none_or(|t| now >= t + self.cfg.heartbeat_interval_us) {
            self.last_heartbeat = Some(now);
            let heartbeat = Message::heartbeat(self.incarnation, self.config.as_deref());
            for c in self.controllers.clone() {
                self.send(c, heartbeat.clone());
            }
        }
        next.at(now + self.cfg.heartbeat_interval_us);
        self.copy_tick(now, &mut next);
        let Some(config) = self.config.clone().filter(|_| self.shard.is_some()) else { return next };
        let mut fetches = Vec::new();
        self.follower.on_tick(now, &config, &mut fetches, &mut next);
        for (to, m) in fetches {
            self.send(to, m);
        }
        for (to, msg) in self.assembly.retry(now, self.cfg.fetch_retry_us) {
            self.send(to, msg);
        }
        self.assembly.next_due(self.cfg.fetch_retry_us, &mut next);
        while self.held.front().is_some_and(|(at, _)| now >= at + self.cfg.hold_us) {
            self.held.pop_front();
            self.stats.expired += 1;
        }
        if let Some((at, _)) = self.held.front() {
            next.at(at + self.cfg.hold_us);
        }
        next
    }

    pub fn on_message(&mut self, now: Micros, from: NodeId, msg: Message) {
        // A spare follows nothing (it would only buffer what the sequencers push).
        let followed = if self.shard.is_some() { self.follower.on_message(msg) } else { Followed::Other(msg) };
        let msg = match followed {
            Followed::Entries(log) => return self.drain(now, log),
            Followed::Tail => return,
            Followed::Other(msg) => msg,
        };
        match msg {
            Message::NewConfig { config } => self.on_config(now, config),
            Message::MetaReply { req, shard, from: start, metas } => {
                let (completed, more) = self.assembly.on_meta(now, req, shard, start, metas);
                if let Some((to, msg)) = more {
                    self.send(to, msg);
                }
                if completed.is_some() {
                    self.apply_ready(now);
                }
            }
            Message::MetaUnavailable { req } => self.assembly.unavailable(req),
            Message::UpdateFetch { req, log, after } => {
                let updates = match self.updates.get(usize::from(log.0)).map(|u| u.since(after, 64)) {
                    Some(Since::Updates(u)) => Some(u),
                    _ => None,
                };
                self.send(from, Message::UpdateFetched { req, log, updates });
            }
            m @ (Message::TierLookup { .. } | Message::HolderLookup { .. } | Message::TierSetAux { .. }) => {
                self.on_tier_request(now, from, m)
            }
            Message::ShardCopy { req, shard, piece } => self.give_copy(now, from, req, shard, piece),
            Message::ShardCopied { req, piece, copy } => self.on_copied(now, from, req, piece, copy),
            _ => {}
        }
    }

    /// A lookup, a holder lookup or aux data: held until answerable, if admitted.
    fn on_tier_request(&mut self, now: Micros, from: NodeId, msg: Message) {
        let (req, shard, held) = match msg {
            Message::TierLookup { req, round, shard, log, book, tag, bound, next, q, fetch, aggregator } => {
                (req, shard, Held::Lookup { from, req, round, log, read: (book, tag, bound, next), q, fetch, aggregator })
            }
            Message::HolderLookup { req, shard, log, book, tag, offset, before, at } => {
                (req, shard, Held::Holder { from, req, log, book, tag, offset, before, at })
            }
            Message::TierSetAux { req, shard, log, book, seqnum, aux, q } => {
                (req, shard, Held::Aux { from, req, log, book, seqnum, aux, q })
            }
            _ => return,
        };
        let (log, at) = held.waits_for();
        self.stats.requests += 1;
        if self.admit(from, req, shard, log, at) {
            self.hold(now, held);
        }
    }

    /// Whether a tier request of `from` for `shard` and `log` is one this node answers;
    /// refuses it otherwise.
    /// A log this node does not know yet is held for if `at` names a later term than
    /// its configuration's (the caller has a newer one, which adds the log).
    fn admit(&mut self, from: NodeId, req: u64, shard: u16, log: LogId, at: MetalogPosition) -> bool {
        let error = match (&self.config, &self.shard) {
            (None, _) => Error::Unavailable(format!("index node {} has no configuration yet", self.id.0)),
            (_, None) => Error::Unavailable(format!("index node {} is in no index shard", self.id.0)),
            (Some(_), Some(s)) if usize::from(shard) != s.shard => {
                Error::InvalidArgument(format!("index node {} replicates index shard {}, not {shard}", self.id.0, s.shard))
            }
            (Some(c), _) if log.0 >= c.n_logs && at.term <= c.current().term.0 => {
                Error::InvalidArgument(format!("log {} does not exist (the cluster has {})", log.0, c.n_logs))
            }
            (Some(c), _) if is_infrastructure(c, from) => {
                Error::InvalidArgument(format!("node {} is not a function node of this cluster", from.0))
            }
            _ => return true,
        };
        self.stats.refused += 1;
        self.send(from, Message::TierRefused { req, error });
        false
    }

    fn hold(&mut self, now: Micros, h: Held) {
        if self.held.len() >= self.cfg.held_max {
            self.held.pop_front(); // its caller asks again
            self.stats.expired += 1;
        }
        self.held.push_back((now, h));
        let (log, _) = self.held.back().expect("pushed").1.waits_for();
        self.answer_held(now, log);
    }

    fn on_config(&mut self, now: Micros, config: Arc<Configuration>) {
        if self.config.as_ref().is_some_and(|c| c.stamp() >= config.stamp()) {
            self.send(config.controller, Message::config_ack(&config));
            return;
        }
        self.config = Some(config.clone());
        let mine = config.tier.as_ref().and_then(|t| t.shard_of_node(self.id).map(|s| (s, t.shards.len())));
        let had = self.shard.as_ref().map(|s| s.shard).or(self.copying.as_ref().map(|c| c.shard));
        if mine.map(|m| m.0) != had {
            // Into the tier (started, or a spare replacing a silent replica), or out of
            // it (replaced while silent): either way the node starts from nothing, and
            // copies a replica of its shard if one gives it.
            self.leave_shard();
            if let Some((shard, shards)) = mine {
                let tier = config.tier.as_ref().expect("mine");
                let from: Vec<NodeId> = tier.shards[shard].iter().copied().filter(|&n| n != self.id).collect();
                self.copying = Some(Copying::new(shard, shards, from, self.next_req, now));
                self.next_req += 1;
            }
        }
        self.follower.on_config(&config);
        self.ask_copy(now);
        while self.updates.len() < usize::from(config.n_logs) {
            self.updates.push(UpdateLog::new(self.cfg.update_keep_bytes));
        }
        self.send(config.controller, Message::config_ack(&config));
        for l in 0..config.n_logs {
            self.drain(now, LogId(l));
        }
    }

    /// Asks the current replica for the next piece of its state; with none left to
    /// ask, replays the log instead.
    fn ask_copy(&mut self, now: Micros) {
        let Some(c) = self.copying.as_mut() else { return };
        let Some(to) = c.donor() else {
            // No replica gave a copy: replay the log from its first term.
            let c = self.copying.take().expect("checked");
            self.stats.replays += 1;
            self.shard = Some(IndexShard::new(c.shard, c.shards, self.cfg.dead_keep_entries));
            self.drain_all(now);
            return;
        };
        c.asked_at = now;
        let msg = Message::ShardCopy { req: c.req, shard: c.shard as u16, piece: c.next_piece() };
        self.send(to, msg);
    }

    /// Resends a copy's request, or gives up a silent replica; drops an export no one
    /// asked for in a while.
    fn copy_tick(&mut self, now: Micros, next: &mut NextTick) {
        if self.export.as_ref().is_some_and(|e| now >= e.asked_at + self.cfg.hold_us) {
            self.export = None;
        }
        let (give_up, retry) = (self.cfg.copy_give_up_us, self.cfg.fetch_retry_us);
        let Some(c) = self.copying.as_mut() else { return };
        if now >= c.since + give_up {
            c.next_donor(self.next_req, now);
            self.next_req += 1;
            self.ask_copy(now);
        } else if now >= c.asked_at + retry {
            self.ask_copy(now);
        }
        if let Some(c) = &self.copying {
            next.at((c.asked_at + retry).min(c.since + give_up));
        }
    }

    /// A replica's request for a piece of this node's state (see `copy.rs`).
    fn give_copy(&mut self, now: Micros, from: NodeId, req: u64, shard: u16, piece: u32) {
        // A node not in this node's tier gets no answer: this node's configuration may
        // lag the one that put it there (it asks again until it gives up on this one).
        let in_tier = self.config.as_ref().and_then(|c| c.tier.as_ref()).is_some_and(|t| t.nodes().any(|n| n == from));
        if !in_tier {
            return;
        }
        let Some(s) = self.shard.as_ref().filter(|s| s.shard == usize::from(shard)) else {
            return self.send(from, Message::ShardCopied { req, piece, copy: None });
        };
        if self.export.as_ref().is_none_or(|e| (e.to, e.req) != (from, req)) {
            if piece != 0 {
                // An export given up (another replica asked since): start again.
                return self.send(from, Message::ShardCopied { req, piece, copy: None });
            }
            let n_logs = self.updates.len();
            let at = (0..n_logs).map(|l| s.postings.applied(LogId(l as u8))).collect();
            self.stats.copies_given += 1;
            self.export = Some(Export { to: from, req, at, pieces: s.export(self.cfg.copy_piece_items), asked_at: now });
        }
        let e = self.export.as_mut().expect("made above");
        e.asked_at = now;
        let copy = e.pieces.get(piece as usize).map(|p| (e.at.clone(), e.pieces.len() as u32, p.clone()));
        self.send(from, Message::ShardCopied { req, piece, copy });
    }

    /// A piece of a replica's state: the copy goes on, moves to the next replica, or is
    /// complete and the node follows the log from the copy's position.
    fn on_copied(
        &mut self,
        now: Micros,
        from: NodeId,
        req: u64,
        piece: u32,
        copy: Option<(Vec<MetalogPosition>, u32, super::ShardPiece)>,
    ) {
        let n_logs = self.updates.len();
        let Some(c) = self.copying.as_mut().filter(|c| c.req == req && c.donor() == Some(from)) else { return };
        let fits = |at: &Vec<MetalogPosition>, total: u32| {
            at.len() <= n_logs && (c.at.is_empty() || c.at == *at) && c.total.is_none_or(|t| t == total) && piece < total
        };
        match copy {
            Some((at, total, data)) if fits(&at, total) => {
                c.at = at;
                c.total = Some(total);
                if c.pieces.insert(piece, data).is_some() {
                    return; // a duplicate: the piece after it is asked for already
                }
                c.since = now;
            }
            // Nothing to give, or a copy of a configuration with more logs: the next.
            _ => {
                c.next_donor(self.next_req, now);
                self.next_req += 1;
                return self.ask_copy(now);
            }
        }
        if !c.complete() {
            return self.ask_copy(now);
        }
        let c = self.copying.take().expect("checked");
        self.stats.copies_taken += 1;
        let at = c.at.clone();
        let pieces = c.pieces.into_values().collect();
        self.shard = Some(IndexShard::import(c.shard, c.shards, self.cfg.dead_keep_entries, pieces));
        for (l, &p) in at.iter().enumerate() {
            if p != MetalogPosition::ZERO {
                self.follower.start_at(LogId(l as u8), p);
            }
        }
        self.drain_all(now);
    }

    fn drain_all(&mut self, now: Micros) {
        for l in 0..self.updates.len() {
            self.drain(now, LogId(l as u8));
        }
    }

    /// Drops the shard's state and what follows the log for it; the requests held
    /// are refused (their callers ask another replica).
    fn leave_shard(&mut self) {
        self.shard = None;
        self.copying = None;
        self.export = None;
        self.follower = Follower::new(self.cfg.follower.clone());
        self.assembly = Assembly::new();
        self.updates.clear();
        self.aux = AuxCache::default();
        for (_, h) in std::mem::take(&mut self.held) {
            let (from, req) = h.caller();
            let error = Error::Unavailable(format!("index node {} left the index tier", self.id.0));
            self.send(from, Message::TierRefused { req, error });
        }
    }

    /// Takes the entries the follower can deliver for `log` and fetches their metadata.
    fn drain(&mut self, now: Micros, log: LogId) {
        let Some(config) = self.config.clone() else { return };
        if log.0 >= config.n_logs || self.shard.is_none() {
            return;
        }
        for entry in self.follower.poll(&config, log) {
            let lc = config.term(entry.term).expect("delivered entries belong to known terms").log(log);
            let mut runs = Vec::new();
            let mut fetch = Vec::new();
            for (j, ids, _) in entry.runs() {
                let s = &lc.shards[j];
                fetch.push((runs.len(), s.replicas.clone()));
                runs.push((crate::types::Location { shard: s.shard, local_id: ids.start }, ids.end - ids.start, None));
            }
            let sends = self.assembly.push(now, Assembling { entry, runs, extra: () }, fetch, &mut self.next_req);
            for (to, msg) in sends {
                self.send(to, msg);
            }
        }
        self.apply_ready(now);
    }

    /// Whether `log` may apply entries: a log added in term T waits for every older
    /// log to be through T-1.
    fn open(&self, config: &Configuration, log: LogId) -> bool {
        let Some(term) = config.added_at(log) else { return true };
        let start = MetalogPosition::new(term, 0);
        (0..log.0).all(|l| config.first_term_of(LogId(l)).is_some_and(|t| t < term) && self.applied(LogId(l)) >= start)
    }

    /// Applies, in order, every entry of every log whose metadata is complete.
    fn apply_ready(&mut self, now: Micros) {
        let Some(config) = self.config.clone() else { return };
        loop {
            let mut progressed = false;
            for l in 0..config.n_logs {
                let log = LogId(l);
                if !self.open(&config, log) {
                    continue;
                }
                while let Some(a) = self.assembly.pop_ready(log) {
                    self.apply(&config, a.entry, a.runs.into_iter().map(|r| r.2.expect("ready")).collect());
                    progressed = true;
                }
                // With nothing left to apply, the node is at its follower's position,
                // which after a sealed term is (next term, 0).
                let delivered = self.follower.delivered(log);
                if self.assembly.is_empty(log) && delivered > self.applied(log) {
                    self.shard.as_mut().expect("configured").postings.reach(log, delivered);
                    progressed = true;
                }
                self.answer_held(now, log);
            }
            // An older log reaching a term may open an added one.
            if !progressed {
                break;
            }
        }
    }

    fn apply(&mut self, config: &Configuration, entry: MetalogEntry, metas: Vec<Vec<RecordMeta>>) {
        let lc = config.term(entry.term).expect("applied entries belong to known terms").log(entry.log);
        let shard_ids: Vec<ShardId> = lc.shards.iter().map(|s| s.shard).collect();
        let shard = self.shard.as_mut().expect("configured");
        let (decisions, update) = shard.apply_entry(&entry, &shard_ids, &metas);
        let mine = shard_of(entry.log, entry.index, shard.shards) == shard.shard;
        let metas = metas.into_iter().flatten();
        let mut records = Vec::with_capacity(decisions.len());
        let mut holder_lookups = Vec::new();
        for ((seqnum, location, decision), meta) in decisions.into_iter().zip(metas) {
            let placement = match decision {
                Decision::Placed(_) => Placement::Placed,
                Decision::Failed { holder: Holder::None, .. } => Placement::CondFailed { holder: None },
                Decision::Failed { holder: Holder::Known(s), .. } => Placement::CondFailed { holder: Some(s) },
                Decision::Failed { holder: Holder::Lookup, .. } => {
                    holder_lookups.push(seqnum);
                    Placement::CondFailed { holder: None }
                }
            };
            records.push(IndexedRecord { seqnum, location, meta, placement });
        }
        let (log, position) = (entry.log, entry.position_after());
        self.out.push(IndexNodeAction::Applied { log, position, records, holder_lookups });
        let first = config.tier.as_ref().and_then(|t| t.shards.get(self.shard.as_ref().expect("configured").shard));
        if mine && first.and_then(|r| r.first()) == Some(&self.id) {
            for &to in &config.current().engines {
                self.send(to, Message::UpdatePush { update: update.clone() });
            }
        }
        self.updates[usize::from(log.0)].push(update);
    }

    /// Type 2: asks a replica of `found`'s storage shard to send the record to `caller`
    /// for its lookup `req` (the replica by `req`, so that the caller's retry, which
    /// starts at the next one, asks another).
    fn read_for(&mut self, caller: NodeId, req: u64, found: Found) {
        let replicas = self.config.as_ref().and_then(|c| {
            let t = c.term(found.seqnum.term())?;
            let (lc, i) = t.shard(found.location.shard)?;
            Some(lc.shards[i].replicas.clone())
        });
        let Some(to) = replicas.filter(|r| !r.is_empty()).map(|r| r[req as usize % r.len()]) else { return };
        self.stats.storage_reads += 1;
        self.send(to, Message::ReadRecordFor { req, seqnum: found.seqnum, reply_to: caller });
    }

    /// Answers the held requests of `log` whose position is applied.
    fn answer_held(&mut self, now: Micros, log: LogId) {
        let applied = self.applied(log);
        let (ready, waiting): (VecDeque<_>, VecDeque<_>) =
            self.held.drain(..).partition(|(_, h)| h.waits_for().0 == log && h.waits_for().1 <= applied);
        self.held = waiting;
        for (since, h) in ready {
            self.stats.held_us += now.saturating_sub(since);
            self.answer(h);
        }
    }

    fn answer(&mut self, h: Held) {
        self.stats.answered += 1;
        let shard = self.shard.as_ref().expect("admitted requests have a shard");
        let index = shard.shard as u16;
        match h {
            Held::Lookup { from, req, round, log, read, q, fetch, aggregator } => {
                let answer = shard.lookup(log, read, q).expect("held until applied");
                let aux = match answer {
                    super::ShardAnswer::Exact(f) | super::ShardAnswer::Closest(Some(f)) => self.aux.get(f.seqnum),
                    _ => None,
                };
                // To the aggregator named, if the configuration has it; else the caller.
                let tier = self.config.as_ref().and_then(|c| c.tier.as_ref());
                let shards = tier.map_or(0, |t| t.shards.len()) as u16;
                match aggregator.filter(|a| tier.is_some_and(|t| t.aggregators.contains(a))) {
                    Some(a) => {
                        let (caller, next) = (from, read.3);
                        let m = Message::TierAnswerFor { caller, req, round, shard: index, shards, next, q, fetch, answer, aux };
                        self.send(a, m);
                    }
                    None => self.send(from, Message::TierAnswer { req, round, shard: index, answer, aux }),
                }
                if let (true, super::ShardAnswer::Exact(f)) = (fetch, answer) {
                    self.read_for(from, req, f);
                }
            }
            Held::Holder { from, req, log: _, book, tag, offset, before, at } => {
                let holder = shard.postings.holder(book, tag, offset, before, at);
                self.send(from, Message::HolderAnswer { req, shard: index, holder });
            }
            Held::Aux { from, req, log: _, book, seqnum, aux, q } => {
                let kept = shard.postings.live_at(book, seqnum, q);
                if kept {
                    self.aux.put(seqnum, book, aux, self.cfg.aux_bytes_max);
                }
                self.send(from, Message::TierAuxSet { req, shard: index, kept });
            }
        }
    }
}
