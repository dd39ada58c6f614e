//! The clients' workload: each client's invocations on keys of its own (keyed,
//! asynchronous or without any key), checked against the oracle as they finish, and the
//! request helpers the other workloads share.

use std::sync::Arc;

use bytes::Bytes;
use tally_log_core::{BookId, Context};

use crate::env::{Clock, Spawn};
use crate::error::Error;
use crate::invoke::{InvocationStatus, InvokeRequest};
use crate::node::Durable;

use super::exec::Handle;
use super::guest::PEEK;
use super::history::{logged_clocks, logged_output};
use super::oracle::show;
use super::world::World;
use super::{chan, guest};

/// Creates every book's tables, then starts the clients.
pub(super) async fn setup_then_clients(world: Arc<World>) {
    for book in 0..world.opts.books {
        let input = format!("setup{book}:n0").into_bytes();
        if keyed(&world, BookId(book), "setup", &input, format!("setup-{book}")).await.is_none() {
            return;
        }
    }
    for c in 0..world.opts.clients {
        let w = world.clone();
        world.harness().spawn("client", Box::pin(client(w, c)));
    }
}

/// Calls `function` with an idempotency key until it has a final outcome; models it
/// and checks the output. `None` when a violation was found.
async fn keyed(world: &Arc<World>, book: BookId, function: &str, input: &[u8], key: String) -> Option<Result<u64, String>> {
    let h = world.harness();
    loop {
        let Some((n, d, _)) = world.pick_node() else {
            h.sleep(5).await;
            continue;
        };
        if world.chance(world.opts.peer) {
            // A concurrent twin of the request on another node: a racing peer.
            if let Some((m, d2, _)) = world.pick_node() {
                world.stats.lock().expect("not poisoned").peers += 1;
                let req = request(function, book, input, &key);
                let (tx, _rx) = chan::oneshot::<()>();
                Handle { shared: world.shared.clone(), owner: Some(m) }.spawn(
                    "peer",
                    Box::pin(async move {
                        let _ = d2.invoke(req).await;
                        tx.send(());
                    }),
                );
            }
        }
        let req = request(function, book, input, &key);
        let answer = world.on_node(n, d, "keyed", move |d| async move { d.invoke(req).await }).await;
        let result = match answer {
            None => continue,
            Some(Err(e)) if e.is_transient() => {
                h.sleep(1 + world.draw(20)).await;
                continue;
            }
            // The result was kept shorter than this client kept retrying.
            Some(Err(Error::Conflict(m))) if m.contains("no longer kept") => None,
            // Asleep: asked again after its wake time, it answers with its result.
            Some(Err(Error::Suspended { wake_ms, .. })) => {
                world.stats.lock().expect("not poisoned").suspensions += 1;
                h.sleep(wake_ms.saturating_sub(h.now_ms()) + 1 + world.draw(20)).await;
                continue;
            }
            Some(r) => Some(r),
        };
        let got = result.map(|r| match r {
            Ok(out) if out.len() == 8 => Ok(u64::from_be_bytes(out[..].try_into().expect("8 bytes"))),
            Ok(out) => Err(format!("output of {} bytes", out.len())),
            Err(e) => Err(e.code().to_string()),
        });
        return check_finished(world, function, input, got);
    }
}

/// A keyed request: with the client's idempotency key, or (for every other key, as a
/// cluster's gateway does) a retry key, which initialises lazily.
fn request(function: &str, book: BookId, input: &[u8], key: &str) -> InvokeRequest {
    let retry = key.len() % 2 == 1;
    InvokeRequest {
        idempotency_key: (!retry).then(|| key.to_string()),
        retry_key: retry.then(|| key.to_string()),
        delay_ms: delay_of(key),
        ..unkeyed_request(function, book, input)
    }
}

/// A request without any key, as a browser sends one.
pub(super) fn unkeyed_request(function: &str, book: BookId, input: &[u8]) -> InvokeRequest {
    InvokeRequest {
        function: function.to_string(),
        book,
        input: Bytes::copy_from_slice(input),
        idempotency_key: None,
        retry_key: None,
        crash_after: None,
        position: Context::new(),
        delay_ms: 0,
        key: None,
    }
}

/// The delayed start some keys ask for (every request of one key asks the same).
fn delay_of(key: &str) -> u64 {
    match guest::seed_of(key.as_bytes()) % 8 {
        0 => guest::seed_of(key.as_bytes()) % 300,
        _ => 0,
    }
}

/// Models a finished invocation and checks what the client got (if it got anything).
fn check_finished(
    world: &Arc<World>,
    function: &str,
    input: &[u8],
    got: Option<Result<u64, String>>,
) -> Option<Result<u64, String>> {
    // A client that got nothing (its result was collected before it asked) names no
    // witness; the log's result does. "The last execution that ran to its end" may be
    // a peer whose guest ran on readings of its own that waited for the result's record
    // and stopped there, after the invocation had finished.
    let logged = if got.is_none() { logged_output(&world.log, input, world.tag_key().as_ref()) } else { None };
    let registry = world.registry.lock().expect("not poisoned");
    let traces = world.traces.lock().expect("not poisoned");
    let mut oracle = world.oracle.lock().expect("not poisoned");
    world.stats.lock().expect("not poisoned").invocations += 1;
    let clocks = |input: &[u8]| logged_clocks(&world.log, input, world.tag_key().as_ref());
    let expected = match oracle.finish(&registry, &traces, &clocks, function, input, got.as_ref().or(logged.as_ref())) {
        Ok(e) => e,
        Err(m) => {
            world.fail(format!("{m} (the client got {got:?})"));
            return None;
        }
    };
    if let Some(got) = &got {
        if let Err(m) = oracle.check_output(input, got) {
            world.fail(m);
            return None;
        }
    }
    if let Err(m) = oracle.check_executions(&traces) {
        world.fail(m);
        return None;
    }
    Some(expected.output)
}

/// One client: its invocations one after another on its own keys (keyed or
/// asynchronous), some replayed, then the verification.
async fn client(world: Arc<World>, c: usize) {
    let h = world.harness();
    let book = BookId(c as u64 % world.opts.books);
    let mut keys: Vec<String> = Vec::new();
    for n in 0..world.opts.invocations {
        let function = format!("f{}", world.draw(3));
        let function = if world.chance(0.1) { "intruder".to_string() } else { function };
        let input = format!("c{c}:n{n}").into_bytes();
        let done = if world.chance(0.3) {
            asynchronous(&world, book, &function, &input, format!("c{c}-{n}-async")).await
        } else {
            // Some keys extend an earlier key with a separator and a step number: under
            // a string scheme they would name that invocation's child.
            let key = match keys.last() {
                Some(prev) if world.chance(0.3) => format!("{prev}.{}", 1 + world.draw(4)),
                _ => format!("c{c}-{n}"),
            };
            keys.push(key.clone());
            let out = keyed(&world, book, &function, &input, key.clone()).await;
            if out.is_some() && world.chance(0.2) {
                // A client retrying after it had its answer: the same result, not a rerun.
                world.stats.lock().expect("not poisoned").replays += 1;
                if let Some((n2, d, _)) = world.pick_node() {
                    let req = request(&function, book, &input, &key);
                    if let Some(again) = world.on_node(n2, d, "replay", move |d| async move { d.invoke(req).await }).await {
                        let again = again.map(|o| u64::from_be_bytes(o[..8.min(o.len())].try_into().unwrap_or([0; 8])));
                        match (&out, again) {
                            (Some(Ok(v)), Ok(w)) if *v != w => {
                                world.fail(format!("a replay of {} returned {w}, first {v}", show(&input)))
                            }
                            (Some(Err(code)), Err(e)) if e.code() != code && !e.is_transient() && e.code() != "conflict" => {
                                world.fail(format!("a replay of {} failed with {e}, first {code}", show(&input)))
                            }
                            _ => {}
                        }
                    }
                }
            }
            out.is_some()
        };
        if !done {
            return;
        }
        if world.chance(0.2) && !peek(&world, book, c, n).await {
            return;
        }
        h.sleep(world.draw(30)).await;
    }
    let input = format!("c{c}:verify").into_bytes();
    if keyed(&world, book, "verify", &input, format!("c{c}-verify")).await.is_some() {
        // Every append of the client's invocations is in its stream once: as many
        // records as the model counts (the offsets count trimmed records too).
        let prefix = format!("c{c}");
        let counted = world.oracle.lock().expect("not poisoned").appends(&prefix);
        let there = world.log.next_offset(book, guest::stream_of(&prefix));
        if counted.is_some_and(|c| c != there) {
            world.fail(format!("client {prefix}'s stream holds {there} records, its invocations appended {counted:?}"));
        }
        *world.clients_done.lock().expect("not poisoned") += 1;
    }
}

/// Reads the client's keys of those tables with a request that has no key
/// at all, as a browser would: on a node alone it logs nothing (`Of::forgettable`), so
/// only its answer shows what it read, which the model checks as any invocation's. A
/// lost answer is not asked again (nothing names it); the client sends another, under
/// another input. `false` when a violation was found.
async fn peek(world: &Arc<World>, book: BookId, c: usize, n: usize) -> bool {
    let h = world.harness();
    for attempt in 0.. {
        let input = format!("c{c}:peek{n}.{attempt}").into_bytes();
        let Some((node, d, _)) = world.pick_node() else {
            h.sleep(5).await;
            continue;
        };
        let req = unkeyed_request(PEEK, book, &input);
        let answer = world.on_node(node, d, "peek", move |d| async move { d.invoke(req).await }).await;
        match answer {
            Some(Ok(out)) if out.len() == 8 => {
                let got = Ok(u64::from_be_bytes(out[..].try_into().expect("8 bytes")));
                world.stats.lock().expect("not poisoned").peeks += 1;
                return check_finished(world, PEEK, &input, Some(got)).is_some();
            }
            Some(Ok(out)) => {
                world.fail(format!("{} output {} bytes", show(&input), out.len()));
                return false;
            }
            Some(Err(e)) if !e.is_transient() => {
                world.fail(format!("{} failed: {e}", show(&input)));
                return false;
            }
            _ => {
                world.oracle.lock().expect("not poisoned").abandon(&input);
                h.sleep(1 + world.draw(20)).await;
            }
        }
    }
    unreachable!("the loop returns")
}

/// An asynchronous invocation: submitted (with a key, so that a lost answer can be
/// asked again) on one node, polled on any until finished.
async fn asynchronous(world: &Arc<World>, book: BookId, function: &str, input: &[u8], key: String) -> bool {
    let h = world.harness();
    let (id, submitted_ms) = loop {
        let Some((n, d, _)) = world.pick_node() else {
            h.sleep(5).await;
            continue;
        };
        let (f, i, k) = (function.to_string(), Bytes::copy_from_slice(input), key.clone());
        match world
            .on_node(n, d, "submit", move |d| async move {
                d.invoke_async(&mut Context::new(), f, book, i, Some(k.clone()), delay_of(&k), None).await
            })
            .await
        {
            Some(Ok(id)) => break (id.to_string(), h.now_ms()),
            Some(Err(e)) if e.is_transient() => h.sleep(5 + world.draw(20)).await,
            Some(Err(e)) => {
                world.fail(format!("an asynchronous submission of {} failed: {e}", show(input)));
                return false;
            }
            None => {}
        }
    };
    loop {
        h.sleep(5 + world.draw(20)).await;
        let Some((n, d, _)) = world.pick_node() else { continue };
        let id2 = id.clone();
        let status =
            world.on_node(n, d, "status", move |d| async move { d.invocation(&mut Context::new(), book, &id2).await }).await;
        match status {
            Some(Ok(InvocationStatus::Finished(r))) => {
                let got = match r {
                    Ok(out) if out.len() == 8 => Ok(u64::from_be_bytes(out[..].try_into().expect("8 bytes"))),
                    Ok(out) => Err(format!("output of {} bytes", out.len())),
                    Err(e) => Err(e.code().to_string()),
                };
                return check_finished(world, function, input, Some(got)).is_some();
            }
            Some(Ok(InvocationStatus::Running | InvocationStatus::Sleeping { .. })) | None => {}
            // Accepted means started, so an unknown invocation is either one a lagging
            // replica does not show yet or one whose result was kept shorter than this
            // client took to ask (after an execution ran it to its end): the model still
            // says what it did.
            Some(Err(Error::InvocationNotFound(_)))
                if h.now_ms() > submitted_ms + world.config.results_kept_ms && world.completed(input) =>
            {
                return check_finished(world, function, input, None).is_some();
            }
            Some(Err(e)) if matches!(e, Error::InvocationNotFound(_)) || e.is_transient() => {}
            Some(Err(e)) => {
                world.fail(format!("the status of {} failed: {e}", show(input)));
                return false;
            }
        }
    }
}

/// Calls `f` on random nodes until it answers with something other than a transient
/// failure or a lost answer; `None` (after reporting it) for another failure.
pub(super) async fn retry<F, Fut>(world: &Arc<World>, what: &'static str, f: F) -> Option<()>
where
    F: Fn(Arc<Durable>) -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>> + Send + 'static,
{
    let h = world.harness();
    loop {
        let Some((n, d, _)) = world.pick_node() else {
            h.sleep(5).await;
            continue;
        };
        match world.on_node(n, d, what, &f).await {
            Some(Ok(())) => return Some(()),
            Some(Err(e)) if !e.is_transient() && !matches!(e, Error::Conflict(_)) => {
                world.fail(format!("{what} failed: {e}"));
                return None;
            }
            _ => h.sleep(5 + world.draw(20)).await,
        }
    }
}

/// Submits an asynchronous invocation on random nodes until one takes it; its ID, or
/// `None` after a violation.
pub(super) async fn submit(world: &Arc<World>, function: &str, book: BookId, input: Bytes, key: String) -> Option<String> {
    submit_to(world, function, book, input, key, None).await
}

/// [`submit`] of an invocation addressed to `to` (`?key=`).
pub(super) async fn submit_to(
    world: &Arc<World>,
    function: &str,
    book: BookId,
    input: Bytes,
    key: String,
    to: Option<crate::record::InvocationKey>,
) -> Option<String> {
    let h = world.harness();
    loop {
        let Some((n, d, _)) = world.pick_node() else {
            h.sleep(5).await;
            continue;
        };
        let (f, i, k, t) = (function.to_string(), input.clone(), key.clone(), to.clone());
        match world
            .on_node(n, d, "submit", move |d| async move { d.invoke_async(&mut Context::new(), f, book, i, Some(k), 0, t).await })
            .await
        {
            Some(Ok(id)) => return Some(id.to_string()),
            Some(Err(e)) if !e.is_transient() => {
                world.fail(format!("submitting {function} {key}: {e}"));
                return None;
            }
            _ => h.sleep(5 + world.draw(20)).await,
        }
    }
}

/// Asks for invocation `id`'s status on random nodes until it has finished; its output
/// (`Some(None)` when its result was collected before a look got to it and `ran` says
/// an execution ran it), or `None` after a violation (a failure included).
pub(super) async fn wait_finished(world: &Arc<World>, book: BookId, id: &str, ran: impl Fn() -> bool) -> Option<Option<Bytes>> {
    let h = world.harness();
    let submitted_ms = h.now_ms();
    loop {
        h.sleep(5 + world.draw(10)).await;
        let Some((n, d, _)) = world.pick_node() else { continue };
        let i = id.to_string();
        match world.on_node(n, d, "status", move |d| async move { d.invocation(&mut Context::new(), book, &i).await }).await {
            Some(Ok(InvocationStatus::Finished(Ok(out)))) => return Some(Some(out)),
            Some(Ok(InvocationStatus::Finished(r))) => {
                world.fail(format!("invocation {id} ended {r:?}"));
                return None;
            }
            Some(Err(Error::InvocationNotFound(_))) if h.now_ms() > submitted_ms + world.config.results_kept_ms && ran() => {
                return Some(None);
            }
            Some(Err(e)) if !e.is_transient() && !matches!(e, Error::InvocationNotFound(_)) => {
                world.fail(format!("the status of {id}: {e}"));
                return None;
            }
            _ => {}
        }
    }
}

/// [`submit`], then [`wait_finished`].
pub(super) async fn submit_and_wait(
    world: &Arc<World>,
    function: &str,
    book: BookId,
    input: Bytes,
    key: String,
) -> Option<Option<Bytes>> {
    let id = submit(world, function, book, input, key).await?;
    wait_finished(world, book, &id, || false).await
}
