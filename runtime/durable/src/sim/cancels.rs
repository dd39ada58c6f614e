//! Cancellations through the faults: invocations cancelled asleep, running or already
//! finished, each checked against what its executions saw and made.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tally_log_core::{BookId, Context};

use crate::env::{Clock, Spawn};
use crate::error::Error;
use crate::invoke::InvocationStatus;

use super::guest;
use super::world::World;

/// Invocations cancelled mid-flight through the faults: each [`guest::TARGET`] is
/// submitted asynchronously and cancelled (on random nodes, some twice) after a random
/// while, asleep, running or already finished, while its status is polled (results
/// are kept only briefly). Once finished, each is checked against what its executions
/// saw (below), and a second later its stream has not grown (nothing ran after the
/// outcome).
pub(super) async fn cancels(world: Arc<World>) {
    const TARGETS: u64 = 6;
    let h = world.harness();
    let done = Arc::new(Mutex::new(0u64));
    for t in 0..TARGETS {
        h.sleep(world.draw(300)).await;
        let (w, done) = (world.clone(), done.clone());
        h.spawn(
            "target",
            Box::pin(async move {
                if cancel_one(&w, t).await.is_some() {
                    *done.lock().expect("not poisoned") += 1;
                }
            }),
        );
    }
    while *done.lock().expect("not poisoned") < TARGETS {
        h.sleep(50).await;
    }
    *world.cancels_done.lock().expect("not poisoned") = true;
}

/// Whether an execution of target `input` ran to its end (all its steps, or its
/// cancellation).
fn target_ended(world: &World, input: &str) -> bool {
    let t = world.traces.lock().expect("not poisoned");
    t.targets.get(input).is_some_and(|&(ok, cancelled)| cancelled || ok == guest::TARGET_STEPS)
}

/// One target of [`cancels`]; `None` after a violation.
async fn cancel_one(world: &Arc<World>, t: u64) -> Option<()> {
    let h = world.harness();
    let book = BookId(t % world.opts.books);
    let input = format!("x{t}");
    let key = format!("target-{t}");
    let id = loop {
        let Some((n, d, _)) = world.pick_node() else {
            h.sleep(5).await;
            continue;
        };
        let (i, k) = (Bytes::from(input.clone()), key.clone());
        match world
            .on_node(n, d, "submit", move |d| async move {
                d.invoke_async(&mut Context::new(), guest::TARGET.into(), book, i, Some(k), 0, None).await
            })
            .await
        {
            Some(Ok(id)) => break id.to_string(),
            Some(Err(e)) if !e.is_transient() => {
                world.fail(format!("submitting {input}: {e}"));
                return None;
            }
            _ => h.sleep(5 + world.draw(20)).await,
        }
    };
    // The cancellations, in their own task: whether every answer refused it.
    let refused_all: Arc<Mutex<Option<bool>>> = Arc::default();
    let (w, i, answer) = (world.clone(), id.clone(), refused_all.clone());
    h.spawn(
        "cancel",
        Box::pin(async move {
            w.harness().sleep(w.draw(700)).await;
            let mut refused = true;
            for _ in 0..1 + w.draw(2) {
                let Some((n, d, _)) = w.pick_node() else { continue };
                let c = i.clone();
                match w
                    .on_node(n, d, "cancel", move |d| async move { d.invocations().cancel(&mut Context::new(), book, &c).await })
                    .await
                {
                    // Finished already, or not yet visible on a lagging replica.
                    Some(Err(Error::Conflict(_) | Error::InvocationNotFound(_))) => {}
                    Some(Err(e)) if !e.is_transient() => return w.fail(format!("cancelling {i}: {e}")),
                    _ => refused = false,
                }
            }
            *answer.lock().expect("not poisoned") = Some(refused);
        }),
    );
    let submitted_ms = h.now_ms();
    let outcome = loop {
        h.sleep(5 + world.draw(10)).await;
        let Some((n, d, _)) = world.pick_node() else { continue };
        let i = id.clone();
        match world.on_node(n, d, "status", move |d| async move { d.invocation(&mut Context::new(), book, &i).await }).await {
            Some(Ok(InvocationStatus::Finished(r))) => break Some(r),
            // Its result was collected before a look got to it (a paused node, say):
            // once an execution ran it to its end, the outcome is unknown, not lost.
            Some(Err(Error::InvocationNotFound(_)))
                if h.now_ms() > submitted_ms + world.config.results_kept_ms && target_ended(world, &input) =>
            {
                break None;
            }
            Some(Err(e)) if !e.is_transient() && !matches!(e, Error::InvocationNotFound(_)) => {
                world.fail(format!("the status of {input}: {e}"));
                return None;
            }
            _ => {}
        }
    };
    let refused_all = loop {
        if let Some(r) = *refused_all.lock().expect("not poisoned") {
            break r;
        }
        h.sleep(10).await;
    };
    let made = world.log.next_offset(book, guest::target_of(input.as_bytes()));
    let (most_ok, saw_cancel) = world.traces.lock().expect("not poisoned").targets.get(&input).copied().unwrap_or_default();
    let trapped = world.traces.lock().expect("not poisoned").targets_trapped.contains(&input);
    // Succeeded: every step made and seen, no cancellation seen (it would be logged, and
    // seen again by every later execution). Cancelled: it was asked for before the
    // result, and an execution saw it (past the recorded history nothing passes it) or
    // it came after the last step. A step may be made and not seen (its execution died
    // right after it).
    let all = guest::TARGET_STEPS;
    // A guest that trimmed the whole book may have taken an own record away before a
    // re-execution looked at it, which then sees a conflict (a documented gap).
    let trimmed = world.traces.lock().expect("not poisoned").trimmed_books.contains(&book.0);
    let fine = match &outcome {
        _ if trimmed => true,
        // Asked for after its result was collected (it is kept briefly here): unknown.
        None => made >= most_ok,
        Some(Err(Error::Conflict(m))) if m.contains("no longer kept") => true,
        Some(Ok(_)) => made == all && most_ok == all && !saw_cancel,
        // Seen by an execution, or an attempt trapped once it was asked for (the trap
        // is not retried then): the oracle knows of traps, not of when they came. Or
        // taken between the last step and the result: an execution that made every
        // step finds the Cancelled step where its result would go (`log_result`).
        Some(Err(Error::Cancelled)) => {
            !refused_all && (saw_cancel || trapped || most_ok == all) && made >= most_ok && made <= all
        }
        Some(Err(_)) => false,
    };
    if !fine {
        world.fail(format!(
            "{input} ended {outcome:?} after {made} of {all} steps, {most_ok} seen made by one execution, a cancellation \
             seen: {saw_cancel}, every cancellation refused: {refused_all}"
        ));
        return None;
    }
    if matches!(outcome, Some(Err(_))) {
        world.stats.lock().expect("not poisoned").cancelled += 1;
    }
    // Nothing of a finished invocation runs on: a late peer stops at its next step.
    // Except (a documented gap) one peer that passed its step's gate before the
    // cancelling execution logged the cancellation there, and makes that step's effect.
    h.sleep(1_000).await;
    let now = world.log.next_offset(book, guest::target_of(input.as_bytes()));
    let racing_peer = u64::from(!matches!(outcome, Some(Ok(_))));
    if now < made || now > made + racing_peer {
        world.fail(format!("{input} made {now} steps, {made} when it had finished"));
        return None;
    }
    Some(())
}
