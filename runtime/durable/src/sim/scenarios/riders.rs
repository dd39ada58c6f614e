//! Scenarios of steps that ride their instance's next record: a lock's release, a call's
//! outcome once its child's Result is logged, and a try of a lock seen free (on the
//! condition that the lock's stream did not change).

use std::sync::Arc;

use bytes::Bytes;
use tally_log_core::{SeqNum, Tag};

use crate::abort::Abort;
use crate::record::kind;
use crate::record::{LockId, Step};
use crate::recovery::Recovery;
use crate::Durable;

use super::{config, guest, id, keyed, Limits, World};

/// `pair`: takes the locks `A` and `B`, releases both and returns `ok`, or `busy` if
/// either was held.
fn deploy_pair(w: &World) {
    let pair = guest(|a| {
        Box::pin(async move {
            for lock in ["A", "B"] {
                if !a.lock_acquire(lock, 0).await? {
                    return Ok(b"busy".to_vec());
                }
            }
            a.lock_release("A").await?;
            a.lock_release("B").await?;
            Ok(b"ok".to_vec())
        })
    });
    w.deploy("pair", Limits::default(), pair);
}

fn last_record(w: &mut World, d: &Arc<Durable>, function: &str, key: &str) -> Step {
    w.stream(d, d.core.tags.step(&id(function, key))).pop().expect("a step log")
}

/// A step's releases ride its Result: one record holds both releases and the Result
/// (three appends before), and the locks are free after it for the next holder.
#[test]
fn a_steps_releases_ride_its_result() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_pair(&w);
    for key in ["first", "second"] {
        assert_eq!(w.invoke(&d, keyed("pair", key, "x")).as_deref(), Ok("ok"), "{key}: both locks were free");
        match last_record(&mut w, &d, "pair", key) {
            Step::Group(kind::Group { steps }) => assert!(
                matches!(&steps[..], [Step::LockRelease(_), Step::LockRelease(_), Step::Result(_)]),
                "{key}: the last record holds {steps:?}"
            ),
            other => panic!("{key}: the last record is {other:?}, not the releases with the Result"),
        }
    }
    for lock in ["A", "B"] {
        let view = w.run(async {
            let mut ctx = tally_log_core::Context::new();
            crate::locks::lock_at(&d.core, &mut ctx, super::BOOK, &LockId::Named(lock.into()), u64::MAX).await
        });
        assert_eq!(view.expect("a view").holder, None, "{lock} is held after its release");
    }
}

/// `caller` calls `mark` (a conditional append, logged with its Init and Result) and
/// returns what it answered.
fn deploy_caller(w: &World) {
    let mark = guest(|a| {
        Box::pin(async move {
            let tag = Tag(2_000 + a.input.len() as u64);
            a.cond_append(&[tag], Bytes::from_static(b"m"), tag, 0).await?.map_err(|e| Abort::internal(e.to_string()))?;
            Ok(b"marked".to_vec())
        })
    });
    w.deploy("mark", Limits::default(), mark);
    let caller = guest(|a| {
        Box::pin(async move {
            let got = a.call("mark".into(), Bytes::from_static(b"xyz")).await?.map_err(Abort::Transient)?;
            Ok(got)
        })
    });
    w.deploy("caller", Limits::default(), caller);
}

/// A call's outcome, which its child's Result holds, rides the parent's next record,
/// here the Result, and the parent is answered before that record: a crash that loses
/// it loses nothing, since the recovery's execution calls the child again and gets its
/// logged Result without running it.
#[test]
fn a_calls_outcome_rides_the_parents_result() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_caller(&w);
    assert_eq!(w.invoke(&d, keyed("caller", "c", "in")).as_deref(), Ok("marked"));
    let child_runs = w.guests.runs("mark").len();
    w.crash(0);
    drop(d);
    let d = w.start_alone(0);
    w.recover(&d, &mut Recovery::default(), 3);
    match last_record(&mut w, &d, "caller", "c") {
        Step::Group(kind::Group { steps }) => {
            assert!(matches!(&steps[..], [Step::Invoke(_), Step::Result(_)]), "the last record holds {steps:?}")
        }
        other => panic!("the last record is {other:?}, not the call's outcome with the Result"),
    }
    assert_eq!(w.invoke(&d, keyed("caller", "c", "in")).as_deref(), Ok("marked"));
    assert_eq!(w.guests.runs("mark").len(), child_runs, "the child ran again");
    assert_eq!(w.guests.runs("caller").len(), 2, "the first run and the recovery's: it was answered before its Result");
}

/// `tries`: takes the locks `A` and `B` (`C` and `D` for input `calm`), makes a
/// conditional append (an effect, which logs what is pending first) and returns `ok`
/// (the locks are released with its Result), or `busy` if either was held. With input
/// `intrude`, its first run has another holder take `A` in the log between its tries
/// and that append.
fn deploy_tries(w: &World) {
    let intruded = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tries = guest(move |a| {
        let intruded = intruded.clone();
        Box::pin(async move {
            let locks = if &a.input[..] == b"calm" { ["C", "D"] } else { ["A", "B"] };
            for lock in locks {
                if !a.lock_acquire(lock, 0).await? {
                    return Ok(b"busy".to_vec());
                }
            }
            if &a.input[..] == b"intrude" && !intruded.swap(true, std::sync::atomic::Ordering::SeqCst) {
                let core = a.instance.core().clone();
                let lock = LockId::Named("A".into());
                let root = id("intruder", "i");
                let intruder = kind::LockTry { lock: lock.clone(), holder: root.to_string(), root, prev: 0, last: false };
                let record = crate::record::encode(&Step::LockTry(intruder));
                core.log.append(&mut a.ctx, crate::tags::shadow(a.book), &[core.tags.lock(&lock)], record).await?;
            }
            let tag = Tag(3_000 + a.input.len() as u64);
            a.cond_append(&[tag], Bytes::from_static(b"m"), tag, 0).await?.map_err(|e| Abort::internal(e.to_string()))?;
            Ok(b"ok".to_vec())
        })
    });
    w.deploy("tries", Limits::default(), tries);
}

/// The tries of locks seen free ride the instance's next record, together (one append
/// where each took its own), on the condition that each lock's stream is as the
/// instance saw it: a lock taken by another in between fails that record, and the
/// attempt runs again, its tries logged one by one, and finds the lock held.
#[test]
fn tries_of_free_locks_ride_one_record_that_holds_only_if_the_locks_did_not_change() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_tries(&w);
    let tries_of = |steps: &[Step]| steps.iter().filter(|s| matches!(s, Step::LockTry(_))).count();
    assert_eq!(w.invoke(&d, keyed("tries", "calm", "calm")).as_deref(), Ok("ok"));
    let records = w.stream(&d, d.core.tags.step(&id("tries", "calm")));
    let together = records.iter().any(|r| matches!(r, Step::Group(kind::Group { steps }) if tries_of(steps) == 2));
    assert!(together, "no record holds both tries: {records:?}");
    let runs = w.guests.runs("tries").len();
    assert_eq!(w.invoke(&d, keyed("tries", "raced", "intrude")).as_deref(), Ok("busy"), "A is the intruder's");
    assert_eq!(w.guests.runs("tries").len(), runs + 2, "the raced run and the one after it");
    let records = w.stream(&d, d.core.tags.step(&id("tries", "raced")));
    let tries: usize = records.iter().map(|r| tries_of(&r.clone().into_steps())).sum();
    assert_eq!(tries, 1, "the raced tries were logged: {records:?}");
    for (lock, holder) in [("A", Some(id("intruder", "i").to_string())), ("B", None)] {
        let view = w.run(async {
            let mut ctx = tally_log_core::Context::new();
            crate::locks::lock_at(&d.core, &mut ctx, super::BOOK, &LockId::Named(lock.into()), u64::MAX).await
        });
        assert_eq!(view.expect("a view").holder, holder, "{lock}");
    }
    // The last record of C and D (both releases, with the Result) keeps a view of each
    // once each was read.
    let mut ctx = tally_log_core::Context::new();
    let (c, d_lock) = (LockId::Named("C".into()), LockId::Named("D".into()));
    for lock in [&c, &d_lock] {
        w.run(crate::locks::lock_at(&d.core, &mut ctx, super::BOOK, lock, u64::MAX)).expect("a view");
    }
    let last = w.run(d.core.log.read_prev(&mut ctx, crate::tags::shadow(super::BOOK), d.core.tags.lock(&c), SeqNum::MAX));
    let aux = last.expect("a read").expect("a record").aux.expect("views cached");
    let views: crate::locks::LockViews = crate::record::decode("lock views", &aux).expect("lock views");
    let mut tags: Vec<u64> = views.views.iter().map(|(t, _)| *t).collect();
    tags.sort_unstable();
    let mut both = vec![d.core.tags.lock(&c).0, d.core.tags.lock(&d_lock).0];
    both.sort_unstable();
    assert_eq!(tags, both, "the views of C and D");
}

/// A peer's record in the place of an instance's pending tries may hold the same tries
/// logged at once, which need not have taken their locks (another took one between the
/// peer's look and its append): the instance does not take that record for its own
/// tries' and go on to its effect, but stops (`Superseded`), and the next execution
/// replays the tries as the log decides them.
#[test]
fn a_peers_record_in_place_of_pending_tries_stops_the_instance() {
    let (mut w, d, mut inst, mut ctx) = super::started_by_hand("spec");
    let lock = LockId::Named("P".into());
    let took = w.run(inst.lock_acquire(&mut ctx, lock.clone(), 0, u64::MAX));
    assert!(matches!(took, Ok(true)), "P was free: {took:?}");
    let (lock_tag, step_tag) = (d.core.tags.lock(&lock), d.core.tags.step(&id("put", "spec")));
    let try_by = |holder: &crate::InstanceId| {
        let (lock, root) = (lock.clone(), holder.root());
        crate::record::encode(&Step::LockTry(kind::LockTry { lock, holder: holder.to_string(), root, prev: 0, last: false }))
    };
    let mut other_ctx = tally_log_core::Context::new();
    let book = crate::tags::shadow(super::BOOK);
    // Another takes P; then the peer's try, made on the state the instance saw, lands
    // after it: it takes nothing.
    w.run(d.core.log.append(&mut other_ctx, book, &[lock_tag], try_by(&id("other", "o")))).expect("appended");
    let mut tags = [lock_tag, step_tag];
    tags.sort_unstable();
    w.run(d.core.log.cond_append(&mut other_ctx, book, &tags, try_by(&id("put", "spec")), step_tag, 1)).expect("appended");
    let appended = w.run(inst.append(&mut ctx, &[Tag(77)], Bytes::from_static(b"under P")));
    assert!(matches!(appended, Err(Abort::Superseded)), "the effect under P: {appended:?}");
    let view = w.run(crate::locks::lock_at(&d.core, &mut other_ctx, super::BOOK, &lock, u64::MAX)).expect("a view");
    assert_eq!(view.holder, Some(id("other", "o").to_string()));
}
