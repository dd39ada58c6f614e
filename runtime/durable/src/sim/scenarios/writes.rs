//! Scenarios of writes and their versions: what records group them with, what garbage
//! collection deletes and trims, what a switch's migration finds, and what a crash of
//! an execution or of the machine leaves.

use bytes::Bytes;
use tally_log_core::Context;

use crate::abort::Abort;
use crate::abort::CrashAfter;
use crate::config::Protocol;
use crate::error::Error;
use crate::instance::{Instance, Of, Started};
use crate::invoke::InvokeRequest;
use crate::record::kind;
use crate::record::{self, Outcome, Step};
use crate::recovery::Recovery;
use crate::tags::shadow;

use super::{begun_switch, config, id, keyed, of_put, put_instance, started_by_hand, text, World, BOOK};

/// The key of a write record (of a group's first write: a deferred Init's group
/// begins with the Init).
fn write_key(step: &Step) -> String {
    match step {
        Step::Write(kind::Write { key, .. }) | Step::Put(kind::Put { key, .. }) => text(key),
        Step::Group(kind::Group { steps }) => write_key(steps.iter().find(|s| s.is_taken_write()).expect("a group of writes")),
        other => panic!("not a write: {other:?}"),
    }
}

/// Defect 6: a switch to read-optimized whose migration ran more than once (a retried
/// completion, or two nodes completing it) appended a migration record of a key each
/// time. A transitional write logged between two of them was then followed by two
/// migration records, and readers, who let a migration record defer only to a write
/// just before it, took the write-optimized value again: the transitional write was
/// lost. `migrate` must claim each key's record with a conditional append at offset 0
/// of the key's migration tag, so that every run after the first writes nothing.
///
/// The transitional write dies between its write-log record and its single-version
/// put, so the later runs still find the write-optimized entry (a finished transitional
/// write leaves an entry they skip). Two runs follow it, since a single migration
/// record right after the write is voided by the readers' rule.
#[test]
fn a_migration_run_more_than_once_keeps_a_transitional_write_visible() {
    let mut config = config();
    config.tables.insert("sw".into(), Protocol::WriteOptimized);
    let mut w = World::new(config);
    let d = w.start(0);
    w.put(&d, "sw", "k", "before");
    // Node 1 begins the switch and dies at once, before its completion task ever ran.
    let d1 = w.start(1);
    let begun = w.run(d1.tables().switch(BOOK, "sw", Protocol::ReadOptimized)).expect("the switch begins");
    w.crash(1);
    drop(d1);
    let switch = begun_switch(&begun, "sw", Protocol::ReadOptimized);
    let mut ctx = Context::new();
    w.run(d.migrate(&mut ctx, &switch)).expect("the first migration");
    // A transitional instance writes k and dies right after its write-log record (its
    // effects: Init, the version, the record), before its single-version put: the
    // migration still finds the write-optimized entry.
    let transitional = keyed("put", "transitional", "sw k during");
    let crashing = InvokeRequest { crash_after: Some(3), ..transitional.clone() };
    assert_eq!(w.invoke(&d, crashing), Err(Error::InjectedCrash));
    w.run(d.migrate(&mut ctx, &switch)).expect("a second migration");
    w.run(d.migrate(&mut ctx, &switch)).expect("a third migration");
    w.run(d.complete(&mut ctx, &switch)).expect("the switch completes");
    let status = w.run(d.tables().status(BOOK, "sw")).expect("a status").expect("a table");
    assert_eq!((status.protocol, status.switching), (Protocol::ReadOptimized, None));
    assert_eq!(w.invoke(&d, transitional).as_deref(), Ok("ok"), "the transitional write finishes");
    assert_eq!(w.get(&d, "sw", "k").as_deref(), Some("during"), "a read-optimized reader after End");
    // Collection keeps the write that is visible and drops the migration before it.
    w.recover(&d, &mut Recovery::default(), 1);
    assert_eq!(w.get(&d, "sw", "k").as_deref(), Some("during"), "a reader after garbage collection");
    let object = d.core.tags.object("sw", b"k");
    match &w.stream(&d, object)[..] {
        [Step::Write(kind::Write { migrated_from: None, .. })] => {}
        other => panic!("the write log of k after collection: {other:?}"),
    }
}

/// Defect 9: garbage collection trimmed an object's write log up to the record visible
/// at the horizon, whatever lay before it, so a record of another object that shares
/// the tag (two objects whose derived tags collide) went too, and that object lost its
/// value. `collect_table` must stop at the first record of another object.
#[test]
fn garbage_collection_never_trims_another_objects_record_under_a_shared_tag() {
    let mut w = World::new(config());
    let d = w.start(0);
    w.put(&d, "ro", "a", "a1");
    // A write of object b under a's tag, as if their tags collided.
    let a_tag = d.core.tags.object("ro", b"a");
    let foreign = Step::Write(kind::Write { table: "ro".into(), key: Bytes::from_static(b"b"), version: 7, migrated_from: None });
    w.run(d.core.log.append(&mut Context::new(), shadow(BOOK), &[a_tag], record::encode(&foreign))).expect("appended");
    w.put(&d, "ro", "a", "a2");
    w.put(&d, "ro", "a", "a3");
    w.recover(&d, &mut Recovery::default(), 1);
    let left = w.stream(&d, a_tag);
    let keys: Vec<String> = left.iter().map(write_key).collect();
    assert_eq!(keys, ["b", "a", "a"], "a's write log after collection: a1 trimmed, b's record and what follows kept");
    assert_eq!(left[0], foreign);
    assert_eq!(w.get(&d, "ro", "a").as_deref(), Some("a3"));
}

/// Read-optimized writes are taken without a record each: the next record of the step
/// log holds them, with the step that logs them if it may end a group (the result
/// here), so a transfer's two writes and its result cost one append. Each write is
/// visible from that record on, and garbage collection keeps and drops the versions a
/// group names as it does those of single records.
#[test]
fn read_optimized_writes_and_the_result_are_one_record() {
    let (mut w, d, mut inst, mut ctx) = started_by_hand("grouped");
    for (key, value) in [("a", "1"), ("b", "2"), ("a", "3")] {
        let value = Bytes::copy_from_slice(value.as_bytes());
        w.run(inst.put(&mut ctx, "ro", key.as_bytes(), Some(value))).expect("taken");
    }
    let done = w.run(inst.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"ok")))).expect("finished");
    assert_eq!(done, Outcome::Ok(Bytes::from_static(b"ok")));
    let steps = w.stream(&d, d.core.tags.step(&id("put", "grouped")));
    assert_eq!(steps.len(), 2, "Init, then one record: {steps:?}");
    match &steps[1] {
        Step::Group(kind::Group { steps }) => {
            let keys: Vec<String> = steps[..3].iter().map(write_key).collect();
            assert_eq!(keys, ["a", "b", "a"]);
            assert!(matches!(steps[3], Step::Result(kind::Result { .. })));
        }
        other => panic!("the writes and the result are {other:?}, not one group"),
    }
    assert_eq!(w.get(&d, "ro", "a").as_deref(), Some("3"), "a's last write in the group");
    assert_eq!(w.get(&d, "ro", "b").as_deref(), Some("2"));
    w.put(&d, "ro", "a", "4");
    w.recover(&d, &mut Recovery::default(), 1);
    assert_eq!(w.get(&d, "ro", "a").as_deref(), Some("4"));
    assert_eq!(w.get(&d, "ro", "b").as_deref(), Some("2"), "b's group record stays in b's write log");
}

/// A write's version is named by the invocation and the step. An execution that crashed
/// after storing the version of a small write (a marker: its record carries the value),
/// before the record, leaves that name taken; a re-execution whose write at that step is
/// large (its value goes to the store, and readers take it from there) must still store
/// its value, since the first version under a name stays. Markers are named apart from
/// values. Before, the re-execution's record named the crashed one's small value, and
/// every reader got that.
#[test]
fn a_large_write_never_finds_its_name_taken_by_a_crashed_execution_s_marker() {
    let large = "L".repeat(record::PUT_INLINE_MAX + 1);
    for effects in 1u64.. {
        let mut w = World::new(config());
        let d = w.start(0);
        let mut ctx = Context::new();
        let mut first = Instance::new(d.core.clone(), Of { crash: Some(CrashAfter::new(effects)), ..of_put(&w, "renamed") });
        let ran = w.run(async {
            first.init(&mut ctx).await?;
            first.put(&mut ctx, "ro", b"k", Some(Bytes::from_static(b"small"))).await?;
            first.finish(&mut ctx, Outcome::Ok(Bytes::new())).await
        });
        match ran {
            Err(Abort::Crash) => {}
            other => panic!("no crash left a marker without its record (at effect {effects}: {other:?})"),
        }
        let step_log = d.core.tags.step(&id("put", "renamed"));
        let markers = [true, false].map(|marker| crate::instance::version_of(&id("put", "renamed"), 1, marker));
        if w.stream(&d, step_log).len() != 1 || !w.stored_versions("ro", "k", &markers).contains(&true) {
            continue;
        }
        let mut again = put_instance(&w, &d, "renamed");
        let ran = w.run(async {
            assert!(matches!(again.init(&mut ctx).await?, Started::Running { .. }));
            again.put(&mut ctx, "ro", b"k", Some(Bytes::from(large.clone()))).await?;
            again.finish(&mut ctx, Outcome::Ok(Bytes::new())).await
        });
        assert!(ran.is_ok(), "the re-execution: {ran:?}");
        assert_eq!(w.get(&d, "ro", "k").as_deref(), Some(large.as_str()), "the re-execution's value, not the crashed one's");
        return;
    }
}

/// A read-optimized write of a small value stores only a marker (its record carries the
/// value), without a sync of its own. The marker is how a switch to write-optimized
/// finds the object to migrate (and garbage collection its write log): a machine crash
/// that lost an object's only marker after its record was logged left the object
/// invisible to both, and after the switch every reader missed its value. An object's
/// first marker in a node's life is stored durably; later ones need no sync, since the
/// object keeps a durable version (collection never deletes its visible one).
#[test]
fn a_machine_crash_never_loses_the_only_marker_of_an_object_that_a_switch_migrates() {
    let mut config = config();
    config.tables.insert("sw".into(), Protocol::ReadOptimized);
    let mut w = World::new(config);
    let d = w.start(0);
    w.put(&d, "sw", "k", "first");
    w.put(&d, "sw", "k", "second");
    w.put(&d, "sw", "other", "x");
    // The machine dies: the log is durable, the store keeps what it synced.
    w.store.lose_unsynced();
    w.crash(0);
    drop(d);
    let d = w.start(0);
    let begun = w.run(d.tables().switch(BOOK, "sw", Protocol::WriteOptimized)).expect("the switch begins");
    let switch = begun_switch(&begun, "sw", Protocol::WriteOptimized);
    let mut ctx = Context::new();
    w.run(d.migrate(&mut ctx, &switch)).expect("the migration");
    w.run(d.complete(&mut ctx, &switch)).expect("the switch completes");
    let status = w.run(d.tables().status(BOOK, "sw")).expect("a status").expect("a table");
    assert_eq!((status.protocol, status.switching), (Protocol::WriteOptimized, None));
    assert_eq!(w.get(&d, "sw", "k").as_deref(), Some("second"), "k after the switch");
    assert_eq!(w.get(&d, "sw", "other").as_deref(), Some("x"), "other after the switch");
}

/// Garbage collection of an object written more often than one batch of deletes holds:
/// every version but the visible one is deleted (those that records carry the values of
/// and those stored before their records alike), the write log keeps only its last
/// record, and the object reads as before.
#[test]
fn garbage_collection_deletes_more_versions_than_a_batch() {
    let mut w = World::new(config());
    let d = w.start(0);
    let big = "x".repeat(crate::record::PUT_INLINE_MAX + 1);
    let writes = crate::gc::DELETES_MAX + 40;
    for i in 0..writes {
        let value = if i % 7 == 0 { format!("{i}{big}") } else { i.to_string() };
        w.put(&d, "ro", "hot", &value);
    }
    let object = d.core.tags.object("ro", b"hot");
    let versions = w.written_versions(&d, object);
    assert_eq!(versions.len(), writes);
    w.recover(&d, &mut Recovery::default(), 1);
    assert_eq!(w.get(&d, "ro", "hot"), Some((writes - 1).to_string()));
    assert_eq!(w.stream(&d, object).len(), 1, "the write log keeps its visible record");
    let stored = w.stored_versions("ro", "hot", &versions);
    for (i, stored) in stored.into_iter().enumerate() {
        assert_eq!(stored, i + 1 == writes, "version {i} of {writes}");
    }
}

/// A collection's deletes are not synced one by one: the store syncs them once, and
/// only then are the records that name them trimmed. So a machine crash never brings
/// back a version that no record names any more (no collection would find it again):
/// a collection whose sync fails trims nothing, and the next one deletes the versions
/// that the crash brought back. Only the object's first write stored its marker: the
/// collection stores the visible one's before it deletes the rest (else the object
/// would be left no version at all, which no later collection or switch would find),
/// without a sync, so the crash loses it with the deletes.
#[test]
fn garbage_collection_trims_a_write_log_only_once_its_deletes_are_synced() {
    let mut w = World::new(config());
    let d = w.start(0);
    for i in 0..5 {
        w.put(&d, "ro", "hot", &i.to_string());
    }
    let object = d.core.tags.object("ro", b"hot");
    let versions = w.written_versions(&d, object);
    w.store.refuse_syncs(true);
    w.recover(&d, &mut Recovery::default(), 1);
    w.store.lose_unsynced();
    assert_eq!(w.stream(&d, object).len(), 5, "a collection whose sync failed trims nothing");
    let first_only = [true, false, false, false, false];
    assert_eq!(
        w.stored_versions("ro", "hot", &versions),
        first_only,
        "the crash undid the deletes, and lost the re-stored marker"
    );
    w.store.refuse_syncs(false);
    w.recover(&d, &mut Recovery::default(), 1);
    w.store.lose_unsynced();
    assert_eq!(w.stream(&d, object).len(), 1, "the write log keeps its visible record");
    assert_eq!(w.stored_versions("ro", "hot", &versions), [false, false, false, false, true]);
    assert_eq!(w.get(&d, "ro", "hot").as_deref(), Some("4"));
}

/// A result as large as a result may be fits one record alone, not with the pending
/// writes: those go in a record of their own just before it.
#[test]
fn pending_writes_leave_the_largest_result_a_record_of_its_own() {
    let (mut w, d, mut inst, mut ctx) = started_by_hand("large");
    let key = vec![b'k'; crate::KEY_MAX];
    for n in 0..31u8 {
        let key = [&key[1..], &[n]].concat();
        w.run(inst.put(&mut ctx, "ro", &key, Some(Bytes::from_static(b"v")))).expect("taken");
    }
    let large = Outcome::Ok(Bytes::from(vec![b'r'; crate::PAYLOAD_MAX - 64]));
    assert_eq!(w.run(inst.finish(&mut ctx, large.clone())).expect("finished"), large);
    let steps = w.stream(&d, d.core.tags.step(&id("put", "large")));
    assert!(
        matches!(steps[..], [Step::Init(kind::Init { .. }), Step::Group(kind::Group { .. }), Step::Result(kind::Result { .. })]),
        "{:?}",
        steps[1]
    );
}

/// A node whose reads lag behind its own appends (a partial index: the index tier
/// answers a fresh context at whatever position it has reached) shows a table's status
/// with the switch it just began and, once the switch has ended, begins the next one
/// after it. Both read the transition log with a fresh context: a status showed the
/// table as it was before the switch (the exactly-once suite in partial mode found it),
/// and a second switch read a history without the End and lost its conditional append.
#[test]
fn a_table_status_shows_this_nodes_switches_while_its_reads_lag() {
    let mut config = config();
    config.tables.insert("sw".into(), Protocol::ReadOptimized);
    let mut w = World::new(config);
    let d = w.start(0);
    w.put(&d, "sw", "k", "first");
    w.log.hold_reads(0);
    let (r, wo) = (Protocol::ReadOptimized, Protocol::WriteOptimized);
    for (from, to) in [(r, wo), (wo, r)] {
        let begun = w.run(d.tables().switch(BOOK, "sw", to)).expect("the switch begins");
        assert_eq!(begun.switching, Some((from, to)));
        let status = w.run(d.tables().status(BOOK, "sw")).expect("a status").expect("a table");
        assert_eq!(status.switching, Some((from, to)), "the status right after the switch began");
        let mut waited = 0;
        let status = loop {
            let status = w.run(d.tables().status(BOOK, "sw")).expect("a status").expect("a table");
            if status.switching.is_none() || waited > 5_000 {
                break status;
            }
            w.advance(50);
            waited += 50;
        };
        assert_eq!((status.protocol, status.switching), (to, None), "the status once the switch to {to:?} ended");
    }
    assert_eq!(w.get(&d, "sw", "k").as_deref(), Some("first"));
    // A table no invocation used yet: its first transition is listed, and shown.
    w.run(d.tables().switch(BOOK, "fresh", wo)).expect("the first transition");
    assert!(w.run(d.core.tables(BOOK)).expect("the tables").contains("fresh"), "the listing shows it");
    let status = w.run(d.tables().status(BOOK, "fresh")).expect("a status").expect("a table");
    assert_eq!((status.protocol, status.switching), (wo, None));
}
