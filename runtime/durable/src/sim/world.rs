//! The world the harness tasks share: the simulated nodes (started, crashed, restarted,
//! owning books as a cluster's members would), the log, the store, the functions
//! deployed, the oracle and the run's flags and stats.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tally_log_core::BookId;

use crate::attempt::Functions;
use crate::config::{Protocol, StateConfig};
use crate::core::NodeBounds;
use crate::env::{Clock, Spawn};
use crate::node::{Durable, Parts};
use crate::store::StateStore;
use crate::tags::TagKey;

use super::exec::{self, Exec, Handle};
use super::functions::SimFunctions;
use super::guest::{self, random_program, Op, Program, Registry, Traces, DYN_KEYS, KEYS, PEEK, TABLES};
use super::log::SimLog;
use super::oracle::Oracle;
use super::store::FaultyStore;
use super::{chan, libs, Rng, SimOptions, SimStats};

/// The slot of one simulated node.
#[derive(Default)]
pub(super) struct NodeSlot {
    durable: Option<Arc<Durable>>,
    incarnation: u64,
    pub(super) up: bool,
    /// When it last crashed, while it is down.
    down_since_ms: Option<u64>,
}

impl NodeSlot {
    /// Roots the node's incarnation that runs now answered before their Result.
    pub(super) fn answered_first(&self) -> u64 {
        self.durable.as_ref().map_or(0, |d| d.invocations().answered_first())
    }
}

/// How long a crashed node still counts as a member: a cluster's controller seals a
/// dead engine out only after its failure timeout, and until then the dead node owns
/// its books and nobody does their background work.
const DETECT_MS: u64 = 300;

/// Ownership of books as a cluster's function nodes see it: rendezvous hashing over the
/// members, which are the nodes up and those down for less than [`DETECT_MS`].
struct SimPeers {
    world: std::sync::Weak<World>,
    me: usize,
}

impl crate::env::Peers for SimPeers {
    fn owns(&self, book: BookId) -> bool {
        let Some(world) = self.world.upgrade() else { return false };
        let now = world.harness().now_ms();
        let members: Vec<u64> = (0..world.nodes.len())
            .filter(|&n| {
                let s = world.nodes[n].lock().expect("not poisoned");
                s.up || s.down_since_ms.is_some_and(|t| now < t + DETECT_MS)
            })
            .map(|n| n as u64)
            .collect();
        crate::env::owner(book, &members) == Some(self.me as u64)
    }

    /// One node over the simulated log, whose replica applies every append before
    /// answering it: alone, and its roots defer their Init.
    fn alone(&self) -> bool {
        self.world.upgrade().is_some_and(|w| w.nodes.len() == 1)
    }
}

/// What the harness tasks share.
pub(super) struct World {
    pub(super) seed: u64,
    pub(super) opts: SimOptions,
    pub(super) log: SimLog,
    pub(super) store: Arc<FaultyStore>,
    pub(super) registry: Arc<Mutex<Registry>>,
    pub(super) traces: Arc<Mutex<Traces>>,
    /// Clock readings of the scripted guests so far (`SimFunctions::readings`).
    pub(super) readings: Arc<std::sync::atomic::AtomicU64>,
    pub(super) oracle: Mutex<Oracle>,
    pub(super) nodes: Vec<Mutex<NodeSlot>>,
    pub(super) shared: exec::SharedRef,
    pub(super) rng: Mutex<Rng>,
    pub(super) violation: Mutex<Option<String>>,
    pub(super) stats: Mutex<SimStats>,
    pub(super) clients_done: Mutex<usize>,
    /// Every switch begun in the safety phase has completed.
    pub(super) switches_done: Mutex<bool>,
    /// The schedules were defined, ticked, deleted, and their ticks checked.
    pub(super) schedules_done: Mutex<bool>,
    /// The cancelled invocations finished and were checked.
    pub(super) cancels_done: Mutex<bool>,
    /// The invocations awaiting other invocations' promises finished and were checked.
    pub(super) waiters_done: Mutex<bool>,
    /// The libraries' workload finished and was checked (`libs.rs`).
    pub(super) libs_done: Mutex<bool>,
    pub(super) config: StateConfig,
    /// The cluster's tag key, once a node agreed on it: the oracle names an Init's step
    /// log by it (a deferred Init's record also carries its writes' object streams).
    pub(super) tag_key: Mutex<Option<TagKey>>,
}

impl World {
    /// The cluster's tag key, once a node agreed on it.
    pub(super) fn tag_key(&self) -> Option<TagKey> {
        self.tag_key.lock().expect("not poisoned").clone()
    }

    pub(super) fn harness(&self) -> Handle {
        Handle { shared: self.shared.clone(), owner: None }
    }

    pub(super) fn draw(&self, n: u64) -> u64 {
        self.rng.lock().expect("not poisoned").below(n)
    }

    pub(super) fn chance(&self, p: f64) -> bool {
        self.rng.lock().expect("not poisoned").chance(p)
    }

    pub(super) fn fail(&self, message: String) {
        let mut v = self.violation.lock().expect("not poisoned");
        if v.is_none() {
            *v = Some(message);
        }
    }

    /// Whether an execution of `input` ran its program to the end.
    pub(super) fn completed(&self, input: &[u8]) -> bool {
        let traces = self.traces.lock().expect("not poisoned");
        traces.by_input.get(input).is_some_and(|l| l.iter().any(|e| e.completed))
    }

    /// A node that is up, drawn at random, with its incarnation.
    pub(super) fn pick_node(&self) -> Option<(usize, Arc<Durable>, u64)> {
        let up: Vec<usize> = (0..self.nodes.len())
            .filter(|&n| {
                let s = self.nodes[n].lock().expect("not poisoned");
                s.up && s.durable.is_some()
            })
            .collect();
        if up.is_empty() {
            return None;
        }
        let n = up[self.draw(up.len() as u64) as usize];
        let s = self.nodes[n].lock().expect("not poisoned");
        Some((n, s.durable.clone()?, s.incarnation))
    }

    /// Runs `f` as a task of node `n`: if the node crashes meanwhile, the answer is `None`.
    pub(super) async fn on_node<T, F>(
        &self,
        n: usize,
        d: Arc<Durable>,
        name: &'static str,
        f: impl FnOnce(Arc<Durable>) -> F,
    ) -> Option<T>
    where
        T: Send + 'static,
        F: std::future::Future<Output = T> + Send + 'static,
    {
        let (tx, rx) = chan::oneshot();
        let fut = f(d);
        Handle { shared: self.shared.clone(), owner: Some(n) }.spawn(
            name,
            Box::pin(async move {
                tx.send(fut.await);
            }),
        );
        rx.await
    }
}

/// The functions every run deploys: four that may call the later ones, one deployed
/// late (callers find it missing first), one that declares exactly-once tables unsafe,
/// the setup that creates every table with its protocol, and the final verification.
pub(super) fn deploy_functions(rng: &mut Rng, registry: &mut Registry) {
    let names: Vec<String> = (0..4).map(|i| format!("f{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let mut callees: Vec<String> = names[i + 1..].to_vec();
        callees.push("late".into());
        let len = 4 + rng.below(6) as usize;
        let program = random_program(rng, len, &callees, true, true);
        registry.deploy(name, program, BTreeMap::new());
    }
    let intruder =
        Program { ops: vec![Op::Incr { table: 0, key: 0 }, Op::Incr { table: 1, key: 1 }, Op::Get { table: 0, key: 1 }] };
    let unsafe_tables = [("ro".to_string(), Protocol::Unsafe), ("wo".to_string(), Protocol::Unsafe)].into_iter().collect();
    registry.deploy("intruder", intruder, unsafe_tables);
    let setup = Program { ops: TABLES.iter().enumerate().map(|(t, _)| Op::Get { table: t as u8, key: 0 }).collect() };
    let declared = TABLES.iter().map(|(t, p)| (t.to_string(), *p)).collect();
    registry.deploy("setup", setup, declared);
    let mut verify = Vec::new();
    for t in 0..TABLES.len() as u8 {
        for key in 0..KEYS + DYN_KEYS {
            verify.push(Op::Get { table: t, key });
        }
    }
    registry.deploy("verify", Program { ops: verify }, BTreeMap::new());
    // The read-optimized table and the one that switches protocols.
    let peek = [0, 3].into_iter().flat_map(|table| (0..KEYS + DYN_KEYS).map(move |key| Op::Get { table, key })).collect();
    registry.deploy(PEEK, Program { ops: peek }, BTreeMap::new());
    registry.deploy(guest::TICKER, Program { ops: Vec::new() }, BTreeMap::new());
    registry.deploy(guest::TARGET, Program { ops: Vec::new() }, BTreeMap::new());
    registry.deploy(guest::WAITER, Program { ops: Vec::new() }, BTreeMap::new());
    registry.deploy(guest::MAKER, Program { ops: Vec::new() }, BTreeMap::new());
    for f in [libs::TELLER, libs::PRODUCER, libs::CONSUMER, libs::LOCKER, libs::KEYED, libs::READER] {
        registry.deploy(f, Program { ops: Vec::new() }, BTreeMap::new());
    }
}

pub(super) fn sim_config() -> StateConfig {
    StateConfig {
        reexecute_after_ms: 100,
        recovery_interval_ms: 50,
        attempts_max: 100_000,
        gc_interval_ms: 40,
        results_kept_ms: 300,
        history_kept_ms: 0,
        auto_interval_ms: 200,
        auto_min_ops: 5,
        open_max: 3,
        async_max: 2,
        sleep_in_place_max_ms: 100,
        schedule_poll_ms: 50,
        ..StateConfig::default()
    }
}

/// The node-wide bounds of every simulated node.
pub(super) const BOUNDS: NodeBounds = NodeBounds { call_depth_max: 8, invocations_kept: 1000 };

/// What the core of node `handle.owner` runs on: its view of the simulated log, the
/// shared store, the executor's clock and spawner (tasks owned by the node), and a tag
/// key and ID prefix drawn from `seed`, distinct per node and incarnation, as a real
/// node's random ones are.
pub(super) fn node_parts(
    log: &SimLog,
    store: Arc<dyn StateStore>,
    handle: &Handle,
    functions: Arc<dyn Functions>,
    seed: u64,
    incarnation: u64,
) -> Parts {
    let n = handle.owner.expect("a node's handle");
    let key_seed = Rng::new(seed).next_u64() ^ ((n as u64) << 40) ^ incarnation;
    let mut key = [0u8; 32];
    let mut krng = Rng::new(key_seed);
    for chunk in key.chunks_mut(8) {
        chunk.copy_from_slice(&krng.next_u64().to_be_bytes());
    }
    Parts {
        log: Arc::new(log.node(n, handle.clone())),
        store,
        clock: Arc::new(handle.clone()),
        spawn: Arc::new(handle.clone()),
        functions,
        peers: Arc::new(crate::env::Alone),
        observe: Arc::new(crate::env::Unobserved),
        tag_key: TagKey::new(key),
        id_prefix: krng.next_u64(),
    }
}

/// Starts (or restarts) node `n`: a fresh replica, then the core, then its background.
pub(super) fn start_node(world: &Arc<World>, n: usize) {
    world.log.open_replica(n);
    let incarnation = {
        let mut s = world.nodes[n].lock().expect("not poisoned");
        s.incarnation += 1;
        s.up = true;
        s.down_since_ms = None;
        s.durable = None;
        s.incarnation
    };
    let handle = Handle { shared: world.shared.clone(), owner: Some(n) };
    let functions = SimFunctions {
        node: n,
        registry: world.registry.clone(),
        traces: world.traces.clone(),
        log: world.log.node(n, handle.clone()),
        handle: handle.clone(),
        readings: world.readings.clone(),
    };
    let mut parts = node_parts(&world.log, world.store.clone(), &handle, Arc::new(functions), world.seed, incarnation);
    parts.peers = Arc::new(SimPeers { world: Arc::downgrade(world), me: n });
    let config = world.config.clone();
    let w = world.clone();
    handle.spawn(
        "node-start",
        Box::pin(async move {
            match Durable::start(parts, config, BOUNDS).await {
                Ok(d) => {
                    d.start_background();
                    w.tag_key.lock().expect("not poisoned").get_or_insert_with(|| d.core.tags.clone());
                    let mut s = w.nodes[n].lock().expect("not poisoned");
                    if s.incarnation == incarnation {
                        s.durable = Some(d);
                    }
                }
                // The log failed under the start: start again, as a supervisor would.
                Err(e) => {
                    tracing::debug!(node = n, "start failed: {e}");
                    w.start_again(n);
                }
            }
        }),
    );
}

impl World {
    fn start_again(self: &Arc<Self>, n: usize) {
        let w = self.clone();
        self.harness().spawn(
            "node-restart",
            Box::pin(async move {
                w.harness().sleep(10).await;
                start_node(&w, n);
            }),
        );
    }
}

/// Node `n` dies: its tasks are dropped, its requests still on the network lost.
pub(super) fn crash(world: &Arc<World>, exec: &mut Exec, n: usize) {
    exec.kill(n);
    let now = world.harness().now_ms();
    let mut s = world.nodes[n].lock().expect("not poisoned");
    s.up = false;
    s.down_since_ms = Some(now);
    let answered = s.durable.take().map_or(0, |d| d.invocations().answered_first());
    let mut stats = world.stats.lock().expect("not poisoned");
    stats.crashes += 1;
    stats.answered_first += answered;
}
