//! The simulator as part of the test suite: hundreds of seeds of the default
//! scenario, and a harsher one with more loss and crashes. A failure prints the seed
//! to reproduce with `cargo run --release -p tally-logsvc --features sim --bin sim -- --seeds 1 --seed N`.

use tally_log_core::{run_seeds, MetalogMode, SimOptions, SimPartial, SimStats};

fn check(first: u64, count: u64, opts: SimOptions) -> Vec<SimStats> {
    match run_seeds(first, count, &opts) {
        Ok(stats) => {
            let acked: u64 = stats.iter().map(|s| s.appends_acked).sum();
            let reads: u64 = stats.iter().map(|s| s.reads).sum();
            let crashes: u64 = stats.iter().map(|s| s.crashes).sum();
            let controller_crashes: u64 = stats.iter().map(|s| s.controller_crashes).sum();
            let failovers: u64 = stats.iter().map(|s| s.failovers).sum();
            let terms = stats.iter().map(|s| s.terms).max().unwrap_or(0);
            let aux_accepted: u64 = stats.iter().map(|s| s.aux_accepted).sum();
            let aux_refused: u64 = stats.iter().map(|s| s.aux_refused).sum();
            let spilled: u64 = stats.iter().map(|s| s.chunks_spilled).sum();
            // The scenario must exercise what it claims to: appends, reads, crashes (the
            // controller's among them), terms.
            assert!(acked > count * 50 && reads > count * 50, "too little traffic: {acked} appends, {reads} reads");
            assert!(crashes > 0 && terms > 1, "no faults exercised: {crashes} crashes, {terms} terms");
            assert!(controller_crashes > 0, "the controller never crashed in {count} seeds");
            assert!(opts.controllers < 2 || failovers > 0, "leadership never moved in {count} seeds");
            assert!(aux_accepted > 0 && aux_refused > 0, "aux data: {aux_accepted} accepted, {aux_refused} refused");
            // Indexes with a cold store spill (the chunks of tests are short); in partial
            // mode engines keep no complete index.
            assert!(opts.partial.is_some() || spilled > count, "{spilled} chunks of indexes spilled in {count} seeds");
            stats
        }
        Err(v) => panic!("with {opts}\n{v}"),
    }
}

#[test]
fn default_scenario_holds_for_hundreds_of_seeds() {
    check(1_000, 200, SimOptions::default());
}

#[test]
fn harsh_network_and_crashes_hold() {
    let opts =
        SimOptions { loss: 0.1, duplicate: 0.05, crash: 0.05, partition: 0.03, delay_max_us: 10_000, ..SimOptions::default() };
    check(50_000, 60, opts);
}

#[test]
fn three_way_replication_with_one_log_holds() {
    // Every engine indexes the log here; the other scenarios use index replicas.
    let opts =
        SimOptions { n_logs: 1, n_data: 3, storage: 5, engines: 4, clients: 8, indexers_per_log: None, ..SimOptions::default() };
    check(90_000, 60, opts);
}

#[test]
fn controller_failovers_with_a_deposed_leader_still_running_hold() {
    // Leadership moves often, and the old leader seals and tries to install terms for
    // up to 300 ms after: only the compare-and-swap on the shared store keeps the
    // history one.
    let opts = SimOptions { controllers: 3, failover: 0.03, controller_crash: 0.005, ..SimOptions::default() };
    check(120_000, 60, opts);
}

#[test]
fn power_losses_with_one_replica_per_shard_hold() {
    // Every node crashes at once, often: a shard's only replica loses the records it
    // had not synced, which the tail entry a seal finds may name (the primary orders
    // records being written). Such an entry must be dropped, never kept.
    let opts = SimOptions { n_data: 1, power_loss: 0.01, ..SimOptions::default() };
    let stats = check(130_000, 60, opts);
    let lacking: u64 = stats.iter().map(|s| s.probes_lacking).sum();
    assert!(lacking > 0, "no seal found an uncommitted tail entry whose records a power loss took");
}

#[test]
fn replicated_metalogs_hold_while_one_sequencer_at_a_time_loses_power() {
    // Sequencers acknowledge entries they only wrote: a power loss of one takes what it
    // had not synced, entries it acknowledged among them, and its seal report must not
    // count towards a quorum (seed 61 of this scenario committed past a sealed tail when
    // it did: a quorum of the amnesiac replica and one that missed the entry).
    let opts = SimOptions {
        metalog: MetalogMode::Replicated,
        sequencer_power_loss: 0.05,
        loss: 0.1,
        crash: 0.05,
        ..SimOptions::default()
    };
    let stats = check(0, 64, opts);
    let losses: u64 = stats.iter().map(|s| s.sequencer_power_losses).sum();
    assert!(losses > 64, "{losses} power losses of a sequencer in 64 seeds");
}

#[test]
fn replicated_metalogs_lose_only_what_no_sequencer_kept_at_a_power_loss_of_every_node() {
    // Every sequencer loses what it had not synced: the committed entries of the
    // current term that none of them kept are gone (the oracle forgets them), and the
    // seal must keep every other one, waiting for every sequencer (seed 10 ordered past
    // a sealed tail when the controller sealed with two of three amnesiac replicas).
    let opts = SimOptions { metalog: MetalogMode::Replicated, power_loss: 0.01, ..SimOptions::default() };
    let stats = check(0, 40, opts);
    let lost: u64 = stats.iter().map(|s| s.entries_lost).sum();
    assert!(lost > 0, "no power loss took a committed entry in 40 seeds");
}

/// Partial mode (INDILOG): index nodes, engines with tiny local indexes (one in three
/// with none), lookups through the tier, decided updates lost, fetched and gone.
fn check_partial(first: u64, count: u64, opts: SimOptions) {
    let replicas = opts.partial.map_or(0, |p| p.replicas);
    let aggregators = opts.partial.map_or(0, |p| p.aggregators);
    let stats = check(first, count, opts);
    let mut paths = tally_log_core::PartialStats::default();
    for s in &stats {
        paths.add(&s.paths);
    }
    // Every path runs: a sweep where one never did checks nothing of it.
    let p = paths;
    assert!(
        p.tag_hits > 0
            && p.popularity_hits > 0
            && p.tier_reads > 0
            && p.exact_reads > 0
            && p.holder_lookups > 0
            && p.local_restarts > 0,
        "a path never ran in {count} seeds: {p:?}"
    );
    // Function nodes joined and left without new terms, and started mid-term.
    let versions: u64 = stats.iter().map(|s| s.versions).sum();
    assert!(versions > 0 && p.mid_term_starts > 0, "no function node joined through a version: {versions}, {p:?}");
    // Spare index nodes replaced silent replicas.
    let replaced: u64 = stats.iter().map(|s| s.tier_replacements).sum();
    assert!(replaced > 0, "no index replica was replaced in {count} seeds");
    // Index nodes that started or took a place copied a live replica's state (with a
    // replica to copy: one replica per shard leaves none).
    let copies: u64 = stats.iter().map(|s| s.shard_copies).sum();
    assert!(copies > 0 || replicas < 2, "no index node copied a replica in {count} seeds");
    // With aggregator nodes, they answered lookups (and engines aggregated their own
    // while none was up).
    let aggregated: u64 = stats.iter().map(|s| s.aggregated).sum();
    assert!(aggregated > 0 || aggregators == 0, "no aggregator answered a lookup in {count} seeds");
    // Some were dropped (most past `lookups_max`) and asked again.
    let dropped: u64 = stats.iter().map(|s| s.lookups_dropped).sum();
    assert!(dropped > 0 || aggregators == 0, "no aggregator dropped a lookup in {count} seeds");
}

#[test]
fn partial_mode_holds_for_hundreds_of_seeds() {
    let opts =
        SimOptions { partial: Some(SimPartial { shards: 2, replicas: 2, spares: 1, aggregators: 1 }), ..SimOptions::default() };
    check_partial(200_000, 100, opts);
}

#[test]
fn partial_mode_with_three_unreplicated_shards_and_a_harsh_network_holds() {
    let opts = SimOptions {
        partial: Some(SimPartial { shards: 3, replicas: 1, spares: 1, aggregators: 0 }),
        loss: 0.1,
        duplicate: 0.05,
        crash: 0.05,
        partition: 0.03,
        delay_max_us: 10_000,
        ..SimOptions::default()
    };
    check_partial(250_000, 40, opts);
}

#[test]
fn a_partial_mode_seed_replays_exactly() {
    // One seed fixes everything: what a tick resends goes out in one order.
    let opts =
        SimOptions { partial: Some(SimPartial { shards: 2, replicas: 2, spares: 1, aggregators: 1 }), ..SimOptions::default() };
    let run = || run_seeds(300_000, 2, &opts).unwrap_or_else(|v| panic!("with {opts}\n{v}"));
    let (a, b) = (run(), run());
    let key = |s: &Vec<SimStats>| s.iter().map(|s| (s.events, s.appends_acked, s.reads, s.paths)).collect::<Vec<_>>();
    assert_eq!(key(&a), key(&b));
}
