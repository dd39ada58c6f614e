use super::*;
use crate::config::{SealedTail, ShardConfig};
use crate::types::ShardId;

const ME: NodeId = NodeId(1);
const STORAGE: NodeId = NodeId(4);
const ENGINE: NodeId = NodeId(5);

fn term(t: u16, sealed: Option<Vec<SealedTail>>) -> TermConfig {
    let shards = vec![ShardConfig {
        shard: ShardId(u32::from(t)),
        engine: ENGINE,
        incarnation: 1,
        replicas: vec![STORAGE],
        since: 0,
        until: None,
    }];
    let logs = vec![LogTermConfig { log: LogId(0), sequencers: vec![ME], shards }];
    TermConfig { term: Term(t), logs, engines: vec![ENGINE], storage: vec![STORAGE], sealed, version: 0 }
}

fn config(terms: Vec<TermConfig>) -> Message {
    Message::NewConfig {
        config: Arc::new(Configuration { n_logs: 1, controller: NodeId(0), terms, indexers: vec![vec![]], tier: None }),
    }
}

fn persisted(actions: &[SequencerAction]) -> Vec<MetalogWrite> {
    actions.iter().filter_map(|a| if let SequencerAction::Persist(w) = a { Some(w.clone()) } else { None }).collect()
}

/// The entries a subscriber gets for a fetch of `term` from index 0.
fn fetch(s: &mut Sequencer, term: u16) -> Vec<MetalogEntry> {
    s.on_message(0, ENGINE, Message::MetalogFetch { term: Term(term), log: LogId(0), from: 0 });
    s.take_actions()
        .into_iter()
        .flat_map(|a| match a {
            SequencerAction::Send(ENGINE, Message::MetalogEntries { entries, .. }) => entries,
            _ => vec![],
        })
        .collect()
}

#[test]
fn a_restarted_sequencer_serves_the_entries_of_sealed_terms() {
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 1, SequencerConfig::default(), vec![]);
    s.on_message(0, NodeId(0), config(vec![term(1, None)]));
    let mut writes = persisted(&s.take_actions());
    for stored in [2, 5] {
        s.on_message(0, STORAGE, durable(stored));
        writes.extend(persisted(&s.take_actions()));
    }
    let committed = fetch(&mut s, 1);
    assert_eq!(committed.iter().map(|e| e.cut.clone()).collect::<Vec<_>>(), vec![vec![2], vec![5]]);

    // The whole cluster restarts. Before a configuration says how term 1 ended, the
    // replica promises nothing about its entries and serves none.
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 2, SequencerConfig::default(), writes.clone());
    assert_eq!(fetch(&mut s, 1), vec![]);
    s.on_message(0, NodeId(0), Message::Seal { term: Term(1), log: LogId(0) });
    let actions = s.take_actions();
    let last = Some(committed[1].clone());
    assert!(actions.contains(&SequencerAction::Send(
        NodeId(0),
        Message::Sealed {
            term: Term(1),
            log: LogId(0),
            len: 2,
            last: last.clone(),
            prev: Some(Box::new(committed[0].clone())),
            committed_len: 0,
            amnesiac: false
        }
    )));
    writes.extend(persisted(&actions));
    let sealed = vec![SealedTail { len: 2, last }];
    s.on_message(0, NodeId(0), config(vec![term(1, Some(sealed.clone())), term(2, None)]));
    writes.extend(persisted(&s.take_actions()));
    assert_eq!(fetch(&mut s, 1), committed, "engines replaying from term 1 fetch its entries here");

    // And again: term 1's entries outlive a second restart.
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 3, SequencerConfig::default(), writes);
    s.on_message(
        0,
        NodeId(0),
        config(vec![term(1, Some(sealed)), term(2, Some(vec![SealedTail { len: 0, last: None }])), term(3, None)]),
    );
    s.take_actions();
    assert_eq!(fetch(&mut s, 1), committed);
}

/// A term of three sequencers led by `ME`.
fn replicated_term(t: u16) -> TermConfig {
    let mut c = term(t, None);
    c.logs[0].sequencers = vec![ME, NodeId(2), NodeId(3)];
    c
}

#[test]
fn a_primary_sends_an_entry_to_its_backups_before_persisting_it() {
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 1, SequencerConfig::default(), vec![]);
    s.on_message(0, NodeId(0), config(vec![replicated_term(1)]));
    let lead = MetalogWrite::Lead { term: Term(1), log: LogId(0) };
    assert_eq!(persisted(&s.take_actions()), vec![lead], "the lead mark comes before any entry");
    s.on_message(0, STORAGE, durable(3));
    let actions = s.take_actions();
    let replicated = |a: &SequencerAction| matches!(a, SequencerAction::Send(_, Message::ReplicateEntry { .. }));
    let persist = actions.iter().position(|a| matches!(a, SequencerAction::Persist(MetalogWrite::Entry(_))));
    let last_send = actions.iter().rposition(replicated);
    assert_eq!(actions.iter().filter(|a| replicated(a)).count(), 2, "{actions:?}");
    assert!(last_send < persist, "the fsyncs overlap: {actions:?}");
    // Not committed on the primary's copy alone.
    assert!(!actions.iter().any(|a| matches!(a, SequencerAction::Committed(_))));
    s.on_message(0, NodeId(2), Message::EntryAck { term: Term(1), log: LogId(0), len: 1 });
    assert!(s.take_actions().iter().any(|a| matches!(a, SequencerAction::Committed(_))));
}

fn progress(held: Vec<(u32, LocalId)>, stored: Vec<(u32, LocalId)>) -> Message {
    Message::Progress { term: Term(1), log: LogId(0), held, stored }
}

/// The storage node holds records `..n` of shard 0, durably.
fn durable(n: LocalId) -> Message {
    progress(vec![(0, n)], vec![(0, n)])
}

#[test]
fn a_primary_orders_records_being_written_and_commits_them_once_durable() {
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 1, SequencerConfig::default(), vec![]);
    s.on_message(0, NodeId(0), config(vec![replicated_term(1)]));
    s.take_actions();
    // Held, not yet durable: the entry goes out, its persist overlapping the writes.
    s.on_message(0, STORAGE, progress(vec![(0, 3)], vec![(0, 0)]));
    let actions = s.take_actions();
    assert!(actions.iter().any(|a| matches!(a, SequencerAction::Persist(MetalogWrite::Entry(e)) if e.cut == vec![3])));
    // A quorum holds the entry, but its records are not durable: not committed.
    s.on_message(0, NodeId(2), Message::EntryAck { term: Term(1), log: LogId(0), len: 1 });
    s.on_message(0, STORAGE, progress(vec![(0, 3)], vec![(0, 2)]));
    assert!(!s.take_actions().iter().any(|a| matches!(a, SequencerAction::Committed(_))));
    s.on_message(0, STORAGE, progress(vec![(0, 3)], vec![(0, 3)]));
    assert!(s.take_actions().iter().any(|a| matches!(a, SequencerAction::Committed(e) if e.cut == vec![3])));
}

/// Committed entries of this test's primary, in order.
fn committed(actions: &[SequencerAction]) -> Vec<MetalogEntry> {
    actions.iter().filter_map(|a| if let SequencerAction::Committed(e) = a { Some(e.clone()) } else { None }).collect()
}

#[test]
fn a_version_is_announced_at_once_and_orders_a_closed_shard_no_more() {
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 1, SequencerConfig::default(), vec![]);
    s.on_message(0, NodeId(0), config(vec![term(1, None)]));
    s.on_message(0, STORAGE, durable(2));
    assert_eq!(committed(&s.take_actions()).iter().map(|e| (e.cut.clone(), e.version)).collect::<Vec<_>>(), [(vec![2], 0)]);
    // Version 1 closes shard 0 and binds shard 9 to another engine.
    let mut v1 = term(1, None);
    v1.version = 1;
    v1.logs[0].shards[0].until = Some(1);
    let new =
        ShardConfig { shard: ShardId(9), engine: NodeId(6), incarnation: 1, replicas: vec![STORAGE], since: 1, until: None };
    v1.logs[0].shards.push(new);
    v1.engines = vec![NodeId(6)];
    // Shard 0 holds more (ordered at once, not yet durable).
    s.on_message(0, STORAGE, progress(vec![(0, 4)], vec![]));
    s.take_actions();
    s.on_message(0, NodeId(0), config(vec![v1]));
    s.on_message(0, STORAGE, progress(vec![(0, 5), (1, 3)], vec![(0, 5), (1, 3)]));
    let entries = committed(&s.take_actions());
    let cuts: Vec<(Vec<LocalId>, Vec<LocalId>, u32)> =
        entries.iter().map(|e| (e.prev_cut.clone(), e.cut.clone(), e.version)).collect();
    // The closed shard stays at its cut from the announcing entry on (its fifth
    // record is never ordered); the new one joins the cut at zero.
    assert_eq!(cuts, [(vec![2], vec![4], 0), (vec![4, 0], vec![4, 3], 1)]);
    // An idle log announces a version with an empty entry.
    let mut v2 = term(1, None);
    v2.version = 2;
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 1, SequencerConfig::default(), vec![]);
    s.on_message(0, NodeId(0), config(vec![term(1, None)]));
    s.on_message(0, NodeId(0), config(vec![v2]));
    s.on_message(0, STORAGE, durable(0));
    let entries = committed(&s.take_actions());
    assert_eq!(entries.iter().map(|e| (e.record_count(), e.version)).collect::<Vec<_>>(), [(0, 2)]);
}

#[test]
fn a_sealed_primary_commits_nothing_more() {
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 1, SequencerConfig::default(), vec![]);
    s.on_message(0, NodeId(0), config(vec![replicated_term(1)]));
    s.on_message(0, STORAGE, progress(vec![(0, 3)], vec![]));
    s.on_message(0, NodeId(2), Message::EntryAck { term: Term(1), log: LogId(0), len: 1 });
    s.on_message(0, NodeId(0), Message::Seal { term: Term(1), log: LogId(0) });
    s.take_actions();
    // The seal may drop the entry (its records were not durable when it looked).
    s.on_message(0, STORAGE, progress(vec![(0, 3)], vec![(0, 3)]));
    assert!(!s.take_actions().iter().any(|a| matches!(a, SequencerAction::Committed(_))));
}

#[test]
fn a_backup_acknowledges_an_entry_once_it_saw_its_records_durable_and_not_after_a_seal() {
    let mut b = Sequencer::recover(NodeId(3), vec![NodeId(0)], 1, SequencerConfig::default(), vec![]);
    b.on_message(0, NodeId(0), config(vec![replicated_term(1)]));
    b.take_actions();
    b.on_message(100, ME, replicate(0, 0, false));
    assert_eq!(backup_did(b.take_actions()), ["P0", "A0"], "persisted, but its record is not durable yet");
    b.on_message(200, STORAGE, progress(vec![], vec![(0, 1)]));
    assert_eq!(backup_did(b.take_actions()), ["A1"], "acknowledged once durable");
    b.on_message(200, STORAGE, progress(vec![], vec![(0, 1)]));
    assert_eq!(backup_did(b.take_actions()), Vec::<String>::new(), "once");
    b.on_message(300, ME, replicate(1, 1, false));
    assert_eq!(backup_did(b.take_actions()), ["P1", "A1"]);
    b.on_message(400, NodeId(0), Message::Seal { term: Term(1), log: LogId(0) });
    assert_eq!(backup_did(b.take_actions()), ["S", "R2"]);
    b.on_message(500, STORAGE, progress(vec![], vec![(0, 2)]));
    assert_eq!(backup_did(b.take_actions()), Vec::<String>::new(), "sealed: the seal may drop entry 1");
}

fn replicate(i: u64, committed_len: u64, spare: bool) -> Message {
    Message::ReplicateEntry { entry: MetalogEntry::nth_of_one_shard(i), committed_len, spare }
}

/// What a backup did, in order: `P<index>` persisted an entry, `S` a seal, `A<len>`
/// acknowledged to the primary, `R<len>` reported its tail to a sealer.
fn backup_did(actions: Vec<SequencerAction>) -> Vec<String> {
    actions
        .into_iter()
        .filter_map(|a| match a {
            SequencerAction::Persist(MetalogWrite::Entry(e)) => Some(format!("P{}", e.index)),
            SequencerAction::Persist(MetalogWrite::Seal { .. }) => Some("S".into()),
            SequencerAction::Send(ME, Message::EntryAck { len, .. }) => Some(format!("A{len}")),
            SequencerAction::Send(_, Message::Sealed { len, .. }) => Some(format!("R{len}")),
            _ => None,
        })
        .collect()
}

#[test]
fn a_spare_backup_persists_its_spares_together_and_acknowledges_them_only_then() {
    // Few entries kept: spares stay in memory anyway until they are persisted.
    let cfg = SequencerConfig { entries_kept: 1, ..SequencerConfig::default() };
    let delay = cfg.spare_persist_us;
    let mut b = Sequencer::recover(NodeId(3), vec![NodeId(0)], 1, cfg, vec![]);
    b.on_message(0, NodeId(0), config(vec![replicated_term(1)]));
    b.on_message(0, STORAGE, progress(vec![], vec![(0, 100)]));
    b.take_actions();
    // Spares: held, and not acknowledged, until the delay after the first.
    b.on_message(100, ME, replicate(0, 0, true));
    b.on_message(200, ME, replicate(1, 1, true));
    b.on_message(300, ME, replicate(2, 2, true));
    assert_eq!(backup_did(b.take_actions()), Vec::<String>::new());
    assert_eq!(b.on_tick(400).due(), 100 + delay, "the spares wake the backup");
    assert_eq!(backup_did(b.take_actions()), Vec::<String>::new());
    b.on_tick(100 + delay);
    assert_eq!(backup_did(b.take_actions()), ["P0", "P1", "P2", "A3"], "persisted in order, then acknowledged");
    // An entry that is not a spare takes the spares before it along, at once.
    b.on_message(10_000, ME, replicate(3, 3, true));
    b.on_message(10_100, ME, replicate(4, 3, false));
    assert_eq!(backup_did(b.take_actions()), ["P3", "P4", "A5"]);
    b.on_message(10_200, ME, replicate(5, 5, false));
    assert_eq!(backup_did(b.take_actions()), ["P5", "A6"], "with no spare held, as before");
    // A seal: the tail reported is persisted first.
    b.on_message(10_300, ME, replicate(6, 6, true));
    b.on_message(10_400, NodeId(0), Message::Seal { term: Term(1), log: LogId(0) });
    assert_eq!(backup_did(b.take_actions()), ["P6", "A7", "S", "R7"]);
}

#[test]
fn the_backups_that_acknowledged_first_persist_the_next_entry_at_once() {
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 1, SequencerConfig::default(), vec![]);
    s.on_message(0, NodeId(0), config(vec![replicated_term(1)]));
    s.take_actions();
    let spares = |actions: Vec<SequencerAction>| -> Vec<(NodeId, bool)> {
        actions
            .into_iter()
            .filter_map(|a| match a {
                SequencerAction::Send(to, Message::ReplicateEntry { spare, .. }) => Some((to, spare)),
                _ => None,
            })
            .collect()
    };
    // A quorum of two: the primary and one backup, the first in the configuration.
    s.on_message(0, STORAGE, durable(1));
    assert_eq!(spares(s.take_actions()), [(NodeId(2), false), (NodeId(3), true)]);
    // The spare acknowledged first (the other lags, or is gone): it makes the quorum
    // now, and persists the next entry at once.
    s.on_message(1, NodeId(3), Message::EntryAck { term: Term(1), log: LogId(0), len: 1 });
    assert!(s.take_actions().iter().any(|a| matches!(a, SequencerAction::Committed(_))));
    s.on_message(2, STORAGE, durable(2));
    assert_eq!(spares(s.take_actions()), [(NodeId(2), true), (NodeId(3), false)]);
    // A resend goes to every backup that has not acknowledged, as no spare.
    s.on_tick(2 + SequencerConfig::default().entry_retry_us);
    assert_eq!(spares(s.take_actions()), [(NodeId(2), false), (NodeId(3), false)]);
}

#[test]
fn an_idle_primary_ticks_only_for_its_heartbeat_and_pushes_its_tail_with_it() {
    let cfg = SequencerConfig::default();
    let (hb, tail) = (cfg.heartbeat_interval_us, cfg.tail_interval_us);
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 1, cfg, vec![]);
    s.on_message(0, NodeId(0), config(vec![term(1, None)]));
    s.take_actions();
    let tails = |actions: Vec<SequencerAction>| {
        actions.iter().filter(|a| matches!(a, SequencerAction::Send(_, Message::MetalogTail { .. }))).count()
    };
    // An entry committed at 0: its tail goes again `tail` later, in case the push
    // of the entry was lost.
    s.on_message(0, STORAGE, durable(2));
    s.take_actions();
    assert_eq!(s.on_tick(1).due(), tail, "a heartbeat at 1, and the tail due at {tail}");
    s.take_actions();
    assert_eq!(s.on_tick(tail).due(), 1 + hb, "after the tail push, only the heartbeat is due");
    assert_eq!(tails(s.take_actions()), 2, "to the engine and the storage node");
    // With no news, the tail rides along with the heartbeat, and nothing else wakes it.
    assert_eq!(s.on_tick(1 + hb).due(), 1 + 2 * hb);
    assert_eq!(tails(s.take_actions()), 2);
    assert_eq!(s.on_tick(1 + hb + tail).due(), 1 + 2 * hb, "an early tick changes nothing");
    assert_eq!(tails(s.take_actions()), 0);
}

#[test]
fn a_primary_of_quorum_one_issues_one_entry_for_a_batch_of_progress_reports() {
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 1, SequencerConfig::default(), vec![]);
    s.on_message(0, NodeId(0), config(vec![term(1, None)]));
    s.take_actions();
    let cuts = |actions: Vec<SequencerAction>| -> Vec<Vec<LocalId>> {
        persisted(&actions).into_iter().filter_map(|w| if let MetalogWrite::Entry(e) = w { Some(e.cut) } else { None }).collect()
    };
    // One input at a time: an entry per report.
    s.on_message(0, STORAGE, durable(1));
    s.on_message(0, STORAGE, durable(2));
    assert_eq!(cuts(s.take_actions()), vec![vec![1], vec![2]]);
    // A batch: one entry for all of it, issued at its end.
    s.begin_batch();
    for n in 3..=9 {
        s.on_message(0, STORAGE, durable(n));
    }
    s.on_tick(1);
    assert_eq!(cuts(s.take_actions()), Vec::<Vec<LocalId>>::new(), "nothing before the batch ends");
    s.end_batch(2);
    assert_eq!(cuts(s.take_actions()), vec![vec![9]]);
    s.end_batch(3);
    assert_eq!(cuts(s.take_actions()), Vec::<Vec<LocalId>>::new(), "a batch ends once");
}

#[test]
fn committed_entries_past_the_newest_kept_are_sent_from_the_store() {
    let cfg = SequencerConfig { entries_kept: 2, ..SequencerConfig::default() };
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 1, cfg, vec![]);
    s.on_message(0, NodeId(0), config(vec![term(1, None)]));
    for n in 1..=5 {
        s.on_message(0, STORAGE, durable(n));
    }
    s.take_actions();
    let fetch = |s: &mut Sequencer, from| {
        s.on_message(0, ENGINE, Message::MetalogFetch { term: Term(1), log: LogId(0), from });
        s.take_actions()
    };
    // Entries 3 and 4 are in memory; 0..3 come from the store.
    assert!(matches!(&fetch(&mut s, 3)[..], [SequencerAction::Send(ENGINE, Message::MetalogEntries { entries, .. })]
        if entries.iter().map(|e| e.index).collect::<Vec<_>>() == vec![3, 4]));
    let stored = SequencerAction::SendStored { to: ENGINE, term: Term(1), log: LogId(0), from: 1, end: 3, gap: None };
    assert_eq!(fetch(&mut s, 1), vec![stored]);
}

#[test]
fn a_restarted_primary_never_leads_its_term_again() {
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 1, SequencerConfig::default(), vec![]);
    s.on_message(0, NodeId(0), config(vec![replicated_term(1)]));
    let writes = persisted(&s.take_actions());
    s.on_message(0, STORAGE, durable(3));
    // It crashes while persisting its first entry: the backups have it, its own
    // store has only the lead mark.
    assert!(s.take_actions().iter().any(|a| matches!(a, SequencerAction::Send(_, Message::ReplicateEntry { .. }))));

    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 2, SequencerConfig::default(), writes.clone());
    s.on_message(0, NodeId(0), config(vec![replicated_term(1)]));
    s.on_message(0, STORAGE, durable(5));
    let actions = s.take_actions();
    assert!(
        !actions.iter().any(|a| matches!(a, SequencerAction::Send(_, Message::ReplicateEntry { .. }))),
        "a second entry 0 would contradict the backups': {actions:?}"
    );
    // It still answers a seal, so the controller can end the term.
    s.on_message(0, NodeId(0), Message::Seal { term: Term(1), log: LogId(0) });
    assert!(s.take_actions().iter().any(|a| matches!(a, SequencerAction::Send(_, Message::Sealed { len: 0, .. }))));

    // A replica that never led the term (it restarted before its lead mark was
    // durable, so it sent nothing) leads it.
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 3, SequencerConfig::default(), vec![]);
    s.on_message(0, NodeId(0), config(vec![replicated_term(1)]));
    s.on_message(0, STORAGE, durable(5));
    assert!(s.take_actions().iter().any(|a| matches!(a, SequencerAction::Send(_, Message::ReplicateEntry { .. }))));
}

/// Whether the replica's report of its tail of (`term`, log 0) says it is amnesiac.
fn sealed_amnesiac(s: &mut Sequencer, term: u16) -> bool {
    s.on_message(0, NodeId(0), Message::Seal { term: Term(term), log: LogId(0) });
    let reports: Vec<bool> = s
        .take_actions()
        .into_iter()
        .filter_map(|a| match a {
            SequencerAction::Send(_, Message::Sealed { amnesiac, .. }) => Some(amnesiac),
            _ => None,
        })
        .collect();
    assert_eq!(reports.len(), 1);
    reports[0]
}

#[test]
fn a_replica_that_lost_unsynced_writes_reports_the_terms_it_held_amnesiac_and_persists_their_bound() {
    // It lost power: until a configuration says which terms exist, any tail may lack
    // an entry it acknowledged, even of a metalog it holds nothing of.
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 2, SequencerConfig::default(), vec![]);
    s.lost_unsynced_writes();
    assert!(sealed_amnesiac(&mut s, 9));
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 2, SequencerConfig::default(), vec![]);
    s.lost_unsynced_writes();
    s.on_message(0, NodeId(0), config(vec![replicated_term(1), replicated_term(2)]));
    let writes = persisted(&s.take_actions());
    assert!(writes.contains(&MetalogWrite::Amnesiac { through: Term(2) }), "{writes:?}");
    assert!(sealed_amnesiac(&mut s, 2));
    // A later term began after the loss.
    assert!(!sealed_amnesiac(&mut s, 3));

    // Restarted (a crash of the process: nothing more was lost), it remembers.
    let mut s = Sequencer::recover(ME, vec![NodeId(0)], 3, SequencerConfig::default(), writes);
    assert!(s.amnesiac(Term(2)) && !s.amnesiac(Term(3)));
    assert!(sealed_amnesiac(&mut s, 1));
}
