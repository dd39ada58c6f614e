//! Runs the deterministic simulator over many seeds; exits non-zero on the first
//! violation. `cargo run --release -p tally-logsvc --features sim --bin sim -- --seeds N --seed S`

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use tally_log_core::{run_seeds, MetalogMode, SimOptions, SimPartial, SimStats};

#[derive(Parser)]
#[command(about = "Deterministic simulation of Tally's shared log")]
struct Args {
    /// How many seeds to run.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed; seeds S, S+1, ... are run.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Simulated milliseconds of the safety phase (with faults).
    #[arg(long, default_value_t = 3000)]
    safety_ms: u64,
    /// Simulated milliseconds of the liveness phase (faults stop, nodes restart).
    #[arg(long, default_value_t = 4000)]
    liveness_ms: u64,
    #[arg(long, default_value_t = 3)]
    engines: u32,
    #[arg(long, default_value_t = 4)]
    storage: u32,
    #[arg(long, default_value_t = 2)]
    n_data: usize,
    /// Per-message loss probability.
    #[arg(long, default_value_t = 0.02)]
    loss: f64,
    /// Chance of a crash every 10 ms of the safety phase.
    #[arg(long, default_value_t = 0.02)]
    crash: f64,
    /// Per-message duplication probability.
    #[arg(long, default_value_t = 0.01)]
    duplicate: f64,
    /// Chance of a partition every 10 ms of the safety phase.
    #[arg(long, default_value_t = 0.01)]
    partition: f64,
    /// Largest one-way message delay, in microseconds.
    #[arg(long, default_value_t = 2000)]
    delay_max_us: u64,
    /// Chance of a controller crash every 10 ms of the safety phase.
    #[arg(long, default_value_t = SimOptions::default().controller_crash)]
    controller_crash: f64,
    /// Controllers sharing the configuration store (one leads).
    #[arg(long, default_value_t = SimOptions::default().controllers)]
    controllers: u32,
    /// Chance of a leadership move every 10 ms of the safety phase.
    #[arg(long, default_value_t = SimOptions::default().failover)]
    failover: f64,
    /// Index mode: `complete` (engines index whole logs) or `partial` (index nodes,
    /// local indexes on engines; `--indexers-per-log` does not apply).
    #[arg(long, default_value = "complete", value_parser = ["complete", "partial"])]
    index: String,
    /// Partial mode: index shards and replicas per shard.
    #[arg(long, default_value_t = 2)]
    index_shards: usize,
    #[arg(long, default_value_t = 2)]
    index_replicas: usize,
    /// Partial mode: spare index nodes, in no shard until one replaces a silent replica.
    #[arg(long, default_value_t = 1)]
    index_spares: usize,
    /// Partial mode: aggregator nodes (0: each engine aggregates its own lookups).
    #[arg(long, default_value_t = 1)]
    aggregators: usize,
    /// Engines holding each log's index (0: every engine indexes every log).
    #[arg(long, default_value_t = 2)]
    indexers_per_log: usize,
    /// Physical logs at the start.
    #[arg(long, default_value_t = SimOptions::default().n_logs)]
    logs: u8,
    /// Physical logs added during the safety phase, each at a random time.
    #[arg(long, default_value_t = SimOptions::default().add_logs)]
    add_logs: u8,
    /// Books the clients use.
    #[arg(long, default_value_t = SimOptions::default().books)]
    books: u64,
    /// Chance of a power loss (every node crashes at once) every 10 ms of the safety phase.
    #[arg(long, default_value_t = SimOptions::default().power_loss)]
    power_loss: f64,
    /// `synced` or `replicated`: whether sequencers sync entries before acknowledging
    /// them (`replicated` simulates power losses of one sequencer at a time instead of
    /// every node's).
    #[arg(long, default_value = "synced")]
    metalog: String,
    /// Replicated metalogs: chance that one sequencer's machine loses power, every 10 ms.
    #[arg(long, default_value_t = SimOptions::default().sequencer_power_loss)]
    sequencer_power_loss: f64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let metalog = match args.metalog.as_str() {
        "synced" => MetalogMode::Synced,
        "replicated" => MetalogMode::Replicated,
        other => {
            eprintln!("sim: --metalog is synced or replicated, not {other:?}");
            return ExitCode::FAILURE;
        }
    };
    let opts = SimOptions {
        safety_us: args.safety_ms * 1000,
        liveness_us: args.liveness_ms * 1000,
        engines: args.engines,
        storage: args.storage,
        n_data: args.n_data,
        loss: args.loss,
        crash: args.crash,
        duplicate: args.duplicate,
        partition: args.partition,
        delay_max_us: args.delay_max_us,
        controller_crash: args.controller_crash,
        power_loss: args.power_loss,
        metalog,
        sequencer_power_loss: args.sequencer_power_loss,
        controllers: args.controllers,
        failover: args.failover,
        indexers_per_log: (args.indexers_per_log > 0).then_some(args.indexers_per_log),
        n_logs: args.logs,
        add_logs: args.add_logs,
        books: args.books,
        partial: (args.index == "partial").then_some(SimPartial {
            shards: args.index_shards.max(1),
            replicas: args.index_replicas.max(1),
            spares: args.index_spares,
            aggregators: args.aggregators,
        }),
        ..SimOptions::default()
    };
    eprintln!("sim: seeds {}..{} with {opts}", args.seed, args.seed + args.seeds);
    let started = Instant::now();
    let mut total = SimStats::default();
    for seed in args.seed..args.seed + args.seeds {
        match run_seeds(seed, 1, &opts) {
            Ok(stats) => {
                let s = &stats[0];
                total.events += s.events;
                total.appends_acked += s.appends_acked;
                total.cond_conflicts += s.cond_conflicts;
                total.reads += s.reads;
                total.reads_in_place += s.reads_in_place;
                total.trims += s.trims;
                total.aux_accepted += s.aux_accepted;
                total.aux_refused += s.aux_refused;
                total.crashes += s.crashes;
                total.persist_crashes += s.persist_crashes;
                total.power_losses += s.power_losses;
                total.sequencer_power_losses += s.sequencer_power_losses;
                total.entries_lost += s.entries_lost;
                total.probes += s.probes;
                total.probes_lacking += s.probes_lacking;
                total.controller_crashes += s.controller_crashes;
                total.failovers += s.failovers;
                total.cas_refused += s.cas_refused;
                total.partitions += s.partitions;
                total.logs_added += s.logs_added;
                total.terms = total.terms.max(s.terms);
                total.paths.add(&s.paths);
                total.versions += s.versions;
                total.tier_replacements += s.tier_replacements;
                total.shard_copies += s.shard_copies;
                total.shard_replays += s.shard_replays;
                total.aggregated += s.aggregated;
                total.lookups_dropped += s.lookups_dropped;
            }
            Err(v) => {
                eprintln!("sim: seed {seed} failed with {opts}\n{v}");
                return ExitCode::FAILURE;
            }
        }
    }
    eprintln!(
        "sim: {} seeds passed in {:.1}s: {} events, {} appends acked, {} conditional conflicts, {} reads checked ({} in place), {} trims, {} aux data accepted, {} refused, {} crashes ({} mid-persist), {} power losses ({} of one sequencer, {} unsynced committed entries lost), {} controller crashes, {} failovers, {} configurations refused by the CAS, {} partitions, {} logs added, up to term {}, {} probes of uncommitted tails ({} lacking)",
        args.seeds,
        started.elapsed().as_secs_f64(),
        total.events,
        total.appends_acked,
        total.cond_conflicts,
        total.reads,
        total.reads_in_place,
        total.trims,
        total.aux_accepted,
        total.aux_refused,
        total.crashes,
        total.persist_crashes,
        total.power_losses,
        total.sequencer_power_losses,
        total.entries_lost,
        total.controller_crashes,
        total.failovers,
        total.cas_refused,
        total.partitions,
        total.logs_added,
        total.terms,
        total.probes,
        total.probes_lacking
    );
    if opts.partial.is_some() {
        let p = &total.paths;
        eprintln!(
            "sim: partial mode: {} tag-cache hits, {} popularity hits, {} tier reads ({} exact), {} holder lookups, {} local index restarts, {} versions, {} logs followed from mid-term, {} index replicas replaced, {} index nodes started from a copy ({} from a replay), {} lookups by aggregators ({} dropped)",
            p.tag_hits, p.popularity_hits, p.tier_reads, p.exact_reads, p.holder_lookups, p.local_restarts, total.versions, p.mid_term_starts, total.tier_replacements, total.shard_copies, total.shard_replays, total.aggregated, total.lookups_dropped
        );
    }
    ExitCode::SUCCESS
}
