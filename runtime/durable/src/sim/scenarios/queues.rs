//! Scenarios of queues: what records a producer's pushes ride, and what pops get from
//! records that hold several pushes.

use bytes::Bytes;

use crate::record::kind;
use crate::record::Step;

use super::{config, guest, keyed, unkeyed, Limits, World};

/// A producer of several small messages appends one record for all of them (with its
/// result), not one per push and per clock reading; consumers pop them once each, in
/// order, from that record, across records, and after garbage collection.
/// Deploys `producer` (input "NAME N": pushes NAME.0 .. NAME.N-1 to "q", reading the
/// clock before each) and `consumer` (pops "q" until it is empty; returns what it got).
fn deploy(w: &mut World) {
    let producer = guest(|a| {
        Box::pin(async move {
            let input = String::from_utf8(a.input.to_vec()).unwrap();
            let (name, n) = input.split_once(' ').unwrap();
            for j in 0..n.parse().unwrap() {
                a.wall_clock_ns(j);
                a.queue_push("q", Bytes::from(format!("{name}.{j}"))).await?;
            }
            Ok(b"ok".to_vec())
        })
    });
    let consumer = guest(|a| {
        Box::pin(async move {
            let mut got = Vec::new();
            while let Some(m) = a.queue_pop("q", 0).await? {
                got.push(String::from_utf8(m.to_vec()).unwrap());
                a.wall_clock_ns(got.len() as u64);
            }
            Ok(got.join(",").into_bytes())
        })
    });
    // Pops "q" until it is empty, pushing each message to "r".
    let relay = guest(|a| {
        Box::pin(async move {
            let mut n = 0;
            while let Some(m) = a.queue_pop("q", 0).await? {
                a.queue_push("r", m).await?;
                n += 1;
            }
            Ok(n.to_string().into_bytes())
        })
    });
    w.deploy("producer", Limits::default(), producer);
    w.deploy("consumer", Limits::default(), consumer);
    // Pops the queue its input names until it is empty; returns what it got.
    let drain = guest(|a| {
        Box::pin(async move {
            let queue = String::from_utf8(a.input.to_vec()).unwrap();
            let mut got = Vec::new();
            while let Some(m) = a.queue_pop(&queue, 0).await? {
                got.push(String::from_utf8(m.to_vec()).unwrap());
            }
            Ok(got.join(",").into_bytes())
        })
    });
    w.deploy("relay", Limits::default(), relay);
    w.deploy("drain", Limits::default(), drain);
}

/// The records of every shard of "q".
fn shard_records(w: &mut World, d: &std::sync::Arc<crate::Durable>) -> Vec<Vec<Step>> {
    (0..crate::queues::SHARDS).map(|s| w.stream(d, d.core.tags.queue_shard("q", s))).collect()
}

#[test]
fn small_pushes_ride_one_record_and_pop_once_in_order() {
    let mut w = World::new(config());
    let d = w.start(0);
    deploy(&mut w);
    assert_eq!(w.invoke(&d, keyed("producer", "p1", "p1 3")).as_deref(), Ok("ok"));
    assert_eq!(w.invoke(&d, keyed("producer", "p2", "p2 2")).as_deref(), Ok("ok"));
    // Each producer's pushes share one shard (its ID's); one record of its step log
    // holds them all, with the clock readings and the result.
    let shards = shard_records(&mut w, &d);
    let records: Vec<&Step> = shards.iter().flatten().collect();
    assert_eq!(records.len(), 2, "one record per producer");
    for step in records {
        let steps = step.clone().into_steps();
        let pushed = steps.iter().filter(|s| matches!(s, Step::QueuePush(kind::QueuePush { .. }))).count();
        assert!(pushed == 3 || pushed == 2, "{steps:?}");
        assert!(matches!(steps.last(), Some(Step::Result(kind::Result { .. }))), "{steps:?}");
    }
    let got = w.invoke(&d, keyed("consumer", "c1", "")).expect("popped");
    let got: Vec<&str> = got.split(',').collect();
    for (name, n) in [("p1", 3), ("p2", 2)] {
        let mine: Vec<String> = got.iter().filter(|m| m.starts_with(name)).map(|m| m.to_string()).collect();
        let pushed: Vec<String> = (0..n).map(|j| format!("{name}.{j}")).collect();
        assert_eq!(mine, pushed, "{name}'s messages once each, in order: {got:?}");
    }
    assert_eq!(got.len(), 5, "{got:?}");
    // The consumer read the clock after each pop: the readings rode the next pop's
    // record (or the result's), never a record of their own.
    let steps = w.stream(&d, d.core.tags.step(&super::id("consumer", "c1")));
    assert!(!steps.iter().any(|s| matches!(s, Step::Clocks(_))), "{steps:?}");
    assert_eq!(steps.len(), 1 + 5 + 1 + 1, "the Init, five pops, the empty one and the result: {steps:?}");
    assert_eq!(w.invoke(&d, keyed("consumer", "c2", "")).as_deref(), Ok(""), "nothing is popped twice");
}

/// On a node alone, an invocation without a key defers its Init to that record too: a
/// producer of three messages is one append, which consumers pop from.
#[test]
fn a_lazily_started_producer_on_a_node_alone_is_one_record() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    deploy(&mut w);
    // The book's first invocation lists it (an append of its own).
    w.put(&d, "ro", "k", "v");
    let appends = w.log.state.lock().unwrap().appends;
    assert_eq!(w.invoke(&d, unkeyed("producer", "p 3")).as_deref(), Ok("ok"));
    assert_eq!(w.log.state.lock().unwrap().appends - appends, 1, "one append");
    let records: Vec<Step> = shard_records(&mut w, &d).into_iter().flatten().collect();
    let [record] = &records[..] else { panic!("{records:?}") };
    let steps = record.clone().into_steps();
    assert!(steps.first().is_some_and(Step::is_init) && matches!(steps.last(), Some(Step::Result(_))), "{steps:?}");
    assert_eq!(w.invoke(&d, unkeyed("consumer", "")).as_deref(), Ok("p.0,p.1,p.2"));
}

/// A relay's push to the next queue rides its next pop's record (or its result's), so
/// moving a message costs one append; a push to the queue it pops from is logged before
/// the pop, which finds it.
#[test]
fn a_relay_moves_each_message_with_one_append() {
    let mut w = World::new(config());
    let d = w.start(0);
    deploy(&mut w);
    assert_eq!(w.invoke(&d, keyed("producer", "p", "p 4")).as_deref(), Ok("ok"));
    assert_eq!(w.invoke(&d, keyed("relay", "r", "")).as_deref(), Ok("4"));
    let steps = w.stream(&d, d.core.tags.step(&super::id("relay", "r")));
    // The Init, four pops (each with the push before it), the empty one (with the last
    // push) and the result.
    assert_eq!(steps.len(), 1 + 4 + 1 + 1, "{steps:?}");
    let got: Vec<String> = (0..crate::queues::SHARDS)
        .flat_map(|s| w.stream(&d, d.core.tags.queue_shard("r", s)))
        .flat_map(Step::into_steps)
        .filter_map(|s| match s {
            Step::QueuePush(kind::QueuePush { message, .. }) => Some(String::from_utf8(message.to_vec()).unwrap()),
            _ => None,
        })
        .collect();
    assert_eq!(got, ["p.0", "p.1", "p.2", "p.3"]);
    // Its records are in the streams of both queues: a view of one cached on them would
    // be taken for the other's (the second queue looked empty).
    assert_eq!(w.invoke(&d, keyed("drain", "dr", "r")).as_deref(), Ok("p.0,p.1,p.2,p.3"));
    // A pop after a push to its own queue finds that message.
    let own = guest(|a| {
        Box::pin(async move {
            a.queue_push("own", Bytes::from_static(b"mine")).await?;
            Ok(a.queue_pop("own", 0).await?.map(|m| m.to_vec()).unwrap_or_default())
        })
    });
    w.deploy("own", Limits::default(), own);
    assert_eq!(w.invoke(&d, keyed("own", "o", "")).as_deref(), Ok("mine"));
}

/// A pop of many takes up to its `max` oldest messages of one shard with one record:
/// from one record of pushes and across several (large messages are a record each),
/// each message once, in order; a `max` out of 1 to 100 is refused.
#[test]
fn a_pop_of_many_takes_them_with_one_record() {
    let mut w = World::new(config());
    let d = w.start(0);
    deploy(&mut w);
    // Pushes three messages of 9 KiB (past PUT_INLINE_MAX: a record each).
    let big = guest(|a| {
        Box::pin(async move {
            for j in 0..3 {
                let mut message = format!("big.{j}.").into_bytes();
                message.resize(crate::record::PUT_INLINE_MAX + 1024, b'x');
                a.queue_push("q", Bytes::from(message)).await?;
            }
            Ok(b"ok".to_vec())
        })
    });
    // Pops "q" three at most at a time until it is empty: "first,second|third|" per pop.
    let many = guest(|a| {
        Box::pin(async move {
            let mut pops = Vec::new();
            loop {
                let got = a.queue_pop_many("q", 3, 0).await?;
                if got.is_empty() {
                    break;
                }
                pops.push(
                    got.iter().map(|m| String::from_utf8_lossy(&m[..m.len().min(6)]).into_owned()).collect::<Vec<_>>().join(","),
                );
            }
            for max in [0, crate::queues::POP_MANY_MAX + 1] {
                match a.queue_pop_many("q", max, 0).await {
                    Err(crate::abort::Abort::Refused(crate::error::Error::InvalidArgument(_))) => {}
                    other => panic!("a pop of {max} gave {other:?}"),
                }
            }
            Ok(pops.join("|").into_bytes())
        })
    });
    w.deploy("big", Limits::default(), big);
    w.deploy("many", Limits::default(), many);
    assert_eq!(w.invoke(&d, keyed("producer", "p", "p 4")).as_deref(), Ok("ok"));
    assert_eq!(w.invoke(&d, keyed("big", "b", "")).as_deref(), Ok("ok"));
    let got = w.invoke(&d, keyed("many", "m", "")).expect("popped");
    let pops: Vec<Vec<&str>> = got.split('|').map(|p| p.split(',').collect()).collect();
    // Each pop takes what one shard holds, up to three: three pops for the seven
    // messages, whether the producers' shards are one (3, 3, 1) or two (3, 1 and 3).
    assert!(pops.iter().all(|p| (1..=3).contains(&p.len())), "{pops:?}");
    assert_eq!(pops.len(), 3, "{pops:?}");
    let all: Vec<&str> = pops.iter().flatten().copied().collect();
    let mine = |name: &str| all.iter().filter(|m| m.starts_with(name)).copied().collect::<Vec<_>>();
    assert_eq!(mine("p."), ["p.0", "p.1", "p.2", "p.3"], "{pops:?}");
    assert_eq!(mine("big."), ["big.0.", "big.1.", "big.2."], "{pops:?}");
    assert_eq!(all.len(), 7, "{pops:?}");
    // The big producer's three records are popped by one pop, if its shard is not the
    // other's (then by pops that cross records anyway).
    if crate::queues::shard_of(&super::id("big", "b")) != crate::queues::shard_of(&super::id("producer", "p")) {
        assert!(pops.contains(&vec!["big.0.", "big.1.", "big.2."]), "{pops:?}");
    }
    let steps = w.stream(&d, d.core.tags.step(&super::id("many", "m")));
    let popped = steps.iter().flat_map(|s| s.clone().into_steps()).filter(|s| matches!(s, Step::QueuePopMany(_))).count();
    assert_eq!(popped, pops.len() + 1, "one record per pop and the empty one: {steps:?}");
    assert_eq!(w.invoke(&d, keyed("consumer", "c", "")).as_deref(), Ok(""), "nothing is popped twice");
}
