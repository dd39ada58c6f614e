//! The controller: decides terms. It watches every node's heartbeats, and when a
//! member of the current term is down (or an engine came back as a new incarnation,
//! or a live node could join), it reconfigures (Boki §4.5):
//!
//! 1. seal: send `Seal` to every sequencer of every log of the term, until a quorum of
//!    each log's sequencers answered with their tails;
//! 2. take, per log, the longest tail of the quorum as the term's final metalog. Its
//!    last entry may be uncommitted, and its records lost by a crash before they were
//!    synced (a primary orders records being written: see `sequencer.rs`). Unless a
//!    sequencer knows it committed, every replica of the records it orders is probed:
//!    a replica that never had one durably proves it never committed, and the entry
//!    is dropped (the one before it ends the term); it is kept once every shard has a
//!    durable copy and every live replica answered. While no replica of a shard
//!    answers, the seal waits: the records may be durable there only;
//! 3. install the next term (sequencers, storage nodes, and one new shard per engine
//!    and log) with the final tails recorded in the sealed term, and send the whole
//!    configuration to every node until it acknowledges.
//!
//! Every configuration is persisted (a `Persist` action) before any node hears of it.
//! A controller restarted from its store ([`Controller::recover`]) cannot know which
//! nodes restarted with it, so it treats them all as restarted: once every node was
//! heard from (or the startup grace passed) it seals the stored current term and
//! installs the next, with new shards for the engines' new incarnations. Until then it
//! sends no configuration: the stored one names a term that is about to end.
//!
//! Invariants (asserted): terms are consecutive; a sealed term's tail is never
//! shorter than any entry the term committed (any two quorums intersect, and the
//! primary commits one entry at a time); shard ids are never reused, across restarts
//! too (storage nodes keep old shards' records under their ids).
//!
//! Architecture Invariant: the controller never touches records or entries beyond a
//! term's final one; it is the only writer of configurations. Its only durable state
//! is the last configuration (`ControllerStore`); members' liveness and incarnations
//! are soft and relearnt from heartbeats. In a cluster the store belongs in etcd.
//!
//! Incarnations: a restarted engine never reuses a shard of its previous incarnation
//! (shards name the incarnation they were made for), and a primary sequencer that restarted
//! ends its term (the controller keeps, as soft state, the incarnation each primary had
//! when its term was installed). Shard ids continue after the stored ones, so storage nodes
//! never confuse a new shard with an old one. This is what lets a whole-cluster restart
//! (`tally dev` stopped and started) keep every book: the old terms stay in the history,
//! the sequencers reload their entries, the storage nodes their records, and the engines
//! replay it all.
//!
//! The store is a file (dev cluster), memory (simulator) or etcd (a cluster of `tally node`
//! processes), where a persist is a compare-and-swap on the revision the leader loaded: a
//! controller that lost its lease without noticing cannot overwrite its successor's term.
//! Every node sends its heartbeats to every controller (`ControllerConfig::peers` and the
//! roles' `controllers`); only the leader acts on them, and members that register after it
//! started join through `Controller::add_member`. `Controller::set_n_logs` asks for more
//! physical logs (from etcd's settings in a cluster, `Cluster::add_logs` in process,
//! `SimOptions::add_logs` in the simulator): the next term adds them, with sequencers,
//! shards and index replicas chosen from the live nodes. A stored configuration with more
//! logs than a controller was told keeps them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::config::{Configuration, LogTermConfig, SealedTail, ShardConfig, TermConfig, TierLayout};
use crate::error::{Error, Result};
use crate::message::{Message, MetalogEntry};
use crate::types::{LocalId, LogId, Micros, NextTick, NodeId, ShardId, Term};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Sequencer,
    Storage,
    Engine,
    /// An index node of the index tier (partial mode): never in a term, so its
    /// absence, restart or arrival seals nothing.
    Index,
}

#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Physical logs the cluster should have. A configuration with fewer gets the
    /// missing ones in its next term; logs are never removed, so a stored
    /// configuration with more keeps them.
    pub n_logs: u8,
    /// Sequencers per metalog (primary included).
    pub n_meta: usize,
    /// Storage replicas per shard.
    pub n_data: usize,
    /// A node silent this long is down.
    pub failure_timeout_us: Micros,
    /// Resend seals and configurations that were not answered after this long.
    pub resend_us: Micros,
    /// Install the first term once every node was heard from, or after this long with
    /// at least one sequencer and one storage node.
    pub startup_grace_us: Micros,
    /// Engines holding each log's index, chosen once from the engines known when the
    /// first term is installed (`None`: every engine indexes every log).
    pub indexers_per_log: Option<usize>,
    /// Partial mode: the index tier's shards and replicas per shard, laid out once over
    /// the index nodes known when the first term is installed (`None`: complete mode).
    pub tier: Option<(usize, usize)>,
    /// The other controllers of the cluster (standbys that may take over), whose
    /// stored configurations this one resumes from. Empty in a one-controller cluster.
    pub peers: Vec<NodeId>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            n_logs: 1,
            n_meta: 3,
            n_data: 3,
            failure_timeout_us: 1_000_000,
            resend_us: 100_000,
            startup_grace_us: 2_000_000,
            indexers_per_log: None,
            tier: None,
            peers: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ControllerAction {
    Send(NodeId, Message),
    /// Make this configuration durable before performing any later action.
    Persist(Arc<Configuration>),
    /// Observation: a new configuration was installed.
    Installed(Arc<Configuration>),
}

struct Member {
    role: Role,
    incarnation: u64,
    last_seen: Option<Micros>,
}

struct Sealing {
    term: Term,
    replies: Vec<BTreeMap<NodeId, SealedReply>>,
    /// Once a quorum of every log replied: the tail of each log, or the probes that
    /// decide it.
    tails: Option<Vec<TailChoice>>,
    sent_at: Micros,
}

#[derive(Clone)]
struct SealedReply {
    len: u64,
    last: Option<MetalogEntry>,
    prev: Option<MetalogEntry>,
    committed_len: u64,
}

/// A log's final tail, decided or waiting on its storage nodes.
enum TailChoice {
    Decided(SealedTail),
    /// The longest tail ends with an entry no replica knows committed, whose records
    /// may not be durable: it is kept if they are (`keep`), dropped (`drop`) if a
    /// replica never had one.
    Probing {
        keep: SealedTail,
        drop: Option<SealedTail>,
        probes: Vec<Probe>,
    },
}

struct Probe {
    shard: ShardId,
    cut: LocalId,
    replica: NodeId,
    durable: Option<bool>,
}

pub struct Controller {
    id: NodeId,
    cfg: ControllerConfig,
    members: BTreeMap<NodeId, Member>,
    config: Option<Arc<Configuration>>,
    acked: BTreeSet<NodeId>,
    config_sent_at: Micros,
    sealing: Option<Sealing>,
    next_shard: u32,
    started_at: Option<Micros>,
    /// Chosen at the first install (or taken from the stored configuration).
    indexers: Option<Vec<Vec<NodeId>>>,
    /// Chosen at the first install (or taken from the stored configuration).
    tier: Option<Option<TierLayout>>,
    /// The current term was installed before this controller restarted: it is sealed
    /// and replaced before anything else, and its configuration is never sent.
    restarted: bool,
    /// When "not enough live nodes" was last said (once a second at most).
    short_warned_at: Option<Micros>,
    /// The incarnation each primary sequencer of the current term had when it was
    /// installed. A primary that restarts never leads that term again (see
    /// `sequencer.rs`), so its new incarnation ends the term. Soft: a restarted
    /// controller seals the stored term anyway.
    primaries: BTreeMap<NodeId, u64>,
    out: Vec<ControllerAction>,
}

impl Controller {
    pub fn new(id: NodeId, cfg: ControllerConfig, roster: &[(NodeId, Role)]) -> Controller {
        assert!(cfg.n_logs > 0 && cfg.n_meta > 0 && cfg.n_data > 0);
        let members = roster.iter().map(|&(n, role)| (n, Member { role, incarnation: 0, last_seen: None })).collect();
        Controller {
            id,
            cfg,
            members,
            config: None,
            acked: BTreeSet::new(),
            config_sent_at: 0,
            sealing: None,
            next_shard: 0,
            started_at: None,
            indexers: None,
            tier: None,
            restarted: false,
            short_warned_at: None,
            primaries: BTreeMap::new(),
            out: Vec::new(),
        }
    }

    /// A controller that resumes from `stored`, the configuration it persisted last
    /// (`None`: a new cluster). Fails when `stored` is not a configuration of this
    /// roster and `cfg`'s number of logs. The stored index replicas win over
    /// `cfg.indexers_per_log`: they are fixed for the life of the cluster.
    pub fn recover(
        id: NodeId,
        cfg: ControllerConfig,
        roster: &[(NodeId, Role)],
        stored: Option<Configuration>,
    ) -> Result<Controller> {
        let mut c = Controller::new(id, cfg, roster);
        let Some(stored) = stored else { return Ok(c) };
        c.check_stored(&stored)?;
        let last_shard = stored.terms.iter().flat_map(|t| &t.logs).flat_map(|l| &l.shards).map(|s| s.shard.0).max();
        c.next_shard = match last_shard {
            None => 0,
            Some(s) => s.checked_add(1).ok_or_else(|| Error::Storage("the stored configuration used every shard id".into()))?,
        };
        c.indexers = Some(stored.indexers.clone());
        c.tier = Some(stored.tier.clone());
        c.restarted = true;
        tracing::info!(term = stored.current().term.0, "controller resumes from its stored configuration");
        c.config = Some(Arc::new(stored));
        Ok(c)
    }

    /// Checks a configuration read from the store against this controller's settings.
    fn check_stored(&self, stored: &Configuration) -> Result<()> {
        let mismatch = |what: String| Err(Error::InvalidArgument(format!("the stored configuration {what}")));
        if stored.controller != self.id && !self.cfg.peers.contains(&stored.controller) {
            return mismatch(format!("belongs to controller {}, not {} or its peers", stored.controller, self.id));
        }
        let Some(first) = stored.terms.first() else { return mismatch("has no term".into()) };
        if stored.n_logs != stored.current().n_logs() {
            return mismatch(format!("says {} physical logs, its current term has {}", stored.n_logs, stored.current().n_logs()));
        }
        let role_is = |n: NodeId, role: Role| self.members.get(&n).is_some_and(|m| m.role == role);
        let mut n_before = 1;
        for (i, t) in stored.terms.iter().enumerate() {
            let last = i + 1 == stored.terms.len();
            if first.term.0.checked_add(i as u16) != Some(t.term.0) {
                return mismatch(format!("has term {} at place {i}", t.term.0));
            }
            if t.logs.len() < n_before || t.logs.iter().enumerate().any(|(l, lc)| lc.log.0 as usize != l) {
                return mismatch(format!("lists other logs in term {}", t.term.0));
            }
            n_before = t.logs.len();
            if t.sealed.is_some() == last || t.sealed.as_ref().is_some_and(|s| s.len() != t.logs.len()) {
                return mismatch(format!("seals term {} wrongly (only every term before the last is sealed)", t.term.0));
            }
            let sequencers = t.logs.iter().flat_map(|l| &l.sequencers).map(|&n| (n, Role::Sequencer));
            let replicas = t.logs.iter().flat_map(|l| &l.shards).flat_map(|s| &s.replicas).map(|&n| (n, Role::Storage));
            let engines = t.logs.iter().flat_map(|l| &l.shards).map(|s| (s.engine, Role::Engine));
            let listed = t.storage.iter().map(|&n| (n, Role::Storage)).chain(t.engines.iter().map(|&n| (n, Role::Engine)));
            if let Some((n, role)) = sequencers.chain(replicas).chain(engines).chain(listed).find(|&(n, role)| !role_is(n, role))
            {
                return mismatch(format!("names {n} ({role:?}) in term {}, a node this cluster does not have", t.term.0));
            }
            if t.logs.iter().any(|l| l.sequencers.is_empty()) {
                return mismatch(format!("has a log without sequencers in term {}", t.term.0));
            }
        }
        if stored.indexers.len() != stored.n_logs as usize || stored.indexers.iter().flatten().any(|&n| !role_is(n, Role::Engine))
        {
            return mismatch("names index replicas this cluster does not have".into());
        }
        if stored.tier.as_ref().is_some_and(|t| t.shards.is_empty() || t.nodes().any(|n| !role_is(n, Role::Index))) {
            return mismatch("names index nodes this cluster does not have".into());
        }
        Ok(())
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Adds a node that registered after this controller started (membership in a
    /// cluster is dynamic: nodes register with the control plane). It is heard from
    /// like any member and joins the next term once live. A node already known keeps
    /// its role: returns false when `role` differs from it.
    pub fn add_member(&mut self, node: NodeId, role: Role) -> bool {
        let m = self.members.entry(node).or_insert(Member { role, incarnation: 0, last_seen: None });
        m.role == role
    }

    /// The physical logs the cluster has or is asked to have.
    pub fn n_logs(&self) -> u8 {
        self.config.as_ref().map_or(0, |c| c.n_logs).max(self.cfg.n_logs)
    }

    /// Asks for `n` physical logs: the next term adds the missing ones (the books
    /// that jump hashing maps to them move there). Logs are never removed.
    pub fn set_n_logs(&mut self, n: u8) -> Result<()> {
        let have = self.n_logs();
        if n < have {
            return Err(Error::InvalidArgument(format!("the cluster has {have} physical logs; logs are never removed")));
        }
        self.cfg.n_logs = n;
        Ok(())
    }

    /// Index replicas of logs `from..to`: for log l, k engines from the l-th on, so
    /// the logs' indexes spread over the engines. Engines known now are chosen from;
    /// the live ones first when logs are added to a running cluster.
    fn choose_indexers(&self, now: Micros, from: usize, to: usize) -> Vec<Vec<NodeId>> {
        let mut engines = self.live_of(now, Role::Engine);
        if engines.is_empty() || from == 0 {
            engines = self.members.iter().filter(|(_, m)| m.role == Role::Engine).map(|(n, _)| *n).collect();
        }
        match self.cfg.indexers_per_log {
            Some(k) if k > 0 && k < engines.len() => {
                (from..to).map(|l| (0..k).map(|i| engines[(l + i) % engines.len()]).collect()).collect()
            }
            _ => vec![Vec::new(); to - from],
        }
    }

    /// The index tier's layout over the index nodes known now: shard s gets nodes s,
    /// s + S, s + 2S... up to R of them (fewer nodes than shards: fewer shards).
    fn choose_tier(&self) -> Option<TierLayout> {
        let (shards, replicas) = self.cfg.tier?;
        let nodes: Vec<NodeId> = self.members.iter().filter(|(_, m)| m.role == Role::Index).map(|(n, _)| *n).collect();
        let shards = shards.min(nodes.len()).max(1);
        let layout: Vec<Vec<NodeId>> =
            (0..shards).map(|s| nodes.iter().skip(s).step_by(shards).take(replicas.max(1)).copied().collect()).collect();
        if layout.iter().any(Vec::is_empty) {
            tracing::warn!("partial mode without index nodes: the cluster runs in complete mode");
            return None;
        }
        Some(TierLayout { shards: layout })
    }

    pub fn configuration(&self) -> Option<&Arc<Configuration>> {
        self.config.as_ref()
    }

    pub fn take_actions(&mut self) -> Vec<ControllerAction> {
        std::mem::take(&mut self.out)
    }

    fn live(&self, now: Micros, node: NodeId) -> bool {
        self.members.get(&node).and_then(|m| m.last_seen).is_some_and(|t| now < t + self.cfg.failure_timeout_us)
    }

    fn live_of(&self, now: Micros, role: Role) -> Vec<NodeId> {
        self.members.iter().filter(|(n, m)| m.role == role && self.live(now, **n)).map(|(n, _)| *n).collect()
    }

    pub fn on_message(&mut self, now: Micros, from: NodeId, msg: Message) {
        match msg {
            Message::Heartbeat { incarnation, term } => {
                let Some(m) = self.members.get_mut(&from) else { return };
                m.last_seen = Some(now);
                if m.incarnation != incarnation {
                    m.incarnation = incarnation;
                    self.acked.remove(&from);
                }
                if let Some(config) = self.config.as_ref().filter(|_| !self.restarted) {
                    if term < config.current().term && !self.acked.contains(&from) {
                        let config = config.clone();
                        self.out.push(ControllerAction::Send(from, Message::NewConfig { config }));
                    }
                }
            }
            Message::ConfigAck { term } if self.config.as_ref().is_some_and(|c| c.current().term == term) => {
                self.acked.insert(from);
            }
            Message::Sealed { term, log, len, last, prev, committed_len } => {
                if let Some(s) = self.sealing.as_mut().filter(|s| s.term == term) {
                    if let Some(r) = s.replies.get_mut(log.0 as usize) {
                        r.insert(from, SealedReply { len, last, prev: prev.map(|e| *e), committed_len });
                    }
                }
                self.try_finish_seal(now);
            }
            Message::Probed { shard, cut, durable } => {
                let probes = self.sealing.iter_mut().flat_map(|s| s.tails.iter_mut().flatten());
                for choice in probes {
                    if let TailChoice::Probing { probes, .. } = choice {
                        for p in probes.iter_mut().filter(|p| p.shard == shard && p.cut == cut && p.replica == from) {
                            p.durable = Some(durable);
                        }
                    }
                }
                self.try_finish_seal(now);
            }
            _ => {}
        }
    }

    pub fn on_tick(&mut self, now: Micros) -> NextTick {
        let mut next = NextTick::after(now);
        // A member heard from falls silent: liveness changes without an input.
        for m in self.members.values() {
            if let Some(expiry) = m.last_seen.map(|t| t + self.cfg.failure_timeout_us).filter(|&t| t > now) {
                next.at(expiry);
            }
        }
        let started = *self.started_at.get_or_insert(now);
        // At a start (of a new cluster or of a restarted controller) the nodes get a
        // moment to be heard from, so the term installed next has them all.
        let waited = self.members.values().all(|m| m.last_seen.is_some()) || now >= started + self.cfg.startup_grace_us;
        if !waited {
            next.at(started + self.cfg.startup_grace_us);
        }
        let Some(config) = self.config.clone() else {
            if waited {
                self.install(now, None);
            }
            return self.resend_due(next);
        };
        // A stored configuration may have more logs than this controller was told.
        self.cfg.n_logs = self.cfg.n_logs.max(config.n_logs);
        if self.restarted && self.sealing.is_none() {
            if waited {
                self.start_seal(now, config.current().term);
            }
            return self.resend_due(next);
        }
        if let Some(s) = &self.sealing {
            if now >= s.sent_at + self.cfg.resend_us {
                self.send_seals(now);
                // Every sequencer may have answered while too few nodes were live to
                // form the next term: try again.
                self.try_finish_seal(now);
            }
            return self.resend_due(next);
        }
        if now >= self.config_sent_at + self.cfg.resend_us {
            self.config_sent_at = now;
            let unacked: Vec<NodeId> = self.members.keys().filter(|n| !self.acked.contains(n)).copied().collect();
            for n in unacked {
                if self.live(now, n) {
                    self.out.push(ControllerAction::Send(n, Message::NewConfig { config: config.clone() }));
                }
            }
        }
        if self.needs_new_term(now, config.current()) {
            self.start_seal(now, config.current().term);
        }
        self.resend_due(next)
    }

    /// `next`, or sooner if seals or a configuration are still to be resent.
    fn resend_due(&self, mut next: NextTick) -> NextTick {
        if let Some(s) = &self.sealing {
            next.at(s.sent_at + self.cfg.resend_us);
        } else if self.config.is_some() && self.members.keys().any(|n| !self.acked.contains(n)) {
            next.at(self.config_sent_at + self.cfg.resend_us);
        }
        next
    }

    fn needs_new_term(&self, now: Micros, t: &TermConfig) -> bool {
        if t.n_logs() < self.cfg.n_logs {
            return true; // logs to add
        }
        let members: BTreeSet<NodeId> = t
            .logs
            .iter()
            .flat_map(|l| l.sequencers.iter().copied())
            .chain(t.storage.iter().copied())
            .chain(t.engines.iter().copied())
            .collect();
        if members.iter().any(|&n| !self.live(now, n)) {
            return true;
        }
        // An engine restarted: it needs a shard of its own incarnation.
        let stale_engine = t
            .logs
            .iter()
            .flat_map(|l| &l.shards)
            .any(|s| self.members.get(&s.engine).is_some_and(|m| m.incarnation != s.incarnation));
        if stale_engine {
            return true;
        }
        // A primary sequencer restarted: it does not lead this term again.
        let restarted_primary = self.primaries.iter().any(|(n, &inc)| self.members.get(n).is_some_and(|m| m.incarnation != inc));
        if restarted_primary {
            return true;
        }
        // A live node could join: an engine, or capacity the term lacks.
        let joinable =
            |role: Role, have: usize, want: usize| have < want && self.live_of(now, role).iter().any(|n| !members.contains(n));
        let engines = self.live_of(now, Role::Engine).iter().any(|n| !t.engines.contains(n));
        let seq_have = t.logs[0].sequencers.len();
        engines
            || joinable(Role::Sequencer, seq_have, self.cfg.n_meta)
            || joinable(Role::Storage, t.storage.len(), self.members.values().filter(|m| m.role == Role::Storage).count())
    }

    fn start_seal(&mut self, now: Micros, term: Term) {
        tracing::info!(term = term.0, "sealing the term");
        let n_logs = self.config.as_ref().and_then(|c| c.term(term)).map_or(0, |t| t.logs.len());
        self.sealing = Some(Sealing { term, replies: vec![BTreeMap::new(); n_logs], tails: None, sent_at: now });
        self.send_seals(now);
    }

    fn send_seals(&mut self, now: Micros) {
        let Some(config) = self.config.clone() else { return };
        let Some(s) = self.sealing.as_mut() else { return };
        s.sent_at = now;
        let t = config.term(s.term).expect("sealing a known term");
        for lc in &t.logs {
            for &q in &lc.sequencers {
                if !s.replies[lc.log.0 as usize].contains_key(&q) {
                    self.out.push(ControllerAction::Send(q, Message::Seal { term: t.term, log: lc.log }));
                }
            }
        }
        self.send_probes();
    }

    fn send_probes(&mut self) {
        let Some(s) = self.sealing.as_ref() else { return };
        for choice in s.tails.iter().flatten() {
            if let TailChoice::Probing { probes, .. } = choice {
                for p in probes.iter().filter(|p| p.durable.is_none()) {
                    self.out.push(ControllerAction::Send(p.replica, Message::Probe { shard: p.shard, cut: p.cut }));
                }
            }
        }
    }

    /// The final tail of a log from a quorum's replies: the longest. Its last entry
    /// may be in flight (persisted by a quorum, its records written but maybe not
    /// durable, so not committed): unless a replica knows it committed, the storage
    /// nodes of the shards it orders are probed.
    fn choose_tail(lc: &LogTermConfig, replies: &BTreeMap<NodeId, SealedReply>) -> TailChoice {
        let r = replies.values().max_by_key(|r| r.len).expect("a quorum replied");
        assert!(r.last.as_ref().is_none_or(|e| e.index + 1 == r.len), "a sealed tail ends with its last entry");
        let keep = SealedTail { len: r.len, last: r.last.clone() };
        let committed = replies.values().any(|x| x.committed_len >= r.len);
        let Some(last) = r.last.as_ref().filter(|e| !committed && e.record_count() > 0) else {
            return TailChoice::Decided(keep);
        };
        // The entry before it: a replica that does not know the tail committed keeps
        // it in memory (`Metalog::forget`), and so does one a step behind.
        let before = replies.values().find_map(|x| match x.len {
            len if len == r.len => x.prev.clone(),
            len if len + 1 == r.len => x.last.clone(),
            _ => None,
        });
        let drop = (before.is_some() || r.len == 1).then(|| SealedTail { len: r.len - 1, last: before });
        let mut probes = Vec::new();
        for (j, ids, _) in last.runs() {
            let Some(shard) = lc.shards.get(j) else { continue };
            for &replica in &shard.replicas {
                probes.push(Probe { shard: shard.shard, cut: ids.end, replica, durable: None });
            }
        }
        TailChoice::Probing { keep, drop, probes }
    }

    fn try_finish_seal(&mut self, now: Micros) {
        let Some(config) = self.config.clone() else { return };
        let Some(s) = self.sealing.as_ref() else { return };
        let t = config.term(s.term).expect("sealing a known term");
        let quorate = t.logs.iter().all(|lc| s.replies[lc.log.0 as usize].len() >= lc.quorum());
        if !quorate {
            return;
        }
        if s.tails.is_none() {
            let tails = t.logs.iter().map(|lc| Self::choose_tail(lc, &s.replies[lc.log.0 as usize])).collect();
            self.sealing.as_mut().expect("sealing").tails = Some(tails);
            self.send_probes();
        }
        let mut decided = Vec::new();
        for choice in self.sealing.as_ref().and_then(|s| s.tails.as_ref()).expect("chosen") {
            match choice {
                TailChoice::Decided(tail) => decided.push(tail.clone()),
                TailChoice::Probing { keep, drop, probes } => match self.probed(now, probes) {
                    Some(true) => decided.push(keep.clone()),
                    Some(false) => match drop {
                        Some(drop) => decided.push(drop.clone()),
                        None => return,
                    },
                    None => return,
                },
            }
        }
        if self.install(now, Some(decided)) {
            self.sealing = None;
        }
    }

    /// Whether an uncommitted tail entry is kept: no (dropped) as soon as a replica
    /// never had one of its records, which proves it was never committed (a primary
    /// commits only once its records are durable on every replica, and a replica that
    /// sealed acknowledges no more); yes once every shard has a durable copy and every
    /// live replica answered. `None`: wait (for a replica that is down, when no other
    /// of its shard answered).
    fn probed(&self, now: Micros, probes: &[Probe]) -> Option<bool> {
        if probes.iter().any(|p| p.durable == Some(false)) {
            return Some(false);
        }
        let answered = |p: &Probe| p.durable.is_some() || !self.live(now, p.replica);
        let copy = |p: &Probe| probes.iter().any(|q| q.shard == p.shard && q.durable == Some(true));
        probes.iter().all(|p| answered(p) && copy(p)).then_some(true)
    }

    /// Installs the next term; `tails` seals the current one. Returns false (and keeps
    /// waiting) when the live nodes cannot form a term.
    fn install(&mut self, now: Micros, tails: Option<Vec<SealedTail>>) -> bool {
        let sequencers = self.live_of(now, Role::Sequencer);
        let storage = self.live_of(now, Role::Storage);
        let engines = self.live_of(now, Role::Engine);
        if sequencers.is_empty() || storage.is_empty() {
            if self.short_warned_at.is_none_or(|t| now >= t + 1_000_000) {
                self.short_warned_at = Some(now);
                tracing::warn!(sequencers = sequencers.len(), storage = storage.len(), "not enough live nodes for a term");
            }
            return false;
        }
        let previous = self.config.as_ref().map(|c| c.current().term.0).unwrap_or(0);
        let Some(next) = previous.checked_add(1) else {
            tracing::error!("the term number space is exhausted; the cluster stays sealed");
            return false;
        };
        let term = Term(next);
        let n_meta = self.cfg.n_meta.min(sequencers.len());
        let n_data = self.cfg.n_data.min(storage.len());
        if n_data < self.cfg.n_data || n_meta < self.cfg.n_meta {
            tracing::warn!(n_data, n_meta, "fewer live nodes than the configured replication");
        }
        let had = self.config.as_ref().map_or(0, |c| c.n_logs);
        let n_logs = self.cfg.n_logs.max(had);
        let mut logs = Vec::new();
        for l in 0..n_logs {
            let seqs: Vec<NodeId> = (0..n_meta).map(|k| sequencers[(l as usize + k) % sequencers.len()]).collect();
            let shards = engines
                .iter()
                .enumerate()
                .map(|(k, &e)| {
                    let shard = ShardId(self.next_shard);
                    self.next_shard += 1;
                    let replicas = (0..n_data).map(|r| storage[(k + l as usize + r) % storage.len()]).collect();
                    ShardConfig { shard, engine: e, incarnation: self.members[&e].incarnation, replicas }
                })
                .collect();
            logs.push(LogTermConfig { log: LogId(l), sequencers: seqs, shards });
        }
        let mut terms = self.config.as_ref().map(|c| c.terms.clone()).unwrap_or_default();
        let used = terms.iter().flat_map(|t| &t.logs).flat_map(|l| &l.shards).map(|s| s.shard).max();
        let fresh = logs.iter().flat_map(|l| &l.shards).map(|s| s.shard).min();
        assert!(used.zip(fresh).is_none_or(|(u, f)| f > u), "shard ids are never reused: {fresh:?} after {used:?}");
        if let Some(last) = terms.last_mut() {
            last.sealed = Some(tails.expect("a term is sealed before the next is installed"));
        }
        terms.push(TermConfig { term, logs, engines, storage, sealed: None });
        let mut indexers = self.indexers.clone().unwrap_or_default();
        let chosen = indexers.len();
        indexers.extend(self.choose_indexers(now, chosen, n_logs as usize));
        self.indexers = Some(indexers.clone());
        let tier = match &self.tier {
            Some(tier) => tier.clone(),
            None => self.choose_tier(),
        };
        self.tier = Some(tier.clone());
        let config = Arc::new(Configuration { n_logs, controller: self.id, terms, indexers, tier });
        if had > 0 && n_logs > had {
            tracing::info!(term = term.0, from = had, to = n_logs, "installed a new term that adds physical logs");
        } else {
            tracing::info!(term = term.0, "installed a new term");
        }
        self.primaries = config
            .current()
            .logs
            .iter()
            .map(|l| l.primary())
            .map(|n| (n, self.members.get(&n).map_or(0, |m| m.incarnation)))
            .collect();
        self.config = Some(config.clone());
        self.restarted = false;
        self.acked.clear();
        self.config_sent_at = now;
        self.out.push(ControllerAction::Persist(config.clone()));
        self.out.push(ControllerAction::Installed(config.clone()));
        for &n in self.members.keys() {
            self.out.push(ControllerAction::Send(n, Message::NewConfig { config: config.clone() }));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEQUENCERS: [NodeId; 3] = [NodeId(1), NodeId(2), NodeId(3)];
    const STORAGE: NodeId = NodeId(4);
    const ENGINE: NodeId = NodeId(5);

    fn roster() -> Vec<(NodeId, Role)> {
        let mut r: Vec<(NodeId, Role)> = SEQUENCERS.iter().map(|&n| (n, Role::Sequencer)).collect();
        r.extend([(STORAGE, Role::Storage), (ENGINE, Role::Engine)]);
        r
    }

    fn cfg() -> ControllerConfig {
        ControllerConfig { n_logs: 2, n_data: 1, ..ControllerConfig::default() }
    }

    /// Every node of the roster says it is alive; engine `ENGINE` as `engine_incarnation`.
    fn heartbeats(c: &mut Controller, now: Micros, engine_incarnation: u64) {
        for (n, _) in roster() {
            let incarnation = if n == ENGINE { engine_incarnation } else { 1 };
            c.on_message(now, n, Message::Heartbeat { incarnation, term: Term(0) });
        }
    }

    /// The configuration installed by these actions, after checking that it was
    /// persisted before anything announced it.
    fn installed(actions: &[ControllerAction]) -> Arc<Configuration> {
        let persisted = actions.iter().position(|a| matches!(a, ControllerAction::Persist(_)));
        let persisted = persisted.expect("an install persists its configuration");
        let ControllerAction::Persist(config) = &actions[persisted] else { unreachable!("found above") };
        for (i, a) in actions.iter().enumerate() {
            if matches!(a, ControllerAction::Installed(_) | ControllerAction::Send(_, Message::NewConfig { .. })) {
                assert!(i > persisted, "action {i} announces the configuration before it is persisted: {a:?}");
            }
        }
        config.clone()
    }

    /// A sequencer's reply to a seal of `log` in `term`: an empty metalog.
    fn sealed_empty(term: Term, log: u8) -> Message {
        Message::Sealed { term, log: LogId(log), len: 0, last: None, prev: None, committed_len: 0 }
    }

    /// Entry `index` of `log` in term 1, one record of the log's first shard.
    fn entry(index: u64, log: u8) -> MetalogEntry {
        MetalogEntry {
            term: Term(1),
            log: LogId(log),
            index,
            start_position: index,
            prev_cut: vec![index],
            cut: vec![index + 1],
            trims: vec![],
        }
    }

    fn first_term() -> Arc<Configuration> {
        let mut c = Controller::new(NodeId(0), cfg(), &roster());
        heartbeats(&mut c, 0, 7);
        c.on_tick(0);
        installed(&c.take_actions())
    }

    #[test]
    fn a_restarted_controller_seals_the_stored_term_and_installs_the_next() {
        let stored = first_term();
        assert_eq!(stored.current().term, Term(1));
        let mut c = Controller::recover(NodeId(0), cfg(), &roster(), Some((*stored).clone())).expect("its own configuration");
        // The nodes restarted too. The stored term is about to end: nobody is sent it,
        // and the seal waits until every node was heard from.
        c.on_tick(10);
        assert_eq!(c.take_actions(), vec![]);
        heartbeats(&mut c, 20, 8);
        c.on_tick(30);
        let actions = c.take_actions();
        let mut sealed: Vec<(NodeId, LogId)> = actions
            .iter()
            .map(|a| match a {
                ControllerAction::Send(to, Message::Seal { term: Term(1), log }) => (*to, *log),
                other => panic!("only seals of term 1 are sent first, not {other:?}"),
            })
            .collect();
        sealed.sort();
        let expect: Vec<(NodeId, LogId)> = SEQUENCERS.iter().flat_map(|&n| [(n, LogId(0)), (n, LogId(1))]).collect();
        assert_eq!(sealed, expect);

        // A quorum of each log's sequencers reports its tail; the longest wins.
        for (n, len) in [(SEQUENCERS[0], 3), (SEQUENCERS[1], 2)] {
            for log in [0, 1] {
                let last = Some(entry(len - 1, log));
                c.on_message(
                    40,
                    n,
                    Message::Sealed { term: Term(1), log: LogId(log), len, last, prev: None, committed_len: len },
                );
            }
        }
        let config = installed(&c.take_actions());
        assert_eq!(config.current().term, Term(2));
        let tails = config.terms[0].sealed.as_ref().expect("term 1 is sealed");
        assert_eq!(
            tails.iter().map(|t| (t.len, t.last.clone())).collect::<Vec<_>>(),
            vec![(3, Some(entry(2, 0))), (3, Some(entry(2, 1)))]
        );
        assert_eq!(TermConfig { sealed: None, ..config.terms[0].clone() }, stored.terms[0], "term 1 is kept as it was");
        // New shards, made for the engine's new incarnation, under ids never used before.
        let old: Vec<ShardId> = stored.current().logs.iter().flat_map(|l| &l.shards).map(|s| s.shard).collect();
        for s in config.current().logs.iter().flat_map(|l| &l.shards) {
            assert_eq!((s.engine, s.incarnation), (ENGINE, 8));
            assert!(old.iter().all(|o| s.shard > *o), "{:?} reuses an id of {old:?}", s.shard);
        }
        assert_eq!(config.indexers, stored.indexers);

        // Restarted again, from the new configuration: term 3 keeps both sealed terms.
        let mut c = Controller::recover(NodeId(0), cfg(), &roster(), Some((*config).clone())).expect("its own configuration");
        heartbeats(&mut c, 0, 9);
        c.on_tick(0);
        for n in SEQUENCERS {
            for log in [0, 1] {
                c.on_message(10, n, sealed_empty(Term(2), log));
            }
        }
        let next = installed(&c.take_actions());
        assert_eq!(
            next.terms.iter().map(|t| (t.term, t.sealed.is_some())).collect::<Vec<_>>(),
            vec![(Term(1), true), (Term(2), true), (Term(3), false)]
        );
        assert_eq!(next.terms[0], config.terms[0]);
        assert_eq!(next.terms[1].logs, config.terms[1].logs);
    }

    #[test]
    fn a_seal_keeps_an_uncommitted_tail_entry_only_if_its_records_are_durable() {
        // Term 1 ends (the engine restarted); log 0's longest tail ends with an entry
        // no replica knows committed, log 1's with one a replica knows committed.
        let sealing = || {
            let mut c = Controller::new(NodeId(0), cfg(), &roster());
            heartbeats(&mut c, 0, 7);
            c.on_tick(0);
            let config = installed(&c.take_actions());
            heartbeats(&mut c, 10, 8);
            c.on_tick(10);
            c.take_actions();
            for n in &SEQUENCERS[..2] {
                let (last, prev) = (Some(entry(2, 0)), Some(Box::new(entry(1, 0))));
                c.on_message(20, *n, Message::Sealed { term: Term(1), log: LogId(0), len: 3, last, prev, committed_len: 2 });
                let (last, prev) = (Some(entry(4, 1)), Some(Box::new(entry(3, 1))));
                let committed_len = if *n == SEQUENCERS[0] { 5 } else { 4 };
                c.on_message(20, *n, Message::Sealed { term: Term(1), log: LogId(1), len: 5, last, prev, committed_len });
            }
            (c, config.terms[0].logs[0].shards[0].shard)
        };
        let tails = |actions: &[ControllerAction]| {
            let config = installed(actions);
            config.terms[0].sealed.clone().expect("term 1 is sealed").into_iter().map(|t| (t.len, t.last)).collect::<Vec<_>>()
        };

        // The storage node is asked whether the entry's record (local id 2 of the
        // shard, so the prefix up to 3) is durable; nothing is installed meanwhile.
        let (mut c, shard) = sealing();
        assert_eq!(c.take_actions(), vec![ControllerAction::Send(STORAGE, Message::Probe { shard, cut: 3 })]);
        c.on_tick(20 + c.cfg.resend_us);
        let probes = |a: &ControllerAction| matches!(a, ControllerAction::Send(_, Message::Probe { .. }));
        let resent: Vec<ControllerAction> = c.take_actions().into_iter().filter(probes).collect();
        assert_eq!(resent, vec![ControllerAction::Send(STORAGE, Message::Probe { shard, cut: 3 })], "resent");
        // Durable: kept.
        c.on_message(30, STORAGE, Message::Probed { shard, cut: 3, durable: true });
        assert_eq!(tails(&c.take_actions()), vec![(3, Some(entry(2, 0))), (5, Some(entry(4, 1)))]);

        // Never there: dropped, the entry before it ends the term.
        let (mut c, shard) = sealing();
        c.take_actions();
        c.on_message(30, STORAGE, Message::Probed { shard, cut: 4, durable: false });
        assert_eq!(c.take_actions(), vec![], "an answer to another probe");
        c.on_message(30, STORAGE, Message::Probed { shard, cut: 3, durable: false });
        assert_eq!(tails(&c.take_actions()), vec![(2, Some(entry(1, 0))), (5, Some(entry(4, 1)))]);
    }

    #[test]
    fn a_restarted_primary_sequencer_ends_the_term_and_a_backup_does_not() {
        let mut c = Controller::new(NodeId(0), cfg(), &roster());
        heartbeats(&mut c, 0, 7);
        c.on_tick(0);
        let config = installed(&c.take_actions());
        let primary = config.current().logs[0].primary();
        let backup = SEQUENCERS.into_iter().find(|n| config.current().logs.iter().all(|l| l.primary() != *n));
        let seals = |actions: &[ControllerAction]| {
            actions.iter().filter(|a| matches!(a, ControllerAction::Send(_, Message::Seal { .. }))).count()
        };
        // A backup's restart changes nothing (with two logs over three sequencers,
        // one sequencer leads neither).
        if let Some(backup) = backup {
            c.on_message(10, backup, Message::Heartbeat { incarnation: 2, term: Term(1) });
            c.on_tick(10);
            assert_eq!(seals(&c.take_actions()), 0);
        }
        c.on_message(20, primary, Message::Heartbeat { incarnation: 2, term: Term(1) });
        c.on_tick(20);
        assert!(seals(&c.take_actions()) > 0, "the term of a restarted primary is sealed");
    }

    #[test]
    fn an_added_log_is_a_new_term_and_logs_are_never_removed() {
        let mut c = Controller::new(NodeId(0), cfg(), &roster());
        heartbeats(&mut c, 0, 7);
        c.on_tick(0);
        let first = installed(&c.take_actions());
        assert_eq!(first.n_logs, 2);
        assert!(c.set_n_logs(1).is_err(), "a log is never removed");
        c.set_n_logs(3).expect("a log is added");
        heartbeats(&mut c, 10, 7);
        c.on_tick(10);
        let seals = c.take_actions().into_iter().filter(|a| matches!(a, ControllerAction::Send(_, Message::Seal { .. })));
        assert_eq!(seals.count(), 2 * SEQUENCERS.len(), "term 1's two logs are sealed");
        for n in SEQUENCERS {
            for log in [0, 1] {
                c.on_message(20, n, sealed_empty(Term(1), log));
            }
        }
        let grown = installed(&c.take_actions());
        assert_eq!((grown.current().term, grown.n_logs, grown.current().n_logs()), (Term(2), 3, 3));
        assert_eq!(grown.terms[0].n_logs(), 2, "term 1 keeps its two logs");
        assert_eq!(grown.terms[0].sealed.as_ref().map(|t| t.len()), Some(2));
        assert_eq!((grown.added_at(LogId(2)), grown.added_at(LogId(1))), (Some(Term(2)), None));
        assert_eq!(grown.indexers.len(), 3);

        // A controller told of fewer logs than the stored configuration has keeps them.
        let mut c = Controller::recover(NodeId(0), cfg(), &roster(), Some((*grown).clone())).expect("its own configuration");
        heartbeats(&mut c, 0, 8);
        c.on_tick(0);
        for n in SEQUENCERS {
            for log in [0, 1, 2] {
                c.on_message(10, n, sealed_empty(Term(2), log));
            }
        }
        let next = installed(&c.take_actions());
        assert_eq!((next.current().term, next.n_logs), (Term(3), 3));
    }

    #[test]
    fn a_stored_configuration_of_another_cluster_is_refused() {
        fn check(change: impl FnOnce(&mut ControllerConfig, &mut Vec<(NodeId, Role)>, &mut Configuration), expect: &str) {
            let (mut cfg, mut roster, mut stored) = (cfg(), roster(), (*first_term()).clone());
            change(&mut cfg, &mut roster, &mut stored);
            match Controller::recover(NodeId(0), cfg, &roster, Some(stored)) {
                Err(Error::InvalidArgument(m)) => assert!(m.contains(expect), "{m:?} should say {expect:?}"),
                Err(e) => panic!("expected {expect:?}, got {e}"),
                Ok(_) => panic!("expected {expect:?}, the configuration was accepted"),
            }
        }
        check(|_, _, stored| stored.n_logs = 3, "says 3 physical logs, its current term has 2");
        check(|_, roster, _| roster.retain(|(n, _)| *n != SEQUENCERS[2]), "names n3 (Sequencer) in term 1");
        check(|_, roster, _| roster.retain(|(n, _)| *n != ENGINE), "names n5 (Engine) in term 1");
        check(|_, roster, _| roster[3].1 = Role::Engine, "names n4 (Storage) in term 1");
        check(|_, _, stored| stored.controller = NodeId(9), "belongs to controller n9");
        check(|_, _, stored| stored.terms.clear(), "has no term");
        check(|_, _, stored| stored.terms[0].sealed = Some(vec![]), "seals term 1 wrongly");
        check(
            |_, _, stored| {
                let mut skipped = stored.terms[0].clone();
                skipped.term = Term(5);
                stored.terms[0].sealed = Some(vec![SealedTail { len: 0, last: None }; 2]);
                stored.terms.push(skipped);
            },
            "has term 5 at place 1",
        );
        let stored = (*first_term()).clone();
        assert!(Controller::recover(NodeId(0), cfg(), &roster(), Some(stored)).is_ok(), "its own configuration is accepted");
    }
}
