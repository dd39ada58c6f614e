//! The recovery scan: finds invocations that started (an Init record in a book's
//! INSTANCES stream) and never finished (no Result record), and runs them again once
//! they are older than their function's timeout plus `reexecute_after_ms`: their node
//! died, or their last attempt failed transiently. A book is scanned by its owner only
//! (see [`crate::Peers`]), from the start of its stream when the node starts or gains
//! the book; a node that loses a book drops what it knew of it. Two nodes running one
//! invocation (the old and the new owner, or the node that started it) are peers, which
//! the step log's conditional appends keep to one history. Children are not run on
//! their own: their parent's re-execution calls them again.
//!
//! An invocation that has failed transiently `attempts_max` times gets its last
//! failure logged as its result; a version that cannot be loaded on this node does not
//! count (another node, or this one later, may load it).
//!
//! Memory is bounded: an unfinished root costs its ID and a few numbers (its input
//! stays in the log), and at most `open_max` are tracked per book. Past that the scan
//! notes where it stopped tracking (the horizon stays below it, so garbage collection
//! keeps what those invocations may read) and picks them up as tracked ones finish.
//!
//! The same scan feeds garbage collection (`gc.rs`): it knows which instances are open
//! and which finished, and when.
//!
//! Waits: a `Sleep`, `Delay` or `Retry` record (of the root or of a child) makes its root
//! not due until its wake time plus `reexecute_after_ms` (the suspending node's timer wakes
//! it on time; the scan is for a node that died), and a re-execution that suspends again is
//! not a failure. A `Completed` record (for the promise's creator and the roots in its
//! waiters stream) or a `Cancel` record makes its root due at once, also a root that was
//! not tracked when the record was read. A root that logged an await with no timeout is run
//! again a few times soon (its execution may have died between logging the wait and looking
//! at the promise), then every ten minutes. A re-execution runs the root's own version.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};

use tally_log_core::{BookId, Context, LogRecord, SeqNum, Tag};

use crate::error::Error;
use crate::gc::{Collectable, CompletedPromise, Finished};
use crate::id::InstanceId;
use crate::instance::{Instance, Of};
use crate::node::Durable;
use crate::record::kind;
use crate::record::{self, Outcome, Step};
use crate::tags::{shadow, APPENDED, INSTANCES};

/// How often the scan runs a root that awaits a promise with no timeout again, should
/// the completion's own wake be lost.
const AWAIT_RECHECK_MS: u64 = 600_000;
/// Times the scan runs a root that logged an await with no timeout again soon after
/// (see `Open::rechecks_soon`).
const RECHECKS_SOON: u8 = 3;

/// An invocation seen starting and not yet seen finishing.
struct Open {
    id: InstanceId,
    function: String,
    version: u64,
    /// When this node first saw it, or last ran it again (its age counts from there).
    seen_ms: u64,
    /// Re-executions this node has started.
    attempts: u32,
    /// The seqnum of its init record.
    init: u64,
    /// The wake time of the durable sleep it was last seen in (wall clock): until then
    /// it is not overdue.
    wake_ms: Option<u64>,
    /// It logged an await with no timeout: run it again this many times soon (its
    /// execution may have died between logging the wait and looking at the promise, and
    /// a completion made in between wakes nobody; a run may fail transiently), then
    /// every `AWAIT_RECHECK_MS`.
    rechecks_soon: u8,
}

/// How far the scan has read one book.
#[derive(Default)]
pub(crate) struct BookScan {
    pub ctx: Context,
    /// The next seqnum of the INSTANCES stream to read.
    pub next: u64,
    /// Unfinished roots by step tag: a Result record names its instance only by that.
    open: BTreeMap<Tag, Open>,
    /// The first root init not tracked because `open` was full.
    untracked_from: Option<u64>,
    /// Untracked roots made due (by a completion or a cancellation) while untracked, which `catch_up` would otherwise take for asleep; bounded (past the
    /// bound such a root waits for the scan's rare look at awaits, `AWAIT_RECHECK_MS`).
    woken_untracked: BTreeSet<Tag>,
    /// Untracked roots that sleep (their Sleep, Delay or Retry records), with when they
    /// wake: after a restart or an owner change nobody's timer wakes them, and they must
    /// not wait for older roots to finish before the scan tracks them; bounded as
    /// `woken_untracked` is.
    sleeping_untracked: BTreeMap<Tag, (InstanceId, u64)>,
    pub last_gc_ms: Option<u64>,
    /// What garbage collection may collect: what the scan saw finish.
    pub gc: Collectable,
}

impl BookScan {
    /// Halfmoon's t̄: every root that started before it has finished (a finished root
    /// has no running descendants), so no reader's cursor is below it.
    pub fn horizon(&self) -> u64 {
        let open = self.open.values().map(|o| o.init).min().unwrap_or(self.next);
        open.min(self.untracked_from.unwrap_or(u64::MAX)).min(self.next)
    }

    /// Reads what is new in the book's INSTANCES stream.
    async fn read(&mut self, d: &Durable, book: BookId, open_max: usize) -> Result<(), Error> {
        while let Some(r) = d.core.log.read_next(&mut self.ctx, shadow(book), INSTANCES, SeqNum(self.next)).await? {
            self.next = r.seqnum.0 + 1;
            let Ok(step) = record::decode_steps("step", &r.data) else { continue };
            let Some(tag) = d.core.tags.step_log_of(&r.tags, &step) else { continue };
            // A deferred Init comes in one record with the root's first steps, up to its
            // result: the Init first, then the last of them.
            let began = began_at(r.seqnum.0, &step);
            let (init, last) = step.into_init_and_last();
            for step in init.into_iter().chain(last) {
                self.note(d, book, &r, tag, step, open_max).await?;
            }
            if let Some(open) = self.open.get_mut(&tag) {
                open.init = open.init.min(began);
            }
        }
        Ok(())
    }

    /// Takes one step of a record of the INSTANCES stream into account.
    async fn note(
        &mut self,
        d: &Durable,
        book: BookId,
        r: &LogRecord,
        tag: Tag,
        step: Step,
        open_max: usize,
    ) -> Result<(), Error> {
        match &step {
            Step::Retry(kind::Retry { id, .. }) => self.collect_with(d.core.tags.step(id), d.core.tags.retry(id)),
            Step::Outcall(kind::Outcall { id, n, .. }) => self.collect_with(d.core.tags.step(id), d.core.tags.outcall(id, *n)),
            _ => {}
        }
        match step {
            Step::Init(kind::Init { id, function, version, .. })
            | Step::InitKeyed(kind::InitKeyed { id, function, version, .. }) => {
                self.gc.inits.insert(tag, r.seqnum.0);
                if !id.is_root() {
                    return Ok(());
                }
                if self.open.len() >= open_max || self.untracked_from.is_some() {
                    self.untracked_from.get_or_insert(r.seqnum.0);
                    return Ok(());
                }
                let seen_ms = d.core.clock.now_ms();
                self.open.insert(
                    tag,
                    Open { id, function, version, seen_ms, attempts: 0, init: r.seqnum.0, wake_ms: None, rechecks_soon: 0 },
                );
            }
            // A sleep of the root or of one of its children, a delayed start, or a
            // retry after a trap: the root is due then.
            Step::Sleep(kind::Sleep { until_ms, root })
            | Step::Delay(kind::Delay { until_ms, root })
            | Step::Retry(kind::Retry { until_ms, root, .. }) => {
                let step = d.core.tags.step(&root);
                if let Some(open) = self.open.get_mut(&step) {
                    open.wake_ms = Some(until_ms);
                    open.attempts = 0;
                    if until_ms == u64::MAX {
                        open.rechecks_soon = RECHECKS_SOON;
                        open.seen_ms = d.core.clock.now_ms();
                    }
                } else if self.untracked_from.is_some()
                    && until_ms != u64::MAX
                    && (self.sleeping_untracked.len() < open_max.saturating_mul(8) || self.sleeping_untracked.contains_key(&step))
                {
                    self.sleeping_untracked.insert(step, (root, until_ms));
                }
            }
            // A promise was completed: the root that created it is due, and so are
            // those that logged a wait for it.
            Step::Completed(kind::Completed { promise, root, .. }) => {
                self.make_due(d, &root, open_max);
                let (creator, seen_ms) = (d.core.tags.step(&root), d.core.clock.now_ms());
                if self.gc.promises.len() < crate::gc::FINISHED_MAX {
                    self.gc.promises.push_back(CompletedPromise {
                        promise: promise.clone(),
                        creator,
                        seqnum: r.seqnum.0,
                        seen_ms,
                    });
                } else {
                    tracing::warn!(book = book.0, promise, "too many completed promises to collect: this one stays");
                }
                for waiter in d.promise_waiters(&mut self.ctx, book, &promise).await? {
                    self.make_due(d, &waiter, open_max);
                }
            }
            // The root was cancelled: it is due, to see it.
            Step::Cancel(kind::Cancel { root }) => {
                self.collect_with(d.core.tags.step(&root), d.core.tags.cancel(&root));
                self.make_due(d, &root, open_max);
            }
            // A refused child's whole history: started and finished at once.
            Step::Refused(kind::Refused { .. }) => {
                self.gc.inits.insert(tag, r.seqnum.0);
                let seen_ms = d.core.clock.now_ms();
                self.gc.finished.push_back(Finished { step_tag: tag, result: r.seqnum.0, seen_ms, appended: false });
            }
            Step::Result(kind::Result { .. }) => {
                self.open.remove(&tag);
                self.sleeping_untracked.remove(&tag);
                let (seen_ms, appended) = (d.core.clock.now_ms(), r.tags.contains(&APPENDED));
                self.gc.finished.push_back(Finished { step_tag: tag, result: r.seqnum.0, seen_ms, appended });
            }
            _ => {}
        }
        Ok(())
    }

    /// Has garbage collection trim `stream` with the step log of `step`.
    fn collect_with(&mut self, step: Tag, stream: Tag) {
        let streams = self.gc.with_step_log.entry(step).or_default();
        if !streams.contains(&stream) {
            streams.push(stream);
        }
    }

    /// Makes root `root` due at once (a completion or a cancellation needs it to run
    /// again), also if it is untracked now (then when it is tracked; past a bound, it
    /// waits for the scan's rare look at awaits, `AWAIT_RECHECK_MS`).
    fn make_due(&mut self, d: &Durable, root: &InstanceId, open_max: usize) {
        let step = d.core.tags.step(root);
        match self.open.get_mut(&step) {
            Some(open) => open.wake_ms = Some(0),
            None if self.untracked_from.is_some() && self.woken_untracked.len() < open_max.saturating_mul(8) => {
                self.woken_untracked.insert(step);
            }
            None => {}
        }
    }

    /// Tracks roots that were left untracked, while there is room: each one's step log
    /// says whether it finished meanwhile.
    async fn catch_up(&mut self, d: &Durable, book: BookId, open_max: usize) -> Result<(), Error> {
        let Some(from) = self.untracked_from else { return Ok(()) };
        let mut at = from;
        while self.open.len() < open_max && at < self.next {
            let Some(r) = d.core.log.read_next(&mut self.ctx, shadow(book), INSTANCES, SeqNum(at)).await? else { break };
            if r.seqnum.0 >= self.next {
                break;
            }
            at = r.seqnum.0 + 1;
            let Ok(step) = record::decode_steps("step", &r.data) else { continue };
            let Some(tag) = d.core.tags.step_log_of(&r.tags, &step) else { continue };
            let began = began_at(r.seqnum.0, &step);
            let Some(
                Step::Init(kind::Init { id, function, version, .. })
                | Step::InitKeyed(kind::InitKeyed { id, function, version, .. }),
            ) = step.into_init_and_last().0
            else {
                continue;
            };
            if !id.is_root() || self.open.contains_key(&tag) {
                continue;
            }
            self.sleeping_untracked.remove(&tag);
            let last = d.core.log.read_prev(&mut self.ctx, shadow(book), tag, SeqNum::MAX).await?;
            // Finished as of the scan's position: a result past it leaves the root open
            // until `read` reaches it. (Taken for finished, the root no longer held the
            // horizon below its Init, and garbage collection, which knows the commits
            // only up to the scan's position, trimmed objects' records that a commit of
            // the root made after it still had to be decided against: the simulator
            // found a read-only transaction reading an aborted commit's writes.)
            let last_at = last.as_ref().map_or(0, |l| l.seqnum.0);
            let last = last.map(|l| record::decode_last("step", &l.data));
            let finished = match &last {
                None => true,
                Some(Ok(Step::Result(_))) => last_at < self.next,
                Some(_) => false,
            };
            if !finished {
                let seen_ms = d.core.clock.now_ms();
                let wake_ms = match last {
                    _ if self.woken_untracked.remove(&tag) => None,
                    Some(Ok(Step::Sleep(kind::Sleep { until_ms, .. }) | Step::Delay(kind::Delay { until_ms, .. }))) => {
                        Some(until_ms)
                    }
                    _ => None,
                };
                self.open.insert(
                    tag,
                    Open {
                        id,
                        function,
                        version,
                        seen_ms,
                        attempts: 0,
                        init: began,
                        wake_ms,
                        rechecks_soon: if wake_ms == Some(u64::MAX) { RECHECKS_SOON } else { 0 },
                    },
                );
            }
        }
        self.untracked_from = (at < self.next).then_some(at);
        if self.untracked_from.is_none() {
            self.woken_untracked.clear();
            self.sleeping_untracked.clear();
        }
        Ok(())
    }
}

/// Where the root whose Init record (at `seqnum`, holding `step`) this is reads from:
/// the record, or the start of a transaction whose commit rides the Init
/// (`instance/snapshot.rs`), where a re-execution begins it. (Garbage collection keeps
/// that start of an untracked root too: no point it picks is a commit's place with the
/// commit's start below it, `gc.rs`.)
fn began_at(seqnum: u64, step: &Step) -> u64 {
    match step.as_steps() {
        [first, .., Step::TxnCommit(kind::TxnCommit { start, .. })] if first.is_init() => seqnum.min(*start),
        _ => seqnum,
    }
}

/// The scan's state on one node.
#[derive(Default)]
pub(crate) struct Recovery {
    books: BTreeMap<BookId, BookScan>,
}

impl Durable {
    /// Starts the node's background work: the recovery scan (with garbage collection),
    /// `auto`, the completion of switches left unfinished, and the drivers of schedules.
    pub fn start_background(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        // Cancelling the scan loses only this node's soft state (what it read, when it
        // first saw each invocation); a restart reads the streams again.
        self.core.spawn.spawn("recovery", Box::pin(recovery_loop(weak.clone())));
        // Cancelling it loses nothing either: it only starts drivers, from the log.
        self.core.spawn.spawn("schedules", Box::pin(crate::schedule::schedule_loop(weak)));
        crate::switch::start(self);
    }
}

/// Scans every `recovery_interval_ms` until the node is dropped.
async fn recovery_loop(weak: Weak<Durable>) {
    let mut scan = Recovery::default();
    loop {
        let Some(d) = Durable::live(&weak) else { return };
        let sleep = d.core.clock.sleep(d.core.config.recovery_interval_ms);
        drop(d);
        sleep.await;
        let Some(d) = Durable::live(&weak) else { return };
        if let Err(e) = scan.round(&d).await {
            tracing::warn!("recovery scan: {e}");
        }
    }
}

impl Recovery {
    /// The horizon of `book`'s scan so far, if it scanned the book.
    #[cfg(test)]
    pub(crate) fn horizon_of(&self, book: BookId) -> Option<u64> {
        self.books.get(&book).map(BookScan::horizon)
    }

    /// Reads what is new in every book, collects garbage when due, then starts the
    /// re-executions that are due.
    pub(crate) async fn round(&mut self, d: &Arc<Durable>) -> Result<(), Error> {
        let open_max = d.core.config.open_max.max(1);
        for book in d.books().await? {
            if !d.core.peers.owns(book) {
                self.books.remove(&book);
                continue;
            }
            let scan = self.books.entry(book).or_default();
            scan.read(d, book, open_max).await?;
            scan.catch_up(d, book, open_max).await?;
            let now = d.core.clock.now_ms();
            if scan.last_gc_ms.is_none_or(|t| now.saturating_sub(t) >= d.core.config.gc_interval_ms) {
                scan.last_gc_ms = Some(now);
                // Below every position a root of this node reads at before its Init.
                let horizon = scan.horizon().min(d.core.pins.floor().unwrap_or(u64::MAX));
                if let Err(e) = crate::gc::collect(d, book, horizon, scan.next, &scan.ctx, &mut scan.gc).await {
                    tracing::warn!(book = book.0, "garbage collection: {}", e.into_error());
                }
            }
            // Re-executions read nothing older than what the scan saw (a completion or a
            // cancellation that made a root due).
            let seen = scan.ctx.clone();
            for open in scan.open.values_mut() {
                if d.is_running(book, &open.id) {
                    continue;
                }
                let timeout_ms = match d.functions.version(&open.function, open.version).await {
                    Ok(Some(v)) => v.timeout_ms,
                    _ => 0,
                };
                let due = open.seen_ms.saturating_add(timeout_ms).saturating_add(d.core.config.reexecute_after_ms);
                let now = d.core.clock.now_ms();
                // A sleeper is due once its wake time is past by as much: the node that
                // suspended it wakes it on time, this is for a node that died.
                let asleep = match open.wake_ms {
                    // Awaiting a promise with no timeout: its completion wakes it; this is
                    // a look now and then should that wake be lost.
                    Some(u64::MAX) => open.rechecks_soon == 0 && now < open.seen_ms.saturating_add(AWAIT_RECHECK_MS),
                    Some(w) => d.core.clock.wall_ms() < w.saturating_add(d.core.config.reexecute_after_ms),
                    None => false,
                };
                if now < due || asleep {
                    continue;
                }
                open.attempts += 1;
                open.seen_ms = now;
                // An await with no timeout that this run finds still waiting logs nothing
                // new: it stays one, looked at again in `AWAIT_RECHECK_MS`.
                open.wake_ms = open.wake_ms.filter(|&w| w == u64::MAX);
                open.rechecks_soon = open.rechecks_soon.saturating_sub(1);
                let task =
                    reexecute(d.clone(), book, open.id.clone(), open.function.clone(), open.version, open.attempts, seen.clone());
                // Cancelling a re-execution loses nothing: it is a peer like any other.
                d.core.spawn.spawn("reexecute", Box::pin(task));
            }
            // Untracked sleepers past their wake, by as much as tracked ones: run again
            // (from their Init) without waiting to be tracked.
            let wall = d.core.clock.wall_ms();
            let due: Vec<Tag> = scan
                .sleeping_untracked
                .iter()
                .filter(|(_, (_, until_ms))| wall >= until_ms.saturating_add(d.core.config.reexecute_after_ms))
                .map(|(tag, _)| *tag)
                .collect();
            for tag in due {
                let Some((root, _)) = scan.sleeping_untracked.remove(&tag) else { continue };
                if d.is_running(book, &root) {
                    continue;
                }
                if let Err(e) = d.wake(&mut seen.clone(), book, root.clone()).await {
                    tracing::warn!(book = book.0, %root, "waking an untracked sleeper: {e}");
                }
            }
        }
        Ok(())
    }
}

/// Runs an unfinished invocation again; logs its failure as its result once it has
/// failed `attempts_max` times.
async fn reexecute(d: Arc<Durable>, book: BookId, id: InstanceId, function: String, version: u64, attempt: u32, seen: Context) {
    tracing::info!(book = book.0, %id, function, attempt, "running an unfinished invocation again");
    let (result, mut ctx) = d.reexecute(book, id.clone(), function.clone(), version, attempt + 1, seen).await;
    let failure = match result {
        // Asleep again (a later sleep, or woken early): its Sleep record says when.
        Ok(_) | Err(Error::Suspended { .. }) => return,
        Err(e) if Outcome::of_final(&Err(e.clone())).is_some() => return,
        Err(e @ Error::FunctionUnavailable(..)) => {
            tracing::warn!(%id, "re-execution cannot run here now: {e}");
            return;
        }
        Err(e) if attempt >= d.core.config.attempts_max => e,
        Err(e) => {
            tracing::warn!(%id, attempt, "re-execution failed, will try again: {e}");
            return;
        }
    };
    tracing::warn!(%id, attempt, "giving up: {failure}");
    let of = Of {
        id: id.clone(),
        book,
        function,
        version,
        input: None,
        declared: Default::default(),
        crash: None,
        key: None,
        defer_init: false,
        forgettable: false,
    };
    let mut instance = Instance::new(d.core.clone(), of);
    if let Err(e) = instance.give_up(&mut ctx, Outcome::of_given_up(&failure)).await {
        tracing::warn!(%id, "logging the given-up result: {e}");
    }
}
