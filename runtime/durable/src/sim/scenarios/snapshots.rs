//! Scenarios of reads of durable objects before the Init (`instance/snapshot.rs`): on a
//! node alone a read-only invocation reads them at a snapshot and logs nothing without a
//! key, one record with one; one that writes after such a read runs again with its Init
//! first; garbage collection keeps what a snapshot may read.

use bytes::Bytes;
use tally_log_core::Context;

use crate::abort::Abort;
use crate::error::Error;
use crate::instance::{Instance, Of};
use crate::invoke::InvocationStatus;
use crate::objects::ObjOp;
use crate::record::kind;
use crate::record::Step;
use crate::recovery::Recovery;
use crate::tags::INSTANCES;

use super::{config, guest, id, keyed, unkeyed, words, Limits, World, BOOK};

/// Deploys the object guests: `oset <object> <json>`, `oget <object>` (the whole
/// object, `none` if it has none), `osum` (objects `a` and `b` in one read-only
/// transaction), `obump <object>` (reads `/n`, then sets it one higher, outside a
/// transaction), `oundo <object>` (a transaction that reads the object, sets `/n` to
/// 99, reads it again and aborts; then reads it outside: the three texts) and `oinc
/// <object>` (sets `/n` one higher in a transaction, again while it conflicts).
fn deploy_objects(w: &World) {
    let set = guest(|a| {
        Box::pin(async move {
            let w = words(&a.input);
            a.object_update(&w[0], ObjOp::Set { path: String::new(), json: w[1].clone() }).await?;
            Ok(b"ok".to_vec())
        })
    });
    let get = guest(|a| {
        Box::pin(async move {
            let object = String::from_utf8_lossy(&a.input).into_owned();
            Ok(a.object_get(&object, "").await?.unwrap_or_else(|| "none".into()).into_bytes())
        })
    });
    let sum = guest(|a| {
        Box::pin(async move {
            a.txn_begin(true).await?;
            let x = a.object_get("a", "").await?.unwrap_or_default();
            let y = a.object_get("b", "").await?.unwrap_or_default();
            assert!(a.txn_commit().await?, "a read-only transaction commits");
            Ok(format!("{x} {y}").into_bytes())
        })
    });
    let bump = guest(|a| {
        Box::pin(async move {
            let object = String::from_utf8_lossy(&a.input).into_owned();
            let n: i64 = a.object_get(&object, "/n").await?.and_then(|n| n.parse().ok()).unwrap_or(0);
            a.object_update(&object, ObjOp::Set { path: "/n".into(), json: (n + 1).to_string() }).await?;
            Ok((n + 1).to_string().into_bytes())
        })
    });
    let undo = guest(|a| {
        Box::pin(async move {
            let object = String::from_utf8_lossy(&a.input).into_owned();
            a.txn_begin(false).await?;
            let before = a.object_get(&object, "").await?.unwrap_or_default();
            a.object_update(&object, ObjOp::Set { path: "/n".into(), json: "99".into() }).await?;
            let written = a.object_get(&object, "").await?.unwrap_or_default();
            a.txn_abort()?;
            let after = a.object_get(&object, "").await?.unwrap_or_default();
            Ok(format!("{before} {written} {after}").into_bytes())
        })
    });
    let inc = guest(|a| {
        Box::pin(async move {
            let object = String::from_utf8_lossy(&a.input).into_owned();
            loop {
                a.txn_begin(false).await?;
                let n: i64 = a.object_get(&object, "/n").await?.and_then(|n| n.parse().ok()).unwrap_or(0);
                a.object_update(&object, ObjOp::Set { path: "/n".into(), json: (n + 1).to_string() }).await?;
                if a.txn_commit().await? {
                    return Ok((n + 1).to_string().into_bytes());
                }
            }
        })
    });
    for (name, g) in [("oset", set), ("oget", get), ("osum", sum), ("obump", bump), ("oundo", undo), ("oinc", inc)] {
        w.deploy(name, Limits::default(), g);
    }
}

/// An instance of `function` with idempotency key `key` and `input`, driven by hand, its
/// Init deferred as on a node alone.
fn of_deferred(w: &World, function: &str, key: &str, input: &str) -> Of {
    Of {
        id: id(function, key),
        book: BOOK,
        function: function.into(),
        version: w.guests.find(function, None).expect("deployed").0.version,
        input: Some(Bytes::from(input.to_owned())),
        declared: Default::default(),
        crash: None,
        key: None,
        defer_init: true,
        forgettable: false,
    }
}

/// On a node alone, plain reads of objects and read-only transactions before the Init
/// read at a snapshot: without any key the invocation logs nothing at all, with an
/// idempotency key one record (its Init and its result), whose result a retry gets
/// however the objects changed since. (Before, each logged its Init for a cursor and
/// its result after it: two appends.)
#[test]
fn read_only_invocations_of_objects_log_nothing_or_one_record() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_objects(&w);
    assert_eq!(w.invoke(&d, keyed("oset", "a1", "a 1")).as_deref(), Ok("ok"));
    assert_eq!(w.invoke(&d, keyed("oset", "b2", "b 2")).as_deref(), Ok("ok"));
    let before = w.stream(&d, INSTANCES).len();
    assert_eq!(w.invoke(&d, unkeyed("oget", "a")).as_deref(), Ok("1"));
    assert_eq!(w.invoke(&d, unkeyed("osum", "")).as_deref(), Ok("1 2"));
    assert_eq!(w.stream(&d, INSTANCES).len(), before, "an unkeyed read-only invocation logged a record");
    assert_eq!(d.core.pins.floor(), None, "an instance that ended holds no snapshot");

    assert_eq!(w.invoke(&d, keyed("oget", "g", "a")).as_deref(), Ok("1"));
    let steps = w.stream(&d, d.core.tags.step(&id("oget", "g")));
    assert!(
        matches!(&steps[..], [Step::Group(kind::Group { steps })]
            if matches!(&steps[..], [Step::Init(kind::Init { .. }), Step::Result(kind::Result { .. })])),
        "the keyed read logged {steps:?}"
    );
    assert_eq!(w.invoke(&d, keyed("oset", "a5", "a 5")).as_deref(), Ok("ok"));
    assert_eq!(w.invoke(&d, keyed("oget", "g", "a")).as_deref(), Ok("1"), "a retry gets the logged result");
    assert_eq!(w.invoke(&d, unkeyed("oget", "a")).as_deref(), Ok("5"), "a new invocation reads what finished before it");
    assert_eq!(w.invoke(&d, unkeyed("osum", "")).as_deref(), Ok("5 2"));
}

/// A transaction reads its own writes, and they are its own: the node's parsed view of
/// the object, which the transaction read first, is what every reader sees after it
/// aborted (the transaction wrote on a copy).
#[test]
fn a_transaction_writes_on_its_own_copy_of_what_it_read() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_objects(&w);
    assert_eq!(w.invoke(&d, keyed("oset", "a1", r#"a {"n":1}"#)).as_deref(), Ok("ok"));
    assert_eq!(w.invoke(&d, unkeyed("oget", "a")).as_deref(), Ok(r#"{"n":1}"#), "a view kept on the node");
    assert_eq!(w.invoke(&d, keyed("oundo", "u", "a")).as_deref(), Ok(r#"{"n":1} {"n":99} {"n":1}"#));
    assert_eq!(w.invoke(&d, unkeyed("oget", "a")).as_deref(), Ok(r#"{"n":1}"#));
}

/// An instance that read at a snapshot and then writes cannot log the write after it
/// (a re-execution would read at its Init instead): it stops before logging anything and
/// runs again with its Init first, and the node remembers the function, whose next
/// invocations log the Init before the read and run once.
#[test]
fn a_write_after_a_snapshot_read_runs_again_with_the_init_first_once_per_function() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_objects(&w);
    assert_eq!(w.invoke(&d, keyed("oset", "c1", r#"c {"n":1}"#)).as_deref(), Ok("ok"));
    assert_eq!(w.invoke(&d, unkeyed("obump", "c")).as_deref(), Ok("2"));
    assert_eq!(w.guests.runs("obump").len(), 2, "the first run stopped at its write and ran again");
    assert_eq!(w.invoke(&d, keyed("obump", "k", "c")).as_deref(), Ok("3"));
    assert_eq!(w.guests.runs("obump").len(), 3, "the function is remembered: one run");
    assert_eq!(w.invoke(&d, keyed("obump", "k", "c")).as_deref(), Ok("3"), "a retry gets the logged result");
    assert_eq!(w.invoke(&d, unkeyed("oget", "c")).as_deref(), Ok(r#"{"n":3}"#));
    let steps = w.stream(&d, d.core.tags.step(&id("obump", "k")));
    assert!(matches!(steps.first(), Some(Step::Init(kind::Init { .. }))), "the Init is logged alone first: {steps:?}");
}

/// Garbage collection keeps what a snapshot may read: an instance that read object `a`
/// at its snapshot reads it there again after many writes and collections (which
/// checkpoint `a`'s stream and trim it below the horizon), and gets the same value.
/// Without the pin the horizon passes the snapshot and the second read is refused.
#[test]
fn garbage_collection_keeps_what_a_snapshot_reads() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_objects(&w);
    assert_eq!(w.invoke(&d, keyed("oset", "a1", "a 1")).as_deref(), Ok("ok"));
    let mut inst = Instance::new(d.core.clone(), Of { forgettable: true, ..of_deferred(&w, "oget", "hand", "a") });
    let mut ctx = Context::new();
    assert_eq!(w.run(inst.object_get(&mut ctx, "a", "")).expect("a read").as_deref(), Some("1"));
    assert!(inst.init_deferred() && d.core.pins.floor().is_some(), "the read took a snapshot");
    let mut scan = Recovery::default();
    for n in 2..8 {
        assert_eq!(w.invoke(&d, keyed("oset", &format!("a{n}"), &format!("a {n}"))).as_deref(), Ok("ok"));
        w.recover(&d, &mut scan, 2);
    }
    assert_eq!(w.run(inst.object_get(&mut ctx, "a", "")).expect("the snapshot is kept").as_deref(), Some("1"));
    drop(inst);
    assert_eq!(d.core.pins.floor(), None);
    assert_eq!(w.invoke(&d, unkeyed("oget", "a")).as_deref(), Ok("7"));
}

/// A forgettable invocation (no key) whose first attempt read at a snapshot and trapped
/// logs its Init alone (to be retried as one that started), and its retry finishes it
/// in the log: the Init is followed by a result, so nothing is left open for the
/// recovery scan. (A retry that took the fresh ID's first attempt for granted would run
/// deferred, log nothing, and leave the Init open.)
#[test]
fn a_forgettable_invocation_that_trapped_after_a_snapshot_read_finishes_in_the_log() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_objects(&w);
    let flaky = guest(|a| {
        Box::pin(async move {
            let read = a.object_get("a", "").await?.unwrap_or_default();
            match a.attempt {
                1 => Err(Abort::Transient(Error::Trap("the first attempt traps".into()))),
                _ => Ok(read.into_bytes()),
            }
        })
    });
    w.deploy("oflaky", Limits::default(), flaky);
    // Each answered before its Result (its outcome is the log's): that follows at once.
    assert_eq!(w.invoke(&d, keyed("oset", "a1", "a 1")).as_deref(), Ok("ok"));
    w.advance(1);
    let before = w.stream(&d, INSTANCES).len();
    assert_eq!(w.invoke(&d, unkeyed("oflaky", "")).as_deref(), Ok("1"));
    w.advance(1);
    let logged: Vec<Step> = w.stream(&d, INSTANCES).into_iter().skip(before).collect();
    assert!(
        matches!(&logged[..], [Step::Init(kind::Init { .. }), Step::Result(kind::Result { .. })]),
        "the trapped invocation logged {logged:?} in INSTANCES"
    );
}

/// On a node alone a root whose Init is deferred calls its children deferred too: a
/// child that only reads logs nothing, and its outcome waits with the parent's Init. So
/// an unkeyed workflow whose steps only read logs nothing at all, and a keyed one a
/// single record. A child that has something to log hands that back to its parent,
/// which logs its own Init first and calls it again, so a child's records always follow
/// its parent's Init.
#[test]
fn children_of_a_deferred_root_that_only_read_log_nothing() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_objects(&w);
    // `flow <object>...`: calls `oget` on each object, or `oset` for `name=json`.
    let flow = guest(|a| {
        Box::pin(async move {
            let mut out = Vec::new();
            for word in words(&a.input) {
                let (function, input) = match word.split_once('=') {
                    Some((object, json)) => ("oset", format!("{object} {json}")),
                    None => ("oget", word.clone()),
                };
                let got = a.call(function.into(), Bytes::from(input)).await?.map_err(Abort::Transient)?;
                out.push(String::from_utf8_lossy(&got).into_owned());
            }
            Ok(out.join(" ").into_bytes())
        })
    });
    w.deploy("flow", Limits::default(), flow);
    assert_eq!(w.invoke(&d, keyed("oset", "a1", "a 1")).as_deref(), Ok("ok"));
    assert_eq!(w.invoke(&d, keyed("oset", "b2", "b 2")).as_deref(), Ok("ok"));
    let before = w.stream(&d, INSTANCES).len();
    assert_eq!(w.invoke(&d, unkeyed("flow", "a b")).as_deref(), Ok("1 2"));
    assert_eq!(w.stream(&d, INSTANCES).len(), before, "an unkeyed read-only workflow logged a record");

    assert_eq!(w.invoke(&d, keyed("flow", "f", "a b")).as_deref(), Ok("1 2"));
    let steps = w.stream(&d, d.core.tags.step(&id("flow", "f")));
    assert!(
        matches!(&steps[..], [Step::Group(kind::Group { steps })] if matches!(&steps[..],
            [Step::Init(kind::Init { .. }), Step::Invoke(kind::Invoke { .. }), Step::Invoke(kind::Invoke { .. }), Step::Result(kind::Result { .. })])),
        "the keyed read-only workflow logged {steps:?}"
    );
    assert_eq!(w.invoke(&d, keyed("oset", "a3", "a 3")).as_deref(), Ok("ok"));
    assert_eq!(w.invoke(&d, keyed("flow", "f", "a b")).as_deref(), Ok("1 2"), "a retry gets the logged result");

    // A step that writes: the parent's Init is logged before the child's.
    let logged = w.stream(&d, INSTANCES).len();
    assert_eq!(w.invoke(&d, unkeyed("flow", "a c=5 c")).as_deref(), Ok("3 ok 5"));
    let inits: Vec<String> = w
        .stream(&d, INSTANCES)
        .into_iter()
        .skip(logged)
        .filter_map(|s| s.into_init_and_last().0)
        .map(|s| match s {
            Step::Init(kind::Init { function, .. }) => function,
            other => other.describe(),
        })
        .collect();
    // The parent's Init first, then the writing child's, and the call after it (its
    // parent's Init is logged now) is eager as any child's.
    assert_eq!(inits, ["flow", "oset", "oget"]);
}

/// On a node alone a read-write transaction begun before the Init begins at the snapshot,
/// and its commit rides the Init: the invocation's first record is [Init, commit], one
/// append before its answer instead of two, and it runs once. A read at the snapshot
/// before the transaction keeps the Init first (a re-execution could not read there).
#[test]
fn a_transaction_before_the_init_commits_in_the_init_s_record() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_objects(&w);
    assert_eq!(w.invoke(&d, keyed("oset", "a1", r#"a {"n":1}"#)).as_deref(), Ok("ok"));
    assert_eq!(w.invoke(&d, keyed("oinc", "i", "a")).as_deref(), Ok("2"));
    w.advance(1);
    assert_eq!(w.guests.runs("oinc").len(), 1);
    let steps = w.stream(&d, d.core.tags.step(&id("oinc", "i")));
    assert!(
        matches!(&steps[..], [Step::Group(kind::Group { steps }), Step::Result(kind::Result { .. })]
            if matches!(&steps[..], [Step::Init(kind::Init { .. }), Step::TxnCommit(kind::TxnCommit { .. })])),
        "the transaction logged {steps:?}"
    );
    assert_eq!(w.invoke(&d, unkeyed("oget", "a")).as_deref(), Ok(r#"{"n":2}"#), "readers apply a commit in a group");
    assert_eq!(w.invoke(&d, keyed("oinc", "i", "a")).as_deref(), Ok("2"), "a retry gets the logged result");
    assert_eq!(d.core.pins.floor(), None, "an instance that ended holds no snapshot");
}

/// An execution that crashed after its commit rode the Init, before its result: its
/// re-execution begins the transaction where the commit says the first one began, reads
/// what it read and takes the logged commit, however the object changed since and
/// whatever garbage collection ran meanwhile (the recovery scan keeps the root's history
/// from the commit's start). Beginning at the Init's place instead, it read its own
/// commit's write and stopped as non-deterministic.
#[test]
fn a_re_execution_begins_a_transaction_where_its_commit_riding_the_init_began() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy_objects(&w);
    assert_eq!(w.invoke(&d, keyed("oset", "a1", r#"a {"n":1}"#)).as_deref(), Ok("ok"));
    let mut first = Instance::new(d.core.clone(), of_deferred(&w, "oinc", "crash", "a"));
    let mut ctx = Context::new();
    let committed = w.run(async {
        first.txn_begin(&mut ctx, false).await?;
        assert_eq!(first.object_get(&mut ctx, "a", "/n").await?.as_deref(), Some("1"));
        first.object_update(&mut ctx, "a", ObjOp::Set { path: "/n".into(), json: "2".into() }).await?;
        first.txn_commit(&mut ctx).await
    });
    assert!(matches!(committed, Ok(true)), "the commit: {committed:?}");
    // The process dies before the result.
    drop(first);
    let steps = w.stream(&d, d.core.tags.step(&id("oinc", "crash")));
    let start = match &steps[..] {
        [Step::Group(kind::Group { steps })] => match &steps[..] {
            [Step::Init(kind::Init { .. }), Step::TxnCommit(kind::TxnCommit { start, .. })] => *start,
            other => panic!("the first execution logged {other:?}"),
        },
        other => panic!("the first execution logged {other:?}"),
    };
    // Others write the object, and collections run, before recovery runs it again.
    let mut scan = Recovery::default();
    for n in 5..9 {
        assert_eq!(w.invoke(&d, keyed("oset", &format!("a{n}"), &format!(r#"a {{"n":{n}}}"#))).as_deref(), Ok("ok"));
        // Their results are logged (after their answers).
        w.advance(1);
        w.run(scan.round(&d)).expect("a recovery round");
        let horizon = scan.horizon_of(BOOK).expect("scanned");
        assert!(horizon <= start, "the horizon {horizon} passed the start {start} of an open root's commit");
    }
    w.recover(&d, &mut scan, 3);
    assert_eq!(
        w.wait_finished(&d, &id("oinc", "crash")),
        Ok(InvocationStatus::Finished(Ok(Bytes::from_static(b"2")))),
        "the re-execution read the object where the first one did"
    );
    assert_eq!(w.invoke(&d, unkeyed("oget", "a")).as_deref(), Ok(r#"{"n":8}"#));
}
