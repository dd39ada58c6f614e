//! The recovery scan: finds invocations that started (an Init record in a book's
//! INSTANCES stream) and never finished (no Result record), and runs them again once
//! they are older than their function's timeout plus `reexecute_after_ms`: their node
//! died, or their last attempt failed transiently. It runs on every node, from the
//! start of each book's stream after a restart; two nodes running one invocation are
//! peers, which the step log's conditional appends keep to one history. Children are
//! not run on their own: their parent's re-execution calls them again.
//!
//! An invocation that has failed transiently `attempts_max` times gets its last
//! failure logged as its result.
//!
//! The same scan feeds garbage collection (`gc.rs`): it knows which instances are open
//! and which finished, and when.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tally_logsvc::{BookId, Context, SeqNum, Tag};

use super::record::{self, Outcome, Step};
use super::{Instance, Of};
use crate::error::RuntimeError;
use crate::runtime::{Run, Runtime};

/// An invocation seen starting and not yet seen finishing.
struct Open {
    id: String,
    function: String,
    input: Bytes,
    /// When this node first saw it (its age is counted from there).
    seen: Instant,
    /// Re-executions this node has started.
    attempts: u32,
    /// The seqnum of its init record.
    init: u64,
}

/// An instance (root or child) whose result the scan has seen.
pub struct Finished {
    pub step_tag: Tag,
    pub result: u64,
    pub seen: Instant,
}

/// How far the scan has read one book.
#[derive(Default)]
pub struct BookScan {
    pub ctx: Context,
    /// The next seqnum of the INSTANCES stream to read.
    pub next: u64,
    /// Unfinished roots by step tag: a Result record names its instance only by that.
    open: BTreeMap<Tag, Open>,
    /// Finished instances whose step logs are still there, in result order.
    pub finished: VecDeque<Finished>,
    /// Init seqnums of the instances whose step logs are still there.
    pub inits: HashMap<Tag, u64>,
    pub last_gc: Option<Instant>,
    /// Where garbage collection last trimmed the INSTANCES stream.
    pub instances_trimmed: u64,
}

impl BookScan {
    /// Halfmoon's t̄: every root that started before it has finished (a finished root
    /// has no running descendants), so no reader's cursor is below it.
    pub fn horizon(&self) -> u64 {
        self.open.values().map(|o| o.init).min().unwrap_or(self.next)
    }
}

/// The scan's state on one node.
#[derive(Default)]
pub struct Recovery {
    books: HashMap<BookId, BookScan>,
}

/// Scans every `interval` until the runtime is dropped.
pub fn spawn(rt: Weak<Runtime>, interval: Duration) {
    tokio::spawn(async move {
        let mut scan = Recovery::default();
        let mut tick = tokio::time::interval(interval);
        loop {
            tick.tick().await;
            let Some(rt) = rt.upgrade() else { return };
            if let Err(e) = scan.round(&rt).await {
                tracing::warn!("recovery scan: {e}");
            }
        }
    });
}

impl Recovery {
    /// Reads what is new in every book, then starts the re-executions that are due.
    pub async fn round(&mut self, rt: &Arc<Runtime>) -> Result<(), RuntimeError> {
        for book in rt.durable.books().await? {
            let scan = self.books.entry(book).or_default();
            scan.read(rt, book).await?;
            let gc_every = Duration::from_millis(rt.config.state.gc_interval_ms);
            if scan.last_gc.is_none_or(|t| t.elapsed() >= gc_every) {
                scan.last_gc = Some(Instant::now());
                if let Err(e) = super::gc::collect(rt, book, scan).await {
                    tracing::warn!(book = book.0, "garbage collection: {}", e.into_error());
                }
            }
            for open in scan.open.values_mut() {
                if rt.is_running(&open.id) {
                    continue;
                }
                let timeout = match rt.registry.lookup(&open.function).await {
                    Ok(loaded) => Duration::from_millis(loaded.info.limits.timeout_ms),
                    Err(_) => Duration::ZERO,
                };
                let due = open.seen + timeout + Duration::from_millis(rt.config.state.reexecute_after_ms);
                if Instant::now() < due {
                    continue;
                }
                open.attempts += 1;
                open.seen = Instant::now();
                tokio::spawn(reexecute(
                    rt.clone(),
                    book,
                    open.id.clone(),
                    open.function.clone(),
                    open.input.clone(),
                    open.attempts,
                ));
            }
        }
        Ok(())
    }
}

impl BookScan {
    async fn read(&mut self, rt: &Runtime, book: BookId) -> Result<(), RuntimeError> {
        let instances = record::instances_tag();
        let log = &rt.durable.log;
        while let Some(r) = log.read_next(&mut self.ctx, book, instances, SeqNum(self.next)).await? {
            self.next = r.seqnum.0 + 1;
            let Some(&tag) = r.tags.iter().find(|&&t| t != instances) else { continue };
            match record::decode::<Step>("step", &r.data) {
                Ok(Step::Init { id, function, root, input }) => {
                    self.inits.insert(tag, r.seqnum.0);
                    if root {
                        let open = Open { id, function, input, seen: Instant::now(), attempts: 0, init: r.seqnum.0 };
                        self.open.insert(tag, open);
                    }
                }
                Ok(Step::Result { .. }) => {
                    self.open.remove(&tag);
                    self.finished.push_back(Finished { step_tag: tag, result: r.seqnum.0, seen: Instant::now() });
                }
                Ok(_) => {}
                Err(e) => tracing::error!(book = book.0, seqnum = %r.seqnum, "skipping a record of the instances stream: {e}"),
            }
        }
        Ok(())
    }
}

/// Runs an unfinished invocation again; logs its failure as its result once it has
/// failed `attempts_max` times.
async fn reexecute(rt: Arc<Runtime>, book: BookId, id: String, function: String, input: Bytes, attempt: u32) {
    tracing::info!(book = book.0, id, function, attempt, "running an unfinished invocation again");
    let run = Run::again(function.clone(), book, input.clone(), id.clone(), attempt + 1);
    let (result, mut ctx) = rt.run(run).await;
    let failure = match result {
        Ok(_) => return,
        Err(e @ RuntimeError::FunctionNotFound(_)) => e,
        Err(e) if Outcome::of_final(&Err(e.clone())).is_some() => return,
        Err(e) if attempt >= rt.config.state.attempts_max => e,
        Err(e) => {
            tracing::warn!(id, attempt, "re-execution failed, will try again: {e}");
            return;
        }
    };
    tracing::warn!(id, attempt, "giving up: {failure}");
    let of = Of { id: id.clone(), book, function, root: true, input, declared: Arc::new(BTreeMap::new()), crash: None };
    let mut instance = Instance::new(rt.durable.clone(), of);
    if let Err(e) = instance.give_up(&mut ctx, Outcome::of_given_up(&failure)).await {
        tracing::warn!(id, "logging the given-up result: {e}");
    }
}
