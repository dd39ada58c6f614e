//! The deterministic simulator: the real state machines over a seeded simulated
//! network and disk.
//!
//! One seed fixes everything: message delays, loss, duplication, reordering, partitions,
//! crashes and restarts (the controller's too: it restarts from its store), disk latency,
//! and the clients' requests. A run has a safety phase with faults, then a liveness phase
//! without them in which every crashed node restarts and every partition heals; the log
//! must then catch up and serve every client. After every event the oracle checks what
//! happened (see [`oracle`]); the first violation ends the run with "reproduce with
//! seed=N".
//!
//! Faults besides those: a sequencer crashing between sending an entry to its backups and
//! persisting it; power losses (every node and the controller crash at once, and storage
//! nodes lose what they had not synced); several controllers over one store written with a
//! compare-and-swap, with leadership moving while the deposed leader runs on; physical logs
//! added during the run (`SimOptions::add_logs`). The simulator also batches a sequencer's
//! inputs at random, as the driver does, answers half the reads in place
//! (`Engine::read_now`), and has each node's indexes spill every full chunk, a few, or
//! none.
//!
//! A caller outside the simulation may also use it as a log ([`client`]): one request
//! at a time to an engine, the simulation stepped until its reply, without the faults.

mod actions;
mod calls;
mod client;
mod faults;
mod options;
mod oracle;
mod rng;

pub use client::SimLog;
pub use options::{SimOptions, SimPartial, SimStats, Violation};
pub use rng::Rng;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::chunks::MemColdStore;
use crate::config::Configuration;
use crate::context::Context;
use crate::controller::{Controller, ControllerAction, ControllerConfig, Role};
use crate::engine::{Engine, EngineAction, EngineConfig, OpId, PartialStats};
use crate::follower::FollowerConfig;
use crate::index::ColdIndex;
use crate::message::{Cond, Message, MetalogEntry, Reply, Request};
use crate::sequencer::{stored_entries_messages, MetalogMode, Sequencer, SequencerAction, SequencerConfig};
use crate::storage::{meta_reply, StorageAction, StorageConfig, StorageNode};
use crate::store::{MemMetalogStore, MemStore, MetalogStore, MetalogWrite, RecordStore};
use crate::tier::{AggregatorConfig, AggregatorNode, IndexNode, IndexNodeAction, IndexNodeConfig, LocalBounds};
use crate::types::{BookId, Location, LogId, MetalogPosition, Micros, NodeId, SeqNum, Tag, Term};
use oracle::Oracle;

/// A live node. Engines dominate the size; boxing them would only add indirection to
/// the simulator's hot path.
#[allow(clippy::large_enum_variant)]
enum Node {
    Sequencer(Sequencer),
    Storage(StorageNode),
    Engine(Engine),
    Index(IndexNode),
    Aggregator(AggregatorNode),
}

impl SimStats {
    /// Counts what an index node did (at its crash or the run's end).
    fn add_index(&mut self, node: &Node) {
        let s = node.index_stats();
        self.shard_copies += s.copies_taken;
        if let Node::Aggregator(a) = node {
            self.aggregated += a.stats.done;
            self.lookups_dropped += a.stats.expired;
        }
        self.shard_replays += s.replays;
    }
}

impl Node {
    fn paths(&self) -> PartialStats {
        match self {
            Node::Engine(e) => e.partial_stats().unwrap_or_default(),
            _ => PartialStats::default(),
        }
    }

    fn index_shard(&self) -> Option<&crate::tier::IndexShard> {
        match self {
            Node::Index(x) => x.shard(),
            _ => None,
        }
    }

    fn index_stats(&self) -> crate::tier::IndexNodeStats {
        match self {
            Node::Index(x) => x.stats,
            _ => Default::default(),
        }
    }

    fn chunks_spilled(&self) -> u64 {
        match self {
            Node::Sequencer(_) | Node::Index(_) | Node::Aggregator(_) => 0,
            Node::Storage(s) => s.chunks_spilled(),
            Node::Engine(e) => e.chunks_spilled(),
        }
    }
}

struct Slot {
    role: Role,
    node: Option<Node>,
    incarnation: u64,
    metalog: Arc<MemMetalogStore>,
    /// Per metalog, how many entries `metalog` holds: what the node may acknowledge.
    durable_len: BTreeMap<(Term, LogId), u64>,
    records: Arc<MemStore>,
    /// A sequencer's store lost unsynced writes, and the sequencer has not persisted
    /// that it did (`MetalogWrite::Amnesiac`): its next start tells it (the driver
    /// learns it from the store).
    lost_power: bool,
}

enum Event {
    Deliver {
        from: NodeId,
        to: NodeId,
        msg: Message,
    },
    Tick(NodeId),
    /// A sequencer's batch of inputs ends: it performs their actions.
    Flush(NodeId),
    DiskDone {
        node: NodeId,
        incarnation: u64,
        batch: u64,
    },
    /// A storage node's read of a record returns (read when it was asked for).
    ReadDone {
        node: NodeId,
        incarnation: u64,
        to: NodeId,
        req: u64,
        seqnum: SeqNum,
        stored: crate::Result<Option<crate::store::StoredData>>,
    },
    ClientStep(u32),
    Fault,
    Restart(NodeId),
    Heal,
    /// The late members register (see `SimOptions::late_members`).
    Join,
    /// The operator asks for one more physical log (see `SimOptions::add_logs`).
    AddLog,
}

struct Client {
    engine: NodeId,
    context: Context,
    op: Option<(OpId, Request, Context)>,
    acked: Vec<(BookId, SeqNum)>,
    completed: u64,
}

/// The first controller; the others count down from `u32::MAX`.
const CONTROLLER: NodeId = NodeId(0);

fn controller_id(i: usize) -> NodeId {
    if i == 0 {
        CONTROLLER
    } else {
        NodeId(u32::MAX - i as u32)
    }
}

/// One controller process.
struct ControllerSlot {
    id: NodeId,
    /// `None` while it is down or standing by.
    node: Option<Controller>,
    /// The store's revision this controller loaded or wrote last.
    revision: u64,
    /// A deposed leader runs on until then, unaware.
    deposed_until: Option<Micros>,
}

/// The configuration store the controllers share (etcd's key), written with a
/// compare-and-swap on its revision.
#[derive(Default)]
struct CasStore {
    config: Option<Configuration>,
    revision: u64,
}

thread_local! {
    static LAST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
    static IN_SIM: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Panics inside the simulation are violations, reported with their location rather
/// than printed as they happen.
/// The client op id an appended record's data names (`op<N>:...`).
fn origin_op(data: &[u8]) -> Option<OpId> {
    let rest = data.strip_prefix(b"op")?;
    let end = rest.iter().position(|&b| b == b':')?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

fn quiet_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_SIM.with(|s| s.get()) {
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{info}")));
            } else {
                default(info);
            }
        }));
    });
}
/// How often a controller that is down ticks (to notice its restart).
const TICK_US: Micros = 5_000;
/// Chance that a sequencer's input starts a batch: its actions wait while more inputs
/// arrive, for up to `BATCH_WINDOW_US`, as the driver takes every waiting input before
/// it acts; the batch's metalog writes are persisted together where the first stands.
const SEQUENCER_BATCH: f64 = 0.3;
const BATCH_WINDOW_US: Micros = 2_000;
/// The shortest time between two ticks of a node. An input may start a timer, which
/// only a tick fires: as the drivers do, a node ticks right after an input, or this
/// long after its last tick if that was sooner.
const TICK_MIN_US: Micros = 1_000;
const DRAIN_US: Micros = 1_000_000;

pub struct Sim {
    seed: u64,
    opts: SimOptions,
    rng: Rng,
    now: Micros,
    queue: BinaryHeap<Reverse<(Micros, u64)>>,
    events: BTreeMap<u64, Event>,
    next_event: u64,
    slots: BTreeMap<NodeId, Slot>,
    roster: Vec<(NodeId, Role)>,
    /// The members registered so far: what a controller that starts now is given.
    registered: Vec<(NodeId, Role)>,
    controller_cfg: ControllerConfig,
    controllers: Vec<ControllerSlot>,
    /// The controller that holds the lease (it may be down, and restarts).
    leader: usize,
    controller_store: CasStore,
    /// The configuration the controller installed last.
    config: Option<Arc<Configuration>>,
    partitioned: BTreeSet<(NodeId, NodeId)>,
    clients: Vec<Client>,
    next_op: OpId,
    op_locations: BTreeMap<OpId, Location>,
    /// When each client op was submitted.
    op_started: BTreeMap<OpId, Micros>,
    /// Per (storage node, shard): the prefix already verified durable.
    durable_checked: BTreeMap<(NodeId, crate::types::ShardId), u64>,
    oracle: Oracle,
    stats: SimStats,
    liveness: bool,
    /// Each node's next tick: after an input, at once or `TICK_MIN_US` after its last
    /// tick; after a tick, when its `NextTick` says (never on a fixed period).
    tick_at: BTreeMap<NodeId, Micros>,
    last_tick: BTreeMap<NodeId, Micros>,
    /// Sequencers in a batch of inputs, whose actions wait for `Event::Flush`.
    batching: BTreeSet<NodeId>,
    /// The request of a caller outside the simulation (`Sim::call`), while it runs.
    call: Option<client::Call>,
}

impl Sim {
    pub fn new(seed: u64, opts: SimOptions) -> Sim {
        let mut roster = Vec::new();
        let mut slots = BTreeMap::new();
        let mut id = 1;
        let index_nodes = opts.partial.map_or(0, |p| (p.shards * p.replicas + p.spares) as u32);
        let roles = [
            (Role::Sequencer, opts.sequencers),
            (Role::Storage, opts.storage),
            (Role::Engine, opts.engines),
            (Role::Index, index_nodes),
            (Role::Aggregator, opts.partial.map_or(0, |p| p.aggregators as u32)),
        ];
        for (role, count) in roles {
            for _ in 0..count {
                let n = NodeId(id);
                id += 1;
                roster.push((n, role));
                slots.insert(
                    n,
                    Slot {
                        role,
                        node: None,
                        incarnation: 0,
                        metalog: Arc::new(MemMetalogStore::new()),
                        durable_len: BTreeMap::new(),
                        records: Arc::new(MemStore::new()),
                        lost_power: false,
                    },
                );
            }
        }
        let ccfg = ControllerConfig {
            n_logs: opts.n_logs,
            n_meta: opts.n_meta,
            n_data: opts.n_data,
            failure_timeout_us: 300_000,
            resend_us: 40_000,
            startup_grace_us: 500_000,
            indexers_per_log: opts.indexers_per_log,
            tier: opts.partial.map(|p| (p.shards, p.replicas)),
            peers: Vec::new(),
            // Few: some joins in a seed fall back to a new term.
            slots_per_log: opts.engines as usize + 3,
            // Within a crash's downtime: some crashed or cut-off replicas are replaced.
            index_replace_us: 400_000,
        };
        let late: Vec<NodeId> = if opts.late_members {
            [Role::Storage, Role::Engine]
                .into_iter()
                .filter_map(|role| roster.iter().rev().find(|(_, r)| *r == role).map(|(n, _)| *n))
                .collect()
        } else {
            Vec::new()
        };
        let registered: Vec<(NodeId, Role)> = roster.iter().filter(|(n, _)| !late.contains(n)).copied().collect();
        let n_controllers = opts.controllers.max(1) as usize;
        let controllers = (0..n_controllers)
            .map(|i| {
                let id = controller_id(i);
                let peers = (0..n_controllers).filter(|&j| j != i).map(controller_id).collect();
                let cfg = ControllerConfig { peers, ..ccfg.clone() };
                let node = (i == 0).then(|| Controller::new(id, cfg, &registered));
                ControllerSlot { id, node, revision: 0, deposed_until: None }
            })
            .collect();
        let engines: Vec<NodeId> = roster.iter().filter(|(_, r)| *r == Role::Engine).map(|(n, _)| *n).collect();
        let clients = (0..opts.clients)
            .map(|c| Client {
                engine: engines[c as usize % engines.len()],
                context: Context::new(),
                op: None,
                acked: Vec::new(),
                completed: 0,
            })
            .collect();
        let mut sim = Sim {
            seed,
            rng: Rng::new(seed),
            opts,
            now: 0,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            next_event: 0,
            slots,
            roster,
            registered,
            controller_cfg: ccfg,
            controllers,
            leader: 0,
            controller_store: CasStore::default(),
            config: None,
            partitioned: BTreeSet::new(),
            clients,
            next_op: 1,
            op_locations: BTreeMap::new(),
            op_started: BTreeMap::new(),
            durable_checked: BTreeMap::new(),
            oracle: Oracle::new(),
            stats: SimStats::default(),
            liveness: false,
            tick_at: BTreeMap::new(),
            last_tick: BTreeMap::new(),
            batching: BTreeSet::new(),
            call: None,
        };
        let ids: Vec<NodeId> = sim.slots.keys().copied().collect();
        for n in ids {
            sim.start(n);
        }
        for i in 0..n_controllers {
            sim.tick_by(controller_id(i), 0);
        }
        for c in 0..sim.opts.clients {
            let at = 200_000 + sim.rng.below(100_000);
            sim.schedule(at, Event::ClientStep(c));
        }
        sim.schedule(10_000, Event::Fault);
        if sim.registered.len() < sim.roster.len() {
            let at = 100_000 + sim.rng.below(500_000);
            sim.schedule(at, Event::Join);
        }
        for _ in 0..sim.opts.add_logs {
            let at = 400_000 + sim.rng.below(sim.opts.safety_us.saturating_sub(400_000).max(1));
            sim.schedule(at, Event::AddLog);
        }
        sim
    }

    /// `n` took an input: it ticks now, or `TICK_MIN_US` after its last tick.
    fn tick_after_input(&mut self, n: NodeId) {
        let at = self.last_tick.get(&n).map_or(self.now, |&t| self.now.max(t + TICK_MIN_US));
        self.tick_by(n, at);
    }

    /// Makes `n` tick at `at` at the latest.
    fn tick_by(&mut self, n: NodeId, at: Micros) {
        if self.tick_at.get(&n).is_none_or(|&t| at < t) {
            self.tick_at.insert(n, at);
            self.schedule(at - self.now, Event::Tick(n));
        }
    }

    fn schedule(&mut self, delay: Micros, event: Event) {
        let id = self.next_event;
        self.next_event += 1;
        self.events.insert(id, event);
        self.queue.push(Reverse((self.now + delay, id)));
    }

    fn sequencer_cfg(&self) -> SequencerConfig {
        SequencerConfig {
            metalog: self.opts.metalog,
            entry_retry_us: 10_000,
            tail_interval_us: 20_000,
            heartbeat_interval_us: 30_000,
            // Two: followers replaying and backups repairing a gap read from the store.
            entries_kept: 2,
            ..Default::default()
        }
    }

    /// Indexes that spill every full chunk at once, or keep a few, or keep all, by
    /// node: the same log must give the same index whatever memory it holds.
    fn cold_index(n: NodeId) -> Option<ColdIndex> {
        let resident_max = [0, 1 << 10, usize::MAX][(n.0 % 3) as usize];
        Some(ColdIndex { resident_max, open: Arc::new(|| Ok(Box::new(MemColdStore::default()))) })
    }

    /// Tiny local indexes (partial mode), so that every path runs; one engine in three
    /// has none.
    fn local_bounds(n: NodeId) -> Option<LocalBounds> {
        (!n.0.is_multiple_of(3)).then_some(LocalBounds {
            suffix_bytes: 1 << 10,
            tag_cache_bytes: 2 << 10,
            tag_bytes_max: 256,
            popularity_bytes: 512,
        })
    }

    fn follower_cfg() -> FollowerConfig {
        FollowerConfig { fetch_retry_us: 15_000, buffer_max: 1024 }
    }

    fn start(&mut self, n: NodeId) {
        let controllers = self.controller_ids();
        let sequencer_cfg = self.sequencer_cfg();
        let slot = self.slots.get_mut(&n).expect("known node");
        slot.incarnation += 1;
        let inc = slot.incarnation;
        let node = match slot.role {
            Role::Sequencer => {
                let writes = slot.metalog.load().expect("the in-memory store never fails");
                let mut s = Sequencer::recover(n, controllers.clone(), inc, sequencer_cfg, writes);
                if slot.lost_power {
                    s.lost_unsynced_writes();
                }
                Node::Sequencer(s)
            }
            Role::Storage => {
                let recovered = slot.records.recover().expect("the in-memory store never fails");
                let cfg = StorageConfig {
                    progress_interval_us: 10_000,
                    heartbeat_interval_us: 30_000,
                    // A few records: engines applying an entry late, and every engine
                    // replaying after a restart, fetch metadata from the store.
                    meta_window: 4,
                    follower: Self::follower_cfg(),
                    cold_index: Self::cold_index(n),
                    ..Default::default()
                };
                Node::Storage(StorageNode::recover(n, controllers.clone(), inc, cfg, recovered))
            }
            Role::Engine => {
                let cfg = EngineConfig {
                    retransmit_us: 50_000,
                    fetch_retry_us: 20_000,
                    op_timeout_us: 2_000_000,
                    heartbeat_interval_us: 30_000,
                    cache_bytes_max: 64 << 10,
                    follower: Self::follower_cfg(),
                    cold_index: Self::cold_index(n),
                    // Tiny local indexes, so that every path runs; one engine in three
                    // has none.
                    local_index: Self::local_bounds(n),
                    local_wait_us: 2_000,
                    lookup_retry_us: 20_000,
                    ..Default::default()
                };
                Node::Engine(Engine::new(n, controllers, inc, cfg))
            }
            Role::Index => {
                let cfg = IndexNodeConfig {
                    // Small, so that lookups meet `TooOld` and engines restart their
                    // local indexes.
                    dead_keep_entries: 32,
                    update_keep_bytes: 16 << 10,
                    aux_bytes_max: 4 << 10,
                    fetch_retry_us: 20_000,
                    heartbeat_interval_us: 30_000,
                    hold_us: 2_000_000,
                    follower: Self::follower_cfg(),
                    // Tiny pieces: a copy takes many, and long rows are split.
                    copy_piece_items: 3,
                    copy_give_up_us: 200_000,
                    ..Default::default()
                };
                Node::Index(IndexNode::new(n, controllers, inc, cfg))
            }
            Role::Aggregator => {
                // One seed in four keeps two lookups at once: past them the oldest is
                // dropped and its caller asks again.
                let lookups_max = if self.seed % 4 == 1 { 2 } else { AggregatorConfig::default().lookups_max };
                let cfg = AggregatorConfig { heartbeat_interval_us: 30_000, gather_us: 500_000, lookups_max };
                Node::Aggregator(AggregatorNode::new(n, controllers, inc, cfg))
            }
        };
        slot.node = Some(node);
        let jitter = self.rng.below(TICK_US);
        self.tick_by(n, self.now + jitter);
    }

    fn send(&mut self, from: NodeId, to: NodeId, msg: Message) {
        if let Message::Probed { durable, .. } = msg {
            self.stats.probes += 1;
            self.stats.probes_lacking += u64::from(!durable);
        }
        if !self.liveness {
            if self.partitioned.contains(&(from.min(to), from.max(to))) || self.rng.chance(self.opts.loss) {
                return;
            }
            if self.rng.chance(self.opts.duplicate) {
                let d = self.delay();
                self.schedule(d, Event::Deliver { from, to, msg: msg.clone() });
            }
        }
        let d = self.delay();
        self.schedule(d, Event::Deliver { from, to, msg });
    }

    fn delay(&mut self) -> Micros {
        self.opts.delay_min_us + self.rng.below(self.opts.delay_max_us - self.opts.delay_min_us + 1)
    }

    /// Runs the whole simulation; returns the stats or the first violation.
    pub fn run(mut self) -> Result<SimStats, Violation> {
        quiet_panics();
        let end = self.opts.safety_us + self.opts.liveness_us;
        while self.step(end)? {}
        self.check_liveness()?;
        self.stats.terms = self.config.as_ref().map_or(0, |c| c.current().term.0);
        self.stats.chunks_spilled += self.slots.values().filter_map(|s| s.node.as_ref()).map(Node::chunks_spilled).sum::<u64>();
        for node in self.slots.values().filter_map(|s| s.node.as_ref()) {
            self.stats.paths.add(&node.paths());
            self.stats.add_index(node);
        }
        Ok(self.stats)
    }

    /// Handles the next event if it is due by `end` (and returns true), then checks the
    /// oracle: the first violation is returned.
    fn step(&mut self, end: Micros) -> Result<bool, Violation> {
        let Some(&Reverse((at, id))) = self.queue.peek() else { return Ok(false) };
        if at > end {
            return Ok(false);
        }
        self.queue.pop();
        self.now = at;
        if !self.liveness && at >= self.opts.safety_us {
            self.begin_liveness();
        }
        let event = self.events.remove(&id).expect("scheduled events exist");
        self.stats.events += 1;
        IN_SIM.with(|s| s.set(true));
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.handle(event)));
        IN_SIM.with(|s| s.set(false));
        if outcome.is_err() {
            let what = LAST_PANIC.with(|p| p.borrow_mut().take()).unwrap_or_default();
            self.oracle.violations.push(format!("a state machine panicked: {what}"));
        }
        if !self.oracle.violations.is_empty() {
            let what = std::mem::take(&mut self.oracle.violations);
            return Err(Violation { seed: self.seed, at_us: self.now, what });
        }
        Ok(true)
    }

    /// Every request submitted past the first half of the liveness phase must succeed.
    fn settled_at(&self, t: Micros) -> bool {
        t >= self.opts.safety_us + self.opts.liveness_us / 2
    }

    fn controller_ids(&self) -> Vec<NodeId> {
        self.controllers.iter().map(|c| c.id).collect()
    }

    /// Starts controller `i` from what the store holds, as a process that just won the
    /// lease (or restarted) would.
    fn start_controller(&mut self, i: usize) {
        let stored = self.controller_store.config.clone();
        let peers = self.controller_ids().into_iter().filter(|&p| p != self.controllers[i].id).collect();
        let cfg = ControllerConfig { peers, ..self.controller_cfg.clone() };
        let controller = Controller::recover(self.controllers[i].id, cfg, &self.registered, stored);
        let slot = &mut self.controllers[i];
        slot.node = Some(controller.expect("a controller resumes from the configuration the cluster stored"));
        slot.revision = self.controller_store.revision;
        slot.deposed_until = None;
        let id = slot.id;
        self.tick_by(id, self.now);
    }

    fn controller_index(&self, id: NodeId) -> Option<usize> {
        self.controllers.iter().position(|c| c.id == id)
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Deliver { from, to, msg } => {
                self.tick_after_input(to);
                if let Some(i) = self.controller_index(to) {
                    if let Some(c) = self.controllers[i].node.as_mut() {
                        c.on_message(self.now, from, msg);
                        self.controller_actions(i);
                    }
                    return;
                }
                let now = self.now;
                match self.slots.get_mut(&to).and_then(|s| s.node.as_mut()) {
                    Some(Node::Sequencer(s)) => {
                        // Its batch ends where its actions are taken (`node_actions`).
                        s.begin_batch();
                        s.on_message(now, from, msg)
                    }
                    Some(Node::Storage(s)) => s.on_message(now, from, msg),
                    Some(Node::Engine(e)) => e.on_message(now, from, msg),
                    Some(Node::Index(x)) => x.on_message(now, from, msg),
                    Some(Node::Aggregator(a)) => a.on_message(now, from, msg),
                    None => return,
                }
                self.after_input(to);
            }
            Event::Flush(n) => {
                if self.batching.remove(&n) && self.slots[&n].node.is_some() {
                    self.node_actions(n);
                }
            }
            Event::Tick(n) => {
                if self.tick_at.get(&n) != Some(&self.now) {
                    return; // superseded by an earlier tick
                }
                self.tick_at.remove(&n);
                let now = self.now;
                self.last_tick.insert(n, now);
                if let Some(i) = self.controller_index(n) {
                    // A controller's ticks go on while it is down and reach it again
                    // after its restart.
                    let slot = &mut self.controllers[i];
                    if slot.deposed_until.is_some_and(|t| now >= t) {
                        // The deposed leader notices its lease is gone.
                        slot.node = None;
                        slot.deposed_until = None;
                    }
                    let next = match slot.node.as_mut() {
                        Some(c) => {
                            let next = c.on_tick(now).due();
                            self.controller_actions(i);
                            next
                        }
                        None => now + TICK_US,
                    };
                    self.tick_by(n, next.max(now + TICK_MIN_US));
                    return;
                }
                let next = match self.slots.get_mut(&n).and_then(|s| s.node.as_mut()) {
                    Some(Node::Sequencer(s)) => {
                        s.begin_batch();
                        s.on_tick(now)
                    }
                    Some(Node::Storage(s)) => s.on_tick(now),
                    Some(Node::Engine(e)) => e.on_tick(now),
                    Some(Node::Index(x)) => x.on_tick(now),
                    Some(Node::Aggregator(a)) => a.on_tick(now),
                    None => return, // a crashed node stops ticking; `start` ticks it again
                };
                self.after_input(n);
                self.tick_by(n, next.due().max(now + TICK_MIN_US));
            }
            Event::DiskDone { node, incarnation, batch } => {
                let slot = self.slots.get_mut(&node).expect("known node");
                if slot.incarnation != incarnation {
                    return;
                }
                slot.records.sync().expect("the in-memory store never fails");
                if let Some(Node::Storage(s)) = slot.node.as_mut() {
                    s.on_written(&[batch]);
                    self.node_actions(node);
                    self.tick_after_input(node);
                }
            }
            Event::ReadDone { node, incarnation, to, req, seqnum, stored } => {
                let slot = self.slots.get_mut(&node).expect("known node");
                if slot.incarnation != incarnation {
                    return;
                }
                if let Some(Node::Storage(s)) = slot.node.as_mut() {
                    s.on_read(to, req, seqnum, stored);
                    self.node_actions(node);
                }
            }
            Event::ClientStep(c) => self.client_step(c),
            Event::Fault => self.fault(),
            Event::Restart(n) if self.controller_index(n).is_some() => {
                let i = self.controller_index(n).expect("a controller");
                // Only the lease holder campaigns back; a standby stays down.
                if i == self.leader && self.controllers[i].node.is_none() {
                    self.start_controller(i);
                }
            }
            Event::Restart(n) => {
                if self.slots[&n].node.is_none() {
                    self.start(n);
                }
            }
            Event::Heal => self.partitioned.clear(),
            Event::AddLog => {
                // The setting lives with the configuration store: every controller
                // started from now on reads it, and the running ones are told.
                self.controller_cfg.n_logs += 1;
                let n = self.controller_cfg.n_logs;
                for c in self.controllers.iter_mut().filter_map(|c| c.node.as_mut()) {
                    c.set_n_logs(n).expect("logs are only added");
                }
                self.tick_controllers();
                self.stats.logs_added += 1;
            }
            Event::Join => {
                self.registered = self.roster.clone();
                for c in self.controllers.iter_mut().filter_map(|c| c.node.as_mut()) {
                    for &(n, role) in &self.roster {
                        assert!(c.add_member(n, role), "a member keeps its role");
                    }
                }
                self.tick_controllers();
            }
        }
    }
}

/// Runs seeds `first..first + count`; returns the stats of each or the first violation.
pub fn run_seeds(first: u64, count: u64, opts: &SimOptions) -> Result<Vec<SimStats>, Violation> {
    (first..first + count).map(|seed| Sim::new(seed, opts.clone()).run()).collect()
}
