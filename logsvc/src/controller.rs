//! The controller: decides terms. It watches every node's heartbeats, and when a
//! member of the current term is down (or an engine came back as a new incarnation,
//! or a live node could join), it reconfigures (Boki §4.5):
//!
//! 1. seal: send `Seal` to every sequencer of every log of the term, until a quorum of
//!    each log's sequencers answered with their tails;
//! 2. take, per log, the longest tail of the quorum as the term's final metalog;
//! 3. install the next term (sequencers, storage nodes, and one new shard per engine
//!    and log) with the final tails recorded in the sealed term, and send the whole
//!    configuration to every node until it acknowledges.
//!
//! Invariants (asserted): terms are consecutive; a sealed term's tail is never
//! shorter than any entry the term committed (any two quorums intersect, and the
//! primary commits one entry at a time).
//!
//! Architecture Invariant: the controller never touches records or entries beyond a
//! term's final one; it is the only writer of configurations. In a cluster its state
//! belongs in etcd; here (the dev cluster and the simulator) it lives in memory and
//! does not crash.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::config::{Configuration, LogTermConfig, SealedTail, ShardConfig, TermConfig};
use crate::message::{Message, MetalogEntry};
use crate::types::{LogId, Micros, NodeId, ShardId, Term};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Sequencer,
    Storage,
    Engine,
}

#[derive(Clone, Debug)]
pub struct ControllerConfig {
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
    /// Engines holding each log's index, chosen once from the roster (`None`: every
    /// engine indexes every log).
    pub indexers_per_log: Option<usize>,
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
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ControllerAction {
    Send(NodeId, Message),
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
    replies: Vec<BTreeMap<NodeId, (u64, Option<MetalogEntry>)>>,
    sent_at: Micros,
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
    indexers: Vec<Vec<NodeId>>,
    out: Vec<ControllerAction>,
}

impl Controller {
    pub fn new(id: NodeId, cfg: ControllerConfig, roster: &[(NodeId, Role)]) -> Controller {
        assert!(cfg.n_logs > 0 && cfg.n_meta > 0 && cfg.n_data > 0);
        let members = roster.iter().map(|&(n, role)| (n, Member { role, incarnation: 0, last_seen: None })).collect();
        // Index replicas of log l: k engines of the roster from the l-th on, so the
        // logs' indexes spread over the engines.
        let engines: Vec<NodeId> = roster.iter().filter(|(_, r)| *r == Role::Engine).map(|(n, _)| *n).collect();
        let indexers = match cfg.indexers_per_log {
            Some(k) if k > 0 && k < engines.len() => {
                (0..cfg.n_logs as usize).map(|l| (0..k).map(|i| engines[(l + i) % engines.len()]).collect()).collect()
            }
            _ => vec![Vec::new(); cfg.n_logs as usize],
        };
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
            indexers,
            out: Vec::new(),
        }
    }

    pub fn id(&self) -> NodeId {
        self.id
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
                if let Some(config) = &self.config {
                    if term < config.current().term && !self.acked.contains(&from) {
                        let config = config.clone();
                        self.out.push(ControllerAction::Send(from, Message::NewConfig { config }));
                    }
                }
            }
            Message::ConfigAck { term } => {
                if self.config.as_ref().is_some_and(|c| c.current().term == term) {
                    self.acked.insert(from);
                }
            }
            Message::Sealed { term, log, len, last } => {
                if let Some(s) = self.sealing.as_mut().filter(|s| s.term == term) {
                    if let Some(r) = s.replies.get_mut(log.0 as usize) {
                        r.insert(from, (len, last));
                    }
                }
                self.try_finish_seal(now);
            }
            _ => {}
        }
    }

    pub fn on_tick(&mut self, now: Micros) {
        let started = *self.started_at.get_or_insert(now);
        let Some(config) = self.config.clone() else {
            let all_heard = self.members.values().all(|m| m.last_seen.is_some());
            let grace = now >= started + self.cfg.startup_grace_us;
            if all_heard || grace {
                self.install(now, None);
            }
            return;
        };
        if let Some(s) = &self.sealing {
            if now >= s.sent_at + self.cfg.resend_us {
                self.send_seals(now);
            }
            return;
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
    }

    fn needs_new_term(&self, now: Micros, t: &TermConfig) -> bool {
        let members: BTreeSet<NodeId> =
            t.logs.iter().flat_map(|l| l.sequencers.iter().copied()).chain(t.storage.iter().copied()).chain(t.engines.iter().copied()).collect();
        if members.iter().any(|&n| !self.live(now, n)) {
            return true;
        }
        // An engine restarted: it needs a shard of its own incarnation.
        let stale_engine = t.logs.iter().flat_map(|l| &l.shards).any(|s| self.members.get(&s.engine).is_some_and(|m| m.incarnation != s.incarnation));
        if stale_engine {
            return true;
        }
        // A live node could join: an engine, or capacity the term lacks.
        let joinable = |role: Role, have: usize, want: usize| {
            have < want && self.live_of(now, role).iter().any(|n| !members.contains(n))
        };
        let engines = self.live_of(now, Role::Engine).iter().any(|n| !t.engines.contains(n));
        let seq_have = t.logs[0].sequencers.len();
        engines
            || joinable(Role::Sequencer, seq_have, self.cfg.n_meta)
            || joinable(Role::Storage, t.storage.len(), self.members.values().filter(|m| m.role == Role::Storage).count())
    }

    fn start_seal(&mut self, now: Micros, term: Term) {
        tracing::info!(term = term.0, "sealing the term");
        self.sealing = Some(Sealing { term, replies: vec![BTreeMap::new(); self.cfg.n_logs as usize], sent_at: now });
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
    }

    fn try_finish_seal(&mut self, now: Micros) {
        let Some(config) = self.config.clone() else { return };
        let Some(s) = self.sealing.as_ref() else { return };
        let t = config.term(s.term).expect("sealing a known term");
        let quorate = t.logs.iter().all(|lc| s.replies[lc.log.0 as usize].len() >= lc.quorum());
        if !quorate {
            return;
        }
        let tails: Vec<SealedTail> = t
            .logs
            .iter()
            .map(|lc| {
                let (len, last) = s.replies[lc.log.0 as usize].values().max_by_key(|(len, _)| *len).cloned().expect("a quorum replied");
                assert!(last.as_ref().is_none_or(|e| e.index + 1 == len), "a sealed tail ends with its last entry");
                SealedTail { len, last }
            })
            .collect();
        if self.install(now, Some(tails)) {
            self.sealing = None;
        }
    }

    /// Installs the next term; `tails` seals the current one. Returns false (and keeps
    /// waiting) when the live nodes cannot form a term.
    fn install(&mut self, now: Micros, tails: Option<Vec<SealedTail>>) -> bool {
        let sequencers = self.live_of(now, Role::Sequencer);
        let storage = self.live_of(now, Role::Storage);
        let engines = self.live_of(now, Role::Engine);
        if sequencers.is_empty() || storage.is_empty() {
            tracing::warn!(sequencers = sequencers.len(), storage = storage.len(), "not enough live nodes for a term");
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
        let mut logs = Vec::new();
        for l in 0..self.cfg.n_logs {
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
        if let Some(last) = terms.last_mut() {
            last.sealed = Some(tails.expect("a term is sealed before the next is installed"));
        }
        terms.push(TermConfig { term, logs, engines, storage, sealed: None });
        let config = Arc::new(Configuration {
            n_logs: self.cfg.n_logs,
            controller: self.id,
            terms,
            indexers: self.indexers.clone(),
        });
        tracing::info!(term = term.0, "installed a new term");
        self.config = Some(config.clone());
        self.acked.clear();
        self.config_sent_at = now;
        self.out.push(ControllerAction::Installed(config.clone()));
        for &n in self.members.keys() {
            self.out.push(ControllerAction::Send(n, Message::NewConfig { config: config.clone() }));
        }
        true
    }
}
