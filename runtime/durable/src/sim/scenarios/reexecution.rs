//! Scenarios of re-executions: one that takes another path is stopped as
//! non-deterministic, one runs on the version it started on, and one reads the clocks
//! and random numbers the execution before it recorded.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use tally_log_core::Context;

use crate::abort::Abort;
use crate::error::Error;
use crate::instance::{Instance, Of, Started};
use crate::invoke::{InvocationStatus, InvokeRequest};
use crate::record::kind;
use crate::record::{Outcome, Step};
use crate::recovery::Recovery;

use super::{config, guest, id, keyed, put_instance, started_by_hand, text, Guest, Limits, Ran, World, BOOK};

/// A guest that takes another path when run again: its first attempt uses key "a" of
/// the table its input names, every later attempt key "b" (a write-optimized table is
/// read, then written back, others written).
fn branchy() -> Guest {
    guest(|a| {
        Box::pin(async move {
            let table = text(&a.input);
            let key: &[u8] = if a.attempt == 1 { b"a" } else { b"b" };
            if table == "wo" {
                let value = a.get(&table, key).await?.unwrap_or_default();
                // The write logs the read first (the result would take it in its own
                // record otherwise).
                a.put(&table, key, value.clone()).await?;
                Ok(value.to_vec())
            } else {
                a.put(&table, key, Bytes::from_static(b"x")).await?;
                // A read logs a read-optimized write at once (the result would take it
                // in its own record otherwise).
                a.get(&table, key).await?;
                Ok(b"written".to_vec())
            }
        })
    })
}

/// Defect 3, second half: a re-execution that asked for a step of the kind recorded at
/// its position, but on another key, was handed the recorded step (the read's value, or
/// the write as done) instead of being stopped. `Instance::recorded` must compare the
/// whole operation (`Step::same_operation`: table, key, version or value), not only the
/// kind of step. Checked for a write-optimized read, a symmetric write and a
/// read-optimized write.
#[test]
fn a_re_execution_asking_for_another_key_is_reported_as_non_deterministic() {
    // Effects up to the step's record: Init, the read-optimized version, the record.
    for (table, effects) in [("wo", 2), ("sym", 2), ("ro", 3)] {
        let mut w = World::new(config());
        let d = w.start(0);
        w.deploy("branchy", Limits::default(), branchy());
        w.put(&d, "wo", "a", "of-a");
        w.put(&d, "wo", "b", "of-b");
        let first = InvokeRequest { crash_after: Some(effects), ..keyed("branchy", "nd", table) };
        assert_eq!(w.invoke(&d, first), Err(Error::InjectedCrash), "{table}");
        // The recovery scan re-executes it (attempt 2), which traps and runs once more.
        w.recover(&d, &mut Recovery::default(), 2);
        let runs = w.guests.runs("branchy");
        let again: Vec<&Ran> = runs.iter().filter(|r| r.attempt > 1).collect();
        assert!(!again.is_empty(), "{table}: no re-execution ran");
        for r in again {
            match &r.result {
                Err(Error::Trap(m)) if m.contains("non-deterministic") => {}
                other => {
                    let other = other.as_deref().map(text);
                    panic!("{table}: attempt {} asking for key b ended with {other:?}, not non-determinism", r.attempt)
                }
            }
        }
        let b = if table == "wo" { Some("of-b".to_string()) } else { None };
        assert_eq!(w.get(&d, table, "b"), b, "{table}: key b");
    }
}

/// A resource defect: a keyed retry of an invocation that was admitted and started on
/// version 1 was checked again against the current version, and refused when a later
/// deploy lowered `request_bytes_max` below its input, although it runs on version 1.
/// `version_for` must, when a run fails admission, take the version that the Init
/// record names (`recorded_version`) and run that.
#[test]
fn a_re_execution_runs_on_its_version_whatever_a_later_deploy_admits() {
    let mut w = World::new(config());
    let d = w.start(0);
    let answer = |out: &'static [u8]| guest(move |_| Box::pin(async move { Ok(out.to_vec()) }));
    let v1 = w.deploy("sized", Limits { request_bytes_max: 1 << 20, ..Limits::default() }, answer(b"v1"));
    let input = "x".repeat(50);
    for key in ["retried", "recovered"] {
        let crashing = InvokeRequest { crash_after: Some(1), ..keyed("sized", key, &input) };
        assert_eq!(w.invoke(&d, crashing), Err(Error::InjectedCrash), "{key}");
    }
    w.deploy("sized", Limits { request_bytes_max: 10, ..Limits::default() }, answer(b"v2"));
    let fresh = w.invoke(&d, keyed("sized", "fresh", &input));
    assert!(matches!(fresh, Err(Error::TooLarge { size: Some(50), limit: 10, .. })), "a fresh invocation: {fresh:?}");
    assert_eq!(w.invoke(&d, keyed("sized", "retried", &input)).as_deref(), Ok("v1"), "a keyed retry");
    // The recovery scan names the version itself, and passes no input to check.
    w.recover(&d, &mut Recovery::default(), 2);
    assert_eq!(w.status(&d, "sized", "recovered"), InvocationStatus::Finished(Ok(Bytes::from_static(b"v1"))));
    let versions: Vec<u64> = w.guests.runs("sized").iter().map(|r| r.version).collect();
    assert_eq!(versions, [v1, v1], "the retry and the re-execution (the first attempts crashed before the guest ran)");
}

/// A non-deterministic re-execution's trap is logged as the invocation's result once
/// retries are spent, after the recorded history (the diverged step's position is
/// taken), naming the step that diverged; nothing is adopted and the invocation does
/// not linger for the recovery scan.
#[test]
fn a_non_determinism_trap_is_logged_once_retries_are_spent() {
    let mut w = World::new(config());
    let d = w.start(0);
    w.deploy("branchy", Limits::default(), branchy());
    let first = InvokeRequest { crash_after: Some(2), ..keyed("branchy", "nd", "wo") };
    assert_eq!(w.invoke(&d, first), Err(Error::InjectedCrash));
    w.recover(&d, &mut Recovery::default(), 2);
    match w.status(&d, "branchy", "nd") {
        InvocationStatus::Finished(Err(Error::Trap(m))) if m.contains("is now a read of wo/\"b\"") => {}
        other => panic!("after one re-execution and its retry: {other:?}"),
    }
    assert_eq!(w.guests.runs("branchy").len(), 3, "the crashed attempt, the re-execution and its retry");
}

/// A guest that reads its wall clock and a random number around three writes: a
/// log-free one first, then the reading, stored read-optimized, then the random number,
/// stored write-optimized. Each clock reading's live value differs from every other.
/// With `pad`, the reading is stored padded with spaces past what a record carries (so
/// its version is stored before its record, `Step::Write`).
fn stamp(live: Arc<std::sync::atomic::AtomicU64>, pad: bool) -> Guest {
    guest(move |a| {
        let live = live.clone();
        Box::pin(async move {
            a.put("wo", b"before", Bytes::from_static(b"x")).await?;
            let t = a.wall_clock_ns(live.fetch_add(1, Ordering::SeqCst));
            let width = if pad { crate::record::PUT_INLINE_MAX + 1 } else { 0 };
            a.put("ro", b"stamp", Bytes::from(format!("{t:<width$}"))).await?;
            let r = a.random_u64();
            a.put("wo", b"random", Bytes::from(r.to_string())).await?;
            Ok(format!("{t} {r}").into_bytes())
        })
    })
}

/// Recorded clocks, first half: an execution that crashed after any of its effects is
/// continued by one that reads what it read, so that what the re-execution returns is
/// what the crashed one stored. Found by the simulator: a `Clocks` record logged after
/// a log-free write was taken by a re-execution at that write, before the reading it
/// holds, which then read the clock live; `Instance::log_clocks` takes a recorded
/// `Clocks` step only once the execution read a clock at that point.
/// With the reading stored as a `Step::Write` (padded), it is also what catches
/// readings that wait for the record after its version was stored: reverting the flush
/// before such a write in `Instance::put` fails it.
#[test]
fn a_re_execution_reads_the_clocks_and_random_numbers_of_the_crashed_one() {
    for pad in [false, true] {
        let mut w = World::new(config());
        let d = w.start(0);
        w.deploy("stamp", Limits::default(), stamp(Arc::new(std::sync::atomic::AtomicU64::new(1_000)), pad));
        let mut stamps = BTreeSet::new();
        for k in 1u64.. {
            let key = format!("stamp-{k}");
            let first = w.invoke(&d, InvokeRequest { crash_after: Some(k), ..keyed("stamp", &key, "") });
            let again = w.invoke(&d, keyed("stamp", &key, "")).expect("the re-execution");
            let stamped = w.get(&d, "ro", "stamp").expect("stamped");
            let stored = format!("{} {}", stamped.trim_end(), w.get(&d, "wo", "random").expect("drawn"));
            assert_eq!(again, stored, "after a crash at effect {k} (pad: {pad})");
            stamps.insert(again.clone());
            match first {
                Err(Error::InjectedCrash) => {}
                Ok(out) => {
                    assert_eq!(out, again, "the uncrashed run");
                    assert!(k >= 5, "only {k} effects");
                    break;
                }
                Err(e) => panic!("crash at {k}: {e}"),
            }
        }
        assert!(stamps.iter().map(|s| s.split(' ').nth(1)).collect::<BTreeSet<_>>().len() > 3, "one random number for all");
    }
}

/// Recorded clocks, second half: an execution that read its clock live and then finds
/// that another execution logged other readings at that point (a racing peer), or that
/// the invocation it started lazily has history already, has acted on a reading the
/// invocation does not hold. It must stop before its next effect (`Superseded`, which
/// runs it again, replaying), never adopt the record and go on with its own value.
#[test]
fn an_execution_that_read_other_clocks_than_the_logged_ones_stops_before_acting() {
    let mut w = World::new(config());
    let d = w.start(0);
    w.deploy("stamp", Limits::default(), stamp(Arc::new(std::sync::atomic::AtomicU64::new(1_000)), false));
    let version = w.guests.find("stamp", None).expect("deployed").0.version;
    let of = |key: &str, input: Option<Bytes>| Of {
        id: id("stamp", key),
        book: BOOK,
        function: "stamp".into(),
        version,
        input,
        declared: Arc::default(),
        crash: None,
        key: None,
        defer_init: false,
        forgettable: false,
    };
    // A peer initialised eagerly, which reads its clock before the other run logs.
    let mut peer = Instance::new(d.core.clone(), of("raced", Some(Bytes::new())));
    let mut ctx = Context::new();
    assert!(matches!(w.run(peer.init(&mut ctx)), Ok(Started::Fresh)));
    assert!(w.run(peer.put(&mut ctx, "wo", b"before", Some(Bytes::from_static(b"x")))).is_ok());
    peer.read_clock(crate::recorder::GuestClock::Wall, 7);
    let done = w.invoke(&d, keyed("stamp", "raced", "")).expect("the other run");
    assert!(!done.starts_with("7 "), "the other run read its own clock: {done}");
    // The read-optimized write carries its value, so it and the reading wait for the
    // next record, and the next effect stops.
    assert!(w.run(peer.put(&mut ctx, "ro", b"stamp", Some(Bytes::from_static(b"7")))).is_ok(), "taken");
    match w.run(peer.put(&mut ctx, "wo", b"random", Some(Bytes::from_static(b"7")))) {
        Err(Abort::Superseded) => {}
        other => panic!("the peer that read 7 went on to write with {other:?}"),
    }
    assert_ne!(w.get(&d, "ro", "stamp").as_deref(), Some("7"), "the peer's write became visible");
    // A lazy start over history, after a live reading: the invocation crashed after
    // logging its reading, and a retry (no Init of its own yet) read the clock anew.
    let crashed = InvokeRequest { crash_after: Some(4), ..keyed("stamp", "lazy", "") };
    assert_eq!(w.invoke(&d, crashed), Err(Error::InjectedCrash));
    let mut lazy = Instance::new(d.core.clone(), of("lazy", Some(Bytes::new())));
    let mut ctx = Context::new();
    lazy.read_clock(crate::recorder::GuestClock::Wall, 9);
    let stopped = match w.run(lazy.put(&mut ctx, "ro", b"stamp", Some(Bytes::from_static(b"9")))) {
        Ok(()) => w.run(lazy.put(&mut ctx, "wo", b"random", Some(Bytes::from_static(b"9")))),
        other => other,
    };
    match stopped {
        Err(Abort::Superseded) => {}
        other => panic!("the lazy start over history went on with a live reading: {other:?}"),
    }
}

/// The clock readings a guest takes after its last write go in the result's record,
/// before the result (the outcome is the first effect that may depend on them). A peer
/// that read other values there, and went on to its outcome from them, stops.
#[test]
fn the_readings_after_the_last_write_go_with_the_result_and_a_peer_that_read_others_stops() {
    let (mut w, d, mut inst, mut ctx) = started_by_hand("late-clock");
    let mut peer = put_instance(&w, &d, "late-clock");
    let mut peer_ctx = Context::new();
    assert!(matches!(w.run(peer.init(&mut peer_ctx)), Ok(Started::Running { .. })));
    for (i, ctx) in [(&mut inst, &mut ctx), (&mut peer, &mut peer_ctx)] {
        w.run(i.put(ctx, "ro", b"k", Some(Bytes::from_static(b"v")))).expect("taken");
    }
    inst.read_clock(crate::recorder::GuestClock::Wall, 42);
    peer.read_clock(crate::recorder::GuestClock::Wall, 43);
    let done = w.run(inst.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"42")))).expect("finished");
    assert_eq!(done, Outcome::Ok(Bytes::from_static(b"42")));
    let steps = w.stream(&d, d.core.tags.step(&id("put", "late-clock")));
    match &steps[..] {
        [Step::Init(kind::Init { .. }), Step::Group(kind::Group { steps })] => match &steps[..] {
            [Step::Put(kind::Put { .. }), Step::Clocks(kind::Clocks { readings }), Step::Result(kind::Result { .. })] => {
                assert_eq!(readings, &[crate::record::Reading::Wall(42)]);
            }
            other => panic!("the group holds {other:?}"),
        },
        other => panic!("the step log is {other:?}"),
    }
    match w.run(peer.finish(&mut peer_ctx, Outcome::Ok(Bytes::from_static(b"43")))) {
        Err(Abort::Superseded) => {}
        other => panic!("the peer that read 43 finished with {other:?}"),
    }
}
