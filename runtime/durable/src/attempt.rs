//! [`Attempt`]: one execution of an invocation, as the guest runtime sees it. The host's
//! imports (`state`, `objects`, `queues`, `locks`, `invoke`, `log` and `context`, and
//! WASI's clocks and random) call these methods; everything exactly-once happens here, in
//! the attempt's `Instance`.
//!
//! A child invocation's outcome, a missing function and a refusal included, is logged as
//! the parent's step, and a child's suspension suspends its parent.

use bytes::Bytes;
use tally_log_core::{BookId, Context, Error as LogError, LogRecord, SeqNum, Tag};

use crate::abort::Abort;
use crate::core::ChildCall;
use crate::env::{BoxFuture, FunctionVersion};
use crate::error::{Error, Result};
use crate::instance::{Instance, Outcall, Wake};
use crate::objects::ObjOp;
use crate::record::LockId;
use crate::record::{cut, input_sha256, Awaited, Outcome};
use crate::recorder::GuestClock;

/// The functions this node can run (the registry and the guest runtime): what runs an
/// [`Attempt`], so it is stated beside it.
pub trait Functions: Send + Sync {
    /// The current version of `name`, or `None` if no function has that name.
    fn current<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<FunctionVersion>>>;

    /// Version `version` of `name`, replaced or deleted since or not, or `None` if it
    /// never existed.
    fn version<'a>(&'a self, name: &'a str, version: u64) -> BoxFuture<'a, Result<Option<FunctionVersion>>>;

    /// Runs one attempt: the version's `handle` on the attempt's input, its `state` and
    /// `invoke` calls going to the attempt's instance. The host bounds it by
    /// `attempt.deadline_ms` and by the function's concurrency, and gives the attempt back.
    fn run(&self, attempt: Attempt) -> BoxFuture<'_, (Result<Vec<u8>>, Attempt)>;
}

/// One execution attempt of an invocation.
pub struct Attempt {
    pub version: FunctionVersion,
    pub book: BookId,
    pub input: Bytes,
    /// The exactly-once side: the instance ID, step log and `cursorTS`.
    pub instance: Instance,
    /// 1 for the first attempt of this invocation on this node.
    pub attempt: u32,
    /// Nesting of `invoke.call`, 0 for an invocation from outside.
    pub depth: u32,
    /// The caller's view of the log; it moves with every log call.
    pub ctx: Context,
    /// On the core's clock ([`crate::Clock::now_ms`]): past it the attempt, children
    /// included, is timed out.
    pub deadline_ms: u64,
}

impl Attempt {
    pub async fn get(&mut self, table: &str, key: &[u8]) -> Result<Option<Bytes>, Abort> {
        self.instance.get(&mut self.ctx, table, key).await
    }

    pub async fn put(&mut self, table: &str, key: &[u8], value: Bytes) -> Result<(), Abort> {
        self.instance.put(&mut self.ctx, table, key, Some(value)).await
    }

    pub async fn delete(&mut self, table: &str, key: &[u8]) -> Result<(), Abort> {
        self.instance.put(&mut self.ctx, table, key, None).await
    }

    /// `objects.get`: the JSON text at `path` of a durable object (`objects.rs`).
    pub async fn object_get(&mut self, object: &str, path: &str) -> Result<Option<String>, Abort> {
        self.instance.object_get(&mut self.ctx, object, path).await
    }

    /// `objects.set`, `increment`, `push`, `remove`: an update of a durable object.
    pub async fn object_update(&mut self, object: &str, op: ObjOp) -> Result<(), Abort> {
        self.instance.object_update(&mut self.ctx, object, op).await
    }

    /// `objects.begin`: a transaction across durable objects of the book.
    pub async fn txn_begin(&mut self, read_only: bool) -> Result<(), Abort> {
        self.instance.txn_begin(&mut self.ctx, read_only).await
    }

    /// `objects.commit`: whether the transaction committed.
    pub async fn txn_commit(&mut self) -> Result<bool, Abort> {
        self.instance.txn_commit(&mut self.ctx).await
    }

    /// `objects.abort`.
    pub fn txn_abort(&mut self) -> Result<(), Abort> {
        self.instance.txn_abort()
    }

    /// `context.key`: the key the invocation is addressed to (`?key=`).
    pub fn key(&self) -> Option<&str> {
        self.instance.key().map(|k| k.key.as_str())
    }

    /// `queues.push`.
    pub async fn queue_push(&mut self, queue: &str, message: Bytes) -> Result<(), Abort> {
        self.instance.queue_push(&mut self.ctx, queue, message).await
    }

    /// `queues.pop`: waits up to `timeout_ms`, and not past the attempt's deadline.
    pub async fn queue_pop(&mut self, queue: &str, timeout_ms: u64) -> Result<Option<Bytes>, Abort> {
        self.instance.queue_pop(&mut self.ctx, queue, timeout_ms, self.deadline_ms).await
    }

    /// `queues.pop-many`: waits up to `timeout_ms` for the first, and not past the
    /// attempt's deadline.
    pub async fn queue_pop_many(&mut self, queue: &str, max: u32, timeout_ms: u64) -> Result<Vec<Bytes>, Abort> {
        self.instance.queue_pop_many(&mut self.ctx, queue, max, timeout_ms, self.deadline_ms).await
    }

    /// `locks.acquire`: waits up to `timeout_ms`, and not past the attempt's deadline.
    pub async fn lock_acquire(&mut self, lock: &str, timeout_ms: u64) -> Result<bool, Abort> {
        self.instance.lock_acquire(&mut self.ctx, LockId::Named(lock.to_string()), timeout_ms, self.deadline_ms).await
    }

    /// `locks.release`.
    pub async fn lock_release(&mut self, lock: &str) -> Result<(), Abort> {
        self.instance.lock_release(&mut self.ctx, LockId::Named(lock.to_string())).await
    }

    /// `context.sleep` of the guest: sleeps durably until `wake` (see
    /// [`Instance::sleep`]), which may outlast the attempt's deadline: the attempt then
    /// ends with [`Abort::Suspended`], and the invocation runs on at the wake time.
    /// Returns the wake time, in milliseconds since the Unix epoch.
    pub async fn sleep(&mut self, wake: Wake) -> Result<u64, Abort> {
        self.instance.sleep(&mut self.ctx, wake, self.deadline_ms).await
    }

    /// `context.promise-create`: a promise the outside world completes once (see
    /// [`Instance::create_promise`]); returns its ID.
    pub async fn create_promise(&mut self) -> Result<String, Abort> {
        self.instance.create_promise(&mut self.ctx).await
    }

    /// `context.promise-await`: the promise's value, waiting durably for it (see
    /// [`Instance::await_promise`]); a timeout and an unknown promise are the guest's
    /// errors.
    pub async fn await_promise(&mut self, promise: &str, timeout_ms: Option<u64>) -> Result<Result<Bytes, Error>, Abort> {
        Ok(match self.instance.await_promise(&mut self.ctx, promise, timeout_ms, self.deadline_ms).await? {
            Awaited::Value(v) => Ok(v),
            Awaited::TimedOut => Err(Error::Timeout(timeout_ms.unwrap_or(0))),
            Awaited::Unknown => Err(Error::PromiseNotFound(promise.to_string())),
        })
    }

    /// Before an outgoing call of the guest (`what`: `POST https://host/path`): what an
    /// earlier execution logged for it, or the slot to log what comes back once it is
    /// sent (see [`Instance::outcall`]).
    pub async fn outcall(&mut self, what: &str) -> Result<Outcall, Abort> {
        self.instance.outcall(&mut self.ctx, what).await
    }

    /// `log.append` of the guest: to its book, once across every execution of the
    /// invocation (see [`Instance::append`]). The inner error is the guest's.
    pub async fn append(&mut self, tags: &[Tag], data: Bytes) -> Result<Result<SeqNum, LogError>, Abort> {
        self.instance.append(&mut self.ctx, tags, data).await
    }

    /// `log.cond-append` of the guest, once across every execution of the invocation,
    /// conflicts included (see [`Instance::cond_append`]).
    pub async fn cond_append(
        &mut self,
        tags: &[Tag],
        data: Bytes,
        cond_tag: Tag,
        cond_position: u64,
    ) -> Result<Result<SeqNum, LogError>, Abort> {
        self.instance.cond_append(&mut self.ctx, tags, data, cond_tag, cond_position).await
    }

    /// `log.read-next` of the guest: the first record of `tag` at or after `min`, the
    /// same in every execution of the invocation (see [`Instance::read_log`]).
    pub async fn read_next(&mut self, tag: Tag, min: SeqNum) -> Result<Result<Option<LogRecord>, LogError>, Abort> {
        self.instance.read_log(&mut self.ctx, tag, min, true).await
    }

    /// `log.read-prev` (and `check-tail`, at `u64::MAX`) of the guest: the last record
    /// of `tag` at or before `max`, the same in every execution.
    pub async fn read_prev(&mut self, tag: Tag, max: SeqNum) -> Result<Result<Option<LogRecord>, LogError>, Abort> {
        self.instance.read_log(&mut self.ctx, tag, max, false).await
    }

    /// The guest's wall clock (nanoseconds since the Unix epoch) when the host's says
    /// `live`: the reading an earlier execution of the invocation got at this point, if
    /// one did (see `recorder.rs`).
    pub fn wall_clock_ns(&mut self, live: u64) -> u64 {
        self.instance.read_clock(GuestClock::Wall, live)
    }

    /// The guest's monotonic clock (nanoseconds) when the host's says `live`: as
    /// [`Attempt::wall_clock_ns`], and never below an earlier reading.
    pub fn monotonic_clock_ns(&mut self, live: u64) -> u64 {
        self.instance.read_clock(GuestClock::Monotonic, live)
    }

    /// The version of the function's settings the execution reads when the registry's
    /// current one is `live`: the one an earlier execution read, if one did.
    pub fn settings_version(&mut self, live: u64) -> u64 {
        self.instance.read_clock(GuestClock::Settings, live)
    }

    /// Random bytes: the invocation's own stream, the same in every execution.
    pub fn random_bytes(&mut self, out: &mut [u8]) {
        self.instance.random(out);
    }

    pub fn random_u64(&mut self) -> u64 {
        let mut b = [0; 8];
        self.instance.random(&mut b);
        u64::from_le_bytes(b)
    }

    /// The invocation's `wasi:random/insecure-seed` (hash-map keys, say): fixed for it.
    pub fn insecure_seed(&self) -> (u64, u64) {
        self.instance.insecure_seed()
    }

    /// An exactly-once child invocation on the same book.
    ///
    /// The child's instance ID is the parent's ID and step, so a re-execution of the
    /// parent calls the same child instance, which answers from its own step log; the
    /// child's final outcome (a missing function and a refusal included) is logged as
    /// the parent's step, so later re-executions take it from there without calling.
    /// A child that failed transiently (timed out, log unavailable, its component not
    /// loadable here) ends the parent's attempt instead: the parent runs again.
    ///
    /// The child starts from a copy of the parent's log context, so it reads everything
    /// the parent has seen or written; then the parent's context moves past everything
    /// the child saw.
    pub async fn call(&mut self, function: String, input: Bytes) -> Result<Result<Vec<u8>, Error>, Abort> {
        let hash = input_sha256(&input);
        let (result, child_ctx) = loop {
            let id = match self.instance.child(&mut self.ctx, &function, hash).await? {
                Ok(logged) => return Ok(logged.into_result()),
                Err(id) => id,
            };
            let defer = self.instance.init_deferred();
            let child = ChildCall {
                function: function.clone(),
                book: self.book,
                input: input.clone(),
                ctx: self.ctx.child(),
                depth: self.depth + 1,
                deadline_ms: self.deadline_ms,
                id,
                crash: self.instance.crash(),
                defer,
            };
            match self.instance.core().invoker()?.call(child).await {
                // A deferred child that had something to log stopped before it did: the
                // parent logs its Init first, and calls it again, as one that may log.
                (Err(Error::Superseded), _) if defer => self.instance.flush(&mut self.ctx).await?,
                done => break done,
            }
        };
        self.ctx.merge(&child_ctx);
        let outcome = match result {
            Err(Error::InjectedCrash) => return Err(Abort::Crash),
            // The child sleeps, and so does its parent, until the child's wake time.
            Err(Error::Suspended { wake_ms, .. }) => return Err(Abort::Suspended { wake_ms }),
            Err(Error::Trap(m)) => Outcome::Trap(cut(&m)),
            other => match Outcome::of_final(&other) {
                Some(outcome) => outcome,
                None => return Err(Abort::Transient(other.expect_err("Ok is final"))),
            },
        };
        Ok(self.instance.child_finished(&mut self.ctx, &function, hash, outcome).await?.into_result())
    }
}
