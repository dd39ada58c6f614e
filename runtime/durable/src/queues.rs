//! Durable FIFO queues (BokiQueue, Boki §5.3): a queue of a book is split into
//! [`SHARDS`] shards, each a replicated state machine over its own stream (vCorfu's
//! composable state machine replication). A push is a step of the pusher's step log and
//! a record of its shard; a pop is a step and a record too, and what it got follows
//! from the shard's records before it: the oldest push no earlier pop got. So every
//! message is popped once, by the pop whose record is first, and a re-execution finds
//! its pop's record and gets the same message.
//!
//! ```text
//!   shard stream:  Push(a) Push(b) Pop Push(c) Pop Pop Pop ...
//!   pops get:                      a            b   c   (none)
//! ```
//!
//! An instance pushes to one shard (a hash of its ID), so one invocation's messages
//! stay in order; a popper looks at its own shard first and then at the others, and
//! appends a pop only where it saw a message (or when its wait is up), so consumers
//! waiting on an empty queue append nothing. They wait on this node's pushes and look
//! at the log every [`POLL_MS`] for others'.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tally_log_core::{BookId, Context, SeqNum};

use crate::abort::Abort;
use crate::core::Core;
use crate::error::Error;
use crate::id::InstanceId;
use crate::record::kind;
use crate::record::{self, Step};
use crate::replay;
use crate::tags::shadow;

/// Shards per queue.
pub const SHARDS: u64 = 4;
/// The longest queue name, in bytes.
pub const QUEUE_NAME_MAX: usize = 256;
/// How often a waiting pop looks at the log for other nodes' pushes.
pub const POLL_MS: u64 = 20;

pub fn check_name(queue: &str) -> Result<(), Error> {
    crate::objects::check_library_name("a queue", queue, QUEUE_NAME_MAX)
}

/// The shard an instance pushes to and pops from first.
pub fn shard_of(id: &InstanceId) -> u64 {
    let digest = Sha256::digest(id.encode());
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes")) % SHARDS
}

/// The key under which this node's waiting pops of a queue are woken by its pushes.
pub(crate) fn wake_key(book: BookId, queue: &str) -> String {
    format!("queue/{}/{queue}", book.0)
}

/// A shard after one of its records: how many pushes no pop got yet, the seqnum of the
/// oldest of them, and what that record popped (for a pop). Cached in the record's aux
/// data; its size does not grow with the backlog (the next push after the head is
/// found in the stream when a pop takes the head).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardView {
    pub pending: u64,
    pub head: Option<u64>,
    pub popped: Option<u64>,
}

fn concerns(step: &Step, queue: &str, shard: u64) -> bool {
    matches!(step, Step::QueuePush(kind::QueuePush { queue: q, shard: s, .. }) | Step::QueuePop(kind::QueuePop { queue: q, shard: s, .. }) if q == queue && *s == shard)
}

/// The shard after its last record at or below `at`.
pub(crate) async fn shard_at(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    queue: &str,
    shard: u64,
    at: u64,
) -> Result<ShardView, Abort> {
    let tag = core.tags.queue_shard(queue, shard);
    let cached = |a: &[u8]| record::decode::<ShardView>("queue view", a).ok();
    let (base, mut newer) = replay::since_view(core, ctx, book, tag, at, |s| concerns(s, queue, shard), cached, false).await?;
    let mut view = base.unwrap_or_default();
    let mut newest = None;
    while let Some((r, step)) = newer.next(core, ctx, book).await? {
        view.popped = None;
        match step {
            Step::QueuePush(kind::QueuePush { .. }) => {
                view.head = view.head.or(Some(r.seqnum.0));
                view.pending += 1;
            }
            Step::QueuePop(kind::QueuePop { .. }) if view.pending > 0 => {
                let head = view.head.ok_or_else(|| Abort::internal(format!("shard {shard} of {queue:?} has no head")))?;
                view.popped = Some(head);
                view.pending -= 1;
                view.head = match view.pending {
                    0 => None,
                    _ => Some(push_after(core, ctx, book, queue, shard, head, r.seqnum.0).await?),
                };
            }
            Step::QueuePop(kind::QueuePop { .. }) => {}
            _ => unreachable!("only the shard's records are kept"),
        }
        newest = Some(r.seqnum);
    }
    if let Some(seqnum) = newest {
        replay::cache(core, ctx, book, seqnum, record::encode(&view)).await;
    }
    Ok(view)
}

/// The first push of the shard after `head` and before `before` (there is one: a push
/// is pending).
async fn push_after(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    queue: &str,
    shard: u64,
    head: u64,
    before: u64,
) -> Result<u64, Abort> {
    let tag = core.tags.queue_shard(queue, shard);
    let mut at = head.saturating_add(1);
    while let Some(r) = core.log.read_next(ctx, shadow(book), tag, SeqNum(at)).await? {
        if r.seqnum.0 >= before {
            break;
        }
        if let Step::QueuePush(kind::QueuePush { queue: q, shard: s, .. }) = record::decode::<Step>("step", &r.data)? {
            if q == queue && s == shard {
                return Ok(r.seqnum.0);
            }
        }
        at = r.seqnum.0.saturating_add(1);
    }
    Err(Abort::internal(format!("shard {shard} of {queue:?} counts a pending push after {head} that is not there")))
}

/// The message of the push at `seqnum` of the shard.
pub(crate) async fn message_at(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    queue: &str,
    shard: u64,
    seqnum: u64,
) -> Result<Bytes, Abort> {
    let tag = core.tags.queue_shard(queue, shard);
    match core.log.read_next(ctx, shadow(book), tag, SeqNum(seqnum)).await? {
        Some(r) if r.seqnum.0 == seqnum => match record::decode::<Step>("step", &r.data)? {
            Step::QueuePush(kind::QueuePush { message, .. }) => Ok(message),
            other => Err(Abort::internal(format!("a pop got a {}, not a push", other.describe()))),
        },
        _ => Err(Abort::internal(format!("the push at {seqnum} of queue {queue:?} is gone"))),
    }
}
