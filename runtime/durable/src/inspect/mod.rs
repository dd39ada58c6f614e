//! What the gateway and the CLI show of the libraries' state, as of the log's tail seen
//! from `ctx` (a client's position): a durable object, a queue's shards, a lock; and of
//! invocations, their steps (`steps.rs`).

pub mod lineage;
pub mod state;
pub mod steps;

use serde::Serialize;
use tally_log_core::{BookId, Context, SeqNum};

use crate::error::Result;
use crate::node::Libraries;
use crate::record::LockId;
use crate::tags::{shadow, LIBRARIES};
use crate::{locks, objects, queues};

/// The objects and queues of a book ([`Libraries::names`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LibraryNames {
    pub objects: std::collections::BTreeSet<String>,
    pub queues: std::collections::BTreeSet<String>,
}

/// One shard of a queue, as `GET /v1/books/{id}/queues/{name}` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShardStatus {
    pub shard: u64,
    /// Messages pushed and not popped yet.
    pub pending: u64,
    /// The seqnum of the oldest of them.
    pub oldest: Option<u64>,
}

impl Libraries<'_> {
    /// The JSON text at `path` of object `object` of `book`, if there is one.
    pub async fn object(&self, ctx: &mut Context, book: BookId, object: &str, path: &str) -> Result<Option<String>> {
        self.object_at(ctx, book, object, path, u64::MAX).await
    }

    /// [`Libraries::object`] as of seqnum `at`.
    pub async fn object_at(&self, ctx: &mut Context, book: BookId, object: &str, path: &str, at: u64) -> Result<Option<String>> {
        let d = self.0;
        crate::abort::check_book(book)?;
        objects::check_name(object)?;
        objects::parse_path(path)?;
        if at != u64::MAX {
            d.check_history(ctx, book, at).await?;
        }
        let view = objects::view_at(d, ctx, book, object, at).await.map_err(|a| a.into_error())?;
        objects::view_text_at(&view, path)
    }

    /// The shards of queue `queue` of `book`.
    pub async fn queue(&self, ctx: &mut Context, book: BookId, queue: &str) -> Result<Vec<ShardStatus>> {
        self.queue_at(ctx, book, queue, u64::MAX).await
    }

    /// [`Libraries::queue`] as of seqnum `at`.
    pub async fn queue_at(&self, ctx: &mut Context, book: BookId, queue: &str, at: u64) -> Result<Vec<ShardStatus>> {
        let d = self.0;
        crate::abort::check_book(book)?;
        queues::check_name(queue)?;
        if at != u64::MAX {
            d.check_history(ctx, book, at).await?;
        }
        let mut out = Vec::new();
        for shard in 0..queues::SHARDS {
            let view = queues::shard_at(d, ctx, book, queue, shard, at).await.map_err(|a| a.into_error())?;
            out.push(ShardStatus { shard, pending: view.pending, oldest: view.head.map(|(seqnum, _)| seqnum) });
        }
        Ok(out)
    }

    /// The invocation holding lock `lock` of `book`, if one does.
    pub async fn lock_holder(&self, ctx: &mut Context, book: BookId, lock: &str) -> Result<Option<String>> {
        let d = self.0;
        crate::abort::check_book(book)?;
        locks::check_name(lock)?;
        let view = locks::lock_at(d, ctx, book, &LockId::Named(lock.to_string()), u64::MAX).await.map_err(|a| a.into_error())?;
        Ok(view.holder)
    }

    /// The names of the objects and queues of `book` whose streams hold records (what
    /// garbage collection left) up to seqnum `at`, reading at most `records_max` records.
    pub async fn names(&self, ctx: &mut Context, book: BookId, at: u64, records_max: usize) -> Result<LibraryNames> {
        use crate::record::{kind, Step};
        let d = self.0;
        crate::abort::check_book(book)?;
        let mut names = LibraryNames::default();
        let mut from = 0;
        for _ in 0..records_max {
            let Some(r) = d.log.read_next(ctx, shadow(book), LIBRARIES, SeqNum(from)).await.map_err(crate::Error::from)? else {
                break;
            };
            if r.seqnum.0 > at {
                break;
            }
            from = r.seqnum.0.saturating_add(1);
            let Ok(step) = crate::record::decode_steps("library", &r.data) else { continue };
            for step in step.into_steps() {
                match step {
                    Step::ObjectWrite(kind::ObjectWrite { object, .. }) => {
                        names.objects.insert(object);
                    }
                    Step::TxnCommit(kind::TxnCommit { writes, .. }) => names.objects.extend(writes.into_iter().map(|(o, _)| o)),
                    Step::QueuePush(kind::QueuePush { queue, .. })
                    | Step::QueuePop(kind::QueuePop { queue, .. })
                    | Step::QueuePopMany(kind::QueuePopMany { queue, .. }) => {
                        names.queues.insert(queue);
                    }
                    _ => {}
                }
            }
        }
        Ok(names)
    }

    /// How many records garbage collection has left of object `object`'s stream, or,
    /// with `None`, of all the streams of objects, queues and locks of `book` (for
    /// operators and tests: a steady workload keeps both bounded).
    pub async fn records(&self, ctx: &mut Context, book: BookId, object: Option<&str>) -> Result<u64> {
        let d = self.0;
        crate::abort::check_book(book)?;
        let tag = match object {
            Some(o) => {
                objects::check_name(o)?;
                d.tags.bokistore(o)
            }
            None => LIBRARIES,
        };
        let mut count = 0;
        let mut at = 0;
        while let Some(r) = d.log.read_next(ctx, shadow(book), tag, SeqNum(at)).await.map_err(crate::Error::from)? {
            count += 1;
            at = r.seqnum.0 + 1;
        }
        Ok(count)
    }
}
