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
//! peer's cancellation took is met a few times per thousand seeds; `scenarios/` pins it.
//! Of the seeds a run covers, the first runs twice and must replay identically.
//!
//! This file is the run itself: [`run_seed`]'s event loop, which injects the pauses and
//! the crashes of nodes and of the machine, and ends the safety phase. Around it:
//! `options.rs` (what a run depends on, what it did), `history.rs` (the step logs read
//! back from the log for the checks at the end), and the harness in layers, each file
//! taking only from those below it: `guest.rs` (the guests as data: programs, the
//! functions' names, what executions report), `libs.rs` (the libraries' functions and
//! their oracle), `functions.rs` (the `Functions` a node runs them with), `oracle.rs`,
//! `world.rs` (the nodes and what the harness tasks share), `clients.rs` (the clients'
//! workload and the request helpers the other tasks share), and the other tasks on top
//! (`chaos.rs`, `promises.rs`, `schedules.rs`, `cancels.rs`, the libraries' in
//! `libraries.rs`).
//!
//! [`Durable`]: crate::Durable

mod cancels;
mod chan;
mod chaos;
mod clients;
mod exec;
mod functions;
mod guest;
mod history;
mod libraries;
mod libs;
mod log;
mod options;
mod oracle;
mod promises;
#[cfg(test)]
mod scenarios;
mod schedules;
mod store;
mod world;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::config::StateConfig;

use self::cancels::cancels;
use self::chaos::chaos;
use self::clients::setup_then_clients;
use self::exec::{Exec, Stepped};
use self::guest::{Registry, Traces};
use self::history::{check_objects_stored, check_step_logs, logged_output};
use self::libraries::libraries;
use self::log::{LogFaults, SimLog};
use self::oracle::Oracle;
use self::promises::{completer, waiters};
use self::schedules::schedules;
use self::store::{FaultyStore, StoreFaults};
use self::world::{crash, deploy_functions, sim_config, start_node, NodeSlot, World};

pub use self::options::{SimOptions, SimStats, Violation};
pub use tally_log_core::Rng;

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
    // The log's result of an invocation (where it is still kept) is what its caller
    // got: a retry of its key would get that, and a root answered before its Result
    // (`Instance::end`) must log what it answered.
    for (input, got) in oracle.answers() {
        let logged = logged_output(&world.log, input, world.tag_key().as_ref());
        if let (Some(Ok(logged)), Ok(got)) = (&logged, got) {
            if logged != got {
                let message = format!("{} logged the result {logged}, its caller got {got}", oracle::show(input));
                return Err(Violation { seed, at_ms: now, message });
            }
        }
    }
    if !unfinished.is_empty() {
        return Err(Violation {
            seed,
            at_ms: now,
            message: format!("executions of invocations that never finished: {unfinished:?}"),
        });
    }
    let mut stats = world.stats.lock().expect("not poisoned").clone();
    for slot in &world.nodes {
        stats.answered_first += slot.lock().expect("not poisoned").answered_first();
    }
    stats.executions = traces.executions;
    stats.reads_checked = oracle.reads_checked;
    stats.outputs_checked = oracle.outputs_checked;
    stats.log_failures = world.log.state.lock().expect("not poisoned").failures;
    stats.store_failures = *world.store.failures.lock().expect("not poisoned");
    stats.log_records = world.log.state.lock().expect("not poisoned").appends;
    stats.calls_out = traces.upstream.len() as u64;
    stats.calls_out_resent = traces.upstream.values().filter(|(_, sends)| sends.len() > 1).count() as u64;
    stats.sim_ms = now;
    stats.digest = digest ^ stats.log_records.rotate_left(32) ^ stats.executions;
    Ok(stats)
}
