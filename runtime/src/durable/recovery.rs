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

use std::collections::{BTreeMap, HashMap};
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
}

/// How far the scan has read one book.
#[derive(Default)]
struct BookScan {
    ctx: Context,
    next: u64,
    /// By step tag: a Result record names its instance only by that tag.
    open: BTreeMap<Tag, Open>,
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
                tokio::spawn(reexecute(rt.clone(), book, open.id.clone(), open.function.clone(), open.input.clone(), open.attempts));
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
                Ok(Step::Init { id, function, root: true, input }) => {
                    let open = Open { id, function, input, seen: Instant::now(), attempts: 0 };
                    self.open.insert(tag, open);
                }
                Ok(Step::Result { .. }) => {
                    self.open.remove(&tag);
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
