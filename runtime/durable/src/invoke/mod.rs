//! Invocations: the attempts of one invocation until it has a final outcome, the
//! invocations a client starts (synchronous, keyed, asynchronous), and their status.
//!
//! Which invocations are exactly-once: those given an `Idempotency-Key`, asynchronous
//! ones, delayed ones, ones addressed to a key, children, and any other as soon as it
//! does something durable: `state` (of a table that is not unsafe), `invoke`, durable
//! objects, queues, locks, appends to its book, sleeps or promises (its Init record is
//! appended then, or deferred to its first record on a node alone; what ran before
//! touched nothing durable). An attempt that trapped runs again as its function's retry
//! policy says (attempts, backoff: a wait is logged as a Retry record, and a long one
//! suspends the invocation); one that failed transiently is left to the recovery scan
//! (`recovery.rs`).
//!
//! Admission: a fresh invocation must exist and pass its checks; one with history runs
//! the version its Init names, whatever the checks say now. An asynchronous invocation
//! is answered once its Init is logged, and may carry a key; a gateway's retry key gives
//! a keyed ID with a lazy Init, so its effects are exactly-once across the gateway's
//! retries and a function without effects logs nothing. A per-ID lock
//! (`Running::running`) keeps one node from running one invocation's guest twice at
//! once. An attempt that ends suspended (a durable sleep) answers `Error::Suspended` with
//! the root's ID and wake time (the gateway's 202).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::lock::Mutex as AsyncMutex;
use tally_log_core::{BookId, Context, LogRecord, SeqNum};

use crate::abort::check_book;
use crate::abort::Abort;
use crate::abort::CrashAfter;
use crate::attempt::Attempt;
use crate::env::{BoxFuture, FunctionVersion};
use crate::error::{Error, Result};
use crate::id::InstanceId;
use crate::instance::{Ending, Instance, Of, Started};
use crate::node::{Durable, Invocations};
use crate::record::kind;
use crate::record::meta::Meta;
use crate::record::{self, cut, InvocationKey, Outcome, Step};
use crate::tags::{shadow, INSTANCES};

mod attempts;
pub(crate) mod runs;
mod status;
mod suspend;
mod waking;

pub(crate) use runs::Run;
pub use runs::{InvocationStatus, InvokeRequest, ListFilter, Listed, ListedStatus};
use runs::{LIST_SCAN_MAX, SUSPENDED_PRUNE_AT};

impl Durable {
    /// Invokes a function from outside. With an idempotency key the invocation is
    /// exactly-once across client retries: a retry gets the logged result.
    pub async fn invoke(self: &Arc<Self>, req: InvokeRequest) -> Result<Vec<u8>> {
        self.invoke_at(req).await.0
    }

    /// [`Durable::invoke`], also returning where the invocation got to in the log (its
    /// context at the end, at least `req.position`): a client that sends it with its
    /// next invocation, on any node, reads its own writes.
    pub async fn invoke_at(self: &Arc<Self>, req: InvokeRequest) -> (Result<Vec<u8>>, Context) {
        let delay_until = match self.delay_until(req.delay_ms) {
            Ok(d) => d,
            Err(e) => return (Err(e), req.position),
        };
        let (id, eager) = match (&req.idempotency_key, &req.retry_key) {
            (Some(key), _) | (None, Some(key)) => match InstanceId::keyed(&req.function, key) {
                Ok(id) => (id, req.idempotency_key.is_some()),
                Err(e) => return (Err(e), req.position),
            },
            (None, None) => (self.running.new_id(), false),
        };
        let crash = match req.crash_after {
            None => None,
            Some(_) if !self.core.config.crash_injection => {
                let e = Error::InvalidArgument(
                    "crash injection is a test hook; enable it with [state] crash_injection = true".into(),
                );
                return (Err(e), req.position);
            }
            Some(n) => Some(CrashAfter::new(n)),
        };
        if let Some(wake_ms) = self.asleep_here(req.book, &id, &req.position).await {
            return (Err(Error::Suspended { id: id.to_string(), wake_ms }), req.position);
        }
        let defer = delay_until.is_none() && req.key.is_none();
        let run = Run {
            function: req.function,
            version: None,
            book: req.book,
            input: Some(req.input),
            ctx: req.position,
            depth: 0,
            deadline_ms: None,
            id,
            // A delayed invocation is logged before it waits; a keyed one, before it
            // takes its key.
            eager: eager || delay_until.is_some() || req.key.is_some(),
            crash,
            attempt: 1,
            delay_until,
            fresh: false,
            background: false,
            defer,
            forgettable: defer && req.idempotency_key.is_none() && req.retry_key.is_none(),
            key: req.key,
        };
        self.run(run).await
    }

    /// The wake time of root `id` of `book` if this node suspended it and it still
    /// sleeps: a client's resend of its key is answered with that, without running its
    /// guest again up to the sleep (and setting another wake timer). The log has the
    /// last word: a root that finished or went on elsewhere is not asleep.
    async fn asleep_here(&self, book: BookId, id: &InstanceId, seen: &Context) -> Option<u64> {
        let here = self.running.suspended.lock().expect("not poisoned").get(&(book, id.clone())).copied();
        if here.is_none_or(|wake_ms| wake_ms <= self.core.clock.wall_ms()) {
            return None;
        }
        match self.status_of(&mut seen.clone(), book, id).await {
            Ok(InvocationStatus::Sleeping { wake_ms }) => Some(wake_ms),
            _ => None,
        }
    }

    /// The start time of an invocation delayed by `delay_ms` (none for 0).
    fn delay_until(&self, delay_ms: u64) -> Result<Option<u64>> {
        if delay_ms > crate::SLEEP_MAX_MS {
            return Err(Error::InvalidArgument(format!(
                "a delay of {delay_ms} ms is longer than the limit of {} ms (a year)",
                crate::SLEEP_MAX_MS
            )));
        }
        Ok((delay_ms > 0).then(|| self.core.clock.wall_ms().saturating_add(delay_ms)))
    }

    /// Starts an exactly-once invocation in the background and returns its ID, once its
    /// Init record is in the log: from then on it runs to a result even if this node
    /// dies, and its status outlives the node. With an idempotency key, submitting again
    /// returns the same ID instead of starting another invocation. Refused with `busy`
    /// when `async_max` are running here already.
    #[allow(clippy::too_many_arguments)]
    pub async fn invoke_async(
        self: &Arc<Self>,
        ctx: &mut Context,
        function: String,
        book: BookId,
        input: Bytes,
        idempotency_key: Option<String>,
        delay_ms: u64,
        key: Option<InvocationKey>,
    ) -> Result<InstanceId> {
        let id = match &idempotency_key {
            Some(key) => InstanceId::keyed(&function, key)?,
            None => self.running.new_id(),
        };
        self.start_async(ctx, function, book, input, id, delay_ms, key).await
    }

    /// [`Durable::invoke_async`] of invocation `id`. An `id` that started already is
    /// not started again, but run here too (as a peer: its node may have died) unless it
    /// runs here already or has finished.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn start_async(
        self: &Arc<Self>,
        ctx: &mut Context,
        function: String,
        book: BookId,
        input: Bytes,
        id: InstanceId,
        delay_ms: u64,
        key: Option<InvocationKey>,
    ) -> Result<InstanceId> {
        let delay_until = self.delay_until(delay_ms)?;
        if self.asleep_here(book, &id, ctx).await.is_some() {
            return Ok(id);
        }
        let mut run = Run {
            function,
            version: None,
            book,
            input: Some(input),
            ctx: ctx.clone(),
            depth: 0,
            deadline_ms: None,
            id: id.clone(),
            eager: true,
            crash: None,
            attempt: 1,
            delay_until,
            fresh: false,
            background: true,
            defer: false,
            forgettable: false,
            key,
        };
        let version = self.version_for(&mut run).await?;
        {
            let mut asyncs = self.running.asyncs.lock().expect("not poisoned");
            if asyncs.running >= self.core.config.async_max {
                return Err(Error::Busy(format!(
                    "asynchronous invocations: {} are running on this node already",
                    self.core.config.async_max
                )));
            }
            asyncs.running += 1;
        }
        let of = Of {
            id: id.clone(),
            book,
            function: run.function.clone(),
            version: version.version,
            input: run.input.clone(),
            declared: version.tables.clone(),
            crash: None,
            key: run.key.clone(),
            defer_init: false,
            forgettable: false,
        };
        let started = Instance::new(self.core.clone(), of).init(&mut run.ctx).await;
        ctx.merge(&run.ctx);
        run.fresh = matches!(started, Ok(Started::Fresh));
        let release = || self.running.asyncs.lock().expect("not poisoned").running -= 1;
        match started {
            // Finished, or a resubmission of one that runs here already: nothing to start.
            Ok(Started::Finished(_)) => {
                release();
                return Ok(id);
            }
            Ok(Started::Running { .. }) if self.is_running(book, &id) => {
                release();
                return Ok(id);
            }
            Ok(_) => {}
            Err(abort) => {
                release();
                return Err(abort.into_error());
            }
        }
        self.running.asyncs.lock().expect("not poisoned").by_id.insert((book, id.clone()), InvocationStatus::Running);
        let svc = self.clone();
        let run_id = id.clone();
        // Cancelling this task (the node stops) loses nothing: the Init record is in the
        // log, and the recovery scan runs the invocation again.
        self.core.spawn.spawn(
            "invoke-async",
            Box::pin(async move {
                let (result, _) = svc.run(run).await;
                let mut asyncs = svc.running.asyncs.lock().expect("not poisoned");
                asyncs.running -= 1;
                if matches!(&result, Err(e) if e.is_transient() || matches!(e, Error::Suspended { .. })) {
                    // Not finished: the recovery scan (or a wake timer) runs it again, and
                    // its status comes from its step log until then.
                    asyncs.by_id.remove(&(book, run_id));
                    return;
                }
                asyncs.by_id.insert((book, run_id.clone()), InvocationStatus::Finished(result.map(Bytes::from)));
                asyncs.finished.push_back((book, run_id));
                while asyncs.finished.len() > svc.core.bounds.invocations_kept {
                    let old = asyncs.finished.pop_front().expect("not empty");
                    asyncs.by_id.remove(&old);
                }
            }),
        );
        Ok(id)
    }

    /// Whether root invocation `id` of `book` is running on this node.
    pub(crate) fn is_running(&self, book: BookId, id: &InstanceId) -> bool {
        self.running.running.lock().expect("not poisoned").contains_key(&(book, id.clone()))
    }
}

impl Invocations<'_> {
    /// Invocations this node answered with their logged result, without running.
    pub fn replayed(&self) -> u64 {
        let d = self.0;
        d.running.replayed.load(Ordering::Relaxed)
    }

    /// Roots this node answered before their Result was logged.
    pub fn answered_first(&self) -> u64 {
        self.0.running.answered_first.load(Ordering::Relaxed)
    }
}
