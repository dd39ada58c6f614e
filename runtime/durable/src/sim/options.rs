//! What a run depends on besides the seed ([`SimOptions`]), what it did ([`SimStats`]),
//! and how it fails ([`Violation`]).

use std::fmt;

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
    /// Roots answered before their Result was logged.
    pub answered_first: u64,
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
    /// Calls out the upstream saw (by key), and those it saw more than once.
    pub calls_out: u64,
    pub calls_out_resent: u64,
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
        self.answered_first += o.answered_first;
        self.peeks += o.peeks;
        self.suspensions += o.suspensions;
        self.ticks += o.ticks;
        self.cancelled += o.cancelled;
        self.awaited_elsewhere += o.awaited_elsewhere;
        self.library_checked += o.library_checked;
        self.switches += o.switches;
        self.redeploys += o.redeploys;
        self.calls_out += o.calls_out;
        self.calls_out_resent += o.calls_out_resent;
        self.log_records += o.log_records;
        self.sim_ms += o.sim_ms;
    }
}

impl fmt::Display for SimStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} invocations, {} executions, {} reads and {} outputs checked against the model; faults: {} crashes ({} for good, {} of the \
             machine), {} pauses, {} log and {} store failures, {} racing peers, {} replays, {} answered before their result, {} unkeyed reads, {} switches, {} redeploys; {} suspended \
             invocations answered; {} scheduled, {} cancelled and {} awaiting others' promises; {} commits, writes, pops and \
             holds of the libraries checked; {} calls out ({} sent again); {} log records, {} simulated ms",
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
            self.answered_first,
            self.peeks,
            self.switches,
            self.redeploys,
            self.suspensions,
            self.ticks,
            self.cancelled,
            self.awaited_elsewhere,
            self.library_checked,
            self.calls_out,
            self.calls_out_resent,
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
