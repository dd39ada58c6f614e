//! The controller: decides terms. It watches every node's heartbeats, and when a
//! member of the current term is down (or an engine came back as a new incarnation,
//! or a live node could join), it reconfigures (Boki §4.5):
//!
//! 1. seal: send `Seal` to every sequencer of every log of the term, until a quorum of
//!    each log's sequencers answered with their tails (a replica that lost unsynced
//!    entries, see `sequencer`, does not count: see `Controller::sufficient`);
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
//! primary commits one entry at a time; under a replicated metalog, but for the
//! entries a power loss of a majority of its sequencers took); shard ids are never reused, across restarts
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
    /// An aggregator of index-tier lookups (partial mode): bound and unbound through
    /// versions of the term, like index nodes never sealing one.
    Aggregator,
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
    /// the index nodes live when the first term is installed, which waits up to
    /// `TIER_GRACE_FACTOR` startup graces for all of them (`None`: complete mode).
    pub tier: Option<(usize, usize)>,
    /// The other controllers of the cluster (standbys that may take over), whose
    /// stored configurations this one resumes from. Empty in a one-controller cluster.
    pub peers: Vec<NodeId>,
    /// Partial mode: shards a log's term may bind, closed ones included, before a
    /// function node that joins needs a new term (see `version.rs`).
    pub slots_per_log: usize,
    /// Partial mode: an index replica silent this long is replaced by a live spare
    /// index node (one registered and in no shard), through a version.
    pub index_replace_us: Micros,
}

/// How many startup graces the first term waits for every index node of the tier.
const TIER_GRACE_FACTOR: u64 = 5;

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
            slots_per_log: 16,
            index_replace_us: 10_000_000,
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
    amnesiac: bool,
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
    /// installed, and in partial mode each storage node. A primary that restarts never
    /// leads that term again (see `sequencer.rs`), so its new incarnation ends the term.
    /// A storage node that restarts may have lost records being written that the entry
    /// in flight orders; their engine resends them, but in partial mode a restarted
    /// engine's shard is closed by a version, not a seal, and nobody would: only a seal
    /// (its probes) drops that entry. Soft: a restarted controller seals the stored term
    /// anyway.
    watched: BTreeMap<NodeId, u64>,
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
            watched: BTreeMap::new(),
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
        if stored.tier.as_ref().is_some_and(|t| t.aggregators.iter().any(|&n| !role_is(n, Role::Aggregator))) {
            return mismatch("names aggregators this cluster does not have".into());
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

    /// The index tier's layout over the registered index nodes, the live ones first:
    /// shard s gets nodes s, s + S, s + 2S... up to R of them (fewer nodes than
    /// shards: fewer shards).
    fn choose_tier(&self, now: Micros) -> Option<TierLayout> {
        let (shards, replicas) = self.cfg.tier?;
        // Registered ones that are down come after the live ones: they may restart.
        let mut nodes = self.live_of(now, Role::Index);
        let live = nodes.len();
        nodes.extend(
            self.members.iter().filter(|(n, m)| m.role == Role::Index && !nodes.contains(n)).map(|(n, _)| *n).collect::<Vec<_>>(),
        );
        if live < shards * replicas {
            tracing::warn!(live, shards, replicas, "the index tier is laid out over fewer live index nodes than asked");
        }
        let shards = shards.min(nodes.len()).max(1);
        let layout: Vec<Vec<NodeId>> =
            (0..shards).map(|s| nodes.iter().skip(s).step_by(shards).take(replicas.max(1)).copied().collect()).collect();
        if layout.iter().any(Vec::is_empty) {
            tracing::warn!("partial mode without index nodes: the cluster runs in complete mode");
            return None;
        }
        Some(TierLayout { shards: layout, aggregators: self.live_of(now, Role::Aggregator) })
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
            Message::Heartbeat { incarnation, term, version } => {
                let Some(m) = self.members.get_mut(&from) else { return };
                m.last_seen = Some(now);
                if m.incarnation != incarnation {
                    m.incarnation = incarnation;
                    self.acked.remove(&from);
                }
                if let Some(config) = self.config.as_ref().filter(|_| !self.restarted) {
                    if (term, version) < config.stamp() && !self.acked.contains(&from) {
                        let config = config.clone();
                        self.out.push(ControllerAction::Send(from, Message::NewConfig { config }));
                    }
                }
            }
            Message::ConfigAck { term, version } if self.config.as_ref().is_some_and(|c| c.stamp() == (term, version)) => {
                self.acked.insert(from);
            }
            Message::Sealed { term, log, len, last, prev, committed_len, amnesiac } => {
                if let Some(s) = self.sealing.as_mut().filter(|s| s.term == term) {
                    if let Some(r) = s.replies.get_mut(log.0 as usize) {
                        r.insert(from, SealedReply { len, last, prev: prev.map(|e| *e), committed_len, amnesiac });
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
        // Partial mode: the index tier is laid out once, over the index nodes live at
        // the first term, so that term waits longer for all of them (shards x
        // replicas): processes that register late would never serve.
        let tier_short = self.config.is_none()
            && self.cfg.tier.is_some_and(|(shards, replicas)| self.live_of(now, Role::Index).len() < shards * replicas);
        let grace = self.cfg.startup_grace_us * if tier_short { TIER_GRACE_FACTOR } else { 1 };
        let heard = self.members.values().all(|m| m.last_seen.is_some()) && !tier_short;
        let waited = heard || now >= started + grace;
        if !waited {
            next.at(started + grace);
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
        } else if config.partial() {
            self.next_version(now);
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
        // Partial mode: function nodes join and leave through versions of the term
        // (`version.rs`), unless their shards no longer fit its slots.
        let partial = self.config.as_ref().is_some_and(|c| c.partial());
        let members: BTreeSet<NodeId> = t
            .logs
            .iter()
            .flat_map(|l| l.sequencers.iter().copied())
            .chain(t.storage.iter().copied())
            .chain(t.engines.iter().copied().filter(|_| !partial))
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
        if stale_engine && !partial {
            return true;
        }
        // A primary sequencer restarted (it does not lead this term again), or in
        // partial mode a storage node.
        let restarted = self.watched.iter().any(|(n, &inc)| self.members.get(n).is_some_and(|m| m.incarnation != inc));
        if restarted {
            return true;
        }
        // A live node could join: an engine, or capacity the term lacks.
        let joinable =
            |role: Role, have: usize, want: usize| have < want && self.live_of(now, role).iter().any(|n| !members.contains(n));
        let engines = match partial {
            true => !self.versions_fit(now, t),
            false => self.live_of(now, Role::Engine).iter().any(|n| !t.engines.contains(n)),
        };
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

    /// The replies a log's final tail is chosen from, once they suffice: a quorum of
    /// replicas that lost nothing, which holds every committed entry (any two quorums
    /// intersect). When too many replicas lost unsynced writes for such a quorum to
    /// exist (a `replicated` metalog after a power loss of a majority of its
    /// sequencers), every replica's: what none of them kept is lost, as the README
    /// says `replicated` allows.
    fn sufficient(lc: &LogTermConfig, replies: &BTreeMap<NodeId, SealedReply>) -> Option<BTreeMap<NodeId, SealedReply>> {
        let sound: BTreeMap<NodeId, SealedReply> =
            replies.iter().filter(|(_, r)| !r.amnesiac).map(|(&n, r)| (n, r.clone())).collect();
        if sound.len() >= lc.quorum() {
            return Some(sound);
        }
        let (n, amnesiac) = (lc.sequencers.len(), replies.len() - sound.len());
        if amnesiac > n - lc.quorum() && replies.len() >= n {
            tracing::warn!(log = lc.log.0, amnesiac, "a majority of the metalog's sequencers lost unsynced entries");
            return Some(replies.clone());
        }
        None
    }

    fn try_finish_seal(&mut self, now: Micros) {
        let Some(config) = self.config.clone() else { return };
        let Some(s) = self.sealing.as_ref() else { return };
        let t = config.term(s.term).expect("sealing a known term");
        if s.tails.is_none() {
            let mut tails = Vec::new();
            for lc in &t.logs {
                let Some(replies) = Self::sufficient(lc, &s.replies[lc.log.0 as usize]) else { return };
                tails.push(Self::choose_tail(lc, &replies));
            }
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
                    ShardConfig { shard, engine: e, incarnation: self.members[&e].incarnation, replicas, since: 0, until: None }
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
        terms.push(TermConfig { term, logs, engines, storage, sealed: None, version: 0 });
        let mut indexers = self.indexers.clone().unwrap_or_default();
        let chosen = indexers.len();
        indexers.extend(self.choose_indexers(now, chosen, n_logs as usize));
        self.indexers = Some(indexers.clone());
        let tier = match &self.tier {
            Some(tier) => tier.clone(),
            None => self.choose_tier(now),
        };
        self.tier = Some(tier.clone());
        let config = Arc::new(Configuration { n_logs, controller: self.id, terms, indexers, tier });
        if had > 0 && n_logs > had {
            tracing::info!(term = term.0, from = had, to = n_logs, "installed a new term that adds physical logs");
        } else {
            tracing::info!(term = term.0, "installed a new term");
        }
        let current = config.current();
        let storage = current.storage.iter().copied().filter(|_| config.partial());
        self.watched = (current.logs.iter().map(|l| l.primary()).chain(storage))
            .map(|n| (n, self.members.get(&n).map_or(0, |m| m.incarnation)))
            .collect();
        self.restarted = false;
        self.publish(now, config);
        true
    }

    /// Makes `config` the current configuration: persisted, then sent to every member.
    fn publish(&mut self, now: Micros, config: Arc<Configuration>) {
        self.config = Some(config.clone());
        self.acked.clear();
        self.config_sent_at = now;
        self.out.push(ControllerAction::Persist(config.clone()));
        self.out.push(ControllerAction::Installed(config.clone()));
        for &n in self.members.keys() {
            self.out.push(ControllerAction::Send(n, Message::NewConfig { config: config.clone() }));
        }
    }
}

#[cfg(test)]
mod tests;
mod version;
