use super::*;

const SEQUENCERS: [NodeId; 3] = [NodeId(1), NodeId(2), NodeId(3)];
const STORAGE: NodeId = NodeId(4);
const ENGINE: NodeId = NodeId(5);

fn roster() -> Vec<(NodeId, Role)> {
    let mut r: Vec<(NodeId, Role)> = SEQUENCERS.iter().map(|&n| (n, Role::Sequencer)).collect();
    r.extend([(STORAGE, Role::Storage), (ENGINE, Role::Engine)]);
    r
}

fn cfg() -> ControllerConfig {
    ControllerConfig { n_logs: 2, n_data: 1, ..ControllerConfig::default() }
}

/// Every node of the roster says it is alive; engine `ENGINE` as `engine_incarnation`.
fn heartbeats(c: &mut Controller, now: Micros, engine_incarnation: u64) {
    for (n, _) in roster() {
        let incarnation = if n == ENGINE { engine_incarnation } else { 1 };
        c.on_message(now, n, Message::Heartbeat { incarnation, term: Term(0), version: 0 });
    }
}

/// The configuration installed by these actions, after checking that it was
/// persisted before anything announced it.
fn installed(actions: &[ControllerAction]) -> Arc<Configuration> {
    let persisted = actions.iter().position(|a| matches!(a, ControllerAction::Persist(_)));
    let persisted = persisted.expect("an install persists its configuration");
    let ControllerAction::Persist(config) = &actions[persisted] else { unreachable!("found above") };
    for (i, a) in actions.iter().enumerate() {
        if matches!(a, ControllerAction::Installed(_) | ControllerAction::Send(_, Message::NewConfig { .. })) {
            assert!(i > persisted, "action {i} announces the configuration before it is persisted: {a:?}");
        }
    }
    config.clone()
}

/// A sequencer's reply to a seal of `log` in `term`: an empty metalog.
fn sealed_empty(term: Term, log: u8) -> Message {
    Message::Sealed { term, log: LogId(log), len: 0, last: None, prev: None, committed_len: 0, amnesiac: false }
}

/// Entry `index` of `log` in term 1, one record of the log's first shard.
fn entry(index: u64, log: u8) -> MetalogEntry {
    MetalogEntry {
        term: Term(1),
        log: LogId(log),
        index,
        start_position: index,
        prev_cut: vec![index],
        cut: vec![index + 1],
        trims: vec![],
        version: 0,
    }
}

fn first_term() -> Arc<Configuration> {
    let mut c = Controller::new(NodeId(0), cfg(), &roster());
    heartbeats(&mut c, 0, 7);
    c.on_tick(0);
    installed(&c.take_actions())
}

#[test]
fn a_restarted_controller_seals_the_stored_term_and_installs_the_next() {
    let stored = first_term();
    assert_eq!(stored.current().term, Term(1));
    let mut c = Controller::recover(NodeId(0), cfg(), &roster(), Some((*stored).clone())).expect("its own configuration");
    // The nodes restarted too. The stored term is about to end: nobody is sent it,
    // and the seal waits until every node was heard from.
    c.on_tick(10);
    assert_eq!(c.take_actions(), vec![]);
    heartbeats(&mut c, 20, 8);
    c.on_tick(30);
    let actions = c.take_actions();
    let mut sealed: Vec<(NodeId, LogId)> = actions
        .iter()
        .map(|a| match a {
            ControllerAction::Send(to, Message::Seal { term: Term(1), log }) => (*to, *log),
            other => panic!("only seals of term 1 are sent first, not {other:?}"),
        })
        .collect();
    sealed.sort();
    let expect: Vec<(NodeId, LogId)> = SEQUENCERS.iter().flat_map(|&n| [(n, LogId(0)), (n, LogId(1))]).collect();
    assert_eq!(sealed, expect);

    // A quorum of each log's sequencers reports its tail; the longest wins.
    for (n, len) in [(SEQUENCERS[0], 3), (SEQUENCERS[1], 2)] {
        for log in [0, 1] {
            let last = Some(entry(len - 1, log));
            c.on_message(
                40,
                n,
                Message::Sealed { term: Term(1), log: LogId(log), len, last, prev: None, committed_len: len, amnesiac: false },
            );
        }
    }
    let config = installed(&c.take_actions());
    assert_eq!(config.current().term, Term(2));
    let tails = config.terms[0].sealed.as_ref().expect("term 1 is sealed");
    assert_eq!(
        tails.iter().map(|t| (t.len, t.last.clone())).collect::<Vec<_>>(),
        vec![(3, Some(entry(2, 0))), (3, Some(entry(2, 1)))]
    );
    assert_eq!(TermConfig { sealed: None, ..config.terms[0].clone() }, stored.terms[0], "term 1 is kept as it was");
    // New shards, made for the engine's new incarnation, under ids never used before.
    let old: Vec<ShardId> = stored.current().logs.iter().flat_map(|l| &l.shards).map(|s| s.shard).collect();
    for s in config.current().logs.iter().flat_map(|l| &l.shards) {
        assert_eq!((s.engine, s.incarnation), (ENGINE, 8));
        assert!(old.iter().all(|o| s.shard > *o), "{:?} reuses an id of {old:?}", s.shard);
    }
    assert_eq!(config.indexers, stored.indexers);

    // Restarted again, from the new configuration: term 3 keeps both sealed terms.
    let mut c = Controller::recover(NodeId(0), cfg(), &roster(), Some((*config).clone())).expect("its own configuration");
    heartbeats(&mut c, 0, 9);
    c.on_tick(0);
    for n in SEQUENCERS {
        for log in [0, 1] {
            c.on_message(10, n, sealed_empty(Term(2), log));
        }
    }
    let next = installed(&c.take_actions());
    assert_eq!(
        next.terms.iter().map(|t| (t.term, t.sealed.is_some())).collect::<Vec<_>>(),
        vec![(Term(1), true), (Term(2), true), (Term(3), false)]
    );
    assert_eq!(next.terms[0], config.terms[0]);
    assert_eq!(next.terms[1].logs, config.terms[1].logs);
}

#[test]
fn a_seal_keeps_an_uncommitted_tail_entry_only_if_its_records_are_durable() {
    // Term 1 ends (the engine restarted); log 0's longest tail ends with an entry
    // no replica knows committed, log 1's with one a replica knows committed.
    let sealing = || {
        let mut c = Controller::new(NodeId(0), cfg(), &roster());
        heartbeats(&mut c, 0, 7);
        c.on_tick(0);
        let config = installed(&c.take_actions());
        heartbeats(&mut c, 10, 8);
        c.on_tick(10);
        c.take_actions();
        for n in &SEQUENCERS[..2] {
            let (last, prev) = (Some(entry(2, 0)), Some(Box::new(entry(1, 0))));
            c.on_message(
                20,
                *n,
                Message::Sealed { term: Term(1), log: LogId(0), len: 3, last, prev, committed_len: 2, amnesiac: false },
            );
            let (last, prev) = (Some(entry(4, 1)), Some(Box::new(entry(3, 1))));
            let committed_len = if *n == SEQUENCERS[0] { 5 } else { 4 };
            c.on_message(
                20,
                *n,
                Message::Sealed { term: Term(1), log: LogId(1), len: 5, last, prev, committed_len, amnesiac: false },
            );
        }
        (c, config.terms[0].logs[0].shards[0].shard)
    };
    let tails = |actions: &[ControllerAction]| {
        let config = installed(actions);
        config.terms[0].sealed.clone().expect("term 1 is sealed").into_iter().map(|t| (t.len, t.last)).collect::<Vec<_>>()
    };

    // The storage node is asked whether the entry's record (local id 2 of the
    // shard, so the prefix up to 3) is durable; nothing is installed meanwhile.
    let (mut c, shard) = sealing();
    assert_eq!(c.take_actions(), vec![ControllerAction::Send(STORAGE, Message::Probe { shard, cut: 3 })]);
    c.on_tick(20 + c.cfg.resend_us);
    let probes = |a: &ControllerAction| matches!(a, ControllerAction::Send(_, Message::Probe { .. }));
    let resent: Vec<ControllerAction> = c.take_actions().into_iter().filter(probes).collect();
    assert_eq!(resent, vec![ControllerAction::Send(STORAGE, Message::Probe { shard, cut: 3 })], "resent");
    // Durable: kept.
    c.on_message(30, STORAGE, Message::Probed { shard, cut: 3, durable: true });
    assert_eq!(tails(&c.take_actions()), vec![(3, Some(entry(2, 0))), (5, Some(entry(4, 1)))]);

    // Never there: dropped, the entry before it ends the term.
    let (mut c, shard) = sealing();
    c.take_actions();
    c.on_message(30, STORAGE, Message::Probed { shard, cut: 4, durable: false });
    assert_eq!(c.take_actions(), vec![], "an answer to another probe");
    c.on_message(30, STORAGE, Message::Probed { shard, cut: 3, durable: false });
    assert_eq!(tails(&c.take_actions()), vec![(2, Some(entry(1, 0))), (5, Some(entry(4, 1)))]);
}

#[test]
fn a_restarted_primary_sequencer_ends_the_term_and_a_backup_does_not() {
    let mut c = Controller::new(NodeId(0), cfg(), &roster());
    heartbeats(&mut c, 0, 7);
    c.on_tick(0);
    let config = installed(&c.take_actions());
    let primary = config.current().logs[0].primary();
    let backup = SEQUENCERS.into_iter().find(|n| config.current().logs.iter().all(|l| l.primary() != *n));
    let seals = |actions: &[ControllerAction]| {
        actions.iter().filter(|a| matches!(a, ControllerAction::Send(_, Message::Seal { .. }))).count()
    };
    // A backup's restart changes nothing (with two logs over three sequencers,
    // one sequencer leads neither).
    if let Some(backup) = backup {
        c.on_message(10, backup, Message::Heartbeat { incarnation: 2, term: Term(1), version: 0 });
        c.on_tick(10);
        assert_eq!(seals(&c.take_actions()), 0);
    }
    c.on_message(20, primary, Message::Heartbeat { incarnation: 2, term: Term(1), version: 0 });
    c.on_tick(20);
    assert!(seals(&c.take_actions()) > 0, "the term of a restarted primary is sealed");
}

#[test]
fn an_added_log_is_a_new_term_and_logs_are_never_removed() {
    let mut c = Controller::new(NodeId(0), cfg(), &roster());
    heartbeats(&mut c, 0, 7);
    c.on_tick(0);
    let first = installed(&c.take_actions());
    assert_eq!(first.n_logs, 2);
    assert!(c.set_n_logs(1).is_err(), "a log is never removed");
    c.set_n_logs(3).expect("a log is added");
    heartbeats(&mut c, 10, 7);
    c.on_tick(10);
    let seals = c.take_actions().into_iter().filter(|a| matches!(a, ControllerAction::Send(_, Message::Seal { .. })));
    assert_eq!(seals.count(), 2 * SEQUENCERS.len(), "term 1's two logs are sealed");
    for n in SEQUENCERS {
        for log in [0, 1] {
            c.on_message(20, n, sealed_empty(Term(1), log));
        }
    }
    let grown = installed(&c.take_actions());
    assert_eq!((grown.current().term, grown.n_logs, grown.current().n_logs()), (Term(2), 3, 3));
    assert_eq!(grown.terms[0].n_logs(), 2, "term 1 keeps its two logs");
    assert_eq!(grown.terms[0].sealed.as_ref().map(|t| t.len()), Some(2));
    assert_eq!((grown.added_at(LogId(2)), grown.added_at(LogId(1))), (Some(Term(2)), None));
    assert_eq!(grown.indexers.len(), 3);

    // A controller told of fewer logs than the stored configuration has keeps them.
    let mut c = Controller::recover(NodeId(0), cfg(), &roster(), Some((*grown).clone())).expect("its own configuration");
    heartbeats(&mut c, 0, 8);
    c.on_tick(0);
    for n in SEQUENCERS {
        for log in [0, 1, 2] {
            c.on_message(10, n, sealed_empty(Term(2), log));
        }
    }
    let next = installed(&c.take_actions());
    assert_eq!((next.current().term, next.n_logs), (Term(3), 3));
}

#[test]
fn a_stored_configuration_of_another_cluster_is_refused() {
    fn check(change: impl FnOnce(&mut ControllerConfig, &mut Vec<(NodeId, Role)>, &mut Configuration), expect: &str) {
        let (mut cfg, mut roster, mut stored) = (cfg(), roster(), (*first_term()).clone());
        change(&mut cfg, &mut roster, &mut stored);
        match Controller::recover(NodeId(0), cfg, &roster, Some(stored)) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(expect), "{m:?} should say {expect:?}"),
            Err(e) => panic!("expected {expect:?}, got {e}"),
            Ok(_) => panic!("expected {expect:?}, the configuration was accepted"),
        }
    }
    check(|_, _, stored| stored.n_logs = 3, "says 3 physical logs, its current term has 2");
    check(|_, roster, _| roster.retain(|(n, _)| *n != SEQUENCERS[2]), "names n3 (Sequencer) in term 1");
    check(|_, roster, _| roster.retain(|(n, _)| *n != ENGINE), "names n5 (Engine) in term 1");
    check(|_, roster, _| roster[3].1 = Role::Engine, "names n4 (Storage) in term 1");
    check(|_, _, stored| stored.controller = NodeId(9), "belongs to controller n9");
    check(|_, _, stored| stored.terms.clear(), "has no term");
    check(|_, _, stored| stored.terms[0].sealed = Some(vec![]), "seals term 1 wrongly");
    check(
        |_, _, stored| {
            let mut skipped = stored.terms[0].clone();
            skipped.term = Term(5);
            stored.terms[0].sealed = Some(vec![SealedTail { len: 0, last: None }; 2]);
            stored.terms.push(skipped);
        },
        "has term 5 at place 1",
    );
    let stored = (*first_term()).clone();
    assert!(Controller::recover(NodeId(0), cfg(), &roster(), Some(stored)).is_ok(), "its own configuration is accepted");
}

/// The configuration a tick installs, if any.
fn tick_installs(c: &mut Controller, now: Micros) -> Option<Arc<Configuration>> {
    c.on_tick(now);
    let actions = c.take_actions();
    // (Resends of the configuration before may come first.)
    let persist = actions.iter().position(|a| matches!(a, ControllerAction::Persist(_)))?;
    Some(installed(&actions[persist..]))
}

#[test]
fn in_partial_mode_function_nodes_join_leave_and_restart_through_versions_until_the_slots_run_out() {
    const INDEX: NodeId = NodeId(9);
    const JOINER: NodeId = NodeId(6);
    let mut roster = roster();
    roster.push((INDEX, Role::Index));
    let cfg = ControllerConfig { tier: Some((1, 1)), slots_per_log: 4, ..cfg() };
    let mut c = Controller::new(NodeId(0), cfg, &roster);
    let beat = |c: &mut Controller, now: Micros, engine: u64, joiner: Option<u64>| {
        heartbeats(c, now, engine);
        c.on_message(now, INDEX, Message::Heartbeat { incarnation: 1, term: Term(0), version: 0 });
        if let Some(incarnation) = joiner {
            c.on_message(now, JOINER, Message::Heartbeat { incarnation, term: Term(0), version: 0 });
        }
    };
    beat(&mut c, 0, 1, None);
    let first = tick_installs(&mut c, 0).expect("the first term");
    assert!(first.partial());
    assert_eq!(first.stamp(), (Term(1), 0));
    // A function node registers and comes up: bound by version 1, in every log.
    assert!(c.add_member(JOINER, Role::Engine));
    beat(&mut c, 10, 1, Some(1));
    let v1 = tick_installs(&mut c, 10).expect("a version");
    assert_eq!(v1.stamp(), (Term(1), 1), "a join is no new term");
    for lc in &v1.current().logs {
        let s = lc.shards.last().expect("bound");
        assert_eq!((s.engine, s.since, s.until), (JOINER, 1, None));
    }
    assert_eq!(v1.current().engines, vec![ENGINE, JOINER]);
    // It restarts: its shard closes and a fresh one is bound, by one version.
    beat(&mut c, 20, 1, Some(2));
    let v2 = tick_installs(&mut c, 20).expect("a version");
    assert_eq!(v2.stamp(), (Term(1), 2));
    let shards = &v2.current().logs[0].shards;
    assert_eq!(
        shards.iter().map(|s| (s.engine, s.since, s.until)).collect::<Vec<_>>(),
        [(ENGINE, 0, None), (JOINER, 1, Some(2)), (JOINER, 2, None)]
    );
    // It falls silent: it leaves.
    let later = 20 + ControllerConfig::default().failure_timeout_us;
    beat(&mut c, later, 1, None);
    let v3 = tick_installs(&mut c, later).expect("a version");
    assert_eq!(v3.stamp(), (Term(1), 3));
    assert_eq!(v3.current().engines, vec![ENGINE]);
    assert_eq!(v3.current().logs[0].shards[2].until, Some(3));
    // Nothing changed: nothing installed.
    beat(&mut c, later + 10, 1, None);
    assert!(tick_installs(&mut c, later + 10).is_none());
    // Back again, it needs a fourth shard per log, which still fits; a fifth does not:
    // the term is sealed, and the next one binds every live node afresh.
    beat(&mut c, later + 20, 1, Some(3));
    assert_eq!(tick_installs(&mut c, later + 20).expect("a version").stamp(), (Term(1), 4));
    beat(&mut c, later + 30, 1, Some(4));
    assert!(tick_installs(&mut c, later + 30).is_none(), "sealing, not a version");
    let ids: Vec<ShardId> = v3.terms.iter().flat_map(|t| &t.logs).flat_map(|l| &l.shards).map(|s| s.shard).collect();
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), ids.len(), "no shard id twice");
}

#[test]
fn the_first_term_waits_for_every_index_node_of_the_tier_that_registers_late() {
    // Processes start in any order: two of four index nodes register after the rest
    // of the cluster is heard from. The tier is laid out once, so the first term waits
    // for them (longer than the startup grace), then lays out two shards of two.
    let index: Vec<NodeId> = (10..14).map(NodeId).collect();
    let mut roster = roster();
    roster.extend(index[..2].iter().map(|&n| (n, Role::Index)));
    let grace = ControllerConfig::default().startup_grace_us;
    let cfg = ControllerConfig { tier: Some((2, 2)), ..cfg() };
    let beat = |c: &mut Controller, now: Micros, nodes: &[NodeId]| {
        heartbeats(c, now, 1);
        for &n in nodes {
            c.on_message(now, n, Message::Heartbeat { incarnation: 1, term: Term(0), version: 0 });
        }
    };
    let mut c = Controller::new(NodeId(0), cfg.clone(), &roster);
    beat(&mut c, 0, &index[..2]);
    assert!(tick_installs(&mut c, 0).is_none(), "every registered node was heard from, but the tier is short");
    beat(&mut c, grace + 1, &index[..2]);
    assert!(tick_installs(&mut c, grace + 1).is_none(), "past the startup grace, the tier still waits");
    for &n in &index[2..] {
        assert!(c.add_member(n, Role::Index));
    }
    beat(&mut c, grace + 2, &index);
    let first = tick_installs(&mut c, grace + 2).expect("the first term, once the tier is whole");
    let tier = first.tier.as_ref().expect("partial mode");
    assert_eq!(tier.shards, vec![vec![index[0], index[2]], vec![index[1], index[3]]]);

    // They never come: after the tier's grace, the first term lays it out over those live.
    let mut c = Controller::new(NodeId(0), cfg, &roster);
    let late = grace * TIER_GRACE_FACTOR;
    beat(&mut c, 0, &index[..2]);
    assert!(tick_installs(&mut c, 0).is_none());
    beat(&mut c, late - 1, &index[..2]);
    assert!(tick_installs(&mut c, late - 1).is_none());
    beat(&mut c, late, &index[..2]);
    let first = tick_installs(&mut c, late).expect("the first term after the tier's grace");
    assert_eq!(first.tier.as_ref().expect("partial mode").shards, vec![vec![index[0]], vec![index[1]]]);
}

#[test]
fn a_spare_index_node_replaces_a_replica_silent_too_long_through_a_version() {
    // Two shards of one replica, and a spare: shard 1's replica falls silent.
    let index: Vec<NodeId> = (10..13).map(NodeId).collect();
    let mut roster = roster();
    roster.extend(index.iter().map(|&n| (n, Role::Index)));
    let cfg = ControllerConfig { tier: Some((2, 1)), ..cfg() };
    let replace = cfg.index_replace_us;
    let mut c = Controller::new(NodeId(0), cfg, &roster);
    let beat = |c: &mut Controller, now: Micros, nodes: &[NodeId]| {
        heartbeats(c, now, 1);
        for &n in nodes {
            c.on_message(now, n, Message::Heartbeat { incarnation: 1, term: Term(0), version: 0 });
        }
    };
    beat(&mut c, 0, &index);
    let first = tick_installs(&mut c, 0).expect("the first term");
    assert_eq!(first.tier.as_ref().unwrap().shards, vec![vec![index[0]], vec![index[1]]], "index[2] is a spare");
    // Silent for less than `index_replace_us`: nothing changes.
    let mut now = 0;
    while now + 500_000 < replace {
        now += 500_000;
        beat(&mut c, now, &[index[0], index[2]]);
        assert!(tick_installs(&mut c, now).is_none(), "at {now}");
    }
    now = replace;
    beat(&mut c, now, &[index[0], index[2]]);
    let v1 = tick_installs(&mut c, now).expect("a version");
    assert_eq!(v1.stamp(), (Term(1), 1), "no new term");
    assert_eq!(v1.tier.as_ref().unwrap().shards, vec![vec![index[0]], vec![index[2]]]);
    // The old replica comes back: it is the spare now, and nothing changes.
    beat(&mut c, now + 10, &index);
    assert!(tick_installs(&mut c, now + 10).is_none());
    // A silent replica with no spare stays.
    let later = now + 10 + replace;
    beat(&mut c, later, &[index[1], index[2]]);
    let v2 = tick_installs(&mut c, later).expect("index[1] replaces index[0]");
    assert_eq!(v2.tier.as_ref().unwrap().shards, vec![vec![index[1]], vec![index[2]]]);
    let much_later = later + 2 * replace;
    beat(&mut c, much_later, &[]);
    assert!(tick_installs(&mut c, much_later).is_none(), "no spare is live");
}

#[test]
fn aggregators_come_and_go_through_versions_without_a_new_term() {
    let index: Vec<NodeId> = (10..12).map(NodeId).collect();
    let aggregators: Vec<NodeId> = (20..22).map(NodeId).collect();
    let mut roster = roster();
    roster.extend(index.iter().map(|&n| (n, Role::Index)));
    roster.extend(aggregators.iter().map(|&n| (n, Role::Aggregator)));
    let cfg = ControllerConfig { tier: Some((2, 1)), ..cfg() };
    let timeout = cfg.failure_timeout_us;
    let mut c = Controller::new(NodeId(0), cfg, &roster);
    let beat = |c: &mut Controller, now: Micros, nodes: &[NodeId]| {
        heartbeats(c, now, 1);
        for &n in index.iter().chain(nodes) {
            c.on_message(now, n, Message::Heartbeat { incarnation: 1, term: Term(0), version: 0 });
        }
    };
    beat(&mut c, 0, &aggregators);
    let first = tick_installs(&mut c, 0).expect("the first term");
    assert_eq!(first.tier.as_ref().unwrap().aggregators, aggregators);
    // One falls silent: a version drops it, in the same term.
    let now = timeout + 1;
    beat(&mut c, now, &aggregators[..1]);
    let v1 = tick_installs(&mut c, now).expect("a version");
    assert_eq!(v1.stamp(), (Term(1), 1));
    assert_eq!(v1.tier.as_ref().unwrap().aggregators, aggregators[..1]);
    assert_eq!(v1.tier.as_ref().unwrap().shards, first.tier.as_ref().unwrap().shards, "the shards stay");
    assert!(tick_installs(&mut c, now + 10).is_none(), "nothing more changes");
    // It comes back: listed again.
    beat(&mut c, now + 20, &aggregators);
    let v2 = tick_installs(&mut c, now + 20).expect("a version");
    assert_eq!(v2.stamp(), (Term(1), 2));
    assert_eq!(v2.tier.as_ref().unwrap().aggregators, aggregators);
}

#[test]
fn in_partial_mode_a_restarted_storage_node_ends_the_term() {
    // A storage node that restarted may have lost records being written that the entry
    // in flight orders; a restarted engine, which would resend them in complete mode,
    // ends the term there, but in partial mode closes its shard by a version.
    for partial in [false, true] {
        let mut roster = roster();
        roster.push((NodeId(9), Role::Index));
        let tier = partial.then_some((1, 1));
        let mut c = Controller::new(NodeId(0), ControllerConfig { tier, ..cfg() }, &roster);
        let beat = |c: &mut Controller, now: Micros, storage: u64| {
            for &(n, _) in &roster {
                let incarnation = if n == STORAGE { storage } else { 1 };
                c.on_message(now, n, Message::Heartbeat { incarnation, term: Term(0), version: 0 });
            }
        };
        beat(&mut c, 0, 1);
        assert_eq!(tick_installs(&mut c, 0).expect("the first term").partial(), partial);
        beat(&mut c, 10, 2);
        c.on_tick(10);
        let seals = c.take_actions().iter().filter(|a| matches!(a, ControllerAction::Send(_, Message::Seal { .. }))).count();
        assert_eq!(seals > 0, partial, "partial: {partial}");
    }
}

/// A sequencer's report of a tail of `len` entries of `log`, all of them committed.
fn sealed_tail(log: u8, len: u64, amnesiac: bool) -> Message {
    let last = Some(entry(len - 1, log));
    Message::Sealed { term: Term(1), log: LogId(log), len, last, prev: None, committed_len: len, amnesiac }
}

#[test]
fn a_seal_counts_no_replica_that_lost_unsynced_entries_unless_a_majority_did() {
    // Term 1 ends (the engine restarted). Sequencer 1 lost power holding unsynced
    // entries it had acknowledged: its short tail cannot stand for a quorum's.
    let sealing = || {
        let mut c = Controller::new(NodeId(0), cfg(), &roster());
        heartbeats(&mut c, 0, 7);
        c.on_tick(0);
        c.take_actions();
        heartbeats(&mut c, 10, 8);
        c.on_tick(10);
        c.take_actions();
        c
    };
    let tails = |actions: &[ControllerAction]| {
        let config = installed(actions);
        config.terms[0].sealed.clone().expect("term 1 is sealed").into_iter().map(|t| t.len).collect::<Vec<_>>()
    };
    let mut c = sealing();
    for log in [0, 1] {
        c.on_message(20, SEQUENCERS[0], sealed_tail(log, 2, true));
        c.on_message(20, SEQUENCERS[1], sealed_tail(log, 1, false));
    }
    assert!(!c.take_actions().iter().any(|a| matches!(a, ControllerAction::Persist(_))), "sealed with an amnesiac replica");
    for log in [0, 1] {
        c.on_message(30, SEQUENCERS[2], sealed_tail(log, 5, false));
    }
    assert_eq!(tails(&c.take_actions()), vec![5, 5], "the replicas that lost nothing decide");

    // Two of three lost power: no quorum of sound replicas is left, and the seal waits
    // for every replica, taking the longest tail any of them kept.
    let mut c = sealing();
    for log in [0, 1] {
        c.on_message(20, SEQUENCERS[0], sealed_tail(log, 2, true));
        c.on_message(20, SEQUENCERS[1], sealed_tail(log, 3, true));
    }
    assert!(!c.take_actions().iter().any(|a| matches!(a, ControllerAction::Persist(_))), "sealed without every replica");
    for log in [0, 1] {
        c.on_message(30, SEQUENCERS[2], sealed_tail(log, 1, false));
    }
    assert_eq!(tails(&c.take_actions()), vec![3, 3]);
}
