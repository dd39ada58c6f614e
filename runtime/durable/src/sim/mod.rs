//! The deterministic simulator of the exactly-once layer: the real core ([`Durable`],
//! instances, recovery, garbage collection, switches) on several simulated nodes over
//! one simulated log (the real index, `log.rs`) and one state store, driven by a seeded
//! executor (`exec.rs`) and checked by an oracle that shares no code with the protocols
//! (`oracle.rs`).
//!
//! One seed fixes everything: the programs, the clients' requests, every interleaving,
//! and the faults of the safety phase: node crashes after any poll (so after any log or
//! store effect), crashes of the machine (every node, and the store loses what it did
//! not sync), node pauses, log and store calls failing before or after they take
//! effect, racing peers of one invocation (a client's concurrent retry on another
//! node), client retries after a result, redeploys, switches, garbage collection every
//! few tens of milliseconds, guests that trim their own book. The liveness phase then
//! stops the faults, restarts every node, and every invocation and switch must finish.
//! A violation ends the run with "reproduce with seed=N".
//!
//! More faults and workloads: machine crashes undo what the store did not sync (deletes
//! since the last `sync`, versions put without durability since the last synced write), in
//! a test of their own (`machine_crashes_hold`) so that the other scenarios' seeds replay
//! as before; a function that appears late; a node lost for good, whose books' ownership
//! moves to the others shortly after its crash, as a controller's failure timeout would;
//! swarm testing (each seed scales each fault rate). With one node (`--nodes 1`, the test
//! `a_node_alone_that_defers_inits_holds`) the node is alone and its roots defer their
//! Init. Clients also read their keys with requests without any key (`peek`, a read-only
//! function of the read-optimized and the switching table), which on a node alone log
//! nothing: only the answer shows what they read, and a lost answer is abandoned
//! (`Oracle::abandon`) and sent again under another input.
//!
//! Besides the oracle's checks: schedules run through the same faults (one firing every
//! tick and catching all up, one skipping overlaps and catching up the latest while it is
//! triggered, one buffering a tick), and after their deletion their invocations are checked
//! against the definitions alone (no more than the ticks between definition and deletion
//! plus the triggers, at least every tick up to where the schedule said it had caught up,
//! the k-th earliest start no earlier than the k-th tick, one append each). Promises
//! created by one invocation are awaited by two others, with no timeout, and completed on a
//! random node: both must finish with the completion's value (nothing but the waiters
//! stream wakes them within the run). Cancellations hit invocations that cond-append four
//! steps with a read-optimized write and a durable sleep between each two, at random times
//! on random nodes: one that succeeded made and saw every step and no cancellation, one
//! cancelled saw it and was asked for it, and nothing runs on after the outcome but the one
//! racing peer of the known gap. At the end, every step log the log holds (read without the
//! core's code) has nothing but clock readings, lock releases and the result after a
//! `Cancelled` step, and nothing after the result (`check_step_logs`), and every object
//! with a write in its write log has a stored version. The pending write whose place a
//! peer's cancellation took is met a few times per thousand seeds; `scenarios.rs` pins it.
//! Of the seeds a run covers, the first runs twice and must replay identically.

mod chan;
mod exec;
mod guest;
mod libs;
mod log;
mod oracle;
#[cfg(test)]
mod scenarios;
mod store;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tally_log_core::{BookId, Context, Tag};

use crate::attempt::Functions;
use crate::config::{Protocol, StateConfig};
use crate::env::{Clock, Spawn};
use crate::error::Error;
use crate::invoke::{InvocationStatus, InvokeRequest};
use crate::node::{Durable, Parts};
use crate::core::NodeBounds;
use crate::record::kind;
use crate::store::StateStore;
use crate::tags::TagKey;

use self::exec::{Exec, Handle, Stepped};
use self::guest::{random_program, Op, Program, Registry, SimFunctions, Traces, DYN_KEYS, KEYS, TABLES};
use self::log::{LogFaults, SimLog};
use self::oracle::{show, Oracle};
use self::store::{FaultyStore, StoreFaults};

pub use tally_log_core::Rng;

/// Everything a run depends on besides the seed. Each seed also scales the fault rates
/// by its own factors (swarm testing), so that some seeds run with few faults of one
/// kind and many of another.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub nodes: usize,
    pub clients: usize,
    /// Invocations per client.
    pub invocations: usize,
    pub books: u64,
    pub safety_ms: u64,
    /// The most the liveness phase may take before a run is declared stuck.
    pub liveness_ms: u64,
    /// Chance that a node crashes right after one of its tasks made progress.
    pub crash: f64,
    /// Chance that the machine under every node crashes right after a task made
    /// progress: every node goes down and the store loses what it did not sync. 0 by
    /// default, so that the seeds of the other scenarios (and the regressions kept
    /// from them) replay as they did before it existed.
    pub machine_crash: f64,
    /// Chance, per executor step, that a node pauses for a while.
    pub pause: f64,
    pub log_fail: f64,
    pub store_fail: f64,
    /// Chance that a keyed request gets a concurrent twin on another node.
    pub peer: f64,
    pub switch_every_ms: u64,
    pub redeploy_every_ms: u64,
    /// The first node to crash never comes back: the books it owned get other owners,
    /// which must finish what it left unfinished.
    pub lose_node: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            nodes: 3,
            clients: 4,
            invocations: 10,
            books: 2,
            safety_ms: 3_000,
            liveness_ms: 60_000,
            crash: 0.002,
            machine_crash: 0.0,
            pause: 0.0005,
            log_fail: 0.01,
            store_fail: 0.01,
            peer: 0.2,
            switch_every_ms: 250,
            redeploy_every_ms: 400,
            lose_node: true,
        }
    }
}

impl fmt::Display for SimOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "nodes={} clients={} invocations={} books={} safety={}ms liveness<={}ms crash={} machine_crash={} pause={} \
             log_fail={} \
             store_fail={} peer={} switch_every={}ms redeploy_every={}ms",
            self.nodes,
            self.clients,
            self.invocations,
            self.books,
            self.safety_ms,
            self.liveness_ms,
            self.crash,
            self.machine_crash,
            self.pause,
            self.log_fail,
            self.store_fail,
            self.peer,
            self.switch_every_ms,
            self.redeploy_every_ms
        )
    }
}

/// What a run did: the effects checked and the faults injected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    pub invocations: u64,
    pub executions: u64,
    pub reads_checked: u64,
    pub outputs_checked: u64,
    pub crashes: u64,
    /// Nodes that crashed for good (see `SimOptions::lose_node`).
    pub lost: u64,
    /// Crashes of the machine: every node, and the store's unsynced writes.
    pub machine_crashes: u64,
    pub pauses: u64,
    pub log_failures: u64,
    pub store_failures: u64,
    pub peers: u64,
    pub replays: u64,
    /// Read-only invocations without a key answered (`peek`).
    pub peeks: u64,
    /// Answers that an invocation sleeps (it suspended).
    pub suspensions: u64,
    /// Invocations that ended cancelled.
    pub cancelled: u64,
    /// Invocations schedules started (ticks and triggers).
    pub ticks: u64,
    /// Invocations that awaited a promise another one created.
    pub awaited_elsewhere: u64,
    /// Transactions, plain writes, pops and lock holds checked against the libraries'
    /// model (`libs.rs`).
    pub library_checked: u64,
    pub switches: u64,
    pub redeploys: u64,
    pub log_records: u64,
    pub sim_ms: u64,
    /// A digest of the run, to check that a seed replays identically.
    pub digest: u64,
}

impl SimStats {
    pub fn add(&mut self, o: &SimStats) {
        self.invocations += o.invocations;
        self.executions += o.executions;
        self.reads_checked += o.reads_checked;
        self.outputs_checked += o.outputs_checked;
        self.crashes += o.crashes;
        self.lost += o.lost;
        self.machine_crashes += o.machine_crashes;
        self.pauses += o.pauses;
        self.log_failures += o.log_failures;
        self.store_failures += o.store_failures;
        self.peers += o.peers;
        self.replays += o.replays;
        self.peeks += o.peeks;
        self.suspensions += o.suspensions;
        self.ticks += o.ticks;
        self.cancelled += o.cancelled;
        self.awaited_elsewhere += o.awaited_elsewhere;
        self.library_checked += o.library_checked;
        self.switches += o.switches;
        self.redeploys += o.redeploys;
        self.log_records += o.log_records;
        self.sim_ms += o.sim_ms;
    }
}

impl fmt::Display for SimStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} invocations, {} executions, {} reads and {} outputs checked against the model; faults: {} crashes ({} for good, {} of the \
             machine), {} pauses, {} log and {} store failures, {} racing peers, {} replays, {} unkeyed reads, {} switches, {} redeploys; {} suspended \
             invocations answered; {} scheduled, {} cancelled and {} awaiting others' promises; {} commits, writes, pops and \
             holds of the libraries checked; {} log records, {} simulated ms",
            self.invocations,
            self.executions,
            self.reads_checked,
            self.outputs_checked,
            self.crashes,
            self.lost,
            self.machine_crashes,
            self.pauses,
            self.log_failures,
            self.store_failures,
            self.peers,
            self.replays,
            self.peeks,
            self.switches,
            self.redeploys,
            self.suspensions,
            self.ticks,
            self.cancelled,
            self.awaited_elsewhere,
            self.library_checked,
            self.log_records,
            self.sim_ms
        )
    }
}

/// A failed run.
#[derive(Debug)]
pub struct Violation {
    pub seed: u64,
    pub at_ms: u64,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "violation at {} ms: {}\nreproduce with seed={}", self.at_ms, self.message, self.seed)
    }
}

/// Runs `count` seeds from `first`; the first is run twice and must replay identically.
pub fn run_seeds(first: u64, count: u64, opts: &SimOptions) -> Result<Vec<SimStats>, Violation> {
    let mut out = Vec::new();
    for seed in first..first + count {
        let stats = run_seed(seed, opts)?;
        if seed == first {
            let again = run_seed(seed, opts)?;
            if again.digest != stats.digest {
                return Err(Violation { seed, at_ms: 0, message: "the seed did not replay identically".into() });
            }
        }
        out.push(stats);
    }
    Ok(out)
}

/// The slot of one simulated node.
#[derive(Default)]
struct NodeSlot {
    durable: Option<Arc<Durable>>,
    incarnation: u64,
    up: bool,
    /// When it last crashed, while it is down.
    down_since_ms: Option<u64>,
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
struct World {
    seed: u64,
    opts: SimOptions,
    log: SimLog,
    store: Arc<FaultyStore>,
    registry: Arc<Mutex<Registry>>,
    traces: Arc<Mutex<Traces>>,
    /// Clock readings of the scripted guests so far (`SimFunctions::readings`).
    readings: Arc<std::sync::atomic::AtomicU64>,
    oracle: Mutex<Oracle>,
    nodes: Vec<Mutex<NodeSlot>>,
    shared: exec::SharedRef,
    rng: Mutex<Rng>,
    violation: Mutex<Option<String>>,
    stats: Mutex<SimStats>,
    clients_done: Mutex<usize>,
    /// Every switch begun in the safety phase has completed.
    switches_done: Mutex<bool>,
    /// The schedules were defined, ticked, deleted, and their ticks checked.
    schedules_done: Mutex<bool>,
    /// The cancelled invocations finished and were checked.
    cancels_done: Mutex<bool>,
    /// The invocations awaiting other invocations' promises finished and were checked.
    waiters_done: Mutex<bool>,
    /// The libraries' workload finished and was checked (`libs.rs`).
    libs_done: Mutex<bool>,
    config: StateConfig,
    /// The cluster's tag key, once a node agreed on it: the oracle names an Init's step
    /// log by it (a deferred Init's record also carries its writes' object streams).
    tag_key: Mutex<Option<TagKey>>,
}

impl World {
    /// The cluster's tag key, once a node agreed on it.
    fn tag_key(&self) -> Option<TagKey> {
        self.tag_key.lock().expect("not poisoned").clone()
    }

    fn harness(&self) -> Handle {
        Handle { shared: self.shared.clone(), owner: None }
    }

    fn draw(&self, n: u64) -> u64 {
        self.rng.lock().expect("not poisoned").below(n)
    }

    fn chance(&self, p: f64) -> bool {
        self.rng.lock().expect("not poisoned").chance(p)
    }

    fn fail(&self, message: String) {
        let mut v = self.violation.lock().expect("not poisoned");
        if v.is_none() {
            *v = Some(message);
        }
    }

    /// Whether an execution of `input` ran its program to the end.
    fn completed(&self, input: &[u8]) -> bool {
        let traces = self.traces.lock().expect("not poisoned");
        traces.by_input.get(input).is_some_and(|l| l.iter().any(|e| e.completed))
    }

    /// A node that is up, drawn at random, with its incarnation.
    fn pick_node(&self) -> Option<(usize, Arc<Durable>, u64)> {
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
    async fn on_node<T, F>(&self, n: usize, d: Arc<Durable>, name: &'static str, f: impl FnOnce(Arc<Durable>) -> F) -> Option<T>
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
fn deploy_functions(rng: &mut Rng, registry: &mut Registry) {
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

fn sim_config() -> StateConfig {
    StateConfig {
        reexecute_after_ms: 100,
        recovery_interval_ms: 50,
        attempts_max: 100_000,
        gc_interval_ms: 40,
        results_kept_ms: 300,
        auto_interval_ms: 200,
        auto_min_ops: 5,
        open_max: 3,
        async_max: 2,
        sleep_in_place_max_ms: 100,
        schedule_poll_ms: 50,
        ..StateConfig::default()
    }
}

/// Runs one seed.
pub fn run_seed(seed: u64, opts: &SimOptions) -> Result<SimStats, Violation> {
    let mut rng = Rng::new(seed);
    let mut swarm = |base: f64| base * [0.0, 0.5, 1.0, 2.0][rng.below(4) as usize];
    let opts = SimOptions {
        crash: swarm(opts.crash),
        pause: swarm(opts.pause),
        log_fail: swarm(opts.log_fail),
        store_fail: swarm(opts.store_fail),
        peer: swarm(opts.peer),
        ..opts.clone()
    };
    let mut exec = Exec::new();
    let log = SimLog::new(seed, LogFaults { fail_before: opts.log_fail / 2.0, fail_after: opts.log_fail / 2.0, delay_max_ms: 2 });
    let store = FaultyStore::new(seed, StoreFaults { fail_before: opts.store_fail / 2.0, fail_after: opts.store_fail / 2.0 });
    let mut registry = Registry::default();
    deploy_functions(&mut rng, &mut registry);
    let world = Arc::new(World {
        seed,
        opts: opts.clone(),
        log,
        store,
        registry: Arc::new(Mutex::new(registry)),
        traces: Arc::new(Mutex::new(Traces::default())),
        readings: Arc::default(),
        oracle: Mutex::new(Oracle::new(opts.books)),
        nodes: (0..opts.nodes).map(|_| Mutex::new(NodeSlot::default())).collect(),
        shared: exec.shared.clone(),
        rng: Mutex::new(Rng::new(seed ^ 0xc1)),
        violation: Mutex::new(None),
        stats: Mutex::new(SimStats::default()),
        clients_done: Mutex::new(0),
        switches_done: Mutex::new(false),
        schedules_done: Mutex::new(false),
        cancels_done: Mutex::new(false),
        waiters_done: Mutex::new(false),
        libs_done: Mutex::new(false),
        tag_key: Mutex::new(None),
        // A third of the seeds without aux-data views: their readers replay streams
        // from their checkpoints, which garbage collection then exercises.
        config: StateConfig { aux_views: !seed.is_multiple_of(3), ..sim_config() },
    });
    for n in 0..opts.nodes {
        start_node(&world, n);
    }
    exec.spawn(None, "setup", Box::pin(setup_then_clients(world.clone())));
    exec.spawn(None, "chaos", Box::pin(chaos(world.clone())));
    exec.spawn(None, "completer", Box::pin(completer(world.clone())));
    exec.spawn(None, "schedules", Box::pin(schedules(world.clone())));
    exec.spawn(None, "cancels", Box::pin(cancels(world.clone())));
    exec.spawn(None, "waiters", Box::pin(waiters(world.clone())));
    exec.spawn(None, "libraries", Box::pin(libraries(world.clone())));
    let mut paused: BTreeMap<usize, u64> = BTreeMap::new();
    let mut restarts: BTreeMap<usize, u64> = BTreeMap::new();
    let mut lost: Option<usize> = None;
    let end_ms = opts.safety_ms + opts.liveness_ms;
    let mut digest: u64 = 0;
    loop {
        let now = exec.now_ms();
        if let Some(v) = world.violation.lock().expect("not poisoned").take() {
            return Err(Violation { seed, at_ms: now, message: v });
        }
        let safety = now < opts.safety_ms;
        if !safety {
            world.log.state.lock().expect("not poisoned").faults.fail_before = 0.0;
            world.log.state.lock().expect("not poisoned").faults.fail_after = 0.0;
            *world.store.faults.lock().expect("not poisoned") = StoreFaults { fail_before: 0.0, fail_after: 0.0 };
            paused.clear();
        }
        if *world.clients_done.lock().expect("not poisoned") == opts.clients
            && *world.switches_done.lock().expect("not poisoned")
            && *world.schedules_done.lock().expect("not poisoned")
            && *world.cancels_done.lock().expect("not poisoned")
            && *world.waiters_done.lock().expect("not poisoned")
            && *world.libs_done.lock().expect("not poisoned")
        {
            break;
        }
        if now >= end_ms {
            let mut oracle = world.oracle.lock().expect("not poisoned");
            let unfinished = oracle.unfinished(&world.traces.lock().expect("not poisoned"));
            drop(oracle.check_executions(&world.traces.lock().expect("not poisoned")));
            return Err(Violation {
                seed,
                at_ms: now,
                message: format!(
                    "the liveness phase did not finish: {} of {} clients done, switches done: {}, schedules done: {}, \
                     cancels done: {}, waiters done: {}; unfinished: {:?}; tasks: {:?}",
                    world.clients_done.lock().expect("not poisoned"),
                    opts.clients,
                    world.switches_done.lock().expect("not poisoned"),
                    world.schedules_done.lock().expect("not poisoned"),
                    world.cancels_done.lock().expect("not poisoned"),
                    world.waiters_done.lock().expect("not poisoned"),
                    unfinished.iter().take(5).collect::<Vec<_>>(),
                    exec.task_names().iter().take(12).collect::<Vec<_>>()
                ),
            });
        }
        // Restarts and resumptions that are due.
        for (&n, &at) in restarts.clone().iter() {
            if now >= at || !safety {
                restarts.remove(&n);
                start_node(&world, n);
            }
        }
        paused.retain(|_, until| *until > now);
        // Faults of the safety phase.
        if safety && rng.chance(opts.pause) {
            let n = rng.below(opts.nodes as u64) as usize;
            paused.insert(n, now + 1 + rng.below(300));
            world.stats.lock().expect("not poisoned").pauses += 1;
        }
        // Replicas follow the log at their own pace.
        if rng.chance(0.5) {
            let n = rng.below(opts.nodes as u64) as usize;
            if !paused.contains_key(&n) {
                world.log.apply(n, 1 + rng.below(8) as usize);
            }
        }
        let paused_set: BTreeSet<usize> = paused.keys().copied().collect();
        match exec.step(&mut rng, &paused_set, end_ms) {
            Stepped::Polled(Some(n)) => {
                digest = digest.wrapping_mul(31).wrapping_add(n as u64 + 1);
                let down = restarts.len() + usize::from(lost.is_some());
                if safety && opts.machine_crash > 0.0 && rng.chance(opts.machine_crash) {
                    // The machine under every node dies: the store loses what it did
                    // not sync (a shared store here, so every node goes down with it).
                    // (A node lost for good, or waiting for its restart, is down already.)
                    for m in 0..opts.nodes {
                        if world.nodes[m].lock().expect("not poisoned").up {
                            crash(&world, &mut exec, m);
                            restarts.insert(m, now + 5 + rng.below(400));
                        }
                    }
                    world.store.lose_unsynced();
                    world.stats.lock().expect("not poisoned").machine_crashes += 1;
                } else if safety && down + 1 < opts.nodes && rng.chance(opts.crash) {
                    crash(&world, &mut exec, n);
                    if opts.lose_node && lost.is_none() {
                        lost = Some(n);
                        world.stats.lock().expect("not poisoned").lost += 1;
                    } else {
                        restarts.insert(n, now + 5 + rng.below(400));
                    }
                }
            }
            Stepped::Polled(None) => digest = digest.wrapping_mul(31),
            Stepped::Advanced => {}
            Stepped::Idle => {
                // Nothing to run and no timer: let every replica catch up (what waits on
                // one can then go on); a run that still cannot move is stuck.
                for n in 0..opts.nodes {
                    if !paused.contains_key(&n) {
                        world.log.apply(n, usize::MAX);
                    }
                }
                let next = paused.values().min().copied().unwrap_or(now + 1).max(now + 1);
                exec.set_now(next);
            }
        }
    }
    let now = exec.now_ms();
    let mut oracle = world.oracle.lock().expect("not poisoned");
    let traces = world.traces.lock().expect("not poisoned");
    let unfinished = oracle.unfinished(&traces);
    if let Err(m) = oracle.check_executions(&traces) {
        return Err(Violation { seed, at_ms: now, message: m });
    }
    if let Err(m) = check_step_logs(&world.log, world.tag_key().as_ref()) {
        return Err(Violation { seed, at_ms: now, message: m });
    }
    if let Err(m) = check_objects_stored(&world.log, &world.store, world.tag_key().as_ref()) {
        return Err(Violation { seed, at_ms: now, message: m });
    }
    if !unfinished.is_empty() {
        return Err(Violation {
            seed,
            at_ms: now,
            message: format!("executions of invocations that never finished: {unfinished:?}"),
        });
    }
    let mut stats = world.stats.lock().expect("not poisoned").clone();
    stats.executions = traces.executions;
    stats.reads_checked = oracle.reads_checked;
    stats.outputs_checked = oracle.outputs_checked;
    stats.log_failures = world.log.state.lock().expect("not poisoned").failures;
    stats.store_failures = *world.store.failures.lock().expect("not poisoned");
    stats.log_records = world.log.state.lock().expect("not poisoned").appends;
    stats.sim_ms = now;
    stats.digest = digest ^ stats.log_records.rotate_left(32) ^ stats.executions;
    Ok(stats)
}

/// The node-wide bounds of every simulated node.
const BOUNDS: NodeBounds = NodeBounds { call_depth_max: 8, invocations_kept: 1000 };

/// What the core of node `handle.owner` runs on: its view of the simulated log, the
/// shared store, the executor's clock and spawner (tasks owned by the node), and a tag
/// key and ID prefix drawn from `seed`, distinct per node and incarnation, as a real
/// node's random ones are.
fn node_parts(
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
        tag_key: TagKey::new(key),
        id_prefix: krng.next_u64(),
    }
}

/// Starts (or restarts) node `n`: a fresh replica, then the core, then its background.
fn start_node(world: &Arc<World>, n: usize) {
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
fn crash(world: &Arc<World>, exec: &mut Exec, n: usize) {
    exec.kill(n);
    let now = world.harness().now_ms();
    let mut s = world.nodes[n].lock().expect("not poisoned");
    s.up = false;
    s.down_since_ms = Some(now);
    s.durable = None;
    world.stats.lock().expect("not poisoned").crashes += 1;
}

/// Creates every book's tables, then starts the clients.
async fn setup_then_clients(world: Arc<World>) {
    for book in 0..world.opts.books {
        let input = format!("setup{book}:n0").into_bytes();
        if keyed(&world, BookId(book), "setup", &input, format!("setup-{book}")).await.is_none() {
            return;
        }
    }
    for c in 0..world.opts.clients {
        let w = world.clone();
        world.harness().spawn("client", Box::pin(client(w, c)));
    }
}

/// Calls `function` with an idempotency key until it has a final outcome; models it
/// and checks the output. `None` when a violation was found.
async fn keyed(world: &Arc<World>, book: BookId, function: &str, input: &[u8], key: String) -> Option<Result<u64, String>> {
    let h = world.harness();
    loop {
        let Some((n, d, _)) = world.pick_node() else {
            h.sleep(5).await;
            continue;
        };
        if world.chance(world.opts.peer) {
            // A concurrent twin of the request on another node: a racing peer.
            if let Some((m, d2, _)) = world.pick_node() {
                world.stats.lock().expect("not poisoned").peers += 1;
                let req = request(function, book, input, &key);
                let (tx, _rx) = chan::oneshot::<()>();
                Handle { shared: world.shared.clone(), owner: Some(m) }.spawn(
                    "peer",
                    Box::pin(async move {
                        let _ = d2.invoke(req).await;
                        tx.send(());
                    }),
                );
            }
        }
        let req = request(function, book, input, &key);
        let answer = world.on_node(n, d, "keyed", move |d| async move { d.invoke(req).await }).await;
        let result = match answer {
            None => continue,
            Some(Err(e)) if e.is_transient() => {
                h.sleep(1 + world.draw(20)).await;
                continue;
            }
            // The result was kept shorter than this client kept retrying.
            Some(Err(Error::Conflict(m))) if m.contains("no longer kept") => None,
            // Asleep: asked again after its wake time, it answers with its result.
            Some(Err(Error::Suspended { wake_ms, .. })) => {
                world.stats.lock().expect("not poisoned").suspensions += 1;
                h.sleep(wake_ms.saturating_sub(h.now_ms()) + 1 + world.draw(20)).await;
                continue;
            }
            Some(r) => Some(r),
        };
        let got = result.map(|r| match r {
            Ok(out) if out.len() == 8 => Ok(u64::from_be_bytes(out[..].try_into().expect("8 bytes"))),
            Ok(out) => Err(format!("output of {} bytes", out.len())),
            Err(e) => Err(e.code().to_string()),
        });
        return check_finished(world, function, input, got);
    }
}

/// A keyed request: with the client's idempotency key, or (for every other key, as a
/// cluster's gateway does) a retry key, which initialises lazily.
fn request(function: &str, book: BookId, input: &[u8], key: &str) -> InvokeRequest {
    let retry = key.len() % 2 == 1;
    InvokeRequest {
        idempotency_key: (!retry).then(|| key.to_string()),
        retry_key: retry.then(|| key.to_string()),
        delay_ms: delay_of(key),
        ..unkeyed_request(function, book, input)
    }
}

/// A request without any key, as a browser sends one.
pub(crate) fn unkeyed_request(function: &str, book: BookId, input: &[u8]) -> InvokeRequest {
    InvokeRequest {
        function: function.to_string(),
        book,
        input: Bytes::copy_from_slice(input),
        idempotency_key: None,
        retry_key: None,
        crash_after: None,
        position: Context::new(),
        delay_ms: 0,
        key: None,
    }
}

/// The delayed start some keys ask for (every request of one key asks the same).
fn delay_of(key: &str) -> u64 {
    match guest::seed_of(key.as_bytes()) % 8 {
        0 => guest::seed_of(key.as_bytes()) % 300,
        _ => 0,
    }
}

/// Models a finished invocation and checks what the client got (if it got anything).
fn check_finished(
    world: &Arc<World>,
    function: &str,
    input: &[u8],
    got: Option<Result<u64, String>>,
) -> Option<Result<u64, String>> {
    // A client that got nothing (its result was collected before it asked) names no
    // witness; the log's result does. "The last execution that ran to its end" may be
    // a peer whose guest ran on readings of its own that waited for the result's record
    // and stopped there, after the invocation had finished.
    let logged = if got.is_none() { logged_output(&world.log, input, world.tag_key().as_ref()) } else { None };
    let registry = world.registry.lock().expect("not poisoned");
    let traces = world.traces.lock().expect("not poisoned");
    let mut oracle = world.oracle.lock().expect("not poisoned");
    world.stats.lock().expect("not poisoned").invocations += 1;
    let clocks = |input: &[u8]| logged_clocks(&world.log, input, world.tag_key().as_ref());
    let expected = match oracle.finish(&registry, &traces, &clocks, function, input, got.as_ref().or(logged.as_ref())) {
        Ok(e) => e,
        Err(m) => {
            world.fail(format!("{m} (the client got {got:?})"));
            return None;
        }
    };
    if let Some(got) = &got {
        if let Err(m) = oracle.check_output(input, got) {
            world.fail(m);
            return None;
        }
    }
    if let Err(m) = oracle.check_executions(&traces) {
        world.fail(m);
        return None;
    }
    Some(expected.output)
}

/// Whether `tag` is one the platform derives (a step log, an object's write log, ...):
/// the bit the oracle reads without the core's tag code.
fn is_derived(tag: Tag) -> bool {
    tag.is_reserved() && tag.0 & (1 << 62) != 0
}

/// Every record the log placed (collected ones too) that decodes as steps: its book,
/// tags and steps (a group's, in order).
fn placed_steps(log: &SimLog) -> impl Iterator<Item = (BookId, Vec<Tag>, Vec<crate::record::Step>)> {
    use crate::record::{self, Step};
    log.placed_records().into_iter().filter_map(|(book, tags, data)| {
        let steps = record::decode::<Step>("step", &data).ok()?.into_steps();
        Some((book, tags, steps))
    })
}

/// The step log an Init (or a refusal) begins: named by the tag key where known; else
/// the record's one derived tag (an Init logged alone carries no other).
fn step_log_begun(tags: &[Tag], first: &crate::record::Step, key: Option<&TagKey>) -> Option<Tag> {
    use crate::record::Step;
    match (first, key) {
        (Step::Init(kind::Init { id, .. }) | Step::InitKeyed(kind::InitKeyed { id, .. }), Some(key)) => Some(key.step(id)),
        (Step::Init(kind::Init { .. }) | Step::InitKeyed(kind::InitKeyed { .. }) | Step::Refused(kind::Refused { .. }), _) => {
            tags.iter().copied().find(|&t| is_derived(t))
        }
        _ => None,
    }
}

/// The steps of the step log of the invocation with input `input`, in order, read
/// from every record the log placed (collected ones too).
fn logged_steps(log: &SimLog, input: &[u8], key: Option<&TagKey>) -> Vec<crate::record::Step> {
    use crate::record::Step;
    let mut step_log = None;
    let mut logged = Vec::new();
    for (_, tags, steps) in placed_steps(log) {
        let begun = matches!(&steps[0], Step::Init(kind::Init { input: i, .. }) | Step::InitKeyed(kind::InitKeyed { input: i, .. }) if i == input);
        if step_log.is_none() && begun {
            step_log = step_log_begun(&tags, &steps[0], key);
        }
        if step_log.is_some_and(|tag| tags.contains(&tag)) {
            logged.extend(steps);
        }
    }
    logged
}

/// The output that the step log of the invocation with input `input` holds as its
/// result (a deferred Init's record may hold the result too).
fn logged_output(log: &SimLog, input: &[u8], key: Option<&TagKey>) -> Option<Result<u64, String>> {
    use crate::record::{Outcome, Step};
    logged_steps(log, input, key).into_iter().find_map(|step| match step {
        Step::Result(kind::Result { outcome: Outcome::Ok(out) }) => out[..].try_into().ok().map(|b| Ok(u64::from_be_bytes(b))),
        _ => None,
    })
}

/// The clock readings that the step log of the invocation with input `input` holds,
/// in order: those of the execution whose history the invocation kept.
fn logged_clocks(log: &SimLog, input: &[u8], key: Option<&TagKey>) -> Vec<u64> {
    use crate::record::{Reading, Step};
    let readings = logged_steps(log, input, key).into_iter().flat_map(|step| match step {
        Step::Clocks(kind::Clocks { readings }) => readings,
        _ => Vec::new(),
    });
    readings
        .filter_map(|r| match r {
            Reading::Wall(v) | Reading::Monotonic(v) => Some(v),
            Reading::Log(_) => None,
        })
        .collect()
}

/// One client: its invocations one after another on its own keys (keyed or
/// asynchronous), some replayed, then the verification.
async fn client(world: Arc<World>, c: usize) {
    let h = world.harness();
    let book = BookId(c as u64 % world.opts.books);
    let mut keys: Vec<String> = Vec::new();
    for n in 0..world.opts.invocations {
        let function = format!("f{}", world.draw(3));
        let function = if world.chance(0.1) { "intruder".to_string() } else { function };
        let input = format!("c{c}:n{n}").into_bytes();
        let done = if world.chance(0.3) {
            asynchronous(&world, book, &function, &input, format!("c{c}-{n}-async")).await
        } else {
            // Some keys extend an earlier key with a separator and a step number: under
            // a string scheme they would name that invocation's child.
            let key = match keys.last() {
                Some(prev) if world.chance(0.3) => format!("{prev}.{}", 1 + world.draw(4)),
                _ => format!("c{c}-{n}"),
            };
            keys.push(key.clone());
            let out = keyed(&world, book, &function, &input, key.clone()).await;
            if out.is_some() && world.chance(0.2) {
                // A client retrying after it had its answer: the same result, not a rerun.
                world.stats.lock().expect("not poisoned").replays += 1;
                if let Some((n2, d, _)) = world.pick_node() {
                    let req = request(&function, book, &input, &key);
                    if let Some(again) = world.on_node(n2, d, "replay", move |d| async move { d.invoke(req).await }).await {
                        let again = again.map(|o| u64::from_be_bytes(o[..8.min(o.len())].try_into().unwrap_or([0; 8])));
                        match (&out, again) {
                            (Some(Ok(v)), Ok(w)) if *v != w => {
                                world.fail(format!("a replay of {} returned {w}, first {v}", show(&input)))
                            }
                            (Some(Err(code)), Err(e)) if e.code() != code && !e.is_transient() && e.code() != "conflict" => {
                                world.fail(format!("a replay of {} failed with {e}, first {code}", show(&input)))
                            }
                            _ => {}
                        }
                    }
                }
            }
            out.is_some()
        };
        if !done {
            return;
        }
        if world.chance(0.2) && !peek(&world, book, c, n).await {
            return;
        }
        h.sleep(world.draw(30)).await;
    }
    let input = format!("c{c}:verify").into_bytes();
    if keyed(&world, book, "verify", &input, format!("c{c}-verify")).await.is_some() {
        // Every append of the client's invocations is in its stream once: as many
        // records as the model counts (the offsets count trimmed records too).
        let prefix = format!("c{c}");
        let counted = world.oracle.lock().expect("not poisoned").appends(&prefix);
        let there = world.log.next_offset(book, guest::stream_of(&prefix));
        if counted.is_some_and(|c| c != there) {
            world.fail(format!("client {prefix}'s stream holds {there} records, its invocations appended {counted:?}"));
        }
        *world.clients_done.lock().expect("not poisoned") += 1;
    }
}

/// A read-only function of the read-optimized table and the switching one, which
/// clients call without any key (`peek`).
const PEEK: &str = "peek";

/// Reads the client's keys of those tables with a request that has no key
/// at all, as a browser would: on a node alone it logs nothing (`Of::forgettable`), so
/// only its answer shows what it read, which the model checks as any invocation's. A
/// lost answer is not asked again (nothing names it); the client sends another, under
/// another input. `false` when a violation was found.
async fn peek(world: &Arc<World>, book: BookId, c: usize, n: usize) -> bool {
    let h = world.harness();
    for attempt in 0.. {
        let input = format!("c{c}:peek{n}.{attempt}").into_bytes();
        let Some((node, d, _)) = world.pick_node() else {
            h.sleep(5).await;
            continue;
        };
        let req = unkeyed_request(PEEK, book, &input);
        let answer = world.on_node(node, d, "peek", move |d| async move { d.invoke(req).await }).await;
        match answer {
            Some(Ok(out)) if out.len() == 8 => {
                let got = Ok(u64::from_be_bytes(out[..].try_into().expect("8 bytes")));
                world.stats.lock().expect("not poisoned").peeks += 1;
                return check_finished(world, PEEK, &input, Some(got)).is_some();
            }
            Some(Ok(out)) => {
                world.fail(format!("{} output {} bytes", show(&input), out.len()));
                return false;
            }
            Some(Err(e)) if !e.is_transient() => {
                world.fail(format!("{} failed: {e}", show(&input)));
                return false;
            }
            _ => {
                world.oracle.lock().expect("not poisoned").abandon(&input);
                h.sleep(1 + world.draw(20)).await;
            }
        }
    }
    unreachable!("the loop returns")
}

/// An asynchronous invocation: submitted (with a key, so that a lost answer can be
/// asked again) on one node, polled on any until finished.
async fn asynchronous(world: &Arc<World>, book: BookId, function: &str, input: &[u8], key: String) -> bool {
    let h = world.harness();
    let (id, submitted_ms) = loop {
        let Some((n, d, _)) = world.pick_node() else {
            h.sleep(5).await;
            continue;
        };
        let (f, i, k) = (function.to_string(), Bytes::copy_from_slice(input), key.clone());
        match world
            .on_node(n, d, "submit", move |d| async move {
                d.invoke_async(&mut Context::new(), f, book, i, Some(k.clone()), delay_of(&k), None).await
            })
            .await
        {
            Some(Ok(id)) => break (id.to_string(), h.now_ms()),
            Some(Err(e)) if e.is_transient() => h.sleep(5 + world.draw(20)).await,
            Some(Err(e)) => {
                world.fail(format!("an asynchronous submission of {} failed: {e}", show(input)));
                return false;
            }
            None => {}
        }
    };
    loop {
        h.sleep(5 + world.draw(20)).await;
        let Some((n, d, _)) = world.pick_node() else { continue };
        let id2 = id.clone();
        let status =
            world.on_node(n, d, "status", move |d| async move { d.invocation(&mut Context::new(), book, &id2).await }).await;
        match status {
            Some(Ok(InvocationStatus::Finished(r))) => {
                let got = match r {
                    Ok(out) if out.len() == 8 => Ok(u64::from_be_bytes(out[..].try_into().expect("8 bytes"))),
                    Ok(out) => Err(format!("output of {} bytes", out.len())),
                    Err(e) => Err(e.code().to_string()),
                };
                return check_finished(world, function, input, Some(got)).is_some();
            }
            Some(Ok(InvocationStatus::Running | InvocationStatus::Sleeping { .. })) | None => {}
            // Accepted means started, so an unknown invocation is either one a lagging
            // replica does not show yet or one whose result was kept shorter than this
            // client took to ask (after an execution ran it to its end): the model still
            // says what it did.
            Some(Err(Error::InvocationNotFound(_)))
                if h.now_ms() > submitted_ms + world.config.results_kept_ms && world.completed(input) =>
            {
                return check_finished(world, function, input, None).is_some();
            }
            Some(Err(e)) if matches!(e, Error::InvocationNotFound(_)) || e.is_transient() => {}
            Some(Err(e)) => {
                world.fail(format!("the status of {} failed: {e}", show(input)));
                return false;
            }
        }
    }
}

/// What a look at a table's status answered.
type StatusAnswer = Result<Option<crate::switch::TableStatus>, Error>;

/// Completes the promises guests created, at random times on random nodes, some of them
/// again (which must be refused). Two successful completions of one promise are a
/// violation.
async fn completer(world: Arc<World>) {
    let h = world.harness();
    loop {
        h.sleep(1 + world.draw(30)).await;
        let pick = {
            let t = world.traces.lock().expect("not poisoned");
            (!t.promises.is_empty()).then(|| t.promises[world.draw(t.promises.len() as u64) as usize].clone())
        };
        let Some((book, promise)) = pick else { continue };
        let Some((n, d, _)) = world.pick_node() else { continue };
        let value = world.draw(1 << 60);
        // Offered before it is sent: a completion whose answer is lost may have landed.
        world.traces.lock().expect("not poisoned").promise_values.entry(promise.clone()).or_default().0.push(value);
        let p = promise.clone();
        let answer = world
            .on_node(n, d, "complete", move |d| async move {
                d.complete_promise(&mut Context::new(), BookId(book), &p, Bytes::copy_from_slice(&value.to_be_bytes())).await
            })
            .await;
        let mut t = world.traces.lock().expect("not poisoned");
        match answer {
            Some(Ok(())) => {
                let ok = &mut t.promise_values.entry(promise.clone()).or_default().1;
                ok.push(value);
                if ok.len() > 1 {
                    let ok = ok.clone();
                    drop(t);
                    world.fail(format!("promise {promise} was completed twice: {ok:?}"));
                    return;
                }
            }
            Some(Err(Error::Conflict(_))) if world.chance(0.5) => t.promises.retain(|(_, p)| *p != promise),
            _ => {}
        }
    }
}

/// Redeploys, a function that appears late, and switches, during the safety phase.
async fn chaos(world: Arc<World>) {
    let h = world.harness();
    let mut next_redeploy = world.opts.redeploy_every_ms;
    let mut next_switch = world.opts.switch_every_ms;
    let late_at = world.draw(world.opts.safety_ms.max(1));
    let mut late = false;
    while h.now_ms() < world.opts.safety_ms {
        h.sleep(10).await;
        let now = h.now_ms();
        if !late && now >= late_at {
            late = true;
            let program = Program { ops: vec![Op::Incr { table: 1, key: 3 }] };
            world.registry.lock().expect("not poisoned").deploy("late", program, BTreeMap::new());
        }
        if now >= next_redeploy {
            next_redeploy = now + world.opts.redeploy_every_ms;
            let i = world.draw(4);
            let mut rng = Rng::new(world.seed ^ now);
            let callees: Vec<String> = ((i + 1)..4).map(|j| format!("f{j}")).chain(["late".to_string()]).collect();
            let len = 4 + rng.below(6) as usize;
            let program = random_program(&mut rng, len, &callees, true, true);
            world.registry.lock().expect("not poisoned").deploy(&format!("f{i}"), program, BTreeMap::new());
            world.stats.lock().expect("not poisoned").redeploys += 1;
        }
        if now >= next_switch {
            next_switch = now + world.opts.switch_every_ms;
            let book = BookId(world.draw(world.opts.books));
            let target = [Protocol::ReadOptimized, Protocol::WriteOptimized, Protocol::Auto][world.draw(3) as usize];
            if let Some((n, d, _)) = world.pick_node() {
                world.stats.lock().expect("not poisoned").switches += 1;
                let answer =
                    world.on_node(n, d, "switch", move |d| async move { d.switch_table(book, "sw", target).await }).await;
                if let Some(Err(e)) = answer {
                    if !matches!(e, Error::Conflict(_)) && !e.is_transient() {
                        world.fail(format!("a switch request failed: {e}"));
                    }
                }
            }
        }
    }
    // Every switch finishes, whichever node began it (that node may be gone for good).
    // Each look is given up after a second and made again, on a node drawn anew.
    for book in 0..world.opts.books {
        let book = BookId(book);
        loop {
            h.sleep(20).await;
            let Some((n, d, _)) = world.pick_node() else { continue };
            let answer: Arc<Mutex<Option<StatusAnswer>>> = Arc::default();
            let put = answer.clone();
            Handle { shared: world.shared.clone(), owner: Some(n) }.spawn(
                "table-status",
                Box::pin(async move {
                    let status = d.table_status(book, "sw").await;
                    *put.lock().expect("not poisoned") = Some(status);
                }),
            );
            let mut got = None;
            for _ in 0..100 {
                h.sleep(10).await;
                got = answer.lock().expect("not poisoned").take();
                if got.is_some() {
                    break;
                }
            }
            match got {
                Some(Ok(Some(s))) if s.switching.is_some() => {}
                Some(Ok(_)) => break,
                _ => {}
            }
        }
    }
    *world.switches_done.lock().expect("not poisoned") = true;
}

/// The interval of the simulated schedules.
const TICK_MS: u64 = 100;
/// How far behind the clock a driver is once it has caught up.
const TICK_LAG_MS: u64 = 300;

/// Schedules through the faults: `every` (on book 0: every tick fires, overlapping, all
/// missed ones caught up), `skipping` (on book 1: overlapping ticks skipped, only the
/// latest missed one caught up, and triggered now and then) and `serial` (on book 0:
/// one tick buffered behind a running one, missed ones caught up one after another).
/// After the safety phase, once `every` has caught up, all are deleted; once their invocations have finished, the ticks
/// are checked against the definitions alone: tick IDs are distinct and as many as the
/// ticks between definition and deletion (within the drivers' lag, plus triggers),
/// each ran no earlier than its tick (comparing order statistics), and each appended
/// its record to its book once.
async fn schedules(world: Arc<World>) {
    use crate::schedule::{CatchUp, Overlap, ScheduleSpec, Timing};
    let h = world.harness();
    let books = world.opts.books;
    let defs = [
        ("every", BookId(0), Overlap::AllowAll, CatchUp::All),
        ("skipping", BookId(1 % books), Overlap::Skip, CatchUp::Latest),
        ("serial", BookId(0), Overlap::BufferOne, CatchUp::All),
    ];
    h.sleep(world.draw(200)).await;
    let mut defined = Vec::new();
    for (name, book, overlap, catch_up) in defs {
        let spec = ScheduleSpec {
            function: guest::TICKER.into(),
            book,
            input: Bytes::from(name),
            timing: Timing::EveryMs(TICK_MS),
            overlap,
            catch_up,
        };
        let first = h.now_ms();
        let answered = retry(&world, "put-schedule", move |d| {
            let spec = spec.clone();
            async move { d.put_schedule(name, spec, None).await.map(|_| ()) }
        })
        .await;
        if answered.is_none() {
            return;
        }
        defined.push((name, book, first, h.now_ms()));
    }
    // Triggers of `skipping`, on random nodes, during the safety phase.
    let (mut tried, mut triggered) = (0u64, 0u64);
    while h.now_ms() < world.opts.safety_ms {
        h.sleep(50 + world.draw(300)).await;
        let Some((n, d, _)) = world.pick_node() else { continue };
        tried += 1;
        match world.on_node(n, d, "trigger", |d| async move { d.trigger_schedule("skipping").await }).await {
            Some(Ok(_)) => triggered += 1,
            // A replica behind the definition does not know the schedule yet.
            Some(Err(e)) if !e.is_transient() && !matches!(e, Error::Conflict(_) | Error::ScheduleNotFound(_)) => {
                return world.fail(format!("a trigger failed: {e}"));
            }
            _ => {}
        }
    }
    // Once faults stop, `every` catches up with the clock: it says it has fired every
    // tick up to `caught`, which the ticks' effects must then show.
    let caught = loop {
        h.sleep(50).await;
        let Some((n, d, _)) = world.pick_node() else { continue };
        if let Some(Ok(s)) = world.on_node(n, d, "schedule", |d| async move { d.schedule("every").await }).await {
            if s.last_tick_ms + TICK_LAG_MS >= h.now_ms() {
                break s.last_tick_ms;
            }
        }
    };
    let mut deleted = Vec::new();
    for (name, ..) in &defined {
        let name = *name;
        let answered = retry(&world, "delete-schedule", move |d| async move {
            match d.delete_schedule(name).await {
                // An earlier try whose answer was lost deleted it.
                Err(Error::ScheduleNotFound(_)) => Ok(()),
                other => other,
            }
        })
        .await;
        if answered.is_none() {
            return;
        }
        deleted.push(h.now_ms());
    }
    // Every invocation started runs to its end. One whose node died before it ran (or
    // whose run failed at once) is run by the recovery scan, after its function's
    // timeout and then some, later when the scan tracks `open_max` others already (the
    // libraries' invocations share book 0, and their waiters stay unfinished a while):
    // wait until every one whose Init the log holds has run, and nothing new has shown
    // up for several seconds.
    let (mut seen, mut since) = (0, h.now_ms());
    loop {
        h.sleep(20).await;
        let t = world.traces.lock().expect("not poisoned");
        if t.ticks.len() != seen {
            (seen, since) = (t.ticks.len(), h.now_ms());
        }
        let quiet = 8_000;
        if h.now_ms() > since + quiet && t.ticks.keys().all(|k| t.ticks_done.contains(k)) {
            let ran: BTreeSet<&String> = t.ticks.keys().map(|(_, id)| id).collect();
            if started_ticks(&world.log).iter().all(|id| ran.contains(id)) {
                break;
            }
        }
    }
    let t = world.traces.lock().expect("not poisoned");
    for (i, (name, book, put_first, put_done)) in defined.iter().enumerate() {
        let del_done = deleted[i];
        let mut starts: Vec<u64> = t.ticks.iter().filter(|((s, _), _)| s == name).map(|(_, &at)| at).collect();
        starts.sort_unstable();
        // Ticks are the multiples of TICK_MS after the definition took effect (at or
        // after put_first) and up to the deletion (at or before del_done); those up to
        // `caught` have fired (the definition took effect by put_done).
        let upper = del_done / TICK_MS - put_first / TICK_MS;
        let lower = (caught / TICK_MS).saturating_sub(put_done / TICK_MS);
        let (extra_max, extra_min) = if *name == "skipping" { (tried, triggered) } else { (0, 0) };
        let n = starts.len() as u64;
        if n > upper + extra_max {
            return world.fail(format!(
                "schedule {name} started {n} invocations for at most {upper} ticks and {extra_max} triggers: a tick fired twice"
            ));
        }
        if *name == "every" {
            if n < lower {
                return world.fail(format!(
                    "schedule {name} (every tick, all caught up) started {n} invocations for at least {lower} ticks \
                     (up to {caught} ms): a tick never fired; they started at {starts:?} ms"
                ));
            }
            let first_tick = (put_first / TICK_MS + 1) * TICK_MS;
            for (k, at) in starts.iter().enumerate() {
                let tick = first_tick + k as u64 * TICK_MS;
                if *at < tick {
                    return world.fail(format!("schedule {name}: invocation {k} ran at {at} ms, before tick {tick} ms"));
                }
            }
        } else if n < extra_min {
            return world.fail(format!("schedule {name} started {n} invocations for {extra_min} successful triggers"));
        }
        let appended = world.log.next_offset(*book, guest::ticks_of(name));
        if appended != n {
            return world.fail(format!("schedule {name}: {n} invocations ran and appended {appended} records"));
        }
    }
    world.stats.lock().expect("not poisoned").ticks = t.ticks.len() as u64;
    drop(t);
    *world.schedules_done.lock().expect("not poisoned") = true;
}

/// Calls `f` on random nodes until it answers with something other than a transient
/// failure or a lost answer; `None` (after reporting it) for another failure.
async fn retry<F, Fut>(world: &Arc<World>, what: &'static str, f: F) -> Option<()>
where
    F: Fn(Arc<Durable>) -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>> + Send + 'static,
{
    let h = world.harness();
    loop {
        let Some((n, d, _)) = world.pick_node() else {
            h.sleep(5).await;
            continue;
        };
        match world.on_node(n, d, what, &f).await {
            Some(Ok(())) => return Some(()),
            Some(Err(e)) if !e.is_transient() && !matches!(e, Error::Conflict(_)) => {
                world.fail(format!("{what} failed: {e}"));
                return None;
            }
            _ => h.sleep(5 + world.draw(20)).await,
        }
    }
}

/// Every step log the run left, as the log holds it (the records that took their
/// places): a stream of a derived tag whose first record is an Init or a refusal.
/// After a `Cancelled` step the guest's every call fails before it logs, so only clock
/// readings, lock releases and the result may follow it; nothing follows the result.
/// (A write taken before the cancellation and logged after it would break this.)
fn check_step_logs(log: &SimLog, key: Option<&TagKey>) -> Result<(), String> {
    use crate::record::Step;
    // Per stream: whether it is a step log, and whether it has a Cancelled or a Result.
    let mut streams: BTreeMap<(BookId, u64), (bool, bool, bool)> = BTreeMap::new();
    for (book, tags, steps) in placed_steps(log) {
        let begun = step_log_begun(&tags, &steps[0], key);
        for tag in tags.iter().filter(|&&t| is_derived(t)) {
            let first = begun == Some(*tag);
            let (step_log, cancelled, ended) = streams.entry((book, tag.0)).or_insert((first, false, false));
            if !*step_log {
                continue;
            }
            for step in &steps {
                let after_cancel = matches!(
                    step,
                    Step::Clocks(kind::Clocks { .. })
                        | Step::LockRelease(kind::LockRelease { .. })
                        | Step::Result(kind::Result { .. })
                );
                if *ended || (*cancelled && !after_cancel) {
                    let after = if *ended { "its result" } else { "its cancellation" };
                    return Err(format!("the step log {:#x} of book {} has a {} after {after}", tag.0, book.0, step.describe()));
                }
                *cancelled |= matches!(step, Step::Cancelled);
                *ended |= matches!(step, Step::Result(kind::Result { .. }) | Step::Refused(kind::Refused { .. }));
            }
        }
    }
    Ok(())
}

/// Every object that a record still in its write log writes (a read-optimized write)
/// has a version in the store: garbage collection and a switch's migration find
/// objects by their stored versions, so one without any would keep its garbage for
/// ever and be left out of a migration. A crash may lose any version that is not
/// durable; the protocol keeps one durable version per object.
fn check_objects_stored(log: &SimLog, store: &FaultyStore, key: Option<&TagKey>) -> Result<(), String> {
    use crate::record::{self, Step};
    let Some(tags) = key else { return Ok(()) };
    let mut objects = BTreeSet::new();
    for (book, _, steps) in placed_steps(log) {
        for step in steps {
            if let Step::Write(kind::Write { table, key, .. }) | Step::Put(kind::Put { table, key, .. }) = step {
                objects.insert((book, table, key));
            }
        }
    }
    let objects: Vec<(BookId, String, Bytes)> = objects.into_iter().collect();
    let streams: Vec<(BookId, Tag)> = objects.iter().map(|(book, table, key)| (*book, tags.object(table, key))).collect();
    for ((book, table, key), records) in objects.iter().zip(log.readable(&streams)) {
        let writes_it = |data: &Bytes| {
            let steps = record::decode::<Step>("step", data).map(Step::into_steps).unwrap_or_default();
            steps.iter().any(|s| matches!(s, Step::Write(kind::Write { table: t, key: k, .. }) | Step::Put(kind::Put { table: t, key: k, .. }) if t == table && k == key))
        };
        // Write logs are in the book's shadow, the store's tables under the book.
        let user = BookId(book.0 & !BookId::RESERVED_BIT);
        if records.iter().any(writes_it) && !store.has_versions(&crate::table::store_table(user, table), key) {
            return Err(format!("{table}/{key:?} of book {} has a write in its write log and no version in the store", user.0));
        }
    }
    Ok(())
}

/// The IDs of the schedules' invocations whose Init the log holds (started).
fn started_ticks(log: &SimLog) -> BTreeSet<String> {
    use crate::record::Step;
    let inits = placed_steps(log).flat_map(|(_, _, steps)| steps);
    inits
        .filter_map(|step| match step {
            Step::Init(kind::Init { id, function, .. }) if function == guest::TICKER => Some(id.to_string()),
            _ => None,
        })
        .collect()
}

/// Invocations cancelled mid-flight through the faults: each [`guest::TARGET`] is
/// submitted asynchronously and cancelled (on random nodes, some twice) after a random
/// while, asleep, running or already finished, while its status is polled (results
/// are kept only briefly). Once finished, each is checked against what its executions
/// saw (below), and a second later its stream has not grown (nothing ran after the
/// outcome).
async fn cancels(world: Arc<World>) {
    const TARGETS: u64 = 6;
    let h = world.harness();
    let done = Arc::new(Mutex::new(0u64));
    for t in 0..TARGETS {
        h.sleep(world.draw(300)).await;
        let (w, done) = (world.clone(), done.clone());
        h.spawn(
            "target",
            Box::pin(async move {
                if cancel_one(&w, t).await.is_some() {
                    *done.lock().expect("not poisoned") += 1;
                }
            }),
        );
    }
    while *done.lock().expect("not poisoned") < TARGETS {
        h.sleep(50).await;
    }
    *world.cancels_done.lock().expect("not poisoned") = true;
}

/// Whether an execution of target `input` ran to its end (all its steps, or its
/// cancellation).
fn target_ended(world: &World, input: &str) -> bool {
    let t = world.traces.lock().expect("not poisoned");
    t.targets.get(input).is_some_and(|&(ok, cancelled)| cancelled || ok == guest::TARGET_STEPS)
}

/// One target of [`cancels`]; `None` after a violation.
async fn cancel_one(world: &Arc<World>, t: u64) -> Option<()> {
    let h = world.harness();
    let book = BookId(t % world.opts.books);
    let input = format!("x{t}");
    let key = format!("target-{t}");
    let id = loop {
        let Some((n, d, _)) = world.pick_node() else {
            h.sleep(5).await;
            continue;
        };
        let (i, k) = (Bytes::from(input.clone()), key.clone());
        match world
            .on_node(n, d, "submit", move |d| async move {
                d.invoke_async(&mut Context::new(), guest::TARGET.into(), book, i, Some(k), 0, None).await
            })
            .await
        {
            Some(Ok(id)) => break id.to_string(),
            Some(Err(e)) if !e.is_transient() => {
                world.fail(format!("submitting {input}: {e}"));
                return None;
            }
            _ => h.sleep(5 + world.draw(20)).await,
        }
    };
    // The cancellations, in their own task: whether every answer refused it.
    let refused_all: Arc<Mutex<Option<bool>>> = Arc::default();
    let (w, i, answer) = (world.clone(), id.clone(), refused_all.clone());
    h.spawn(
        "cancel",
        Box::pin(async move {
            w.harness().sleep(w.draw(700)).await;
            let mut refused = true;
            for _ in 0..1 + w.draw(2) {
                let Some((n, d, _)) = w.pick_node() else { continue };
                let c = i.clone();
                match w.on_node(n, d, "cancel", move |d| async move { d.cancel(&mut Context::new(), book, &c).await }).await {
                    // Finished already, or not yet visible on a lagging replica.
                    Some(Err(Error::Conflict(_) | Error::InvocationNotFound(_))) => {}
                    Some(Err(e)) if !e.is_transient() => return w.fail(format!("cancelling {i}: {e}")),
                    _ => refused = false,
                }
            }
            *answer.lock().expect("not poisoned") = Some(refused);
        }),
    );
    let submitted_ms = h.now_ms();
    let outcome = loop {
        h.sleep(5 + world.draw(10)).await;
        let Some((n, d, _)) = world.pick_node() else { continue };
        let i = id.clone();
        match world.on_node(n, d, "status", move |d| async move { d.invocation(&mut Context::new(), book, &i).await }).await {
            Some(Ok(InvocationStatus::Finished(r))) => break Some(r),
            // Its result was collected before a look got to it (a paused node, say):
            // once an execution ran it to its end, the outcome is unknown, not lost.
            Some(Err(Error::InvocationNotFound(_)))
                if h.now_ms() > submitted_ms + world.config.results_kept_ms && target_ended(world, &input) =>
            {
                break None;
            }
            Some(Err(e)) if !e.is_transient() && !matches!(e, Error::InvocationNotFound(_)) => {
                world.fail(format!("the status of {input}: {e}"));
                return None;
            }
            _ => {}
        }
    };
    let refused_all = loop {
        if let Some(r) = *refused_all.lock().expect("not poisoned") {
            break r;
        }
        h.sleep(10).await;
    };
    let made = world.log.next_offset(book, guest::target_of(input.as_bytes()));
    let (most_ok, saw_cancel) = world.traces.lock().expect("not poisoned").targets.get(&input).copied().unwrap_or_default();
    let trapped = world.traces.lock().expect("not poisoned").targets_trapped.contains(&input);
    // Succeeded: every step made and seen, no cancellation seen (it would be logged, and
    // seen again by every later execution). Cancelled: it was asked for, an execution
    // saw it, and none saw every step succeed (past the recorded history nothing
    // passes it). A step may be made and not seen (its execution died right after it).
    let all = guest::TARGET_STEPS;
    // A guest that trimmed the whole book may have taken an own record away before a
    // re-execution looked at it, which then sees a conflict (a documented gap).
    let trimmed = world.traces.lock().expect("not poisoned").trimmed_books.contains(&book.0);
    let fine = match &outcome {
        _ if trimmed => true,
        // Asked for after its result was collected (it is kept briefly here): unknown.
        None => made >= most_ok,
        Some(Err(Error::Conflict(m))) if m.contains("no longer kept") => true,
        Some(Ok(_)) => made == all && most_ok == all && !saw_cancel,
        // Seen by an execution, or an attempt trapped once it was asked for (the trap
        // is not retried then): the oracle knows of traps, not of when they came.
        Some(Err(Error::Cancelled)) => !refused_all && (saw_cancel || trapped) && most_ok < all && made >= most_ok,
        Some(Err(_)) => false,
    };
    if !fine {
        world.fail(format!(
            "{input} ended {outcome:?} after {made} of {all} steps, {most_ok} seen made by one execution, a cancellation \
             seen: {saw_cancel}, every cancellation refused: {refused_all}"
        ));
        return None;
    }
    if matches!(outcome, Some(Err(_))) {
        world.stats.lock().expect("not poisoned").cancelled += 1;
    }
    // Nothing of a finished invocation runs on: a late peer stops at its next step.
    // Except (a documented gap) one peer that passed its step's gate before the
    // cancelling execution logged the cancellation there, and makes that step's effect.
    h.sleep(1_000).await;
    let now = world.log.next_offset(book, guest::target_of(input.as_bytes()));
    let racing_peer = u64::from(!matches!(outcome, Some(Ok(_))));
    if now < made || now > made + racing_peer {
        world.fail(format!("{input} made {now} steps, {made} when it had finished"));
        return None;
    }
    Some(())
}

/// Invocations awaiting promises that other invocations created, with no timeout:
/// a `maker` creates a promise, two `waiter`s await it (each suspends), and the harness
/// completes it a while later on a random node. Nothing but the promise's waiters
/// stream wakes the waiters (the recovery scan looks only every ten minutes, past the
/// run's end), so each must finish, with the value a completion offered, the same in
/// every execution of both.
async fn waiters(world: Arc<World>) {
    const PROMISES: u64 = 3;
    let h = world.harness();
    for p in 0..PROMISES {
        h.sleep(world.draw(400)).await;
        let book = BookId(p % world.opts.books);
        let Some(promise) = submit_and_wait(&world, guest::MAKER, book, Bytes::new(), format!("maker-{p}")).await else { return };
        let Some(promise) = promise.map(|out| String::from_utf8_lossy(&out).into_owned()) else {
            return world.fail(format!("the maker of promise {p} was collected before it was seen"));
        };
        let waiting: Vec<String> = vec![format!("waiter-{p}-a"), format!("waiter-{p}-b")];
        let mut ids = Vec::new();
        for key in &waiting {
            let Some(id) = submit(&world, guest::WAITER, book, Bytes::from(promise.clone()), key.clone()).await else { return };
            ids.push(id);
        }
        h.sleep(world.draw(300)).await;
        let mut offered = Vec::new();
        loop {
            let Some((n, d, _)) = world.pick_node() else {
                h.sleep(5).await;
                continue;
            };
            let value = world.draw(1 << 60);
            offered.push(value);
            let q = promise.clone();
            let answer = world
                .on_node(n, d, "complete", move |d| async move {
                    d.complete_promise(&mut Context::new(), book, &q, Bytes::copy_from_slice(&value.to_be_bytes())).await
                })
                .await;
            match answer {
                // A conflict: an earlier try whose answer was lost completed it.
                Some(Ok(())) | Some(Err(Error::Conflict(_))) => break,
                Some(Err(e)) if !e.is_transient() && !matches!(e, Error::PromiseNotFound(_)) => {
                    return world.fail(format!("completing {promise}: {e}"));
                }
                _ => h.sleep(5 + world.draw(20)).await,
            }
        }
        let mut got = Vec::new();
        for id in ids {
            let Some(out) =
                wait_finished(&world, book, &id, || world.traces.lock().expect("not poisoned").waited.contains_key(&promise))
                    .await
            else {
                return;
            };
            got.extend(out.map(|o| u64::from_be_bytes(o[..8.min(o.len())].try_into().unwrap_or([0; 8]))));
        }
        let seen = world.traces.lock().expect("not poisoned").waited.get(&promise).cloned().unwrap_or_default();
        let all: Vec<u64> = seen.iter().chain(&got).copied().collect();
        if all.is_empty() || !all.iter().all(|v| *v == all[0]) || !offered.contains(&all[0]) {
            return world.fail(format!("the waiters of {promise} got {got:?}, their executions {seen:?}; offered {offered:?}"));
        }
        world.stats.lock().expect("not poisoned").awaited_elsewhere += 2;
    }
    *world.waiters_done.lock().expect("not poisoned") = true;
}

/// Submits an asynchronous invocation on random nodes until one takes it; its ID, or
/// `None` after a violation.
async fn submit(world: &Arc<World>, function: &str, book: BookId, input: Bytes, key: String) -> Option<String> {
    submit_to(world, function, book, input, key, None).await
}

/// [`submit`] of an invocation addressed to `to` (`?key=`).
async fn submit_to(
    world: &Arc<World>,
    function: &str,
    book: BookId,
    input: Bytes,
    key: String,
    to: Option<crate::record::InvocationKey>,
) -> Option<String> {
    let h = world.harness();
    loop {
        let Some((n, d, _)) = world.pick_node() else {
            h.sleep(5).await;
            continue;
        };
        let (f, i, k, t) = (function.to_string(), input.clone(), key.clone(), to.clone());
        match world
            .on_node(n, d, "submit", move |d| async move { d.invoke_async(&mut Context::new(), f, book, i, Some(k), 0, t).await })
            .await
        {
            Some(Ok(id)) => return Some(id.to_string()),
            Some(Err(e)) if !e.is_transient() => {
                world.fail(format!("submitting {function} {key}: {e}"));
                return None;
            }
            _ => h.sleep(5 + world.draw(20)).await,
        }
    }
}

/// Asks for invocation `id`'s status on random nodes until it has finished; its output
/// (`Some(None)` when its result was collected before a look got to it and `ran` says
/// an execution ran it), or `None` after a violation (a failure included).
async fn wait_finished(world: &Arc<World>, book: BookId, id: &str, ran: impl Fn() -> bool) -> Option<Option<Bytes>> {
    let h = world.harness();
    let submitted_ms = h.now_ms();
    loop {
        h.sleep(5 + world.draw(10)).await;
        let Some((n, d, _)) = world.pick_node() else { continue };
        let i = id.to_string();
        match world.on_node(n, d, "status", move |d| async move { d.invocation(&mut Context::new(), book, &i).await }).await {
            Some(Ok(InvocationStatus::Finished(Ok(out)))) => return Some(Some(out)),
            Some(Ok(InvocationStatus::Finished(r))) => {
                world.fail(format!("invocation {id} ended {r:?}"));
                return None;
            }
            Some(Err(Error::InvocationNotFound(_))) if h.now_ms() > submitted_ms + world.config.results_kept_ms && ran() => {
                return Some(None);
            }
            Some(Err(e)) if !e.is_transient() && !matches!(e, Error::InvocationNotFound(_)) => {
                world.fail(format!("the status of {id}: {e}"));
                return None;
            }
            _ => {}
        }
    }
}

/// [`submit`], then [`wait_finished`].
async fn submit_and_wait(world: &Arc<World>, function: &str, book: BookId, input: Bytes, key: String) -> Option<Option<Bytes>> {
    let id = submit(world, function, book, input, key).await?;
    wait_finished(world, book, &id, || false).await
}

/// The libraries' workload (`libs.rs`): tellers, producers and consumers, lockers and
/// keyed invocations on one book, all at once through the faults; then a drain, the
/// final reads and the oracle.
async fn libraries(world: Arc<World>) {
    use self::libs::*;
    let h = world.harness();
    let book = BookId(0);
    let mut started: Vec<(String, String)> = Vec::new();
    let mut plan: Vec<(&str, String, Option<crate::record::InvocationKey>)> = Vec::new();
    // The seed in the tellers' inputs: what each does (and on which counters) follows
    // from its input, so every seed gets another mix.
    plan.extend((0..TELLERS).map(|t| (TELLER, format!("t{t}-{}", world.seed), None)));
    plan.extend((0..PRODUCERS).map(|p| (PRODUCER, format!("p{p}"), None)));
    plan.extend((0..CONSUMERS).map(|c| (CONSUMER, format!("c{c}"), None)));
    plan.extend((0..LOCKERS).map(|l| (LOCKER, format!("l{l}"), None)));
    plan.extend(
        (0..KEYEDS).map(|k| (KEYED, format!("k{k}"), Some(crate::record::InvocationKey { key: "hot".into(), exclusive: true }))),
    );
    for (function, input, to) in plan {
        // Tellers close together, so that their transactions' windows overlap.
        h.sleep(world.draw(if function == TELLER { 4 } else { 30 })).await;
        let key = format!("lib-{input}");
        let Some(id) = submit_to(&world, function, book, Bytes::from(input.clone()), key, to).await else { return };
        started.push((input, id));
    }
    let reported = |input: &str| {
        let t = world.traces.lock().expect("not poisoned");
        let l = &t.libs;
        l.tellers.contains_key(input)
            || l.consumers.contains_key(input)
            || l.holders.contains_key(input)
            || input.starts_with('p')
    };
    for (input, id) in &started {
        if wait_finished(&world, book, id, || reported(input)).await.is_none() {
            return;
        }
    }
    // Drain what the consumers left (they stop at an empty queue).
    for d in 0.. {
        let input = format!("drain{d}");
        if submit_and_wait(&world, CONSUMER, book, Bytes::from(input.clone()), format!("lib-{input}")).await.is_none() {
            return;
        }
        let empty =
            world.traces.lock().expect("not poisoned").libs.consumers.get(&input).is_none_or(|e| e.iter().all(Vec::is_empty));
        if empty || d > 20 {
            break;
        }
    }
    for input in ["counters", "locked", "keyed"] {
        if submit_and_wait(&world, READER, book, Bytes::from(input), format!("lib-read-{input}")).await.is_none() {
            return;
        }
    }
    let checked = {
        let t = world.traces.lock().expect("not poisoned");
        check_libraries(&t.libs)
    };
    match checked {
        Ok(n) => {
            world.stats.lock().expect("not poisoned").library_checked += n;
            *world.libs_done.lock().expect("not poisoned") = true;
        }
        Err(e) => world.fail(e),
    }
}

/// The libraries' oracle over what the executions reported (`libs.rs`).
fn check_libraries(t: &libs::LibTraces) -> Result<u64, String> {
    use self::libs::*;
    let read = agreed("reader", &t.read)?;
    let value = |input: &str| read.get(input).cloned().ok_or_else(|| format!("no read of {input}"));
    let mut checked = check_tellers(&agreed("teller", &t.tellers)?, &value("counters")?)?;
    // Every message popped once, one producer's in its order.
    let consumers = agreed("consumer", &t.consumers)?;
    let mut popped: BTreeMap<String, u64> = BTreeMap::new();
    for got in consumers.values() {
        for (message, seqnum) in got {
            if let Some(earlier) = popped.insert(message.clone(), *seqnum) {
                return Err(format!("{message} was popped twice, at {earlier} and {seqnum}"));
            }
        }
    }
    for p in 0..PRODUCERS {
        let at: Vec<Option<u64>> = (0..MESSAGES).map(|j| popped.remove(&format!("p{p}/{j}"))).collect();
        if at.iter().any(Option::is_none) || at.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("producer p{p}'s messages were popped at {at:?}"));
        }
        checked += MESSAGES;
    }
    if !popped.is_empty() {
        return Err(format!("popped messages no producer pushed: {popped:?}"));
    }
    // Lock holders one at a time: each one's increment counted.
    let holders = agreed("holder", &t.holders)?;
    let held = |prefix: char| holders.iter().filter(|(i, h)| i.starts_with(prefix) && **h).count() as i64;
    if value("locked")? != [held('l')] {
        return Err(format!("{} lockers held the lock; the counter says {:?}", held('l'), value("locked")?));
    }
    if held('k') != KEYEDS as i64 || value("keyed")? != [KEYEDS as i64] {
        return Err(format!("{} of {KEYEDS} keyed invocations ran; their counter says {:?}", held('k'), value("keyed")?));
    }
    checked += holders.len() as u64;
    Ok(checked)
}
