//! The sequencer: keeps replicas of metalogs; the primary of a metalog orders records.
//!
//! Per (term, log) there is one metalog, replicated on the term's sequencers. The
//! primary takes the element-wise minimum of the storage nodes' *held* progress (the
//! cut: what every replica of every shard has received and is writing, or has made
//! durable), and whenever the cut moves or trims wait, appends an entry: it sends the
//! entry to the backups and persists it meanwhile, while the storage nodes sync the
//! records (all these fsyncs overlap). The entry is committed and streamed to
//! subscribers once a quorum (itself included) holds it *and* every replica of its
//! records reported them durable: storage nodes send their durable progress to every
//! sequencer of the log, and a backup acknowledges an entry only once it persisted it
//! and saw its records durable (`Metalog::ackable_len`). At most one entry is in
//! flight (Boki §4.2), so an uncommitted tail is never longer than one entry.
//!
//! Boki orders only durable records, so an append waits for two fsyncs one after the
//! other (the records', then the metalog's); here it waits for the slower of them. The
//! price is at a seal: a tail entry a quorum persisted may name records that a crash
//! lost before they were synced (on every replica, as a power loss does). The
//! controller keeps such an entry only if its records are durable, and asks the
//! storage nodes (see `controller.rs`).
//!
//! Only the backups the quorum needs persist an entry at once: the primary names
//! them (those that acknowledged the last entry first) and sends the entry to the
//! others as a *spare*. A spare backup holds it in memory and persists it, with the
//! spares that came after, at most `spare_persist_us` later (at once when an entry that
//! is not a spare comes, or a seal, or a final tail), and acknowledges only then. Every
//! replica still persists every entry, but sequencers sharing a disk make one fsync
//! less per entry, and a backup that fails or lags is replaced in the quorum by a spare
//! within `spare_persist_us`. An acknowledgement still means a durable copy.
//!
//! Because the primary's copy may be lost by a crash while the backups' are not, a
//! primary never leads a metalog again after a restart: it persists a lead mark
//! (`MetalogWrite::Lead`) before its first entry, and a recovered replica with the
//! mark stays a backup. The controller sees the primary's new incarnation and ends
//! the term; sealing then keeps whatever a quorum holds.
//!
//! Sealing (Boki §4.5, after Delos): a replica that receives `Seal` persists a promise
//! to reject further entries of that metalog and reports its tail (with the entry
//! before its last, and how much it knows committed). A quorum of such reports
//! contains every committed entry (any two quorums intersect); the controller takes
//! the longest, drops its last entry if that was never committed (its probes of the
//! storage nodes find a record that no replica ever had durably: see `controller.rs`),
//! and the next configuration carries that final tail, which every replica adopts
//! (truncating an uncommitted extra entry, or appending the last one). A sealed
//! replica acknowledges nothing more, and a sealed primary commits nothing more: a
//! record that becomes durable after the controller found it missing cannot commit
//! the entry the controller dropped, as committing it would take the acknowledgement
//! of a replica in the sealing quorum, given before it sealed and so after it saw the
//! record durable, before the probe.
//!
//! Replicated metalogs (`MetalogMode::Replicated`, Boki's failure model): the driver
//! writes entries without syncing them before it acknowledges them or commits, so an
//! acknowledgement means a copy in the kernel's memory, which a crash of the process
//! keeps and a power loss of its machine may not. A replica that lost power may lack
//! entries it acknowledged (the driver learns so from its store,
//! `Sequencer::lost_unsynced_writes`): it reports the tails of the metalogs it held as
//! *amnesiac* (all metalogs of the terms up to the current one of the first
//! configuration it hears of, a bound it persists), and the controller seals with a
//! quorum of replicas that are not; it stays a replica meanwhile and catches up like a
//! backup that lagged. Only when a majority lost power (more amnesiac replicas than
//! the quorum tolerates) does the controller take the longest tail of all of them, and
//! lose what none had synced.
//!
//! A replica keeps the newest committed entries of each metalog in memory
//! (`entries_kept`) with the uncommitted tail; a fetch or gap repair reaching further
//! back is sent from its store (`SequencerAction::SendStored`).
//!
//! Invariants (asserted, and checked by the simulator's oracle):
//! - a committed entry's records are durable on every replica of their shard;
//! - entries of a metalog are contiguous from index 0, and each entry's `prev_cut` is
//!   the previous entry's `cut`; cuts never decrease;
//! - a replica never appends to a sealed metalog;
//! - `committed_len <= entries.len()`.
//!
//! Batches: a driver may hand the sequencer several inputs before it performs their actions
//! (`Sequencer::begin_batch`, `end_batch`). New entries wait for the end of the batch, so a
//! primary issues at most one entry per metalog for all the progress the batch reported.
//! This matters most for a primary of quorum one (`tally dev`), which commits each entry as
//! it issues it: without batches every progress report became an entry of its own, with an
//! fsync of its own. A spare that is not persisted yet stays in memory whatever
//! `entries_kept` says.
//!
//! Architecture Invariant: the sequencer never sees record data or books; it orders counts
//! of records per shard. Its durable state (entries, truncations, seal promises, lead
//! marks) is only what `MetalogStore` holds; everything else is soft and rebuilt after a
//! restart.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::config::{Configuration, LogTermConfig, TermConfig};
use crate::message::{Message, MetalogEntry, TrimCommand};
use crate::store::MetalogWrite;
use crate::types::{LocalId, LogId, Micros, NextTick, NodeId, SeqNum, Term};
use metalog::{Inflight, Metalog, Primary, Spares};
use mode::Amnesia;
pub use mode::MetalogMode;

#[derive(Clone, Debug)]
pub struct SequencerConfig {
    /// Resend an unacknowledged entry to backups after this long.
    pub entry_retry_us: Micros,
    /// An idle primary tells subscribers its committed length this often.
    pub tail_interval_us: Micros,
    pub heartbeat_interval_us: Micros,
    /// Trim commands waiting for the next entry; more are refused (engines retry).
    pub trims_pending_max: usize,
    /// Entries per fetch reply or gap repair.
    pub entries_per_message_max: usize,
    /// Committed entries a replica keeps in memory per metalog, for followers and
    /// backups a little behind; older ones are read from the store, so what a
    /// sequencer holds does not grow with its metalogs (at least one is kept: the next
    /// entry continues it).
    pub entries_kept: u64,
    /// A backup persists the spare entries it holds at most this long after the first
    /// came (see the module docs). A primary with 0 sends no spares.
    pub spare_persist_us: Micros,
    /// Whether entries are synced before they are acknowledged (for the driver: the
    /// state machine is the same).
    pub metalog: MetalogMode,
    /// `replicated`: the driver syncs what it wrote at most this long later, which
    /// bounds what a power loss of every sequencer loses.
    pub unsynced_max_us: Micros,
}

impl Default for SequencerConfig {
    fn default() -> Self {
        SequencerConfig {
            entry_retry_us: 20_000,
            tail_interval_us: 50_000,
            heartbeat_interval_us: 100_000,
            trims_pending_max: 4096,
            entries_per_message_max: 256,
            entries_kept: 4096,
            spare_persist_us: 5_000,
            metalog: MetalogMode::Synced,
            unsynced_max_us: 50_000,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum SequencerAction {
    Send(NodeId, Message),
    /// Make durable before performing any later action.
    Persist(MetalogWrite),
    /// Observation for the simulator's oracle: this replica saw `entry` committed.
    Committed(MetalogEntry),
    /// The primary cannot order more records in this term (position space exhausted).
    NeedsNewTerm {
        term: Term,
        log: LogId,
    },
    /// Read the committed entries `from..end` of (`term`, `log`) from the store, which
    /// left memory, and send them to `to` ([`stored_entries_messages`]).
    SendStored {
        to: NodeId,
        term: Term,
        log: LogId,
        from: u64,
        end: u64,
        /// `Some(committed_len)`: as a primary's repair of a backup's gap, one
        /// `ReplicateEntry` each; `None`: as the answer to a follower's fetch.
        gap: Option<u64>,
    },
}

/// The messages a `SendStored` sends, given what the store returned: nothing if the
/// read failed or came back short (the follower or backup asks again).
pub fn stored_entries_messages(
    term: Term,
    log: LogId,
    from: u64,
    end: u64,
    gap: Option<u64>,
    read: crate::error::Result<Vec<MetalogEntry>>,
) -> Vec<Message> {
    match read {
        Ok(entries) if from < end && entries.len() as u64 == end - from => match gap {
            Some(committed_len) => {
                entries.into_iter().map(|entry| Message::ReplicateEntry { entry, committed_len, spare: false }).collect()
            }
            None => vec![Message::MetalogEntries { term, log, entries }],
        },
        _ => vec![],
    }
}

/// Grows per-shard rows of replica prefixes to every shard of `lc` (a later version's
/// shards start at zero).
fn grow_rows(rows: &mut Vec<Vec<LocalId>>, lc: &LogTermConfig) {
    while let Some(s) = lc.shards.get(rows.len()) {
        rows.push(vec![0; s.replicas.len()]);
    }
}

pub struct Sequencer {
    id: NodeId,
    /// Every controller of the cluster: heartbeats go to all of them, and whichever
    /// leads acts on them (a standby ignores them until it takes over).
    controllers: Vec<NodeId>,
    incarnation: u64,
    cfg: SequencerConfig,
    config: Option<Arc<Configuration>>,
    logs: BTreeMap<(Term, LogId), Metalog>,
    last_heartbeat: Option<Micros>,
    out: Vec<SequencerAction>,
    /// Set between `begin_batch` and `end_batch`: the metalogs whose next entry waits
    /// for the batch's end.
    batch: Option<BTreeSet<(Term, LogId)>>,
    amnesia: Amnesia,
}

impl Sequencer {
    #[cfg(feature = "sim")]
    /// For debugging the simulator: each metalog's length, commit point and primary.
    pub fn debug_state(&self) -> String {
        let mut out = String::new();
        for ((term, log), m) in &self.logs {
            let primary = m.primary.as_ref().map(|p| {
                let inflight = p.inflight.as_ref().map(|i| (i.len, i.acks.clone()));
                format!("held {:?} inflight {inflight:?} stopped {} trims {}", p.held, p.stopped, p.trims.len())
            });
            let last = m.last().map(|e| (e.index, e.version, e.cut.clone()));
            out += &format!(
                "; {term:?}/{log:?}: len {} committed {} sealed {} last {last:?} durable {:?} primary {primary:?}",
                m.len(),
                m.committed_len,
                m.sealed,
                m.durable
            );
        }
        out
    }

    /// A sequencer rebuilt from its durable writes (empty for a new one).
    pub fn recover(
        id: NodeId,
        controllers: Vec<NodeId>,
        incarnation: u64,
        cfg: SequencerConfig,
        writes: Vec<MetalogWrite>,
    ) -> Sequencer {
        let mut s = Sequencer {
            id,
            controllers,
            incarnation,
            cfg,
            config: None,
            logs: BTreeMap::new(),
            last_heartbeat: None,
            out: Vec::new(),
            batch: None,
            amnesia: Amnesia::None,
        };
        for w in writes {
            match w {
                MetalogWrite::Entry(e) => {
                    let m = s.logs.entry((e.term, e.log)).or_insert_with(Metalog::new);
                    m.push(e);
                }
                MetalogWrite::Truncate { term, log, len } => {
                    if let Some(m) = s.logs.get_mut(&(term, log)) {
                        m.truncate(len);
                    }
                }
                MetalogWrite::Seal { term, log } => {
                    s.logs.entry((term, log)).or_insert_with(Metalog::new).sealed = true;
                }
                MetalogWrite::Lead { term, log } => {
                    s.logs.entry((term, log)).or_insert_with(Metalog::new).led = true;
                }
                MetalogWrite::Amnesiac { through } => s.amnesia = Amnesia::Through(through),
            }
        }
        s
    }

    /// Tells a recovered replica that its store may have lost writes it did not sync
    /// (a power loss under a `replicated` metalog): until it knows the terms that were,
    /// it reports every sealed tail as amnesiac, then those of the terms up to the
    /// current one of the first configuration it receives (it cannot have written to a
    /// later one), and it persists that bound.
    pub fn lost_unsynced_writes(&mut self) {
        self.amnesia = Amnesia::All;
    }

    /// Whether this replica's tail of a metalog of `term` may lack entries it
    /// acknowledged.
    pub fn amnesiac(&self, term: Term) -> bool {
        match self.amnesia {
            Amnesia::None => false,
            Amnesia::All => true,
            Amnesia::Through(t) => term <= t,
        }
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Starts a batch of inputs (messages and ticks) that the driver hands over before
    /// it performs their actions: new entries wait for `end_batch`, so that a primary
    /// issues one entry for all the progress the batch reported instead of one per
    /// report. (A primary of quorum one commits each entry as it issues it, so no
    /// entry in flight holds the next back.) Issuing later is always safe.
    pub fn begin_batch(&mut self) {
        self.batch.get_or_insert_with(BTreeSet::new);
    }

    /// Ends the batch: issues the entries it held back, at most one per metalog.
    pub fn end_batch(&mut self, now: Micros) {
        for (term, log) in self.batch.take().unwrap_or_default() {
            self.try_issue(now, term, log);
        }
    }

    /// Actions produced since the last call, in the order they must be performed.
    pub fn take_actions(&mut self) -> Vec<SequencerAction> {
        std::mem::take(&mut self.out)
    }

    fn send(&mut self, to: NodeId, msg: Message) {
        self.out.push(SequencerAction::Send(to, msg));
    }

    fn log_config(&self, term: Term, log: LogId) -> Option<&LogTermConfig> {
        let t = self.config.as_ref()?.term(term)?;
        t.logs.get(log.0 as usize)
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
        let keys: Vec<(Term, LogId)> = self.logs.iter().filter(|(_, m)| m.primary.is_some()).map(|(k, _)| *k).collect();
        for (term, log) in keys {
            self.primary_tick(now, term, log, heartbeat, &mut next);
        }
        let spare_persist_us = self.cfg.spare_persist_us;
        let held: Vec<((Term, LogId), Micros)> =
            self.logs.iter().filter_map(|(k, m)| Some((*k, m.spares?.since + spare_persist_us))).collect();
        for (key, due) in held {
            if now >= due {
                self.persist_spares(key);
            } else {
                next.at(due);
            }
        }
        next
    }

    /// Persists the spare entries of a metalog and acknowledges them to the primary.
    fn persist_spares(&mut self, key: (Term, LogId)) {
        let Some(m) = self.logs.get_mut(&key) else { return };
        let Some(spares) = m.spares.take() else { return };
        for i in spares.from..m.len() {
            let entry = m.get(i).expect("spare entries stay in memory").clone();
            self.out.push(SequencerAction::Persist(MetalogWrite::Entry(entry)));
        }
        self.ack(key, spares.primary, true);
    }

    /// A backup acknowledges to `primary` the entries it persisted and saw durable,
    /// unless sealed; `always`: even if it acknowledged as much already (a repeat, in
    /// case the first was lost).
    fn ack(&mut self, key: (Term, LogId), primary: NodeId, always: bool) {
        let Some(m) = self.logs.get_mut(&key) else { return };
        if m.sealed {
            return;
        }
        let len = m.ackable_len();
        if always || len > m.acked_len {
            m.acked_len = m.acked_len.max(len);
            self.send(primary, Message::EntryAck { term: key.0, log: key.1, len });
        }
    }

    /// `heartbeat`: this tick sent one, and takes a tail push without news along.
    fn primary_tick(&mut self, now: Micros, term: Term, log: LogId, heartbeat: bool, next: &mut NextTick) {
        let Some(lc) = self.log_config(term, log).cloned() else { return };
        let m = self.logs.get_mut(&(term, log)).expect("metalog exists");
        let Some(p) = m.primary.as_mut() else { return };
        let mut resend = Vec::new();
        let mut tail = None;
        if let Some(inf) = p.inflight.as_mut() {
            if now >= inf.sent_at + self.cfg.entry_retry_us {
                inf.sent_at = now;
                // The entry in flight is never one that left memory.
                let entry = m.entries[(inf.len - 1 - m.first) as usize].clone();
                for &b in &lc.sequencers {
                    if b != self.id && !inf.acks.contains(&b) {
                        resend.push((b, entry.clone()));
                    }
                }
            }
        } else if if p.tail_news { now >= p.last_push + self.cfg.tail_interval_us } else { heartbeat } {
            p.last_push = now;
            p.tail_news = false;
            tail = Some(m.committed_len);
        }
        let committed_len = m.committed_len;
        for (b, entry) in resend {
            self.send(b, Message::ReplicateEntry { entry, committed_len, spare: false });
        }
        if let Some(committed_len) = tail {
            let subs: Vec<NodeId> = self.subscribers(term);
            for n in subs {
                self.send(n, Message::MetalogTail { term, log, committed_len });
            }
        }
        self.try_issue(now, term, log);
        // The entry in flight (maybe just issued) is resent, or else the tail pushed.
        if let Some(p) = self.logs.get(&(term, log)).and_then(|m| m.primary.as_ref()) {
            match &p.inflight {
                Some(inf) => next.at(inf.sent_at + self.cfg.entry_retry_us),
                None if p.tail_news => next.at(p.last_push + self.cfg.tail_interval_us),
                None => {} // with the next heartbeat
            }
        }
    }

    /// The nodes that get `term`'s entries (and index nodes), engines first: they answer the appends an
    /// entry orders, where storage nodes only learn seqnums from it, and on a shared
    /// machine the first sent is the first to run (-3 to -10 us of a one-client
    /// append's 115-185 us of software, measured on tmpfs).
    fn subscribers(&self, term: Term) -> Vec<NodeId> {
        let Some(config) = self.config.as_ref() else { return vec![] };
        // The current term's nodes too: a node added by a later term replays old ones.
        let terms: Vec<&TermConfig> = config.term(term).into_iter().chain([config.current()]).collect();
        let engines: BTreeSet<NodeId> = terms.iter().flat_map(|t| t.engines.iter().copied()).collect();
        let storage: BTreeSet<NodeId> = terms.iter().flat_map(|t| t.storage.iter().copied()).collect();
        // Index nodes (partial mode) next: the function nodes wait for their decided updates.
        let tier = config.tier.iter().flat_map(|t| t.nodes());
        engines.iter().copied().chain(tier).chain(storage.difference(&engines).copied()).collect()
    }

    pub fn on_message(&mut self, now: Micros, from: NodeId, msg: Message) {
        match msg {
            Message::NewConfig { config } => self.on_config(now, config),
            Message::Progress { term, log, held, stored } => self.on_progress(now, from, term, log, held, stored),
            Message::TrimRequest { term, log, command } => {
                let max = self.cfg.trims_pending_max;
                if let Some(p) = self.logs.get_mut(&(term, log)).and_then(|m| m.primary.as_mut()) {
                    if p.trims.len() < max && !p.trims.contains(&command) {
                        p.trims.push(command);
                    }
                }
                self.try_issue(now, term, log);
            }
            Message::ReplicateEntry { entry, committed_len, spare } => self.on_replicate(now, from, entry, committed_len, spare),
            Message::Committed { term, log, len } => {
                if let Some(m) = self.logs.get_mut(&(term, log)) {
                    m.committed_len = m.committed_len.max(len.min(m.len()));
                    m.forget(self.cfg.entries_kept);
                }
            }
            Message::EntryAck { term, log, len } => self.on_ack(now, from, term, log, len),
            Message::EntryGap { term, log, len } => self.on_gap(from, term, log, len),
            Message::EntryRejected { term, log } => {
                if let Some(p) = self.logs.get_mut(&(term, log)).and_then(|m| m.primary.as_mut()) {
                    p.stopped = true;
                }
            }
            Message::MetalogFetch { term, log, from: start } => {
                let max = self.cfg.entries_per_message_max as u64;
                if let Some(m) = self.logs.get(&(term, log)) {
                    let end = m.committed_len.min(start.saturating_add(max));
                    if start < end {
                        match m.range(start, end) {
                            Some(entries) => self.send(from, Message::MetalogEntries { term, log, entries }),
                            None => {
                                let end = end.min(m.first);
                                self.out.push(SequencerAction::SendStored { to: from, term, log, from: start, end, gap: None })
                            }
                        }
                    }
                }
            }
            Message::Seal { term, log } => {
                self.persist_spares((term, log));
                self.on_seal(from, term, log)
            }
            _ => {}
        }
    }

    fn on_config(&mut self, now: Micros, config: Arc<Configuration>) {
        if self.config.as_ref().is_some_and(|c| c.stamp() >= config.stamp()) {
            self.send(config.controller, Message::config_ack(&config));
            return;
        }
        // Adopt the final tails of sealed terms.
        for t in &config.terms {
            let Some(tails) = &t.sealed else { continue };
            for (l, tail) in tails.iter().enumerate() {
                let key = (t.term, LogId(l as u8));
                if self.logs.get(&key).is_some_and(|m| !m.finalized) {
                    // Truncation and the last entry follow what this replica holds.
                    self.persist_spares(key);
                }
                let Some(m) = self.logs.get_mut(&key) else { continue };
                if m.finalized {
                    continue;
                }
                m.primary = None;
                m.sealed = true;
                m.finalized = true;
                if m.len() > tail.len {
                    m.truncate(tail.len);
                    self.out.push(SequencerAction::Persist(MetalogWrite::Truncate { term: t.term, log: key.1, len: tail.len }));
                } else if m.len() + 1 == tail.len {
                    let last = tail.last.clone().expect("a sealed tail carries its last entry");
                    self.out.push(SequencerAction::Persist(MetalogWrite::Entry(last.clone())));
                    m.push(last);
                }
                m.committed_len = m.len().min(tail.len);
                m.forget(self.cfg.entries_kept);
            }
        }
        let current = config.current().clone();
        if self.amnesia == Amnesia::All {
            self.amnesia = Amnesia::Through(current.term);
            self.out.push(SequencerAction::Persist(MetalogWrite::Amnesiac { through: current.term }));
        }
        self.config = Some(config.clone());
        for lc in &current.logs {
            if !lc.sequencers.contains(&self.id) {
                continue;
            }
            let m = self.logs.entry((current.term, lc.log)).or_insert_with(Metalog::new);
            if lc.primary() == self.id && !m.sealed && m.primary.is_none() {
                if m.led {
                    // Led before a restart: backups may hold an entry this replica
                    // lost. The controller ends the term (see the module docs).
                    continue;
                }
                // Never led, so nothing was sent, and only a term's primary issues
                // its entries: the metalog is empty and nothing is in flight.
                debug_assert!(m.len() == 0, "entries of a term this replica never led");
                m.led = true;
                self.out.push(SequencerAction::Persist(MetalogWrite::Lead { term: current.term, log: lc.log }));
                let backups = lc.sequencers.iter().copied().filter(|&b| b != self.id);
                m.primary = Some(Primary {
                    held: Vec::new(),
                    inflight: None,
                    eager: backups.take(lc.quorum().saturating_sub(1)).collect(),
                    trims: Vec::new(),
                    last_push: now,
                    tail_news: true,
                    stopped: false,
                });
            }
        }
        self.send(config.controller, Message::config_ack(&config));
        for lc in &current.logs {
            self.try_issue(now, current.term, lc.log);
        }
    }

    fn on_progress(
        &mut self,
        now: Micros,
        from: NodeId,
        term: Term,
        log: LogId,
        held: Vec<(u32, LocalId)>,
        stored: Vec<(u32, LocalId)>,
    ) {
        let Some(lc) = self.log_config(term, log).cloned() else { return };
        let Some(m) = self.logs.get_mut(&(term, log)) else { return };
        grow_rows(&mut m.durable, &lc);
        let replica = |j: u32| {
            let shard = lc.shards.get(j as usize)?;
            Some((j as usize, shard.replicas.iter().position(|&x| x == from)?))
        };
        for &(j, n) in &stored {
            let Some((j, r)) = replica(j) else { continue };
            m.durable[j][r] = m.durable[j][r].max(n);
        }
        let Some(p) = m.primary.as_mut() else {
            self.ack((term, log), lc.primary(), false);
            return;
        };
        grow_rows(&mut p.held, &lc);
        for &(j, n) in held.iter().chain(&stored) {
            let Some((j, r)) = replica(j) else { continue };
            p.held[j][r] = p.held[j][r].max(n);
        }
        self.maybe_commit(now, term, log, &lc);
        self.try_issue(now, term, log);
    }

    fn try_issue(&mut self, now: Micros, term: Term, log: LogId) {
        if let Some(held) = self.batch.as_mut() {
            held.insert((term, log));
            return;
        }
        let Some(lc) = self.log_config(term, log).cloned() else { return };
        let version = self.config.as_ref().and_then(|c| c.term(term)).map_or(0, |t| t.version);
        let Some(m) = self.logs.get_mut(&(term, log)) else { return };
        if m.sealed {
            return;
        }
        let len = m.len();
        let last = m.last().cloned();
        let Some(p) = m.primary.as_mut() else { return };
        if p.inflight.is_some() || p.stopped {
            return;
        }
        grow_rows(&mut p.held, &lc);
        // The shards of every version up to this one; a closed shard's cut stays put
        // from the entry announcing its closing on.
        let mut prev_cut = last.as_ref().map_or_else(Vec::new, |e| e.cut.clone());
        prev_cut.resize(lc.shards.len(), 0);
        let cut: Vec<LocalId> = (p.held.iter().zip(&prev_cut).zip(&lc.shards))
            .map(|((replicas, &prev), s)| match s.open_at(version) {
                true => replicas.iter().copied().min().unwrap_or(0).max(prev),
                false => prev,
            })
            .collect();
        // A later version is announced at once, by an empty entry if need be.
        let announce = last.as_ref().map_or(0, |e| e.version) < version;
        if cut == prev_cut && p.trims.is_empty() && !announce {
            return;
        }
        let start_position = last.as_ref().map_or(0, |e| e.start_position + e.record_count());
        let count: u64 = cut.iter().zip(&prev_cut).map(|(c, p)| c - p).sum();
        if count > 0 && start_position + count - 1 > SeqNum::POSITION_MAX {
            p.stopped = true;
            self.out.push(SequencerAction::NeedsNewTerm { term, log });
            return;
        }
        let trims = std::mem::take(&mut p.trims);
        let entry = MetalogEntry { term, log, index: len, start_position, prev_cut, cut, trims, version };
        p.inflight = Some(Inflight { len: len + 1, acks: vec![self.id], sent_at: now });
        let eager = p.eager.clone();
        m.push(entry.clone());
        let committed_len = m.committed_len;
        // The backups get the entry before this replica persists it, so the fsyncs
        // overlap. The primary's own acknowledgement still means a durable copy: its
        // persist completes before the next input, and so before any backup's ack is
        // counted. A crash in between loses only this replica's copy; see the lead
        // mark in the module docs.
        for &b in &lc.sequencers {
            if b != self.id {
                let spare = self.cfg.spare_persist_us > 0 && !eager.contains(&b);
                self.send(b, Message::ReplicateEntry { entry: entry.clone(), committed_len, spare });
            }
        }
        self.out.push(SequencerAction::Persist(MetalogWrite::Entry(entry.clone())));
        self.maybe_commit(now, term, log, &lc);
    }

    fn maybe_commit(&mut self, now: Micros, term: Term, log: LogId, lc: &LogTermConfig) {
        let m = self.logs.get_mut(&(term, log)).expect("metalog exists");
        // Sealed, it commits nothing more: a seal may drop the entry in flight (see
        // the module docs).
        if m.sealed {
            return;
        }
        let Some(inf) = m.primary.as_ref().and_then(|p| p.inflight.as_ref()) else { return };
        let entry = m.get(inf.len - 1).expect("the entry in flight is in memory");
        if inf.acks.len() < lc.quorum() || !m.witnessed(entry) {
            return;
        }
        let p = m.primary.as_mut().expect("checked");
        let inf = p.inflight.as_ref().expect("checked");
        let len = inf.len;
        // The backups that made this quorum persist the next entry at once.
        p.eager = inf.acks[1..lc.quorum()].to_vec();
        p.inflight = None;
        p.last_push = now;
        p.tail_news = true;
        let newly: Vec<MetalogEntry> = m.range(m.committed_len, len).expect("uncommitted entries are in memory");
        m.committed_len = len;
        m.forget(self.cfg.entries_kept);
        for e in newly {
            self.out.push(SequencerAction::Committed(e.clone()));
            for n in self.subscribers(term) {
                self.send(n, Message::MetalogPush { entry: e.clone() });
            }
        }
        for &b in &lc.sequencers {
            if b != self.id {
                self.send(b, Message::Committed { term, log, len });
            }
        }
        self.try_issue(now, term, log);
    }

    fn on_replicate(&mut self, now: Micros, from: NodeId, entry: MetalogEntry, committed_len: u64, spare: bool) {
        let (term, log) = (entry.term, entry.log);
        let m = self.logs.entry((term, log)).or_insert_with(Metalog::new);
        if m.sealed {
            self.send(from, Message::EntryRejected { term, log });
            return;
        }
        assert!(!m.finalized, "only sealed metalogs are finalized");
        if entry.index > m.len() {
            let len = m.len();
            self.send(from, Message::EntryGap { term, log, len });
            return;
        }
        let index = entry.index;
        if index == m.len() {
            m.push(entry);
            if spare {
                m.spares.get_or_insert(Spares { from: index, since: now, primary: from });
            } else if m.spares.is_none() {
                let entry = m.get(index).expect("just pushed").clone();
                self.out.push(SequencerAction::Persist(MetalogWrite::Entry(entry)));
            }
        } else if let Some(held) = m.get(index) {
            assert_eq!(*held, entry, "a primary never rewrites an entry");
        }
        m.committed_len = m.committed_len.max(committed_len.min(m.len()));
        m.forget(self.cfg.entries_kept);
        match m.spares {
            // Spares wait, and so does their acknowledgement.
            Some(_) if spare => {}
            // Persisted with the spares before it, in order, then acknowledged.
            Some(_) => self.persist_spares((term, log)),
            None => self.ack((term, log), from, true),
        }
    }

    fn on_ack(&mut self, now: Micros, from: NodeId, term: Term, log: LogId, len: u64) {
        let Some(lc) = self.log_config(term, log).cloned() else { return };
        let Some(p) = self.logs.get_mut(&(term, log)).and_then(|m| m.primary.as_mut()) else { return };
        if let Some(inf) = p.inflight.as_mut() {
            if len >= inf.len && !inf.acks.contains(&from) {
                inf.acks.push(from);
            }
        }
        self.maybe_commit(now, term, log, &lc);
    }

    fn on_gap(&mut self, from: NodeId, term: Term, log: LogId, len: u64) {
        let max = self.cfg.entries_per_message_max as u64;
        let Some(m) = self.logs.get(&(term, log)) else { return };
        if m.primary.is_none() {
            return;
        }
        let end = m.len().min(len + max);
        let committed_len = m.committed_len;
        let Some(entries) = m.range(len.min(end), end) else {
            // Far behind: what it lacks has left memory, and is committed.
            let end = end.min(m.first);
            self.out.push(SequencerAction::SendStored { to: from, term, log, from: len, end, gap: Some(committed_len) });
            return;
        };
        for entry in entries {
            self.send(from, Message::ReplicateEntry { entry, committed_len, spare: false });
        }
    }

    fn on_seal(&mut self, from: NodeId, term: Term, log: LogId) {
        let m = self.logs.entry((term, log)).or_insert_with(Metalog::new);
        if !m.sealed {
            m.sealed = true;
            self.out.push(SequencerAction::Persist(MetalogWrite::Seal { term, log }));
        }
        if let Some(p) = m.primary.as_mut() {
            p.stopped = true;
        }
        let (len, last, committed_len) = (m.len(), m.last().cloned(), m.committed_len);
        let prev = len.checked_sub(2).and_then(|i| m.get(i)).cloned().map(Box::new);
        let amnesiac = self.amnesiac(term);
        self.send(from, Message::Sealed { term, log, len, last, prev, committed_len, amnesiac });
    }
}

mod metalog;
mod mode;
#[cfg(test)]
mod tests;
