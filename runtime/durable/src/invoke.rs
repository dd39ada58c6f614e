//! Invocations: the attempts of one invocation until it has a final outcome, the
//! invocations a client starts (synchronous, keyed, asynchronous), and their status.
//!
//! Which invocations are exactly-once: those given an `Idempotency-Key`, asynchronous
//! ones, children, and any other as soon as it uses `state` or `invoke` (its init
//! record is appended then; what ran before touched nothing durable). An attempt that
//! trapped runs again as its function's retry policy says (attempts, backoff: a wait
//! is logged as a Retry record, and a long one suspends the invocation); one that
//! failed transiently is left to the recovery scan (`recovery.rs`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::lock::Mutex as AsyncMutex;
use tally_log_core::{BookId, Context, SeqNum};

use crate::attempt::Attempt;
use crate::env::FunctionVersion;
use crate::error::{Error, Result};
use crate::id::InstanceId;
use crate::instance::{CrashAfter, Instance, Of, Started};
use crate::node::{Abort, Durable};
use crate::record::{self, cut, InvocationKey, Outcome, Step};
use crate::switch::check_book;
use crate::tags::{shadow, INSTANCES};

/// One invocation to run: from outside, as a child, or again after a crash.
pub(crate) struct Run {
    pub function: String,
    /// The version to run; `None` for the current one (or the one an Init names).
    pub version: Option<u64>,
    pub book: BookId,
    /// `None` for a re-execution, which takes the input from the Init record.
    pub input: Option<Bytes>,
    pub ctx: Context,
    pub depth: u32,
    /// A parent's deadline, which bounds a child's.
    pub deadline_ms: Option<u64>,
    pub id: InstanceId,
    /// Initialise the instance before running the guest (otherwise at its first
    /// `state` or `invoke` call): needed when the ID may have history.
    pub eager: bool,
    pub crash: Option<Arc<CrashAfter>>,
    pub attempt: u32,
    /// A delayed start (`?delay_ms=`): the guest runs from this wall-clock time on.
    pub delay_until: Option<u64>,
    /// Its Init record was just appended by this node (an asynchronous start): its
    /// first run has no retry and no cancellation to look for yet.
    pub fresh: bool,
    /// The key a fresh invocation is addressed to (`?key=`).
    pub key: Option<InvocationKey>,
    /// Nobody waits for its answer (an asynchronous start, a re-execution): a wait for
    /// its key suspends it soon rather than hold its slot.
    pub background: bool,
    /// A root invocation from outside that may defer its Init on a node alone
    /// (`Instance::begin`); an attempt that found it could not clears it.
    pub defer: bool,
    /// A synchronous root from outside with no key of any kind (`Of::forgettable`).
    pub forgettable: bool,
}

/// Where an invocation stands, as `GET /v1/invocations/{id}` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InvocationStatus {
    Running,
    /// In a durable sleep until `wake_ms` (milliseconds since the Unix epoch).
    Sleeping {
        wake_ms: u64,
    },
    Finished(std::result::Result<Bytes, Error>),
}

/// Where a root invocation stands, as a listing shows it (no output: see
/// [`Durable::invocation`] for that).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListedStatus {
    Running,
    Sleeping {
        wake_ms: u64,
    },
    Succeeded,
    /// With the error's code.
    Failed(&'static str),
}

impl ListedStatus {
    /// The name a listing filters by and shows: `running`, `sleeping`, `succeeded` or
    /// `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            ListedStatus::Running => "running",
            ListedStatus::Sleeping { .. } => "sleeping",
            ListedStatus::Succeeded => "succeeded",
            ListedStatus::Failed(_) => "failed",
        }
    }
}

/// One root invocation of a book in a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub id: InstanceId,
    pub function: String,
    pub status: ListedStatus,
}

/// Entries of `Invocations::suspended` past which wakes already past are forgotten.
const SUSPENDED_PRUNE_AT: usize = 4_096;

/// Records of a book's INSTANCES stream one listing call reads at most, whatever it
/// finds: past them it answers with what it has and where to go on.
const LIST_SCAN_MAX: usize = 10_000;

/// An invocation from outside.
#[derive(Clone, Debug)]
pub struct InvokeRequest {
    pub function: String,
    pub book: BookId,
    pub input: Bytes,
    /// The client's key that makes the invocation exactly-once across its retries.
    pub idempotency_key: Option<String>,
    /// A key a gateway gives an invocation it may retry on another node: the
    /// invocation's effects are exactly-once across those retries (its ID comes from the
    /// key), but it is initialised lazily like an unkeyed one, at its first `state` or
    /// `invoke` call, so a function without effects logs nothing and may simply run
    /// again. Ignored when `idempotency_key` is given.
    pub retry_key: Option<String>,
    /// Test hook: stop after this many effects (`[state] crash_injection` only).
    pub crash_after: Option<u64>,
    /// Where the client's last invocation got to in the log: this one reads nothing
    /// older (session consistency across nodes). Empty for a client with no history.
    pub position: Context,
    /// Milliseconds to wait before the guest runs (0: none). The invocation is logged
    /// at once (so it is exactly-once and outlives the node), and waits as a durable
    /// sleep does; a retry of its key gets the start time the first request logged.
    pub delay_ms: u64,
    /// The key the invocation is addressed to (`?key=`): an exclusive keyed invocation
    /// runs alone among its function's with the key (see `Instance::enter_key`).
    pub key: Option<InvocationKey>,
}

/// What a run of a root holds while its guest runs (see `Invocations::running`).
type RunLock = Arc<AsyncMutex<()>>;

/// The invocations of this node: running roots, asynchronous ones and their status.
pub(crate) struct Invocations {
    id_prefix: u64,
    next_id: AtomicU64,
    /// Invocations answered with their logged result, without running.
    replayed: AtomicU64,
    /// Root invocations running on this node, each with a lock that a concurrent run of
    /// the same ID (a client's retry, the recovery scan) waits on: one node never runs
    /// the guest of one invocation twice at once.
    /// By book and ID: one ID of two books names two invocations.
    running: Mutex<HashMap<(BookId, InstanceId), RunLock>>,
    asyncs: Mutex<Asyncs>,
    /// Roots this node suspended, by book and ID, with their wake time: a root whose
    /// child sleeps has no Sleep of its own in its step log, so its status comes from
    /// here (on this node; others show it running).
    suspended: Mutex<HashMap<(BookId, InstanceId), u64>>,
}

#[derive(Default)]
struct Asyncs {
    /// By book and ID: an ID names an invocation of one book only.
    by_id: HashMap<(BookId, InstanceId), InvocationStatus>,
    /// Finished ones, oldest first, forgotten past `invocations_kept`.
    finished: VecDeque<(BookId, InstanceId)>,
    running: usize,
}

impl Invocations {
    pub(crate) fn new(id_prefix: u64) -> Invocations {
        Invocations {
            id_prefix,
            next_id: AtomicU64::new(1),
            replayed: AtomicU64::new(0),
            running: Mutex::new(HashMap::new()),
            asyncs: Mutex::new(Asyncs::default()),
            suspended: Mutex::new(HashMap::new()),
        }
    }

    /// A new invocation ID, unique across nodes and restarts with high probability.
    fn new_id(&self) -> InstanceId {
        InstanceId::generated(&format!("{:016x}{:08x}", self.id_prefix, self.next_id.fetch_add(1, Ordering::Relaxed)))
    }
}

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
            (None, None) => (self.invocations.new_id(), false),
        };
        let crash = match req.crash_after {
            None => None,
            Some(_) if !self.config.crash_injection => {
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
        let here = self.invocations.suspended.lock().expect("not poisoned").get(&(book, id.clone())).copied();
        if here.is_none_or(|wake_ms| wake_ms <= self.clock.wall_ms()) {
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
        Ok((delay_ms > 0).then(|| self.clock.wall_ms().saturating_add(delay_ms)))
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
            None => self.invocations.new_id(),
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
            let mut asyncs = self.invocations.asyncs.lock().expect("not poisoned");
            if asyncs.running >= self.config.async_max {
                return Err(Error::Busy(format!(
                    "asynchronous invocations: {} are running on this node already",
                    self.config.async_max
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
        let started = Instance::new(self.clone(), of).init(&mut run.ctx).await;
        ctx.merge(&run.ctx);
        run.fresh = matches!(started, Ok(Started::Fresh));
        let release = || self.invocations.asyncs.lock().expect("not poisoned").running -= 1;
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
        self.invocations.asyncs.lock().expect("not poisoned").by_id.insert((book, id.clone()), InvocationStatus::Running);
        let svc = self.clone();
        let run_id = id.clone();
        // Cancelling this task (the node stops) loses nothing: the Init record is in the
        // log, and the recovery scan runs the invocation again.
        self.spawn.spawn(
            "invoke-async",
            Box::pin(async move {
                let (result, _) = svc.run(run).await;
                let mut asyncs = svc.invocations.asyncs.lock().expect("not poisoned");
                asyncs.running -= 1;
                if matches!(&result, Err(e) if e.is_transient() || matches!(e, Error::Suspended { .. })) {
                    // Not finished: the recovery scan (or a wake timer) runs it again, and
                    // its status comes from its step log until then.
                    asyncs.by_id.remove(&(book, run_id));
                    return;
                }
                asyncs.by_id.insert((book, run_id.clone()), InvocationStatus::Finished(result.map(Bytes::from)));
                asyncs.finished.push_back((book, run_id));
                while asyncs.finished.len() > svc.bounds.invocations_kept {
                    let old = asyncs.finished.pop_front().expect("not empty");
                    asyncs.by_id.remove(&old);
                }
            }),
        );
        Ok(id)
    }

    /// The status of invocation `id` (as [`Durable::invoke_async`] returned it) on
    /// `book`: kept in memory for this node's asynchronous invocations, otherwise read
    /// from the invocation's step log.
    /// `ctx` is where the caller saw the log (a client's `Tally-Position`): the status
    /// is read at least there, and `ctx` moves to where it was read.
    pub async fn invocation(&self, ctx: &mut Context, book: BookId, id: &str) -> Result<InvocationStatus> {
        check_book(book)?;
        // An ID this platform cannot have handed out names no invocation.
        let id = InstanceId::parse_generated(id).map_err(|_| Error::InvocationNotFound(id.to_string()))?;
        let kept = self.invocations.asyncs.lock().expect("not poisoned").by_id.get(&(book, id.clone())).cloned();
        if let Some(status) = kept {
            return Ok(status);
        }
        let tag = self.tags.step(&id);
        let not_found = || Error::InvocationNotFound(id.to_string());
        let Some(first) = self.log.read_next(ctx, shadow(book), tag, SeqNum(0)).await? else {
            return Err(not_found());
        };
        match record::decode_steps("step", &first.data)?.into_init_and_last().0 {
            Some(Step::Init { id: found, .. } | Step::InitKeyed { id: found, .. }) if found == id => {}
            _ => return Err(not_found()),
        }
        self.status_of(ctx, book, &id).await
    }

    /// The status of root `id` of `book` as the last record of its step log says: its
    /// result, a sleep not yet over, or (for a root whose child sleeps, which has no
    /// Sleep of its own) the wake time this node suspended it until.
    async fn status_of(&self, ctx: &mut Context, book: BookId, id: &InstanceId) -> Result<InvocationStatus> {
        let last = self.log.read_prev(ctx, shadow(book), self.tags.step(id), SeqNum::MAX).await?;
        let wall = self.clock.wall_ms();
        Ok(match last.map(|r| record::decode_last("step", &r.data)).transpose()? {
            Some(Step::Result { outcome }) => InvocationStatus::Finished(outcome.into_result().map(Bytes::from)),
            Some(Step::Sleep { until_ms, .. } | Step::Delay { until_ms, .. }) if until_ms > wall => {
                InvocationStatus::Sleeping { wake_ms: until_ms }
            }
            _ => match self.invocations.suspended.lock().expect("not poisoned").get(&(book, id.clone())) {
                Some(&wake_ms) if wake_ms > wall => InvocationStatus::Sleeping { wake_ms },
                _ => InvocationStatus::Running,
            },
        })
    }

    /// The root invocations of `book` started at or after seqnum `after` (a cursor:
    /// 0 for the first page) whose function is `function` and whose status is named
    /// `status` (see [`ListedStatus::name`]), if given, in the order they started, at
    /// most `limit`; and the cursor of the next page, if the stream may hold more. Only
    /// what garbage collection has kept is listed (finished invocations for
    /// `results_kept_ms`). A page reads at most `LIST_SCAN_MAX` records of the stream.
    pub async fn list_invocations(
        &self,
        ctx: &mut Context,
        book: BookId,
        function: Option<&str>,
        status: Option<&str>,
        after: u64,
        limit: usize,
    ) -> Result<(Vec<Listed>, Option<u64>)> {
        check_book(book)?;
        let mut out = Vec::new();
        let mut at = after;
        for _ in 0..LIST_SCAN_MAX {
            if out.len() >= limit {
                return Ok((out, Some(at)));
            }
            let Some(r) = self.log.read_next(ctx, shadow(book), INSTANCES, SeqNum(at)).await? else {
                return Ok((out, None));
            };
            at = r.seqnum.0.saturating_add(1);
            let Ok((Some(Step::Init { id, function: f, .. } | Step::InitKeyed { id, function: f, .. }), _)) =
                record::decode_steps("step", &r.data).map(Step::into_init_and_last)
            else {
                continue;
            };
            if !id.is_root() || function.is_some_and(|w| w != f) {
                continue;
            }
            let listed = match self.status_of(ctx, book, &id).await? {
                InvocationStatus::Running => ListedStatus::Running,
                InvocationStatus::Sleeping { wake_ms } => ListedStatus::Sleeping { wake_ms },
                InvocationStatus::Finished(Ok(_)) => ListedStatus::Succeeded,
                InvocationStatus::Finished(Err(e)) => ListedStatus::Failed(e.code()),
            };
            if status.is_none_or(|s| s == listed.name()) {
                out.push(Listed { id, function: f, status: listed });
            }
        }
        Ok((out, Some(at)))
    }

    /// Completes `promise` of `book` with `value`, once: the completion is a
    /// conditional append at offset 1 of the promise's stream, so a second one gets
    /// `Conflict`, one of a promise never created `PromiseNotFound`. Then the invocation
    /// that created it, and any other that suspended awaiting it, runs again here (the
    /// recovery scan wakes them too, from the completion's record in INSTANCES). An
    /// await waiting in place sees the completion within a few ms.
    pub async fn complete_promise(self: &Arc<Self>, ctx: &mut Context, book: BookId, promise: &str, value: Bytes) -> Result<()> {
        check_book(book)?;
        if !crate::tags::is_promise_id(promise) {
            return Err(Error::PromiseNotFound(promise.to_string()));
        }
        if value.len() > crate::PAYLOAD_MAX {
            return Err(Error::TooLarge {
                what: "the value of a promise",
                size: Some(value.len() as u64),
                limit: crate::PAYLOAD_MAX as u64,
            });
        }
        let stream = self.tags.promise(promise);
        let Some(created) = self.log.read_next(ctx, shadow(book), stream, SeqNum(0)).await? else {
            return Err(Error::PromiseNotFound(promise.to_string()));
        };
        let Step::Promise { root, .. } = record::decode::<Step>("promise", &created.data)? else {
            return Err(Error::Internal(format!("promise {promise} starts with another record")));
        };
        let done = Step::Completed { promise: promise.to_string(), root: root.clone(), value };
        let tags = [stream, INSTANCES];
        match self.log.cond_append(ctx, shadow(book), &tags, record::encode(&done), stream, 1).await {
            Ok(_) => self.completions.notify(promise),
            Err(tally_log_core::Error::Conflict { .. }) => {
                return Err(Error::Conflict(format!("promise {promise} was completed already")));
            }
            Err(e) => return Err(e.into()),
        }
        // The completion stands: waking its waiters is the scan's too, should it fail here.
        if let Err(e) = self.wake_waiters(ctx, book, promise, root).await {
            tracing::warn!(promise, "waking the invocations that await a completed promise: {e}");
        }
        Ok(())
    }

    /// Wakes the roots that wait for `promise`: its creator's, and those of awaits that
    /// would suspend (the promise's waiters stream). Should this node die first, the
    /// recovery scan wakes them from the completion's record. A finished root answers
    /// from its log, running nothing.
    async fn wake_waiters(self: &Arc<Self>, ctx: &mut Context, book: BookId, promise: &str, creator: InstanceId) -> Result<()> {
        let mut woken = std::collections::BTreeSet::from([creator]);
        woken.extend(self.promise_waiters(ctx, book, promise).await?);
        for root in woken {
            self.wake(ctx, book, root).await?;
        }
        Ok(())
    }

    /// The roots of the awaits of `promise` that logged a wait (their Sleep records in
    /// the promise's waiters stream).
    pub(crate) async fn promise_waiters(&self, ctx: &mut Context, book: BookId, promise: &str) -> Result<Vec<InstanceId>> {
        let waiters = self.tags.promise_waiters(promise);
        let mut roots = Vec::new();
        let mut at = SeqNum(0);
        while let Some(r) = self.log.read_next(ctx, shadow(book), waiters, at).await? {
            at = SeqNum(r.seqnum.0.saturating_add(1));
            if let Ok(Step::Sleep { root, .. }) = record::decode::<Step>("step", &r.data) {
                roots.push(root);
            }
        }
        Ok(roots)
    }

    /// Cancels root invocation `id` of `book` and its children, cooperatively: each of
    /// its instances sees the cancellation at its next step (a state operation, a call,
    /// a conditional append, a sleep, an await: within `CANCEL_CHECK_MS` on a node
    /// where it runs), which then fails with `cancelled`, as does every step after it;
    /// what it did before stays done, and its outcome is `Cancelled` whatever its guest
    /// returns. A sleeping or suspended root is run again at once, to see it. Cancelling
    /// twice is cancelling once; a finished invocation gets `Conflict`, an unknown one
    /// `InvocationNotFound`.
    pub async fn cancel(self: &Arc<Self>, ctx: &mut Context, book: BookId, id: &str) -> Result<()> {
        match self.invocation(ctx, book, id).await? {
            // Cancelling twice is cancelling once: the first cancellation ended it.
            InvocationStatus::Finished(Err(Error::Cancelled)) => return Ok(()),
            InvocationStatus::Finished(r) => {
                let how = match r {
                    Ok(_) => "succeeded".to_string(),
                    Err(e) => format!("failed ({})", e.code()),
                };
                return Err(Error::Conflict(format!("invocation {id} has finished: it {how}")));
            }
            InvocationStatus::Running | InvocationStatus::Sleeping { .. } => {}
        }
        let root = InstanceId::parse_generated(id)?;
        let stream = self.tags.cancel(&root);
        let request = record::encode(&Step::Cancel { root: root.clone() });
        match self.log.cond_append(ctx, shadow(book), &[stream, INSTANCES], request, stream, 0).await {
            Ok(_) | Err(tally_log_core::Error::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        self.wake(ctx, book, root).await
    }

    /// Runs root `root` of `book` again here, in the background, if it exists.
    async fn wake(self: &Arc<Self>, ctx: &mut Context, book: BookId, root: InstanceId) -> Result<()> {
        let first = self.log.read_next(ctx, shadow(book), self.tags.step(&root), SeqNum(0)).await?;
        let Some(Step::Init { function, version, .. } | Step::InitKeyed { function, version, .. }) =
            first.map(|r| record::decode_steps("step", &r.data)).transpose()?.and_then(|s| s.into_init_and_last().0)
        else {
            return Ok(());
        };
        let weak = Arc::downgrade(self);
        // From the caller's position: a replica behind it would not show the run what
        // woke it (a completion, a cancellation), and the run would wait again.
        let seen = ctx.clone();
        // Cancelling it loses nothing: the root is due in the recovery scan.
        self.spawn.spawn(
            "wake",
            Box::pin(async move {
                let Some(d) = Durable::live(&weak) else { return };
                let _ = d.reexecute(book, root, function, version, 1, seen).await;
            }),
        );
        Ok(())
    }

    /// Runs `root`, which holds a lock a waiter here waited for all along, again here
    /// in the background, at most every `reexecute_after_ms` per root (see `locks.rs`).
    pub(crate) fn kick_holder(self: &Arc<Self>, ctx: &Context, book: BookId, root: &InstanceId) {
        let now = self.clock.now_ms();
        {
            let mut kicked = self.kicked.lock().expect("not poisoned");
            if kicked.get(root).is_some_and(|&at| now < at.saturating_add(self.config.reexecute_after_ms)) {
                return;
            }
            if kicked.len() >= 4096 {
                kicked.retain(|_, at| now < at.saturating_add(self.config.reexecute_after_ms));
            }
            kicked.insert(root.clone(), now);
        }
        let (weak, mut ctx, root) = (Arc::downgrade(self), ctx.clone(), root.clone());
        // Cancelling it loses nothing: the holder is due in the recovery scan anyway.
        self.spawn.spawn(
            "kick",
            Box::pin(async move {
                let Some(d) = Durable::live(&weak) else { return };
                if let Err(e) = d.wake(&mut ctx, book, root.clone()).await {
                    tracing::debug!(%root, "running a lock's holder again: {e}");
                }
            }),
        );
    }

    /// Invocations this node answered with their logged result, without running.
    pub fn replayed(&self) -> u64 {
        self.invocations.replayed.load(Ordering::Relaxed)
    }

    /// Whether root invocation `id` of `book` is running on this node.
    pub fn is_running(&self, book: BookId, id: &InstanceId) -> bool {
        self.invocations.running.lock().expect("not poisoned").contains_key(&(book, id.clone()))
    }

    /// Runs one invocation to a final outcome or a transient failure; returns it with
    /// the invocation's final log context. Roots of one ID run one at a time here.
    pub(crate) async fn run(self: &Arc<Self>, run: Run) -> (Result<Vec<u8>>, Context) {
        if !run.id.is_root() {
            return self.run_attempts(run).await;
        }
        let id = run.id.clone();
        let book = run.book;
        let lock = self.invocations.running.lock().expect("not poisoned").entry((book, id.clone())).or_default().clone();
        let outcome = {
            let _turn = lock.lock().await;
            self.invocations.suspended.lock().expect("not poisoned").remove(&(book, id.clone()));
            self.run_attempts(run).await
        };
        let mut running = self.invocations.running.lock().expect("not poisoned");
        // The map's reference and ours: nobody else waits.
        if Arc::strong_count(&lock) == 2 {
            running.remove(&(book, id));
        }
        outcome
    }

    /// The version a run starts from: the one it names, or the current one.
    async fn resolve(&self, run: &Run) -> Result<FunctionVersion> {
        let found = match run.version {
            Some(v) => self.functions.version(&run.function, v).await?,
            None => self.functions.current(&run.function).await?,
        };
        found.ok_or_else(|| Error::FunctionNotFound(run.function.clone()))
    }

    /// What a fresh invocation must pass before anything is logged for it.
    fn admit(&self, run: &Run, version: &FunctionVersion) -> Result<()> {
        check_book(run.book)?;
        if let Some(input) = &run.input {
            if input.len() as u64 > version.request_bytes_max {
                return Err(Error::TooLarge {
                    what: "the request",
                    size: Some(input.len() as u64),
                    limit: version.request_bytes_max,
                });
            }
        }
        if run.depth > self.bounds.call_depth_max {
            return Err(Error::InvalidArgument(format!("calls nest deeper than {}", self.bounds.call_depth_max)));
        }
        Ok(())
    }

    /// The version the Init record of `id` names, if the invocation has one: then it was
    /// admitted once, and runs on that version whatever the registry or the checks
    /// say now.
    async fn recorded_version(&self, ctx: &mut Context, book: BookId, id: &InstanceId) -> Result<Option<u64>> {
        if book.is_reserved() {
            return Ok(None);
        }
        let Some(first) = self.log.read_next(ctx, shadow(book), self.tags.step(id), SeqNum(0)).await? else {
            return Ok(None);
        };
        match record::decode_steps("step", &first.data)?.into_init_and_last().0 {
            Some(Step::Init { id: found, version, .. } | Step::InitKeyed { id: found, version, .. }) if found == *id => {
                Ok(Some(version))
            }
            _ => Ok(None),
        }
    }

    /// The version to run and whether the run is admitted: a fresh invocation must
    /// exist and pass [`Durable::admit`]; one with history runs the version it began on.
    async fn version_for(&self, run: &mut Run) -> Result<FunctionVersion> {
        let resolved = self.resolve(run).await;
        let admitted = resolved.as_ref().map_err(Clone::clone).and_then(|v| self.admit(run, v));
        match admitted {
            Ok(()) => resolved,
            // Only an eager run's ID may have history (the others are fresh).
            Err(e @ (Error::FunctionNotFound(_) | Error::InvalidArgument(_) | Error::TooLarge { .. })) if run.eager => {
                match self.recorded_version(&mut run.ctx, run.book, &run.id).await? {
                    Some(v) => self.functions.version(&run.function, v).await?.ok_or(e),
                    None => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Logs `refusal` as the outcome of the child `run` in the child's own step log, or
    /// finds what a peer logged there first: its outcome, or (`None`, with `run.version`
    /// set) the version a peer started the child on.
    async fn refuse_child(self: &Arc<Self>, run: &mut Run, refusal: Error) -> Result<Option<Outcome>> {
        let of = Of {
            id: run.id.clone(),
            book: run.book,
            function: run.function.clone(),
            version: 0,
            input: run.input.clone(),
            declared: Default::default(),
            crash: run.crash.clone(),
            key: None,
            defer_init: false,
            forgettable: false,
        };
        let outcome = Outcome::of_final(&Err(refusal)).expect("refusals are final");
        match Instance::new(self.clone(), of).refuse(&mut run.ctx, outcome).await.map_err(Abort::into_error)? {
            Started::Finished(logged) => Ok(Some(logged)),
            Started::Running { version } => {
                run.version = Some(version);
                Ok(None)
            }
            Started::Fresh => Err(Error::Internal("a refusal found no history".into())),
        }
    }

    async fn run_attempts(self: &Arc<Self>, mut run: Run) -> (Result<Vec<u8>>, Context) {
        let mut version = loop {
            match self.version_for(&mut run).await {
                Ok(v) => break v,
                // A child refused before it ran (its function missing, say) has that
                // refusal logged in its own step log, not only in its parent's: a peer of
                // the parent that calls the child once the function exists then finds the
                // refusal there, instead of running the child under a parent whose history
                // says it never ran.
                Err(e @ (Error::FunctionNotFound(_) | Error::InvalidArgument(_) | Error::TooLarge { .. }))
                    if !run.id.is_root() =>
                {
                    match self.refuse_child(&mut run, e).await {
                        Ok(Some(logged)) => return (logged.into_result(), run.ctx),
                        // A peer started the child on a version: run that one.
                        Ok(None) => continue,
                        Err(e) => return (Err(e), run.ctx),
                    }
                }
                Err(e) => return (Err(e), run.ctx),
            }
        };
        // Whether the invocation has a history (a retry may be logged in it).
        let mut history = false;
        loop {
            // On a node alone, a root from outside defers its Init, unless it has a
            // history (a retry of one that started or finished takes that first, as an
            // eager start does, rather than run its guest in vain).
            let mut defer = false;
            if let Some(fresh) = self.fresh_from.as_ref().filter(|_| run.defer && run.id.is_root()) {
                run.ctx.merge(fresh);
                let step_log = self.tags.step(&run.id);
                match self.log.read_next(&mut run.ctx, shadow(run.book), step_log, SeqNum(0)).await {
                    Ok(None) => defer = true,
                    Ok(Some(_)) => run.eager = true,
                    Err(e) => return (Err(e.into()), run.ctx),
                }
            }
            let of = Of {
                id: run.id.clone(),
                book: run.book,
                function: run.function.clone(),
                version: version.version,
                input: run.input.clone(),
                declared: version.tables.clone(),
                crash: run.crash.clone(),
                key: run.key.clone(),
                defer_init: defer,
                forgettable: defer && run.forgettable,
            };
            let mut instance = Instance::new(self.clone(), of);
            if run.eager && defer {
                // An idempotency key: the result is logged even without an effect, so
                // the deferred Init is taken before the guest runs.
                match instance.begin(&mut run.ctx).await {
                    Ok(()) => {}
                    // A peer logged it meanwhile: take its history.
                    Err(Abort::Superseded) => {
                        run.defer = false;
                        continue;
                    }
                    Err(abort) => return (Err(abort.into_error()), run.ctx),
                }
            } else if run.eager {
                match instance.init(&mut run.ctx).await {
                    Ok(Started::Fresh) => history = false,
                    Ok(Started::Running { version: v }) if v != version.version => {
                        history = true;
                        // Invocations finish on the version that started them.
                        version = match self.functions.version(&run.function, v).await {
                            Ok(Some(found)) => found,
                            Ok(None) => {
                                let e = Error::Internal(format!("version {v} of {:?} is missing", run.function));
                                return (Err(e), run.ctx);
                            }
                            Err(e) => return (Err(e), run.ctx),
                        };
                        instance.set_declared(version.tables.clone());
                    }
                    Ok(Started::Running { .. }) if run.fresh => instance.look_for_cancellation_later(),
                    Ok(Started::Running { .. }) => history = true,
                    Ok(Started::Finished(logged)) => {
                        self.invocations.replayed.fetch_add(1, Ordering::Relaxed);
                        return (logged.into_result(), run.ctx);
                    }
                    Err(abort) => return (Err(abort.into_error()), run.ctx),
                }
            }
            // A retry after a trap: its attempt number, and the wait before it.
            if history {
                match self.retry_state(&mut run).await {
                    Ok(Some((attempt, until_ms))) => {
                        run.attempt = run.attempt.max(attempt);
                        // Cancelled while it waited to retry (the cancellation woke it):
                        // the rest of the wait is not waited out.
                        let cancelled = match self.cancel_requested(&mut run).await {
                            Ok(c) => c,
                            Err(e) => return (Err(e), run.ctx),
                        };
                        if cancelled {
                        } else if let Err(suspended) = self.wait_to_retry(&run, version.version, until_ms).await {
                            return suspended;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => return (Err(e), run.ctx),
                }
                history = false;
            }
            let own = self.clock.now_ms().saturating_add(version.timeout_ms);
            let deadline_ms = run.deadline_ms.map_or(own, |d| d.min(own));
            if instance.initialized() && !instance.init_deferred() {
                // What runs before the guest: a delayed start's wait, a keyed one's key.
                let in_place_ms = if run.background { self.config.sleep_in_place_max_ms } else { u64::MAX };
                let before = async {
                    instance.delay(&mut run.ctx, run.delay_until, deadline_ms).await?;
                    instance.enter_key(&mut run.ctx, deadline_ms, in_place_ms).await
                };
                match before.await {
                    Ok(()) => {}
                    Err(Abort::Suspended { wake_ms }) => return self.suspended(&run, version.version, wake_ms),
                    // Cancelled before it started: that is its outcome.
                    Err(_) if instance.is_cancelled() => {
                        let finished = instance.finish(&mut run.ctx, Outcome::Cancelled).await;
                        return (finished.map_err(Abort::into_error).and_then(Outcome::into_result), run.ctx);
                    }
                    Err(abort) => return (Err(abort.into_error()), run.ctx),
                }
            }
            run.fresh = false;
            let input = instance.input().cloned().unwrap_or_default();
            let attempt = Attempt {
                version: version.clone(),
                book: run.book,
                input,
                instance,
                attempt: run.attempt,
                depth: run.depth,
                ctx: run.ctx,
                deadline_ms,
            };
            let (result, mut attempt) = self.functions.run(attempt).await;
            run.ctx = attempt.ctx;
            if let Err(Error::Suspended { wake_ms, .. }) = result {
                return self.suspended(&run, version.version, wake_ms);
            }
            if !attempt.instance.initialized() {
                // Nothing durable happened: the outcome is the attempt's, as it is.
                return (result, run.ctx);
            }
            if matches!(result, Err(Error::Trap(_))) && attempt.instance.init_deferred() {
                // Retried (or given up) as an invocation that started: its Init first.
                match attempt.instance.log_init_alone(&mut run.ctx).await {
                    Ok(()) => {}
                    Err(Abort::Superseded) => {
                        run.eager = true;
                        run.defer = false;
                        continue;
                    }
                    Err(abort) => return (Err(abort.into_error()), run.ctx),
                }
            }
            // A trap after the root was asked to stop is not retried: the cancellation
            // is its outcome (the next attempt would only replay up to its first new
            // step and be refused there, or trap before it again).
            let trapped = matches!(result, Err(Error::Trap(_))) && !attempt.instance.is_cancelled();
            let stop = match trapped && run.attempt < version.retry.attempts {
                true => match self.cancel_requested(&mut run).await {
                    Ok(c) => c,
                    Err(e) => return (Err(e), run.ctx),
                },
                false => false,
            };
            let outcome = match result {
                // Whatever the guest made of its cancellation.
                _ if attempt.instance.is_cancelled() || stop => Outcome::Cancelled,
                Err(Error::Trap(m)) if run.attempt >= version.retry.attempts => Outcome::Trap(cut(&m)),
                Err(Error::Trap(m)) => {
                    tracing::info!(function = run.function, id = %run.id, attempt = run.attempt, "running again after a trap: {m}");
                    run.attempt += 1;
                    run.eager = true;
                    let wait = version.retry.backoff_before(run.attempt);
                    if wait > 0 {
                        // Logged, so that the attempt count and the wait outlive this node.
                        let until_ms = self.clock.wall_ms().saturating_add(wait);
                        let retry = Step::Retry { id: run.id.clone(), root: run.id.root(), attempt: run.attempt, until_ms };
                        let tags = [self.tags.retry(&run.id), INSTANCES];
                        if let Err(e) = self.log.append(&mut run.ctx, shadow(run.book), &tags, record::encode(&retry)).await {
                            return (Err(e.into()), run.ctx);
                        }
                        if let Err(suspended) = self.wait_to_retry(&run, version.version, until_ms).await {
                            return suspended;
                        }
                    }
                    continue;
                }
                // A late peer: the logged result stands; the next init returns it.
                Err(Error::Superseded) => {
                    run.eager = true;
                    run.defer = false;
                    continue;
                }
                other => match Outcome::of_final(&other) {
                    Some(outcome) => outcome,
                    None => return (other, run.ctx),
                },
            };
            // A trap may come from a re-execution that left the recorded history (a
            // non-deterministic one), whose position is taken: its result goes after
            // what is recorded. So does a result that a diverging execution reached
            // early, at a recorded step.
            let instance = &mut attempt.instance;
            let finished = match outcome {
                Outcome::Trap(_) => instance.finish_after_recorded(&mut run.ctx, outcome).await,
                Outcome::Cancelled if stop => instance.finish_after_recorded(&mut run.ctx, outcome).await,
                outcome => match instance.finish(&mut run.ctx, outcome).await {
                    Err(Abort::NonDeterministic(m)) => {
                        let trap = Outcome::Trap(cut(&format!("non-deterministic re-execution: {m}")));
                        instance.finish_after_recorded(&mut run.ctx, trap).await
                    }
                    other => other,
                },
            };
            match finished {
                Ok(logged) => return (logged.into_result(), run.ctx),
                Err(Abort::Superseded) => {
                    run.eager = true;
                    run.defer = false;
                }
                Err(abort) => return (Err(abort.into_error()), run.ctx),
            }
        }
    }

    /// The attempt number and start time of the last retry of `run` logged after a
    /// trap, if any.
    async fn retry_state(&self, run: &mut Run) -> Result<Option<(u32, u64)>> {
        let last = self.log.read_prev(&mut run.ctx, shadow(run.book), self.tags.retry(&run.id), SeqNum::MAX).await?;
        match last.map(|r| record::decode::<Step>("retry", &r.data)).transpose()? {
            Some(Step::Retry { id, attempt, until_ms, .. }) if id == run.id => Ok(Some((attempt, until_ms))),
            Some(other) => Err(Error::Internal(format!("the retry stream of {} holds {}", run.id, other.describe()))),
            None => Ok(None),
        }
    }

    /// Whether `run`'s root was asked to be cancelled (see [`Durable::cancel`]).
    async fn cancel_requested(&self, run: &mut Run) -> Result<bool> {
        let stream = self.tags.cancel(&run.id.root());
        Ok(self.log.read_next(&mut run.ctx, shadow(run.book), stream, SeqNum(0)).await?.is_some())
    }

    /// Waits for `until_ms` (wall clock) before a retry: in place if near, else the
    /// attempt ends suspended (`Err`, the answer to return) and the root wakes then.
    async fn wait_to_retry(self: &Arc<Self>, run: &Run, version: u64, until_ms: u64) -> Result<(), (Result<Vec<u8>>, Context)> {
        let remaining = until_ms.saturating_sub(self.clock.wall_ms());
        if remaining == 0 {
            return Ok(());
        }
        if remaining <= self.config.sleep_in_place_max_ms {
            self.clock.sleep(remaining).await;
            return Ok(());
        }
        Err(self.suspended(run, version, until_ms))
    }

    /// The answer of an attempt that ended suspended until `wake_ms`. A child's parent
    /// takes the suspension up; a root wakes by this node's timer (or, should the node
    /// die, by the recovery scan on its owner).
    fn suspended(self: &Arc<Self>, run: &Run, version: u64, wake_ms: u64) -> (Result<Vec<u8>>, Context) {
        if run.id.is_root() {
            let mut suspended = self.invocations.suspended.lock().expect("not poisoned");
            // Roots woken on another node leave their entry here: forget the past ones
            // now and then, so that the map holds about the roots asleep.
            if suspended.len() >= SUSPENDED_PRUNE_AT && suspended.len().is_power_of_two() {
                let now = self.clock.wall_ms();
                suspended.retain(|_, wake| *wake > now);
            }
            suspended.insert((run.book, run.id.clone()), wake_ms);
            drop(suspended);
            self.wake_at(run.book, run.id.clone(), run.function.clone(), version, wake_ms);
        }
        (Err(Error::Suspended { id: run.id.to_string(), wake_ms }), run.ctx.clone())
    }

    /// Runs a suspended root invocation again at `wake_ms` (wall clock), from a timer
    /// task that holds the node weakly. Cancelling the task (the node stops) loses
    /// nothing: the Sleep record is in the INSTANCES stream, and the recovery scan wakes
    /// the invocation once it is overdue.
    fn wake_at(self: &Arc<Self>, book: BookId, id: InstanceId, function: String, version: u64, wake_ms: u64) {
        if wake_ms == u64::MAX {
            // Waiting for a promise with no timeout: its completion wakes it.
            return;
        }
        let weak = Arc::downgrade(self);
        let wait = self.clock.sleep(wake_ms.saturating_sub(self.clock.wall_ms()));
        self.spawn.spawn(
            "wake",
            Box::pin(async move {
                wait.await;
                let Some(d) = Durable::live(&weak) else { return };
                if let (Err(e), _) = d.reexecute(book, id.clone(), function, version, 1, Context::new()).await {
                    if !matches!(e, Error::Suspended { .. }) {
                        tracing::warn!(%id, "waking a sleeping invocation: {e}");
                    }
                }
            }),
        );
    }

    /// Runs an unfinished root invocation again, on the version its Init record names.
    /// `ctx` is where the caller saw why (a completion, a cancellation, a wake record):
    /// the run reads nothing older, so it sees that too.
    pub(crate) async fn reexecute(
        self: &Arc<Self>,
        book: BookId,
        id: InstanceId,
        function: String,
        version: u64,
        attempt: u32,
        ctx: Context,
    ) -> (Result<Vec<u8>>, Context) {
        let run = Run {
            function,
            version: Some(version),
            book,
            input: None,
            ctx,
            depth: 0,
            deadline_ms: None,
            id,
            eager: true,
            crash: None,
            attempt,
            delay_until: None,
            fresh: false,
            background: true,
            defer: false,
            forgettable: false,
            key: None,
        };
        self.run(run).await
    }
}
