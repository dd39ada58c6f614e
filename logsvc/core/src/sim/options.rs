//! What a run depends on besides the seed, and what it reports.

use super::*;

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
    /// Whether sequencers sync entries before acknowledging them (`synced`), or only
    /// write them, syncing each store in the background about every 50 ms
    /// (`replicated`): there, a power loss loses what a store wrote since its last
    /// sync, and a power loss of every node the committed entries of the current term
    /// that no sequencer kept (as the README says), which the oracle forgets.
    pub metalog: MetalogMode,
    /// Chance, every 10 ms of the safety phase, that one sequencer's machine loses
    /// power (while every other sequencer is up and remembers its entries): it crashes
    /// and its store loses what it had not synced.
    pub sequencer_power_loss: f64,
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
    /// Index nodes in no shard, that replace a replica silent too long.
    pub spares: usize,
    /// Aggregator nodes (0: each engine aggregates its own lookups).
    pub aggregators: usize,
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
            metalog: MetalogMode::Synced,
            sequencer_power_loss: 0.002,
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
             delay={}..{}us loss={} dup={} crash={} persist_crash={} power_loss={} metalog={:?} sequencer_power_loss={} partition={} controller_crash={} controllers={} failover={} late_members={} \
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
            self.metalog,
            self.sequencer_power_loss,
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
    /// Power losses of one sequencer's machine.
    pub sequencer_power_losses: u64,
    /// Committed metalog entries a power loss of every sequencer of a replicated
    /// metalog took (none of them had synced them).
    pub entries_lost: u64,
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
    /// Configurations that replaced a silent index replica by a spare.
    pub tier_replacements: u64,
    /// Index nodes that started from a replica's copied state, and from a replay.
    pub shard_copies: u64,
    pub shard_replays: u64,
    /// Lookups aggregator nodes answered, and dropped (after `gather_us`, or past
    /// `lookups_max`: two in one seed of four).
    pub aggregated: u64,
    pub lookups_dropped: u64,
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
