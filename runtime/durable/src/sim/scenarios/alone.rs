//! Scenarios of a node alone: a deferred Init that goes in one record with what follows
//! it, read-only invocations that log nothing, and the switches that stop either.

use std::sync::Arc;

use bytes::Bytes;
use tally_log_core::{Context, SeqNum, Tag};

use crate::abort::Abort;
use crate::config::Protocol;
use crate::instance::{Instance, Of};
use crate::invoke::InvokeRequest;
use crate::record::kind;
use crate::record::{Outcome, Step};
use crate::recovery::Recovery;
use crate::tags::shadow;
use crate::Durable;

use super::{begun_switch, config, guest, id, keyed, of_put, put_instance, unkeyed, Limits, World, BOOK};

/// On a node alone, a root started lazily defers its Init: the reads it takes before
/// its first record go in that record with the Init and the steps up to it, values and
/// all, so a read-only invocation and one that reads, writes and returns cost one
/// append each (two before). A re-execution takes the recorded reads instead of
/// reading again.
#[test]
fn a_deferred_init_goes_in_one_record_with_the_reads_writes_and_result() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    w.put(&d, "ro", "k", "first");
    let retried =
        |function: &str, key: &str, input: &str| InvokeRequest { retry_key: Some(key.into()), ..unkeyed(function, input) };
    assert_eq!(w.invoke(&d, retried("get", "read", "ro k")).as_deref(), Ok("=first"));
    let steps = w.stream(&d, d.core.tags.step(&id("get", "read")));
    match &steps[..] {
        [Step::Group(kind::Group { steps })] => match &steps[..] {
            [Step::Init(kind::Init { .. }), Step::Read(kind::Read { value: Some(v), .. }), Step::Result(kind::Result { .. })] => {
                assert_eq!(&v[..], b"first")
            }
            other => panic!("the read-only invocation's record holds {other:?}"),
        },
        other => panic!("the read-only invocation logged {other:?}, not one record"),
    }
    w.put(&d, "ro", "k", "second");
    // The same request again gets the logged result, not a new read.
    assert_eq!(w.invoke(&d, retried("get", "read", "ro k")).as_deref(), Ok("=first"));
    assert_eq!(w.invoke(&d, retried("put", "write", "ro k third")).as_deref(), Ok("ok"));
    let steps = w.stream(&d, d.core.tags.step(&id("put", "write")));
    assert!(
        matches!(&steps[..], [Step::Group(kind::Group { steps })] if matches!(&steps[..], [Step::Init(kind::Init { .. }), Step::Put(kind::Put { .. }), Step::Result(kind::Result { .. })])),
        "the writing invocation logged {steps:?}"
    );
    assert_eq!(w.get(&d, "ro", "k").as_deref(), Some("third"));
}

/// A deferred Init's record is conditional on the transition log of every table the
/// instance used: a switch that began after the instance looked (here one that ran to
/// its end) fails it, and the instance runs again with its Init first. Before, its
/// read-optimized write landed after the switch's migration, in a write log that no
/// write-optimized reader looks at, and was lost to them.
#[test]
fn a_deferred_init_whose_table_switched_since_it_looked_is_never_logged() {
    let mut config = config();
    config.tables.insert("sw".into(), Protocol::ReadOptimized);
    let mut w = World::new(config);
    let d = w.start_alone(0);
    w.put(&d, "sw", "k", "first");
    let mut inst = Instance::new(d.core.clone(), Of { defer_init: true, ..of_put(&w, "late") });
    let mut ctx = Context::new();
    let read = w.run(inst.get(&mut ctx, "sw", b"k")).expect("a read");
    assert_eq!(read.as_deref(), Some(&b"first"[..]));
    assert!(inst.init_deferred(), "a read-optimized read defers the Init");
    let begun = w.run(d.tables().switch(BOOK, "sw", Protocol::WriteOptimized)).expect("the switch begins");
    let switch = begun_switch(&begun, "sw", Protocol::WriteOptimized);
    let mut sctx = Context::new();
    w.run(d.migrate(&mut sctx, &switch)).expect("the migration");
    w.run(d.complete(&mut sctx, &switch)).expect("the switch completes");
    let ran = w.run(async {
        inst.put(&mut ctx, "sw", b"k", Some(Bytes::from_static(b"late"))).await?;
        inst.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"ok"))).await
    });
    assert!(matches!(ran, Err(Abort::Superseded)), "the deferred record: {ran:?}");
    assert!(w.stream(&d, d.core.tags.step(&id("put", "late"))).is_empty(), "nothing of it is logged");
    assert_eq!(w.get(&d, "sw", "k").as_deref(), Some("first"));
    // Run again as the invocation path does, eagerly: logged, and seen after the switch.
    let mut again = put_instance(&w, &d, "late");
    let ran = w.run(async {
        again.init(&mut ctx).await?;
        again.put(&mut ctx, "sw", b"k", Some(Bytes::from_static(b"late"))).await?;
        again.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"ok"))).await
    });
    assert!(ran.is_ok(), "the eager run: {ran:?}");
    assert_eq!(w.get(&d, "sw", "k").as_deref(), Some("late"));
}

/// On a node alone, an invocation without any key whose caller waits, and that only
/// read (under any protocol but unsafe) before it returned, logs nothing: no effect,
/// nothing replays it, nobody can ask for its result. One that writes still logs its
/// one record, and a retry key (a gateway may send it again) keeps its record too (the
/// test above).
#[test]
fn an_unkeyed_read_only_invocation_on_a_node_alone_logs_nothing() {
    for table in ["ro", "wo", "sym"] {
        let mut w = World::new(config());
        let d = w.start_alone(0);
        w.put(&d, table, "k", "first");
        let before = w.stream(&d, crate::tags::INSTANCES).len();
        assert_eq!(w.invoke(&d, unkeyed("get", &format!("{table} k"))).as_deref(), Ok("=first"));
        assert_eq!(w.stream(&d, crate::tags::INSTANCES).len(), before, "{table}: the read-only invocation logged a record");
        assert_eq!(w.invoke(&d, unkeyed("put", &format!("{table} k second"))).as_deref(), Ok("ok"));
        let after = w.stream(&d, crate::tags::INSTANCES).len();
        // A read-optimized one in its one record; the others log their Init first.
        assert!(after > before, "{table}: the writing invocation logged nothing");
        assert_eq!(w.invoke(&d, unkeyed("get", &format!("{table} k"))).as_deref(), Ok("=second"));
        assert_eq!(w.stream(&d, crate::tags::INSTANCES).len(), after, "{table}");
    }
}

/// A forgettable read-only invocation ends without a record only if no table it read
/// switched since it looked (what its deferred record's conditions check): a switch
/// begun between its read and its end sends it to its record, whose condition fails,
/// and it runs again with its Init first.
#[test]
fn a_forgettable_read_whose_table_switched_before_it_ended_is_not_forgotten() {
    let mut config = config();
    config.tables.insert("sw".into(), Protocol::ReadOptimized);
    let mut w = World::new(config);
    let d = w.start_alone(0);
    w.put(&d, "sw", "k", "first");
    let forgettable = |w: &World, key: &str| Of { defer_init: true, forgettable: true, ..of_put(w, key) };
    let mut ctx = Context::new();
    // Without a switch: nothing logged.
    let mut inst = Instance::new(d.core.clone(), forgettable(&w, "quiet"));
    let read = w.run(inst.get(&mut ctx, "sw", b"k")).expect("a read");
    assert_eq!(read.as_deref(), Some(&b"first"[..]));
    let done = w.run(inst.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"=first"))));
    assert!(matches!(done, Ok(Outcome::Ok(_))), "{done:?}");
    assert!(w.stream(&d, d.core.tags.step(&id("put", "quiet"))).is_empty(), "a quiet read is not logged");
    // A switch begins between the read and the end.
    let mut inst = Instance::new(d.core.clone(), forgettable(&w, "raced"));
    w.run(inst.get(&mut ctx, "sw", b"k")).expect("a read");
    w.run(d.tables().switch(BOOK, "sw", Protocol::WriteOptimized)).expect("the switch begins");
    let done = w.run(inst.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"=first"))));
    assert!(matches!(done, Err(Abort::Superseded)), "the raced read: {done:?}");
}

/// A node alone reads from its index's end before a deferred Init is logged, so it
/// starts from a position past everything logged before it started (a conditional
/// append that cannot hold): an index still catching up after a restart never serves
/// such a read.
#[test]
fn a_node_alone_reads_from_a_position_past_everything_logged_before_it_started() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    let mut ctx = Context::new();
    w.run(d.core.log.append(&mut ctx, shadow(BOOK), &[Tag(5)], Bytes::from_static(b"before"))).expect("appended");
    w.crash(0);
    drop(d);
    let d = w.start_alone(0);
    assert!(d.core.fresh_from.as_ref().expect("a node alone").covers(&ctx), "{:?} is behind {ctx:?}", d.core.fresh_from);
}

/// A write-optimized transfer (two reads, two writes, a result) logs its reads together
/// in the record that the first write logs before it acts, not one record each: a
/// logged read waits for the next record, as clock readings do. In a cluster the step
/// log holds the Init, the two reads and the result in three records; on a node alone
/// the deferred Init goes with the reads, in two.
#[test]
fn a_write_optimized_transfer_logs_both_reads_in_one_record_with_its_init_on_a_node_alone() {
    let transfer = guest(|a| {
        Box::pin(async move {
            let from = a.get("wo", b"from").await?.unwrap_or_default();
            let to = a.get("wo", b"to").await?.unwrap_or_default();
            a.put("wo", b"from", to.clone()).await?;
            a.put("wo", b"to", from.clone()).await?;
            Ok([from, to].concat())
        })
    });
    for alone in [false, true] {
        let mut w = World::new(config());
        let d = if alone { w.start_alone(0) } else { w.start(0) };
        w.deploy("transfer", Limits::default(), transfer.clone());
        w.put(&d, "wo", "from", "1");
        w.put(&d, "wo", "to", "2");
        let out = w.invoke(&d, keyed("transfer", "t", "")).expect("transferred");
        assert_eq!(out, "12");
        let records: Vec<Vec<String>> = w
            .stream(&d, d.core.tags.step(&id("transfer", "t")))
            .into_iter()
            .map(|s| s.into_steps().iter().map(Step::describe).collect())
            .collect();
        // Init, reads, result; on a node alone the Init waits for the reads
        // (`deferred_protocol`).
        let (init, reads) = ("init of transfer version 3", ["read of wo/\"from\"", "read of wo/\"to\""]);
        let expected: Vec<Vec<&str>> = match alone {
            false => vec![vec![init], reads.to_vec(), vec!["result"]],
            true => vec![[&[init][..], &reads].concat(), vec!["result"]],
        };
        assert_eq!(records, expected, "alone {alone}");
        assert_eq!(w.get(&d, "wo", "from").as_deref(), Some("2"));
        assert_eq!(w.get(&d, "wo", "to").as_deref(), Some("1"));
    }
}

/// A guest that makes one conditional append to its book and returns (`mark`), or then
/// reads its wall clock too, which reads another value in every execution, and returns
/// that (`stamp`).
fn deploy_markers(w: &World) {
    static LIVE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    for (name, stamps) in [("mark", false), ("stamp", true)] {
        let marker = guest(move |a| {
            Box::pin(async move {
                let tag = Tag(1_000 + a.input.len() as u64);
                a.cond_append(&[tag], Bytes::from_static(b"m"), tag, 0).await?.map_err(|e| Abort::internal(e.to_string()))?;
                match stamps {
                    true => Ok(a.wall_clock_ns(LIVE.fetch_add(1, std::sync::atomic::Ordering::SeqCst)).to_string().into_bytes()),
                    false => Ok(b"ok".to_vec()),
                }
            })
        });
        w.deploy(name, Limits::default(), marker);
    }
}

fn results(w: &mut World, d: &Arc<Durable>, function: &str, key: &str) -> Vec<Outcome> {
    let steps = w.stream(d, d.core.tags.step(&id(function, key))).into_iter().flat_map(Step::into_steps);
    steps.filter_map(|s| if let Step::Result(kind::Result { outcome }) = s { Some(outcome) } else { None }).collect()
}

/// The records of `tag` in the user book [`BOOK`].
fn user_records(w: &mut World, d: &Arc<Durable>, tag: Tag) -> usize {
    w.run(async {
        let (mut ctx, mut at, mut n) = (Context::new(), SeqNum(0), 0);
        while let Some(r) = d.core.log.read_next(&mut ctx, BOOK, tag, at).await.expect("a read") {
            (at, n) = (SeqNum(r.seqnum.0 + 1), n + 1);
        }
        n
    })
}

/// On a node alone, a root whose outcome follows from its logged steps alone is answered
/// before its Result record is appended: a crash that loses that record loses nothing,
/// since the recovery scan replays the history to the same outcome, with no effect of its
/// own, and logs it; a retry of its key gets that.
#[test]
fn a_root_whose_outcome_the_log_holds_is_answered_before_its_result() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_markers(&w);
    assert_eq!(w.invoke(&d, keyed("mark", "early", "x")).as_deref(), Ok("ok"));
    assert!(results(&mut w, &d, "mark", "early").is_empty(), "the Result was logged before the answer");
    w.crash(0);
    drop(d);
    let d = w.start_alone(0);
    w.recover(&d, &mut Recovery::default(), 3);
    assert_eq!(results(&mut w, &d, "mark", "early"), [Outcome::Ok(Bytes::from_static(b"ok"))]);
    assert_eq!(user_records(&mut w, &d, Tag(1_001)), 1, "the conditional append, once");
    assert_eq!(w.invoke(&d, keyed("mark", "early", "x")).as_deref(), Ok("ok"));
    assert_eq!(w.guests.runs("mark").len(), 2, "the first execution and the recovery's");
}

/// A root that read its clock after its last record is not answered before its Result,
/// which holds the reading: a crash right after the answer leaves the Result logged, with
/// what the caller got, where a re-execution would have read another time.
#[test]
fn a_root_with_readings_after_its_last_record_logs_its_result_before_it_answers() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_markers(&w);
    let answer = w.invoke(&d, keyed("stamp", "late", "xy")).expect("an answer");
    w.crash(0);
    drop(d);
    let d = w.start_alone(0);
    w.recover(&d, &mut Recovery::default(), 3);
    assert_eq!(results(&mut w, &d, "stamp", "late"), [Outcome::Ok(Bytes::from(answer.clone()))]);
    assert_eq!(w.invoke(&d, keyed("stamp", "late", "xy")), Ok(answer));
}
