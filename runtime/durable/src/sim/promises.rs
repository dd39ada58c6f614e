//! Promises through the faults: the guests' promises completed at random (some twice,
//! which must be refused), and invocations awaiting promises other invocations created.

use std::sync::Arc;

use bytes::Bytes;
use tally_log_core::{BookId, Context};

use crate::env::Clock;
use crate::error::Error;

use super::clients::{submit, submit_and_wait, wait_finished};
use super::guest;
use super::world::World;

/// Completes the promises guests created, at random times on random nodes, some of them
/// again (which must be refused). Two successful completions of one promise are a
/// violation.
pub(super) async fn completer(world: Arc<World>) {
    let h = world.harness();
    loop {
        h.sleep(1 + world.draw(30)).await;
        let pick = {
            let t = world.traces.lock().expect("not poisoned");
            (!t.promises.is_empty()).then(|| t.promises[world.draw(t.promises.len() as u64) as usize].clone())
        };
        let Some((book, promise)) = pick else { continue };
        let Some((n, d, _)) = world.pick_node() else { continue };
        let value = world.draw(1 << 60);
        // Offered before it is sent: a completion whose answer is lost may have landed.
        world.traces.lock().expect("not poisoned").promise_values.entry(promise.clone()).or_default().0.push(value);
        let p = promise.clone();
        let answer = world
            .on_node(n, d, "complete", move |d| async move {
                d.invocations()
                    .complete_promise(&mut Context::new(), BookId(book), &p, Bytes::copy_from_slice(&value.to_be_bytes()))
                    .await
            })
            .await;
        let mut t = world.traces.lock().expect("not poisoned");
        match answer {
            Some(Ok(())) => {
                let ok = &mut t.promise_values.entry(promise.clone()).or_default().1;
                ok.push(value);
                if ok.len() > 1 {
                    let ok = ok.clone();
                    drop(t);
                    world.fail(format!("promise {promise} was completed twice: {ok:?}"));
                    return;
                }
            }
            Some(Err(Error::Conflict(_))) if world.chance(0.5) => t.promises.retain(|(_, p)| *p != promise),
            _ => {}
        }
    }
}

/// Invocations awaiting promises that other invocations created, with no timeout:
/// a `maker` creates a promise, two `waiter`s await it (each suspends), and the harness
/// completes it a while later on a random node. Nothing but the promise's waiters
/// stream wakes the waiters (the recovery scan looks only every ten minutes, past the
/// run's end), so each must finish, with the value a completion offered, the same in
/// every execution of both.
pub(super) async fn waiters(world: Arc<World>) {
    const PROMISES: u64 = 3;
    let h = world.harness();
    for p in 0..PROMISES {
        h.sleep(world.draw(400)).await;
        let book = BookId(p % world.opts.books);
        let Some(promise) = submit_and_wait(&world, guest::MAKER, book, Bytes::new(), format!("maker-{p}")).await else { return };
        let Some(promise) = promise.map(|out| String::from_utf8_lossy(&out).into_owned()) else {
            return world.fail(format!("the maker of promise {p} was collected before it was seen"));
        };
        let waiting: Vec<String> = vec![format!("waiter-{p}-a"), format!("waiter-{p}-b")];
        let mut ids = Vec::new();
        for key in &waiting {
            let Some(id) = submit(&world, guest::WAITER, book, Bytes::from(promise.clone()), key.clone()).await else { return };
            ids.push(id);
        }
        h.sleep(world.draw(300)).await;
        let mut offered = Vec::new();
        loop {
            let Some((n, d, _)) = world.pick_node() else {
                h.sleep(5).await;
                continue;
            };
            let value = world.draw(1 << 60);
            offered.push(value);
            let q = promise.clone();
            let answer = world
                .on_node(n, d, "complete", move |d| async move {
                    d.invocations()
                        .complete_promise(&mut Context::new(), book, &q, Bytes::copy_from_slice(&value.to_be_bytes()))
                        .await
                })
                .await;
            match answer {
                // A conflict: an earlier try whose answer was lost completed it.
                Some(Ok(())) | Some(Err(Error::Conflict(_))) => break,
                Some(Err(e)) if !e.is_transient() && !matches!(e, Error::PromiseNotFound(_)) => {
                    return world.fail(format!("completing {promise}: {e}"));
                }
                _ => h.sleep(5 + world.draw(20)).await,
            }
        }
        let mut got = Vec::new();
        for id in ids {
            let Some(out) =
                wait_finished(&world, book, &id, || world.traces.lock().expect("not poisoned").waited.contains_key(&promise))
                    .await
            else {
                return;
            };
            got.extend(out.map(|o| u64::from_be_bytes(o[..8.min(o.len())].try_into().unwrap_or([0; 8]))));
        }
        let seen = world.traces.lock().expect("not poisoned").waited.get(&promise).cloned().unwrap_or_default();
        let all: Vec<u64> = seen.iter().chain(&got).copied().collect();
        if all.is_empty() || !all.iter().all(|v| *v == all[0]) || !offered.contains(&all[0]) {
            return world.fail(format!("the waiters of {promise} got {got:?}, their executions {seen:?}; offered {offered:?}"));
        }
        world.stats.lock().expect("not poisoned").awaited_elsewhere += 2;
    }
    *world.waiters_done.lock().expect("not poisoned") = true;
}
