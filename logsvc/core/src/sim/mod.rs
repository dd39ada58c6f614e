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

mod client;
mod oracle;
mod rng;

pub use client::SimLog;
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
use crate::sequencer::{stored_entries_messages, Sequencer, SequencerAction, SequencerConfig};
use crate::storage::{meta_reply, StorageAction, StorageConfig, StorageNode};
use crate::store::{MemMetalogStore, MemStore, MetalogStore, MetalogWrite, RecordStore};
use crate::tier::{IndexNode, IndexNodeAction, IndexNodeConfig, LocalBounds};
use crate::types::{BookId, Location, LogId, MetalogPosition, Micros, NodeId, SeqNum, Tag, Term};
use oracle::Oracle;

/// Everything a run depends on besides the seed.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub sequencers: u32,
    pub storage: u32,
    pub engines: u32,
    pub n_logs: u8,
    pub n_meta: usize,
    pub n_data: usize,
    pub clients: u32,
    pub books: u64,
    pub safety_us: Micros,
    pub liveness_us: Micros,
    pub delay_min_us: Micros,
    pub delay_max_us: Micros,
    pub loss: f64,
    pub duplicate: f64,
    /// Chance, every 10 ms of the safety phase, of each kind of fault.
    pub crash: f64,
    /// Chance, at each metalog persist a sequencer starts after sending messages in
    /// the same step (a primary's new entry), that it crashes before the persist is
    /// durable: the backups may hold the entry, the primary does not.
    pub persist_crash: f64,
    /// Chance, every 10 ms of the safety phase, that the power fails: every node and
    /// the leading controller crash at once (storage nodes lose what was not synced:
    /// every replica of a shard may), and all restart.
    pub power_loss: f64,
    pub partition: f64,
    /// Chance, every 10 ms of the safety phase, that the leading controller crashes;
    /// it restarts from the store after a downtime.
    pub controller_crash: f64,
    /// Controllers: one leads, the others stand by (as on etcd's leader lease). All
    /// share one configuration store written with a compare-and-swap.
    pub controllers: u32,
    /// Chance, every 10 ms of the safety phase, that leadership moves to another
    /// controller while the old leader, unaware, runs on for up to 300 ms.
    pub failover: f64,
    /// The last storage node and the last engine register with the control plane
    /// only after the controller started (0.1 to 0.6 s in), as members of a cluster of
    /// processes do: they join through `Controller::add_member` and a new term.
    pub late_members: bool,
    /// Physical logs the controller adds during the safety phase, each at a random
    /// time (a new term in which some books move to the new log).
    pub add_logs: u8,
    pub disk_min_us: Micros,
    pub disk_max_us: Micros,
    /// Engines holding each log's index; the others forward (`None`: all index all).
    pub indexers_per_log: Option<usize>,
    /// Partial mode (`sim --index partial`): index nodes instead of indexing engines.
    pub partial: Option<SimPartial>,
}

/// The index tier of a partial-mode run: `shards` x `replicas` index nodes. Engines
/// get local indexes with tiny bounds (every path runs), and one in three none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimPartial {
    pub shards: usize,
    pub replicas: usize,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            sequencers: 3,
            storage: 4,
            engines: 3,
            n_logs: 2,
            n_meta: 3,
            n_data: 2,
            clients: 6,
            books: 4,
            safety_us: 3_000_000,
            liveness_us: 4_000_000,
            delay_min_us: 50,
            delay_max_us: 2_000,
            loss: 0.02,
            duplicate: 0.01,
            crash: 0.02,
            persist_crash: 0.002,
            power_loss: 0.002,
            partition: 0.01,
            controller_crash: 0.002,
            controllers: 2,
            failover: 0.003,
            late_members: true,
            add_logs: 1,
            disk_min_us: 100,
            disk_max_us: 3_000,
            indexers_per_log: Some(2),
            partial: None,
        }
    }
}

impl fmt::Display for SimOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sequencers={} storage={} engines={} logs={} n_meta={} n_data={} clients={} books={} safety={}ms liveness={}ms \
             delay={}..{}us loss={} dup={} crash={} persist_crash={} power_loss={} partition={} controller_crash={} controllers={} failover={} late_members={} \
             add_logs={} disk={}..{}us indexers_per_log={:?} partial={:?}",
            self.sequencers,
            self.storage,
            self.engines,
            self.n_logs,
            self.n_meta,
            self.n_data,
            self.clients,
            self.books,
            self.safety_us / 1000,
            self.liveness_us / 1000,
            self.delay_min_us,
            self.delay_max_us,
            self.loss,
            self.duplicate,
            self.crash,
            self.persist_crash,
            self.power_loss,
            self.partition,
            self.controller_crash,
            self.controllers,
            self.failover,
            self.late_members,
            self.add_logs,
            self.disk_min_us,
            self.disk_max_us,
            self.indexers_per_log,
            self.partial,
        )
    }
}

/// What a run did, for the report line.
#[derive(Clone, Debug, Default)]
pub struct SimStats {
    pub events: u64,
    pub appends_acked: u64,
    pub cond_conflicts: u64,
    pub reads: u64,
    /// Of `reads`, those the engine answered in place (`Engine::read_now`).
    pub reads_in_place: u64,
    pub trims: u64,
    /// Aux data accepted (on a live record of the caller's book) and refused.
    pub aux_accepted: u64,
    pub aux_refused: u64,
    pub crashes: u64,
    /// Of `crashes`, those of a sequencer between sending an entry and persisting it.
    pub persist_crashes: u64,
    pub controller_crashes: u64,
    pub power_losses: u64,
    /// Leadership moves, and configurations a deposed controller could not persist.
    pub failovers: u64,
    pub cas_refused: u64,
    pub partitions: u64,
    pub logs_added: u32,
    pub terms: u16,
    /// Chunks of index rows the nodes' indexes spilled to their cold stores.
    pub chunks_spilled: u64,
    /// A sealing controller's probes of an uncommitted tail entry's records answered,
    /// and of those, answered by a replica that never had one (the entry is dropped).
    pub probes: u64,
    pub probes_lacking: u64,
    /// Partial mode: the engines' reads per path, and their local indexes' restarts.
    pub paths: PartialStats,
    /// Configurations installed as later versions of a term (partial mode: function
    /// nodes that joined, left or restarted without a new term).
    pub versions: u64,
}

#[derive(Debug)]
pub struct Violation {
    pub seed: u64,
    pub at_us: Micros,
    pub what: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "violation at t={}us:", self.at_us)?;
        for w in &self.what {
            writeln!(f, "  {w}")?;
        }
        write!(f, "reproduce with seed={}", self.seed)
    }
}

/// A live node. Engines dominate the size; boxing them would only add indirection to
/// the simulator's hot path.
#[allow(clippy::large_enum_variant)]
enum Node {
    Sequencer(Sequencer),
    Storage(StorageNode),
    Engine(Engine),
    Index(IndexNode),
}

impl Node {
    fn paths(&self) -> PartialStats {
        match self {
            Node::Engine(e) => e.partial_stats().unwrap_or_default(),
            _ => PartialStats::default(),
        }
    }

    fn chunks_spilled(&self) -> u64 {
        match self {
            Node::Sequencer(_) | Node::Index(_) => 0,
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
        let index_nodes = opts.partial.map_or(0, |p| (p.shards * p.replicas) as u32);
        let roles = [
            (Role::Sequencer, opts.sequencers),
            (Role::Storage, opts.storage),
            (Role::Engine, opts.engines),
            (Role::Index, index_nodes),
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

    fn sequencer_cfg() -> SequencerConfig {
        SequencerConfig {
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
        let slot = self.slots.get_mut(&n).expect("known node");
        slot.incarnation += 1;
        let inc = slot.incarnation;
        let node = match slot.role {
            Role::Sequencer => {
                let writes = slot.metalog.load().expect("the in-memory store never fails");
                Node::Sequencer(Sequencer::recover(n, controllers.clone(), inc, Self::sequencer_cfg(), writes))
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
                    ..Default::default()
                };
                Node::Index(IndexNode::new(n, controllers, inc, cfg))
            }
        };
        slot.node = Some(node);
        let jitter = self.rng.below(TICK_US);
        self.tick_by(n, self.now + jitter);
    }

    /// Whether `n` may crash now: a quorum of sequencers and one storage replica per
    /// shard stay alive, the failure model the log promises to survive.
    fn may_crash(&self, n: NodeId) -> bool {
        let role = self.slots[&n].role;
        let down_same = self.slots.values().filter(|s| s.role == role && s.node.is_none()).count();
        let limit = match role {
            Role::Sequencer => (self.opts.n_meta - 1) / 2,
            Role::Storage => self.opts.n_data - 1,
            Role::Engine => self.opts.engines as usize,
            Role::Index => self.opts.partial.map_or(0, |p| p.shards * p.replicas),
        };
        down_same < limit
    }

    fn crash(&mut self, n: NodeId) {
        let slot = self.slots.get_mut(&n).expect("known node");
        let Some(node) = slot.node.take() else { return };
        self.stats.chunks_spilled += node.chunks_spilled();
        self.stats.paths.add(&node.paths());
        // A storage node's disk loses what was not synced; the metalog store syncs
        // every write, so it loses nothing.
        slot.records.crash();
        self.stats.crashes += 1;
        // Clients of a crashed engine lose their request: its outcome is unknown.
        let orphaned: Vec<u32> = (0..self.clients.len() as u32).filter(|&c| self.clients[c as usize].engine == n).collect();
        for c in orphaned {
            if let Some((op, _, _)) = self.clients[c as usize].op.take() {
                self.op_started.remove(&op);
                self.schedule(50_000, Event::ClientStep(c));
            }
        }
        let downtime = 50_000 + self.rng.below(800_000);
        self.schedule(downtime, Event::Restart(n));
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

    fn begin_liveness(&mut self) {
        self.liveness = true;
        self.partitioned.clear();
        let down: Vec<NodeId> = self.slots.iter().filter(|(_, s)| s.node.is_none()).map(|(n, _)| *n).collect();
        for n in down {
            self.start(n);
        }
        // A deposed leader learns it lost the lease; the leader runs.
        for i in 0..self.controllers.len() {
            if i != self.leader {
                self.controllers[i].node = None;
                self.controllers[i].deposed_until = None;
            }
        }
        if self.controllers[self.leader].node.is_none() {
            self.start_controller(self.leader);
        }
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

    fn check_liveness(&mut self) -> Result<(), Violation> {
        let mut what = Vec::new();
        for (&n, slot) in &self.slots {
            let applied = |l: LogId| match &slot.node {
                Some(Node::Engine(e)) => Some(e.applied(l)),
                Some(Node::Index(x)) => Some(x.applied(l)),
                _ => None,
            };
            if applied(LogId(0)).is_some() {
                for l in 0..self.controller_cfg.n_logs {
                    let (mine, canonical) = (applied(LogId(l)).expect("checked"), self.oracle.position(LogId(l)));
                    if mine != canonical {
                        what.push(format!(
                            "after the liveness phase engine {n} has applied {mine} of log {l}, the log is at {canonical}"
                        ));
                    }
                }
            }
        }
        let stuck = self.clients.iter().any(|c| c.op.is_some());
        if (stuck || !what.is_empty()) && std::env::var_os("TALLY_SIM_DEBUG").is_some() {
            for (n, slot) in &self.slots {
                if let Some(Node::Engine(e)) = &slot.node {
                    what.push(format!("engine {n}: {}", e.debug_state()));
                }
            }
            if let Some(c) = self.oracle.config() {
                what.push(format!("config {:?}: {:?}", c.stamp(), c.current().logs));
            }
        }
        for (i, c) in self.clients.iter().enumerate() {
            if let Some((op, req, _)) = &c.op {
                what.push(format!("client {i}'s op {op} ({req:?}) is still waiting at the end of the liveness phase"));
            }
            if c.completed == 0 {
                what.push(format!("client {i} completed no request"));
            }
        }
        if what.is_empty() {
            Ok(())
        } else {
            Err(Violation { seed: self.seed, at_us: self.now, what })
        }
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

    /// The controllers were told something outside a message: they tick soon.
    fn tick_controllers(&mut self) {
        for c in self.controller_ids() {
            self.tick_after_input(c);
        }
    }

    fn controller_actions(&mut self, i: usize) {
        let id = self.controllers[i].id;
        let Some(c) = self.controllers[i].node.as_mut() else { return };
        for a in c.take_actions() {
            match a {
                ControllerAction::Send(to, msg) => self.send(id, to, msg),
                ControllerAction::Persist(config) => {
                    if self.controller_store.revision != self.controllers[i].revision {
                        // Another controller wrote since this one loaded: the driver
                        // stops it before it announces anything. The lease holder
                        // campaigns again and resumes from what is stored.
                        self.stats.cas_refused += 1;
                        self.controllers[i].node = None;
                        self.controllers[i].deposed_until = None;
                        if i == self.leader {
                            self.schedule(50_000, Event::Restart(id));
                        }
                        return;
                    }
                    self.controller_store.config = Some((*config).clone());
                    self.controller_store.revision += 1;
                    self.controllers[i].revision = self.controller_store.revision;
                }
                ControllerAction::Installed(config) => {
                    self.stats.versions += u64::from(config.current().version > 0);
                    self.config = Some(config.clone());
                    // The last entry a seal kept has each of its records durable
                    // somewhere (committed: everywhere, checked when it was).
                    let sealed = config.terms.iter().rev().find_map(|t| t.sealed.as_ref());
                    for e in sealed.into_iter().flatten().filter_map(|tail| tail.last.clone()) {
                        self.check_ordered_durable(&e, false, "kept by a seal");
                    }
                    self.oracle.on_installed(config);
                }
            }
        }
    }

    /// Performs `n`'s actions, unless `n` is a sequencer in a batch of inputs, or
    /// starts one.
    fn after_input(&mut self, n: NodeId) {
        if self.batching.contains(&n) {
            return;
        }
        if matches!(self.slots[&n].node, Some(Node::Sequencer(_))) && self.rng.chance(SEQUENCER_BATCH) {
            self.batching.insert(n);
            let window = self.rng.below(BATCH_WINDOW_US);
            self.schedule(window, Event::Flush(n));
            return;
        }
        self.node_actions(n);
    }

    fn node_actions(&mut self, n: NodeId) {
        let slot = self.slots.get_mut(&n).expect("known node");
        let records = slot.records.clone();
        let metalog = slot.metalog.clone();
        let incarnation = slot.incarnation;
        match slot.node.as_mut() {
            Some(Node::Sequencer(s)) => {
                let mut sent = false;
                s.end_batch(self.now);
                let actions = s.take_actions();
                // As the driver does: every write where the first stands, in one persist.
                let mut writes: Vec<MetalogWrite> = actions
                    .iter()
                    .filter_map(|a| if let SequencerAction::Persist(w) = a { Some(w.clone()) } else { None })
                    .collect();
                for a in actions {
                    match a {
                        SequencerAction::Send(to, msg) => {
                            sent = true;
                            // A backup acknowledges only entries it made durable.
                            if let Message::EntryAck { term, log, len } = &msg {
                                let durable = self.slots[&n].durable_len.get(&(*term, *log)).copied().unwrap_or(0);
                                if *len > durable {
                                    let what = format!(
                                        "sequencer {n} acknowledged {len} entries of term {} log {} holding {durable} durably",
                                        term.0, log.0
                                    );
                                    self.oracle.violations.push(what);
                                }
                            }
                            self.send(n, to, msg)
                        }
                        SequencerAction::Persist(_) if writes.is_empty() => {}
                        SequencerAction::Persist(_)
                            if sent && !self.liveness && self.may_crash(n) && self.rng.chance(self.opts.persist_crash) =>
                        {
                            // The messages are out; the writes and every later action
                            // are lost with the node.
                            self.stats.persist_crashes += 1;
                            self.crash(n);
                            return;
                        }
                        SequencerAction::Persist(_) => {
                            let durable = &mut self.slots.get_mut(&n).expect("known node").durable_len;
                            for w in &writes {
                                match w {
                                    MetalogWrite::Entry(e) => {
                                        let len = durable.entry((e.term, e.log)).or_default();
                                        *len = (*len).max(e.index + 1);
                                    }
                                    MetalogWrite::Truncate { term, log, len } => {
                                        durable.entry((*term, *log)).and_modify(|l| *l = (*l).min(*len));
                                    }
                                    MetalogWrite::Seal { .. } | MetalogWrite::Lead { .. } => {}
                                }
                            }
                            metalog.persist(&std::mem::take(&mut writes)).expect("the in-memory store never fails")
                        }
                        SequencerAction::Committed(e) => {
                            self.check_ordered_durable(&e, true, "committed");
                            self.oracle.on_committed(e)
                        }
                        SequencerAction::NeedsNewTerm { .. } => {}
                        SequencerAction::SendStored { to, term, log, from, end, gap } => {
                            let read = metalog.read_entries(term, log, from, end);
                            for msg in stored_entries_messages(term, log, from, end, gap, read) {
                                self.send(n, to, msg);
                            }
                        }
                    }
                }
            }
            Some(Node::Storage(s)) => {
                for a in s.take_actions() {
                    match a {
                        StorageAction::Send(to, msg) => {
                            self.check_progress(n, &records, &msg);
                            self.send(n, to, msg)
                        }
                        StorageAction::Write { batch, records: rs } => {
                            records.write(&rs).expect("the in-memory store never fails");
                            let d = self.opts.disk_min_us + self.rng.below(self.opts.disk_max_us - self.opts.disk_min_us + 1);
                            self.schedule(d, Event::DiskDone { node: n, incarnation, batch });
                        }
                        StorageAction::Read { to, req, seqnum, location } => {
                            // The read sees the store now; the node learns of it later,
                            // while trims may be ordered.
                            let stored = records.read(location);
                            let d = self.rng.below(self.opts.disk_min_us + 1);
                            self.schedule(d, Event::ReadDone { node: n, incarnation, to, req, seqnum, stored });
                        }
                        StorageAction::ReadMetas { to_node, req, shard, from, to } => {
                            let reply = meta_reply(req, shard, from, to, records.read_metas(shard, from, to));
                            self.send(n, to_node, reply);
                        }
                        StorageAction::Reclaim(locations) => {
                            records.reclaim(&locations).expect("the in-memory store never fails")
                        }
                        StorageAction::Discard { shard, from } => {
                            records.discard(shard, from).expect("the in-memory store never fails")
                        }
                    }
                }
            }
            Some(Node::Engine(e)) => {
                let actions = e.take_actions();
                // A local index never holds more than its bounds, structure by structure.
                let b = Self::local_bounds(n).unwrap_or(LocalBounds {
                    suffix_bytes: 0,
                    tag_cache_bytes: 0,
                    tag_bytes_max: 0,
                    popularity_bytes: 0,
                });
                // Now and then, every stream it caches against the canonical log at L
                // (streams of the books its configuration maps to that log).
                let sample = self.stats.events.is_multiple_of(8);
                let mut streams = Vec::new();
                let n_logs = e.n_logs().unwrap_or(0);
                for l in 0..n_logs {
                    if let Some((suffix, tags, popular)) = e.local_index_bytes(LogId(l)) {
                        if suffix > b.suffix_bytes || tags > b.tag_cache_bytes || popular > b.popularity_bytes {
                            let what =
                                format!("engine {n}'s local index of log {l} holds {suffix}/{tags}/{popular} bytes, over {b:?}");
                            self.oracle.violations.push(what);
                        }
                    }
                    if let Some(local) = e.local_index(LogId(l)).filter(|_| sample) {
                        let at = local.position();
                        let here = local.tags().cached().filter(|c| crate::types::book_to_log(c.0, n_logs) == LogId(l));
                        streams.extend(here.map(|c| (LogId(l), at, c)));
                    }
                }
                for (log, at, (book, tag, covered_from, complete, cached)) in streams {
                    if at <= self.oracle.position(log) {
                        self.oracle.check_local_stream(n.0, at, book, tag, covered_from, complete, &cached);
                    }
                }
                for a in actions {
                    self.engine_action(n, a);
                }
            }
            Some(Node::Index(x)) => {
                for a in x.take_actions() {
                    match a {
                        IndexNodeAction::Send(to, msg) => self.send(n, to, msg),
                        IndexNodeAction::Applied { log, position, records, holder_lookups } => {
                            self.oracle.on_decided(n.0, log, position, &records, &holder_lookups)
                        }
                    }
                }
            }
            None => {}
        }
    }

    /// The records `e` orders are durable on every replica of their shard (`every`),
    /// or on one at least: the log never names a record it cannot serve.
    fn check_ordered_durable(&mut self, e: &MetalogEntry, every: bool, what: &str) {
        let Some(config) = self.config.clone() else { return };
        let Some(t) = config.term(e.term) else { return };
        for (j, ids, _) in e.runs() {
            let shard = &t.log(e.log).shards[j];
            for local_id in ids {
                let location = Location { shard: shard.shard, local_id };
                let durable = shard.replicas.iter().filter(|r| self.slots[r].records.is_durable(location)).count();
                if durable == 0 || (every && durable < shard.replicas.len()) {
                    let msg = format!(
                        "entry {}:{} of {:?} {what} orders {location:?}, durable on {durable} of its {} replicas",
                        e.term.0,
                        e.index,
                        e.log,
                        shard.replicas.len()
                    );
                    self.oracle.violations.push(msg);
                    return;
                }
            }
        }
    }

    /// A storage node reports only records its disk would keep through a crash.
    fn check_progress(&mut self, n: NodeId, records: &MemStore, msg: &Message) {
        let Message::Progress { term, log, stored, .. } = msg else { return };
        let Some(config) = self.config.clone() else { return };
        let Some(t) = config.term(*term) else { return };
        for &(slot, count) in stored {
            let shard = t.log(*log).shards[slot as usize].shard;
            let checked = self.durable_checked.entry((n, shard)).or_insert(0);
            for local_id in *checked..count {
                if !records.is_durable(Location { shard, local_id }) {
                    let what = format!("storage {n} reported {shard:?} stored up to {count}, but {local_id} is not durable");
                    self.oracle.violations.push(what);
                    return;
                }
            }
            *checked = (*checked).max(count);
        }
    }

    fn engine_action(&mut self, n: NodeId, a: EngineAction) {
        match a {
            EngineAction::Send(to, msg) => self.send(n, to, msg),
            EngineAction::Assigned { op, location, record } => {
                // An engine that ran a request forwarded by another names it by its own
                // op id; the client's op id is in the data ("op<N>:...").
                let op = if self.request_of(op).is_some() { Some(op) } else { origin_op(&record.data) };
                // The client may have given up on the op (its engine crashed): the record
                // may be ordered all the same.
                if let Some((op, Request::Append { book, tags, data, cond, unchanged })) =
                    op.and_then(|o| self.request_of(o).map(|r| (o, r)))
                {
                    let mut tags = tags.clone();
                    tags.retain(|&t| t != Tag::ALL);
                    if let Some(c) = cond {
                        tags.push(c.tag);
                    }
                    tags.sort_unstable();
                    tags.dedup();
                    let meta = crate::message::RecordMeta { book: *book, tags, cond: *cond, unchanged: unchanged.clone() };
                    if record.meta != meta || record.data != data {
                        let msg = format!("engine {n} assigned {record:?} for op {op}, which asked for {meta:?}");
                        self.oracle.violations.push(msg);
                    }
                    self.op_locations.insert(op, location);
                }
                self.oracle.on_assigned(location, record.meta, record.data);
            }
            EngineAction::Indexed { log, position, records } => self.oracle.on_indexed(n.0, log, position, &records),
            EngineAction::Complete { op, result, log, position } => self.on_complete(n, op, result, log, position),
        }
    }

    fn request_of(&self, op: OpId) -> Option<&Request> {
        self.clients.iter().find_map(|c| c.op.as_ref().filter(|(o, _, _)| *o == op).map(|(_, r, _)| r))
    }

    fn on_complete(
        &mut self,
        engine: NodeId,
        op: OpId,
        result: Result<Reply, crate::Error>,
        log: LogId,
        position: MetalogPosition,
    ) {
        if let Some(call) = self.call.as_mut().filter(|c| c.engine == engine && c.op == op) {
            call.done = Some((result, log, position));
            return;
        }
        let Some(ci) = self.clients.iter().position(|c| c.engine == engine && c.op.as_ref().is_some_and(|(o, _, _)| *o == op))
        else {
            return;
        };
        let (_, request, before) = self.clients[ci].op.take().expect("found");
        let started = self.op_started.remove(&op).unwrap_or(0);
        let strict = self.settled_at(started);
        let ok = result.is_ok() || matches!(result, Err(crate::Error::Conflict { .. }));
        if ok && position < before.position(log) {
            let msg = format!("op {op} completed at {position} of {log:?}, behind the caller's position {before:?}");
            self.oracle.violations.push(msg);
        }
        // Partial mode: a function node answers nothing before its start (it joined
        // with no index and no replay).
        let read = matches!(request, Request::ReadNext { .. } | Request::ReadPrev { .. } | Request::SetAux { .. });
        if ok && read && self.opts.partial.is_some() {
            let incarnation = self.slots[&engine].incarnation;
            if let Some(start) = self.oracle.start_of(engine, incarnation, log).filter(|&s| position < s) {
                let msg = format!("engine {engine} answered op {op} at {position} of {log:?}, before its start {start}");
                if std::env::var_os("TALLY_SIM_DEBUG").is_some() {
                    let c = self.oracle.config().unwrap();
                    for t in &c.terms {
                        eprintln!(
                            "DBG term {} v{} log shards {:?}",
                            t.term.0,
                            t.version,
                            t.logs.get(usize::from(log.0)).map(|l| l
                                .shards
                                .iter()
                                .map(|s| (s.shard, s.engine, s.incarnation, s.since, s.until))
                                .collect::<Vec<_>>())
                        );
                    }
                    eprintln!("DBG incarnation {incarnation} request {request:?} result {result:?} before {before:?}");
                    if let Some(Node::Engine(e)) = &self.slots[&engine].node {
                        eprintln!("DBG {}", e.debug_state());
                    }
                }
                self.oracle.violations.push(msg);
            }
        }
        match (&request, &result) {
            (Request::Append { book, .. }, Ok(Reply::Appended(seqnum))) => {
                let location = self.op_locations[&op];
                self.oracle.check_append(location, &Ok(*seqnum));
                self.clients[ci].acked.push((*book, *seqnum));
                self.stats.appends_acked += 1;
            }
            (Request::Append { .. }, Err(crate::Error::Conflict { holder })) => {
                let location = self.op_locations[&op];
                self.oracle.check_append(location, &Err(*holder));
                self.stats.cond_conflicts += 1;
            }
            (Request::ReadNext { book, tag, min }, Ok(Reply::Read(got))) => {
                self.oracle.check_read(*book, *tag, *min, true, log, position, &before, got);
                self.stats.reads += 1;
            }
            (Request::ReadPrev { book, tag, max }, Ok(Reply::Read(got))) => {
                self.oracle.check_read(*book, *tag, *max, false, log, position, &before, got);
                self.stats.reads += 1;
            }
            (Request::Trim { .. }, Ok(Reply::Trimmed)) => self.stats.trims += 1,
            (Request::SetAux { aux, .. }, Ok(Reply::AuxSet)) => {
                self.oracle.check_aux(aux, true, log, position);
                self.stats.aux_accepted += 1;
            }
            (Request::SetAux { aux, .. }, Err(crate::Error::InvalidArgument(_))) => {
                self.oracle.check_aux(aux, false, log, position);
                self.stats.aux_refused += 1;
            }
            (_, Err(crate::Error::Timeout(_) | crate::Error::Unavailable(_))) if !strict => {}
            (_, Err(e)) if strict => {
                self.oracle.violations.push(format!("op {op} ({request:?}) failed in the liveness phase: {e}"));
            }
            (r, res) => self.oracle.violations.push(format!("unexpected completion of {r:?}: {res:?}")),
        }
        let c = &mut self.clients[ci];
        c.completed += 1;
        if ok {
            c.context.advance(log, position);
        }
        let think = self.rng.below(20_000);
        self.schedule(think, Event::ClientStep(ci as u32));
    }

    fn client_step(&mut self, ci: u32) {
        let c = &self.clients[ci as usize];
        // The last second is a drain: requests in flight must complete within it.
        let drain_from = self.opts.safety_us + self.opts.liveness_us.saturating_sub(DRAIN_US);
        if c.op.is_some() || self.now >= drain_from {
            return;
        }
        // Now and then a client's session moves to another engine, as through another
        // gateway: its context goes with it.
        if self.rng.chance(0.1) {
            let engines: Vec<NodeId> = self.roster.iter().filter(|(_, r)| *r == Role::Engine).map(|(n, _)| *n).collect();
            self.clients[ci as usize].engine = engines[self.rng.below(engines.len() as u64) as usize];
        }
        let c = &self.clients[ci as usize];
        let engine = c.engine;
        let book = BookId(self.rng.below(self.opts.books));
        // Now and then a mark (a stream for conditions that keeps nothing alive).
        let tag = if self.rng.chance(0.1) { Tag(Tag::MARK_BITS | 20) } else { Tag(self.rng.below(3)) };
        let context = c.context.clone();
        let op = self.next_op;
        self.next_op += 1;
        let roll = self.rng.below(100);
        let request = match roll {
            0..=39 => {
                let tags = if tag == Tag::ALL { vec![] } else { vec![tag, Tag(10 + self.rng.below(2))] };
                let data = Bytes::from(format!("op{op}:{}", "x".repeat(self.rng.below(64) as usize)));
                Request::Append { book, tags, data, cond: None, unchanged: vec![] }
            }
            40..=54 => {
                // Conditional appends race for offsets of a small stream.
                // On a mark, the record may have a tag of its own that keeps it alive.
                let mark = self.rng.chance(0.3);
                let bits = if mark { Tag::MARK_BITS } else { 0 };
                let cond = Cond { tag: Tag(bits | (20 + self.rng.below(2))), position: self.rng.below(12) };
                let tags = if mark && self.rng.chance(0.5) { vec![Tag(1)] } else { vec![] };
                // Now and then conditions on streams the record does not join (one of
                // them may be the condition's own), with or without an offset to land at.
                let mut unchanged = Vec::new();
                while self.rng.chance(0.3) && unchanged.len() < 3 {
                    let bits = if self.rng.chance(0.3) { Tag::MARK_BITS } else { 0 };
                    unchanged.push(Cond { tag: Tag(bits | (20 + self.rng.below(3))), position: self.rng.below(12) });
                }
                let cond = if unchanged.is_empty() || self.rng.chance(0.7) { Some(cond) } else { None };
                let data = Bytes::from(format!("op{op}:cond"));
                Request::Append { book, tags, data, cond, unchanged }
            }
            55..=74 => {
                let min = c.acked.iter().rev().find(|(b, _)| *b == book).map_or(SeqNum::MIN, |&(_, s)| s);
                Request::ReadNext { book, tag, min }
            }
            75..=90 => Request::ReadPrev { book, tag, max: SeqNum::MAX },
            91..=95 => {
                let acked: Vec<SeqNum> = c.acked.iter().filter(|(b, _)| *b == book).map(|&(_, s)| s).collect();
                if acked.is_empty() {
                    Request::ReadPrev { book, tag, max: SeqNum::MAX }
                } else {
                    let seqnum = acked[self.rng.below(acked.len() as u64) as usize];
                    let tag = [Tag::ALL, Tag(1), Tag(10), Tag(20), Tag(Tag::MARK_BITS | 20)][self.rng.below(5) as usize];
                    Request::Trim { book, tag, seqnum }
                }
            }
            _ => {
                // Aux data on a record of the caller's book (accepted while it lives), on
                // another book's record or on a seqnum never written (both refused). The
                // value names the request, so the oracle knows where reads may show it.
                let (own, others): (Vec<&(BookId, SeqNum)>, Vec<_>) = c.acked.iter().partition(|(b, _)| *b == book);
                let seqnum = match self.rng.below(4) {
                    0 if !others.is_empty() => others[self.rng.below(others.len() as u64) as usize].1,
                    1 => SeqNum::new(Term(1), LogId(0), 1 << 39),
                    _ if !own.is_empty() => own[self.rng.below(own.len() as u64) as usize].1,
                    _ => SeqNum::MIN,
                };
                let aux = Bytes::from(format!("aux{op}"));
                self.oracle.on_aux_submitted(aux.clone(), book, seqnum);
                Request::SetAux { book, seqnum, aux }
            }
        };
        self.clients[ci as usize].op = Some((op, request.clone(), context.clone()));
        self.op_started.insert(op, self.now);
        let now = self.now;
        // Half the reads try the engine's in-place answer first, as a driver's client
        // does: it must be the answer the submitted read would get.
        let in_place = matches!(request, Request::ReadNext { .. } | Request::ReadPrev { .. }) && self.rng.chance(0.5);
        match self.slots.get_mut(&engine).and_then(|s| s.node.as_mut()) {
            Some(Node::Engine(e)) => match in_place.then(|| e.read_now(&context, &request)).flatten() {
                Some((result, log, position)) => {
                    self.stats.reads_in_place += 1;
                    self.on_complete(engine, op, result, log, position);
                    return;
                }
                None => {
                    e.submit(now, op, &context, request);
                    self.tick_after_input(engine);
                }
            },
            _ => {
                // The engine is down: try again later.
                self.clients[ci as usize].op = None;
                self.schedule(50_000, Event::ClientStep(ci));
                return;
            }
        }
        self.node_actions(engine);
    }

    fn fault(&mut self) {
        if self.liveness {
            return;
        }
        self.schedule(10_000, Event::Fault);
        let nodes: Vec<NodeId> = self.slots.keys().copied().collect::<BTreeSet<_>>().into_iter().collect();
        if self.rng.chance(self.opts.crash) {
            let n = nodes[self.rng.below(nodes.len() as u64) as usize];
            if self.may_crash(n) {
                self.crash(n);
            }
        }
        let leader = self.leader;
        let power_loss = self.rng.chance(self.opts.power_loss);
        if power_loss {
            self.stats.power_losses += 1;
            for &n in &nodes {
                self.crash(n);
            }
        }
        if self.controllers[leader].node.is_some() && (power_loss || self.rng.chance(self.opts.controller_crash)) {
            // The store holds every configuration before it is sent, so a crash loses
            // only soft state: liveness, incarnations, a seal under way.
            self.controllers[leader].node = None;
            self.stats.controller_crashes += 1;
            let downtime = 50_000 + self.rng.below(800_000);
            self.schedule(downtime, Event::Restart(self.controllers[leader].id));
        }
        if self.controllers.len() > 1 && self.rng.chance(self.opts.failover) {
            // The lease moves (the leader was slow to renew it); the old leader runs on
            // for a while before it notices, and may still seal and try to persist.
            let next = (leader + 1 + self.rng.below(self.controllers.len() as u64 - 1) as usize) % self.controllers.len();
            let until = self.now + self.rng.below(300_000);
            self.controllers[leader].deposed_until = Some(until);
            self.tick_by(self.controllers[leader].id, until);
            self.leader = next;
            self.stats.failovers += 1;
            self.start_controller(next);
        }
        if self.rng.chance(self.opts.partition) {
            let a = nodes[self.rng.below(nodes.len() as u64) as usize];
            for &b in &nodes {
                if b != a && self.rng.chance(0.5) {
                    self.partitioned.insert((a.min(b), a.max(b)));
                }
            }
            self.stats.partitions += 1;
            let d = 50_000 + self.rng.below(400_000);
            self.schedule(d, Event::Heal);
        }
    }
}

/// Runs seeds `first..first + count`; returns the stats of each or the first violation.
pub fn run_seeds(first: u64, count: u64, opts: &SimOptions) -> Result<Vec<SimStats>, Violation> {
    (first..first + count).map(|seed| Sim::new(seed, opts.clone()).run()).collect()
}
