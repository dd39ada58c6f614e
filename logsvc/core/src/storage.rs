//! The storage node: persists the records of the shards it replicates, reports what
//! it has durably stored, learns their seqnums from the metalog, serves reads and
//! record metadata, and reclaims trimmed records.
//!
//! Flow of a record: `Replicate` from its engine -> `Write` action, and the held
//! prefix of its shard grows -> `Progress` to the primary sequencer -> the cut passes
//! it -> a metalog entry orders it while the driver's group commit makes it durable ->
//! [`StorageNode::on_written`] -> the stored prefix grows -> `Progress` to every
//! sequencer of the log -> the entry commits, and gives it a seqnum here and in every
//! engine's index.
//!
//! A sealing controller may ask (`Probe`) whether the records an uncommitted entry
//! names are durable here: the answer waits for records being written, and is no at
//! once for a record this node does not have.
//!
//! Invariants (asserted):
//! - the stored progress reported for a shard only counts records that are durable,
//!   and it never decreases (so the minimum over replicas only holds records that
//!   survive a crash of this node); the held progress is at least the stored one;
//! - a record's first stored version is the one kept: replication is idempotent;
//! - a record is reclaimed only after a trim that covers it has been ordered.
//!
//! One progress report covers every write a sync made durable. Records past the final cut
//! of a sealed term are discarded: their engines append them again in the next term.
//!
//! Memory: the metadata of a shard's records stays in memory only until they are ordered
//! and for a window after (`meta_window` per shard), for the engines that fetch it while
//! they apply the entry that ordered them. Older `FetchMeta` ranges are read from the store
//! (`StorageAction::ReadMetas`, `RecordStore::read_metas`), and a read by seqnum reads the
//! record first and checks its liveness against the stored metadata
//! (`StorageNode::on_read`). Reclaim decisions come from a liveness index, the index's trim
//! semantics with conditions stripped, whose full chunks may spill as the engines' do.
//!
//! Architecture Invariant: the storage node does not evaluate conditional appends; a record
//! whose condition failed is kept like a live one (garbage, never wrong).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::Configuration;
use crate::error::Result;
use crate::follower::{Followed, Follower, FollowerConfig};
use crate::index::{ColdIndex, Index};
use crate::message::{Message, MetalogEntry, Record, RecordMeta, StoredRead};
use crate::store::{RecoveredRecord, StoredData};
use crate::types::{LocalId, Location, LogId, Micros, NextTick, NodeId, SeqNum, ShardId, Term};

#[derive(Clone, Debug)]
pub struct StorageConfig {
    pub progress_interval_us: Micros,
    pub heartbeat_interval_us: Micros,
    /// Metadata records per `MetaReply`.
    pub meta_reply_max: usize,
    /// Bytes written but not yet durable; replication beyond is dropped (engines resend).
    pub unsynced_bytes_max: usize,
    /// How far past the stored prefix a local id may be (bounds memory per shard).
    pub local_id_window: u64,
    /// Metadata of ordered records kept in memory per shard, for the engines that fetch
    /// it while they apply the entry that ordered them; older metadata is read from
    /// the store, so what the node holds does not grow with its records.
    pub meta_window: u64,
    pub follower: FollowerConfig,
    /// Where the liveness index spills its cold chunks (in memory whole without).
    pub cold_index: Option<ColdIndex>,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            progress_interval_us: 20_000,
            heartbeat_interval_us: 100_000,
            meta_reply_max: 4096,
            unsynced_bytes_max: 256 << 20,
            local_id_window: 1 << 20,
            meta_window: 8192,
            follower: FollowerConfig::default(),
            cold_index: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum StorageAction {
    Send(NodeId, Message),
    /// Write (not yet durable); the driver syncs and calls `on_written(&[batch, ..])`.
    Write {
        batch: u64,
        records: Vec<(Location, Record)>,
    },
    /// Read the record at `location` and hand it to [`StorageNode::on_read`].
    Read {
        to: NodeId,
        req: u64,
        seqnum: SeqNum,
        location: Location,
    },
    /// Read the metadata of records `from..to` of `shard` (all ordered, so durable)
    /// and answer `to_node` with [`meta_reply`].
    ReadMetas {
        to_node: NodeId,
        req: u64,
        shard: ShardId,
        from: LocalId,
        to: LocalId,
    },
    Reclaim(Vec<Location>),
    Discard {
        shard: ShardId,
        from: LocalId,
    },
}

/// The answer to a `FetchMeta` of `from..to`, from what the store returned: all of it
/// or nothing (the engine asks another replica).
pub fn meta_reply(req: u64, shard: ShardId, from: LocalId, to: LocalId, read: Result<Vec<RecordMeta>>) -> Message {
    match read {
        Ok(metas) if from < to && metas.len() as u64 == to - from => Message::MetaReply { req, shard, from, metas },
        _ => Message::MetaUnavailable { req },
    }
}

struct Held {
    meta: RecordMeta,
    durable: bool,
}

struct Shard {
    log: LogId,
    term: Term,
    /// Position of this shard in its log's term config (the progress vector index).
    slot: u32,
    records: BTreeMap<LocalId, Held>,
    /// Records `0..stored` are durable.
    stored: LocalId,
    /// Records `0..held` are here, durable or being written (`held >= stored`).
    held: LocalId,
    /// Records `0..ordered` have seqnums.
    ordered: LocalId,
    closed: bool,
}

/// A contiguous run of ordered records of one shard.
#[derive(Clone, Copy)]
struct Run {
    start_position: u64,
    shard: ShardId,
    first: LocalId,
    len: u64,
}

pub struct StorageNode {
    id: NodeId,
    /// Every controller of the cluster: heartbeats go to all of them, and whichever
    /// leads acts on them (a standby ignores them until it takes over).
    controllers: Vec<NodeId>,
    incarnation: u64,
    cfg: StorageConfig,
    config: Option<Arc<Configuration>>,
    follower: Follower,
    shards: BTreeMap<ShardId, Shard>,
    /// Records whose shard is not in any configuration seen yet (after a restart).
    orphans: Vec<RecoveredRecord>,
    /// Per (term, log), runs sorted by start position, to find a seqnum's location.
    runs: BTreeMap<(Term, LogId), Vec<Run>>,
    /// Liveness of the records held here (conditions stripped), per log.
    liveness: Vec<Index>,
    writing: BTreeMap<u64, (Vec<Location>, usize)>,
    unsynced_bytes: usize,
    next_batch: u64,
    last_progress: Micros,
    /// Records became durable, or the configuration changed, since the last periodic
    /// progress report: the next one comes `progress_interval_us` after the last (in
    /// case the report sent at once was lost); otherwise with the next heartbeat.
    progress_news: bool,
    last_heartbeat: Option<Micros>,
    /// A sealing controller's probes (its node, shard, cut) waiting for records being
    /// written: answered once they are durable.
    probes: Vec<(NodeId, ShardId, LocalId)>,
    out: Vec<StorageAction>,
}

impl StorageNode {
    /// A storage node over a store that held `recovered` (empty for a new node).
    pub fn recover(
        id: NodeId,
        controllers: Vec<NodeId>,
        incarnation: u64,
        cfg: StorageConfig,
        recovered: Vec<RecoveredRecord>,
    ) -> StorageNode {
        StorageNode {
            id,
            controllers,
            incarnation,
            follower: Follower::new(cfg.follower.clone()),
            cfg,
            config: None,
            shards: BTreeMap::new(),
            orphans: recovered,
            runs: BTreeMap::new(),
            liveness: Vec::new(),
            writing: BTreeMap::new(),
            unsynced_bytes: 0,
            next_batch: 0,
            last_progress: 0,
            progress_news: true,
            last_heartbeat: None,
            probes: Vec::new(),
            out: Vec::new(),
        }
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Chunks of the liveness indexes' rows spilled to their cold stores.
    pub fn chunks_spilled(&self) -> u64 {
        self.liveness.iter().map(Index::chunks_spilled).sum()
    }

    pub fn take_actions(&mut self) -> Vec<StorageAction> {
        std::mem::take(&mut self.out)
    }

    fn send(&mut self, to: NodeId, msg: Message) {
        self.out.push(StorageAction::Send(to, msg));
    }

    pub fn on_tick(&mut self, now: Micros) -> NextTick {
        let mut next = NextTick::after(now);
        let heartbeat = self.last_heartbeat.is_none_or(|t| now >= t + self.cfg.heartbeat_interval_us);
        if heartbeat {
            self.last_heartbeat = Some(now);
            let heartbeat = Message::heartbeat(self.incarnation, self.config.as_deref());
            for c in self.controllers.clone() {
                self.send(c, heartbeat.clone());
            }
        }
        next.at(self.last_heartbeat.map_or(now, |t| t + self.cfg.heartbeat_interval_us));
        let Some(config) = self.config.clone() else { return next };
        // With news, the report comes `progress_interval_us` after the last; without,
        // it goes with the heartbeat (a repeat, in case a report was lost).
        let due = if self.progress_news { now >= self.last_progress + self.cfg.progress_interval_us } else { heartbeat };
        if due {
            self.last_progress = now;
            self.progress_news = false;
            let term = config.current().term;
            for l in 0..config.n_logs {
                self.report_progress(term, LogId(l), true);
            }
        }
        if self.progress_news {
            next.at(self.last_progress + self.cfg.progress_interval_us);
        }
        let mut fetches = Vec::new();
        self.follower.on_tick(now, &config, &mut fetches, &mut next);
        for (to, m) in fetches {
            self.send(to, m);
        }
        next
    }

    /// Reports the held and stored prefixes of this node's shards of `log` to the
    /// primary, and with `durable` news to every sequencer of the log: a backup
    /// acknowledges an entry only once it saw its records durable.
    fn report_progress(&mut self, term: Term, log: LogId, durable: bool) {
        let Some(config) = self.config.clone() else { return };
        let Some(t) = config.term(term) else { return };
        if t.sealed.is_some() {
            return;
        }
        let lc = t.log(log);
        let shards: Vec<&Shard> = lc.shards.iter().filter_map(|s| self.shards.get(&s.shard).filter(|h| h.term == term)).collect();
        if shards.is_empty() {
            return;
        }
        let held: Vec<(u32, LocalId)> = shards.iter().map(|h| (h.slot, h.held)).collect();
        let stored: Vec<(u32, LocalId)> = shards.iter().map(|h| (h.slot, h.stored)).collect();
        let to = if durable { lc.sequencers.clone() } else { vec![lc.primary()] };
        for q in to {
            self.send(q, Message::Progress { term, log, held: held.clone(), stored: stored.clone() });
        }
    }

    /// The driver made `batches` durable: one progress report covers them all.
    pub fn on_written(&mut self, batches: &[u64]) {
        let mut touched: Vec<(Term, LogId)> = Vec::new();
        for batch in batches {
            self.mark_durable(*batch, &mut touched);
        }
        // Report at once: the append latency waits on this message.
        self.progress_news |= !touched.is_empty();
        for (term, log) in touched {
            self.report_progress(term, log, true);
        }
        let probes = std::mem::take(&mut self.probes);
        for (to, shard, cut) in probes {
            self.on_probe(to, shard, cut);
        }
    }

    /// A sealing controller asks whether records `..cut` of `shard` are durable here
    /// (see `controller.rs`). Yes once they are; no if one is not here at all, not
    /// even being written: it never was durable here (a durable record stays, its
    /// metadata at least, and only a sealed term's shards discard records), so no
    /// entry ordering it was committed.
    fn on_probe(&mut self, to: NodeId, shard_id: ShardId, cut: LocalId) {
        let (stored, held) = match self.shards.get(&shard_id) {
            Some(shard) => (shard.stored, shard.held),
            None => {
                // Before its first configuration after a restart: what the store held.
                let mut ids = self.orphans.iter().filter(|r| r.location.shard == shard_id).map(|r| r.location.local_id);
                let stored = (0..).zip(&mut ids).take_while(|(k, id)| k == id).count() as LocalId;
                (stored, stored)
            }
        };
        if stored < cut && held >= cut {
            // Resent until answered: parked once.
            if !self.probes.contains(&(to, shard_id, cut)) {
                self.probes.push((to, shard_id, cut));
            }
            return;
        }
        self.send(to, Message::Probed { shard: shard_id, cut, durable: stored >= cut });
    }

    fn mark_durable(&mut self, batch: u64, touched: &mut Vec<(Term, LogId)>) {
        let Some((locations, bytes)) = self.writing.remove(&batch) else { return };
        self.unsynced_bytes -= bytes;
        for loc in locations {
            let Some(shard) = self.shards.get_mut(&loc.shard) else { continue };
            if let Some(h) = shard.records.get_mut(&loc.local_id) {
                h.durable = true;
            }
            let before = shard.stored;
            while shard.records.get(&shard.stored).is_some_and(|h| h.durable) {
                shard.stored += 1;
            }
            if shard.stored > before && !touched.contains(&(shard.term, shard.log)) {
                touched.push((shard.term, shard.log));
            }
        }
    }

    pub fn on_message(&mut self, now: Micros, from: NodeId, msg: Message) {
        let _ = now;
        let msg = match self.follower.on_message(msg) {
            Followed::Entries(_) => return self.drain_metalog(),
            Followed::Tail => return,
            Followed::Other(msg) => msg,
        };
        match msg {
            Message::NewConfig { config } => self.on_config(config),
            Message::Replicate { shard, records, .. } => self.on_replicate(shard, records),
            Message::Probe { shard, cut } => self.on_probe(from, shard, cut),
            Message::FetchMeta { req, shard, from: start, to } => self.on_fetch_meta(from, req, shard, start, to),
            Message::ReadRecord { req, seqnum } => self.on_read_record(from, req, seqnum),
            // Only an index node of the tier sends a read for another node.
            Message::ReadRecordFor { req, seqnum, reply_to } if self.in_tier(from) => self.on_read_record(reply_to, req, seqnum),
            _ => {}
        }
    }

    fn on_config(&mut self, config: Arc<Configuration>) {
        let newer = self.config.as_ref().is_none_or(|c| c.stamp() < config.stamp());
        if newer {
            self.progress_news = true;
            self.config = Some(config.clone());
            self.follower.on_config(&config);
            while self.liveness.len() < config.n_logs as usize {
                self.liveness.push(ColdIndex::index(self.cfg.cold_index.as_ref()));
            }
            for t in &config.terms {
                for lc in &t.logs {
                    for (slot, s) in lc.shards.iter().enumerate() {
                        if s.replicas.contains(&self.id) && !self.shards.contains_key(&s.shard) {
                            let shard = Shard {
                                log: lc.log,
                                term: t.term,
                                slot: slot as u32,
                                records: BTreeMap::new(),
                                stored: 0,
                                held: 0,
                                ordered: 0,
                                closed: false,
                            };
                            self.shards.insert(s.shard, shard);
                        }
                    }
                }
            }
            // Records recovered from the store rejoin their shards.
            for r in std::mem::take(&mut self.orphans) {
                match self.shards.get_mut(&r.location.shard) {
                    Some(shard) => {
                        shard.records.insert(r.location.local_id, Held { meta: r.meta, durable: true });
                        while shard.records.get(&shard.stored).is_some_and(|h| h.durable) {
                            shard.stored += 1;
                        }
                        shard.held = shard.held.max(shard.stored);
                    }
                    None => self.orphans.push(r),
                }
            }
        }
        self.send(config.controller, Message::config_ack(&config));
        self.drain_metalog();
    }

    fn on_replicate(&mut self, shard_id: ShardId, records: Vec<(LocalId, Record)>) {
        let window = self.cfg.local_id_window;
        let Some(shard) = self.shards.get_mut(&shard_id) else { return };
        if shard.closed {
            return;
        }
        let mut fresh = Vec::new();
        let mut bytes = 0;
        for (local_id, record) in records {
            // An ordered record is durable here: its metadata may have left memory.
            if local_id < shard.ordered || local_id >= shard.stored + window || shard.records.contains_key(&local_id) {
                continue;
            }
            if self.unsynced_bytes + bytes + record.data.len() > self.cfg.unsynced_bytes_max {
                break;
            }
            bytes += record.data.len();
            shard.records.insert(local_id, Held { meta: record.meta.clone(), durable: false });
            fresh.push((Location { shard: shard_id, local_id }, record));
        }
        if fresh.is_empty() {
            return;
        }
        let before = shard.held;
        while shard.records.contains_key(&shard.held) {
            shard.held += 1;
        }
        let grew = (shard.held > before).then_some((shard.term, shard.log));
        let batch = self.next_batch;
        self.next_batch += 1;
        self.unsynced_bytes += bytes;
        self.writing.insert(batch, (fresh.iter().map(|(l, _)| *l).collect(), bytes));
        self.out.push(StorageAction::Write { batch, records: fresh });
        // The primary may order records being written: it commits them once durable.
        if let Some((term, log)) = grew {
            self.report_progress(term, log, false);
        }
    }

    fn on_fetch_meta(&mut self, to: NodeId, req: u64, shard_id: ShardId, start: LocalId, end: LocalId) {
        let end = end.min(start.saturating_add(self.cfg.meta_reply_max as u64));
        let Some(shard) = self.shards.get(&shard_id) else {
            self.send(to, Message::MetaUnavailable { req });
            return;
        };
        let held: Option<Vec<RecordMeta>> =
            (start..end).map(|i| shard.records.get(&i).filter(|h| h.durable).map(|h| h.meta.clone())).collect();
        match held {
            Some(metas) => self.send(to, meta_reply(req, shard_id, start, end, Ok(metas))),
            // Ordered records out of the window: the store has them.
            None if end <= shard.ordered => {
                self.out.push(StorageAction::ReadMetas { to_node: to, req, shard: shard_id, from: start, to: end })
            }
            None => self.send(to, Message::MetaUnavailable { req }),
        }
    }

    /// The store's answer to `StorageAction::Read`: the record, unless it is live
    /// nowhere in its book by now (its data may be reclaimed any moment).
    pub fn on_read(&mut self, to: NodeId, req: u64, seqnum: SeqNum, stored: Result<Option<StoredData>>) {
        let read = match stored {
            Ok(Some(StoredData::Record(r))) => {
                let live = self.liveness.get(seqnum.log().0 as usize).is_some_and(|l| l.is_live(r.meta.book, seqnum));
                if live {
                    StoredRead::Found(r)
                } else {
                    StoredRead::Reclaimed
                }
            }
            Ok(Some(StoredData::Reclaimed(_))) => StoredRead::Reclaimed,
            Ok(None) | Err(_) => StoredRead::Missing,
        };
        self.send(to, Message::RecordReply { req, seqnum, read });
    }

    fn in_tier(&self, node: NodeId) -> bool {
        self.config.as_ref().and_then(|c| c.tier.as_ref()).is_some_and(|t| t.nodes().any(|n| n == node))
    }

    fn on_read_record(&mut self, to: NodeId, req: u64, seqnum: SeqNum) {
        let location = self.runs.get(&(seqnum.term(), seqnum.log())).and_then(|runs| {
            let i = runs.partition_point(|r| r.start_position <= seqnum.position()).checked_sub(1)?;
            let r = runs[i];
            let offset = seqnum.position() - r.start_position;
            (offset < r.len).then_some(Location { shard: r.shard, local_id: r.first + offset })
        });
        match location {
            Some(location) => self.out.push(StorageAction::Read { to, req, seqnum, location }),
            None => self.send(to, Message::RecordReply { req, seqnum, read: StoredRead::Missing }),
        }
    }

    fn drain_metalog(&mut self) {
        let Some(config) = self.config.clone() else { return };
        for l in 0..config.n_logs {
            let before = self.follower.delivered(LogId(l));
            let entries = self.follower.poll(&config, LogId(l));
            for e in entries {
                self.apply_entry(&config, e);
            }
            let after = self.follower.delivered(LogId(l));
            // Every term the follower moved past is sealed: close its shards here.
            for term in before.term..after.term {
                self.close_term(&config, Term(term), LogId(l));
            }
        }
    }

    fn apply_entry(&mut self, config: &Configuration, e: MetalogEntry) {
        let Some(t) = config.term(e.term) else { return };
        let lc = t.log(e.log);
        let log = e.log.0 as usize;
        let mut reclaim = Vec::new();
        // Shards the entry's version closed: what they hold past their cut is never
        // ordered, and goes as a sealed term's does.
        for (j, s) in lc.shards.iter().enumerate() {
            if s.until.is_some_and(|u| u <= e.version) && e.cut.get(j).is_some() {
                self.close_shard(s.shard);
            }
        }
        for (j, ids, start_position) in e.runs() {
            let shard_id = lc.shards[j].shard;
            let Some(shard) = self.shards.get_mut(&shard_id) else { continue };
            assert_eq!(shard.ordered, ids.start, "ordered prefixes are contiguous");
            shard.ordered = ids.end;
            let runs = self.runs.entry((e.term, e.log)).or_default();
            let len = ids.end - ids.start;
            match runs.last_mut() {
                // The shard's records go on where its last run ended, in the log and in
                // the shard (no other shard's records came in between): one run.
                Some(last)
                    if last.shard == shard_id
                        && last.first + last.len == ids.start
                        && last.start_position + last.len == start_position =>
                {
                    last.len += len
                }
                _ => runs.push(Run { start_position, shard: shard_id, first: ids.start, len }),
            }
            for (k, local_id) in ids.enumerate() {
                let seqnum = e.seqnum_at(start_position + k as u64);
                let location = Location { shard: shard_id, local_id };
                match shard.records.get(&local_id) {
                    Some(h) => {
                        let book = h.meta.book;
                        self.liveness[log].apply_record_parts(seqnum, location, book, &h.meta.tags, []);
                        if !self.liveness[log].is_live(book, seqnum) {
                            reclaim.push(location);
                        }
                    }
                    None => tracing::error!(node = %self.id, ?location, "an ordered record is missing from this replica"),
                }
            }
            // Metadata of records ordered long enough ago leaves memory.
            let keep_from = shard.ordered.saturating_sub(self.cfg.meta_window);
            while let Some(oldest) = shard.records.first_entry() {
                if *oldest.key() >= keep_from {
                    break;
                }
                oldest.remove();
            }
        }
        for trim in &e.trims {
            for (_, location) in self.liveness[log].apply_trim(trim.book, trim.tag, trim.seqnum) {
                reclaim.push(location);
            }
        }
        if !reclaim.is_empty() {
            self.out.push(StorageAction::Reclaim(reclaim));
        }
    }

    fn close_term(&mut self, config: &Configuration, term: Term, log: LogId) {
        let Some(t) = config.term(term) else { return };
        for s in &t.log(log).shards {
            self.close_shard(s.shard);
        }
    }

    /// No record of `shard_id` past those ordered will be: they go.
    fn close_shard(&mut self, shard_id: ShardId) {
        let Some(shard) = self.shards.get_mut(&shard_id) else { return };
        if shard.closed {
            return;
        }
        shard.closed = true;
        let cut = shard.ordered;
        shard.records.split_off(&cut);
        shard.stored = shard.stored.min(cut);
        shard.held = shard.held.min(cut);
        self.out.push(StorageAction::Discard { shard: shard_id, from: cut });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LogTermConfig, ShardConfig, TermConfig};
    use crate::types::BookId;

    const ME: NodeId = NodeId(4);
    const CONTROLLER: NodeId = NodeId(0);
    const PRIMARY: NodeId = NodeId(1);
    const BACKUP: NodeId = NodeId(2);
    const SHARD: ShardId = ShardId(7);

    fn config() -> Message {
        let shards =
            vec![ShardConfig { shard: SHARD, engine: NodeId(5), incarnation: 1, replicas: vec![ME], since: 0, until: None }];
        let logs = vec![LogTermConfig { log: LogId(0), sequencers: vec![PRIMARY, BACKUP], shards }];
        let term = TermConfig { term: Term(1), logs, engines: vec![NodeId(5)], storage: vec![ME], sealed: None, version: 0 };
        Message::NewConfig {
            config: Arc::new(Configuration {
                n_logs: 1,
                controller: CONTROLLER,
                terms: vec![term],
                indexers: vec![vec![]],
                tier: None,
            }),
        }
    }

    fn records(ids: std::ops::Range<LocalId>) -> Vec<(LocalId, Record)> {
        let meta = RecordMeta { book: BookId(1), tags: vec![], cond: None, unchanged: vec![] };
        ids.map(|i| (i, Record { meta: meta.clone(), data: bytes::Bytes::from_static(b"r") })).collect()
    }

    /// What a node did: progress sent as (to, held, stored), probe answers as (to,
    /// cut, durable), and the batches it wrote.
    #[derive(Default)]
    struct Did {
        progress: Vec<(NodeId, LocalId, LocalId)>,
        probed: Vec<(NodeId, LocalId, bool)>,
        batches: Vec<u64>,
    }

    fn did(s: &mut StorageNode) -> Did {
        let mut d = Did::default();
        for a in s.take_actions() {
            match a {
                StorageAction::Send(to, Message::Progress { held, stored, .. }) => d.progress.push((to, held[0].1, stored[0].1)),
                StorageAction::Send(to, Message::Probed { cut, durable, .. }) => d.probed.push((to, cut, durable)),
                StorageAction::Write { batch, .. } => d.batches.push(batch),
                _ => {}
            }
        }
        d
    }

    #[test]
    fn records_being_written_are_reported_held_and_a_probe_waits_for_them() {
        let mut s = StorageNode::recover(ME, vec![CONTROLLER], 1, StorageConfig::default(), vec![]);
        s.on_message(0, CONTROLLER, config());
        s.take_actions();
        s.on_message(10, NodeId(5), Message::Replicate { shard: SHARD, records: records(0..3), traces: Vec::new() });
        let Did { progress, batches, .. } = did(&mut s);
        assert_eq!(progress, vec![(PRIMARY, 3, 0)], "held, to the primary alone");
        // Being written: the probe waits; one past what is here: never durable here.
        s.on_message(20, CONTROLLER, Message::Probe { shard: SHARD, cut: 3 });
        s.on_message(20, CONTROLLER, Message::Probe { shard: SHARD, cut: 3 });
        s.on_message(20, CONTROLLER, Message::Probe { shard: SHARD, cut: 4 });
        assert_eq!(did(&mut s).probed, vec![(CONTROLLER, 4, false)]);
        s.on_written(&batches);
        let Did { progress, probed, .. } = did(&mut s);
        assert_eq!(progress, vec![(PRIMARY, 3, 3), (BACKUP, 3, 3)], "durable, to every sequencer of the log");
        assert_eq!(probed, vec![(CONTROLLER, 3, true)], "once, though asked twice");
        s.on_message(30, CONTROLLER, Message::Probe { shard: SHARD, cut: 2 });
        assert_eq!(did(&mut s).probed, vec![(CONTROLLER, 2, true)]);
    }

    #[test]
    fn a_restarted_node_answers_probes_from_what_its_store_held() {
        let meta = RecordMeta { book: BookId(1), tags: vec![], cond: None, unchanged: vec![] };
        let recovered = [0, 1, 3]
            .map(|local_id| RecoveredRecord { location: Location { shard: SHARD, local_id }, meta: meta.clone(), has_data: true })
            .to_vec();
        // No configuration yet (the controller that restarted with it sends none).
        let mut s = StorageNode::recover(ME, vec![CONTROLLER], 2, StorageConfig::default(), recovered);
        for (cut, durable) in [(2, true), (3, false), (4, false)] {
            s.on_message(0, CONTROLLER, Message::Probe { shard: SHARD, cut });
            assert_eq!(did(&mut s).probed, vec![(CONTROLLER, cut, durable)]);
        }
    }
}
