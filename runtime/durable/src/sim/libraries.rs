//! The harness task of the libraries' workload (`libs.rs`): it starts the tellers,
//! producers, consumers, lockers and keyed invocations through the clients' request
//! helpers, drains the queue, reads the final values and asks the libraries' oracle.

use std::sync::Arc;

use bytes::Bytes;
use tally_log_core::BookId;

use crate::env::{Clock, Spawn};
use crate::error::Error;
use crate::invoke::InvokeRequest;

use super::chan;
use super::clients::{submit_and_wait, submit_to, unkeyed_request, wait_finished};
use super::libs::{
    check_libraries, CONSUMER, CONSUMERS, KEYED, KEYEDS, LOCKER, LOCKERS, PRODUCER, PRODUCERS, READER, RELAY, RELAY_DRAIN,
    TELLER, TELLERS,
};
use super::world::World;

/// The libraries' workload (`libs.rs`): tellers, producers and consumers, lockers and
/// keyed invocations on one book, all at once through the faults; then a drain, the
/// final reads and the oracle.
pub(super) async fn libraries(world: Arc<World>) {
    let h = world.harness();
    let book = BookId(0);
    let mut started: Vec<(String, String)> = Vec::new();
    let mut plan: Vec<(&str, String, Option<crate::record::InvocationKey>)> = Vec::new();
    // The seed in the tellers' inputs: what each does (and on which counters) follows
    // from its input, so every seed gets another mix.
    plan.extend((0..TELLERS).map(|t| (TELLER, format!("t{t}-{}", world.seed), None)));
    plan.extend((0..PRODUCERS).map(|p| (PRODUCER, format!("p{p}"), None)));
    plan.extend((0..CONSUMERS).map(|c| (CONSUMER, format!("c{c}"), None)));
    plan.push((CONSUMER, format!("{RELAY}0"), None));
    plan.extend((0..LOCKERS).map(|l| (LOCKER, format!("l{l}"), None)));
    plan.extend(
        (0..KEYEDS).map(|k| (KEYED, format!("k{k}"), Some(crate::record::InvocationKey { key: "hot".into(), exclusive: true }))),
    );
    // Tellers answered synchronously: (input, their task's end).
    let mut answered = Vec::new();
    for (function, input, to) in plan {
        // Tellers close together, so that their transactions' windows overlap.
        h.sleep(world.draw(if function == TELLER { 4 } else { 30 })).await;
        let key = format!("lib-{input}");
        if function == TELLER && (answered.len() as u64) < TELLERS / 2 && world.chance(0.5) {
            answered.push((input.clone(), teller_answered(&world, book, input, key)));
            continue;
        }
        let Some(id) = submit_to(&world, function, book, Bytes::from(input.clone()), key, to).await else { return };
        let snapshot = function == TELLER && input.starts_with("t1");
        started.push((input, id));
        if snapshot {
            snapshot_read(&world, book, started.len()).await;
        }
    }
    let reported = |input: &str| {
        let t = world.traces.lock().expect("not poisoned");
        let l = &t.libs;
        l.tellers.contains_key(input)
            || l.consumers.contains_key(input)
            || l.holders.contains_key(input)
            || input.starts_with('p')
    };
    for (input, id) in &started {
        if wait_finished(&world, book, id, || reported(input)).await.is_none() {
            return;
        }
    }
    for (input, end) in answered {
        if end.await.is_none() || !reported(&input) {
            return;
        }
    }
    // Drain what the consumers left (they stop at an empty queue), then what the relay
    // pushed to the second queue.
    for drain in ["drain", RELAY_DRAIN] {
        for d in 0.. {
            let input = format!("{drain}{d}");
            if submit_and_wait(&world, CONSUMER, book, Bytes::from(input.clone()), format!("lib-{input}")).await.is_none() {
                return;
            }
            let consumers = &world.traces.lock().expect("not poisoned").libs.consumers;
            let empty = consumers.get(&input).is_none_or(|e| e.iter().all(Vec::is_empty));
            if empty || d > 20 {
                break;
            }
        }
    }
    for input in ["counters", "locked", "locked-m", "keyed"] {
        if submit_and_wait(&world, READER, book, Bytes::from(input), format!("lib-read-{input}")).await.is_none() {
            return;
        }
    }
    let checked = {
        let t = world.traces.lock().expect("not poisoned");
        check_libraries(&t.libs)
    };
    match checked {
        Ok(n) => {
            world.stats.lock().expect("not poisoned").library_checked += n;
            *world.libs_done.lock().expect("not poisoned") = true;
        }
        Err(e) => world.fail(e),
    }
}

/// Starts a teller synchronously, with an idempotency key, asked again until it
/// answers: on a node alone its Init is deferred, and a transaction it begins first
/// commits in the Init's record (`instance/snapshot.rs`). The receiver answers once it
/// has (`None` after a violation, or when the harness stopped).
fn teller_answered(world: &Arc<World>, book: BookId, input: String, key: String) -> chan::Receiver<()> {
    let (tx, rx) = chan::oneshot::<()>();
    let w = world.clone();
    world.harness().spawn(
        "teller",
        Box::pin(async move {
            let h = w.harness();
            loop {
                let Some((n, d, _)) = w.pick_node() else {
                    h.sleep(5).await;
                    continue;
                };
                let req = InvokeRequest { idempotency_key: Some(key.clone()), ..unkeyed_request(TELLER, book, input.as_bytes()) };
                match w.on_node(n, d, "teller", move |d| async move { d.invoke(req).await }).await {
                    Some(Ok(_)) => break,
                    Some(Err(e)) if !e.is_transient() && !matches!(e, Error::Suspended { .. }) => {
                        w.fail(format!("teller {input}: {e}"));
                        return;
                    }
                    _ => h.sleep(1 + w.draw(20)).await,
                }
            }
            tx.send(());
        }),
    );
    rx
}

/// Reads every counter in one read-only transaction with a request that has no key,
/// while the tellers run: on a node alone it reads at a snapshot and logs nothing
/// (`instance/snapshot.rs`), and the oracle checks that what it read is the counters'
/// state after some prefix of the committed writes. A failed or lost answer is let go.
async fn snapshot_read(world: &Arc<World>, book: BookId, n: usize) {
    let Some((node, d, _)) = world.pick_node() else { return };
    let req = unkeyed_request(READER, book, format!("snap{n}").as_bytes());
    world.on_node(node, d, "snapshot read", move |d| async move { d.invoke(req).await }).await;
}
