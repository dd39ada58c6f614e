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
//! A push whose message is small (at most `PUT_INLINE_MAX`) is pending like a
//! read-optimized write (`instance/steps.rs`): it rides the instance's next record, so a
//! record may hold several pushes (a [`Step::Group`]), and a push is named by its
//! record's seqnum and its place among that record's pushes to the shard ([`PushAt`]).
//! A producer of eight messages appends one record for all of them, not sixteen (each
//! push and the clock reading before it).
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

/// Where a push is: the seqnum of its record, and its place among that record's
/// pushes to the shard.
pub type PushAt = (u64, u32);

/// A shard after one of its records: how many pushes no pop got yet, the oldest of
/// them, and what that record popped (for a pop). Cached in the record's aux data; its
/// size does not grow with the backlog (the next push after the head is found in the
/// stream when a pop takes the head).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardView {
    pub pending: u64,
    pub head: Option<PushAt>,
    pub popped: Option<PushAt>,
}

/// A view as aux data and checkpoints hold it: the first three fields are the format
/// of views written before records held several pushes, which decode with places 0.
#[derive(Serialize, Deserialize)]
struct ViewWire {
    pending: u64,
    head: Option<u64>,
    popped: Option<u64>,
    head_place: u32,
    popped_place: u32,
}

#[derive(Deserialize)]
struct ViewWireV1 {
    pending: u64,
    head: Option<u64>,
    popped: Option<u64>,
}

impl ShardView {
    pub fn encode(&self) -> Bytes {
        record::encode(&ViewWire {
            pending: self.pending,
            head: self.head.map(|h| h.0),
            popped: self.popped.map(|p| p.0),
            head_place: self.head.map_or(0, |h| h.1),
            popped_place: self.popped.map_or(0, |p| p.1),
        })
    }

    /// A view [`ShardView::encode`] wrote, or one of the earlier format (a strict
    /// prefix of it, so never mistaken for it).
    pub fn decode(bytes: &[u8]) -> Result<ShardView, Error> {
        match record::decode::<ViewWire>("queue view", bytes) {
            Ok(w) => Ok(ShardView {
                pending: w.pending,
                head: w.head.map(|h| (h, w.head_place)),
                popped: w.popped.map(|p| (p, w.popped_place)),
            }),
            Err(e) => match record::decode::<ViewWireV1>("queue view", bytes) {
                Ok(w) => Ok(ShardView { pending: w.pending, head: w.head.map(|h| (h, 0)), popped: w.popped.map(|p| (p, 0)) }),
                Err(_) => Err(e),
            },
        }
    }
}

fn concerns(step: &Step, queue: &str, shard: u64) -> bool {
    matches!(step, Step::QueuePush(kind::QueuePush { queue: q, shard: s, .. }) | Step::QueuePop(kind::QueuePop { queue: q, shard: s, .. }) if q == queue && *s == shard)
}

/// The pushes to and pops of the shard that a record's step holds, in order (a group
/// may hold several pushes).
fn shard_steps<'a>(step: &'a Step, queue: &'a str, shard: u64) -> impl Iterator<Item = &'a Step> + 'a {
    record_steps(step).iter().filter(move |s| concerns(s, queue, shard))
}

/// The steps a record holds: a group's, or the one.
fn record_steps(step: &Step) -> &[Step] {
    match step {
        Step::Group(kind::Group { steps }) => steps,
        one => std::slice::from_ref(one),
    }
}

/// Whether a record's step holds pushes or pops of another queue shard than this one.
fn in_other_streams(step: &Step, queue: &str, shard: u64) -> bool {
    record_steps(step).iter().any(|s| match s {
        Step::QueuePush(kind::QueuePush { queue: q, shard: s, .. })
        | Step::QueuePop(kind::QueuePop { queue: q, shard: s, .. }) => q != queue || *s != shard,
        _ => false,
    })
}

/// The messages of the pushes to the shard that a record's step holds, in order.
fn pushes<'a>(step: &'a Step, queue: &'a str, shard: u64) -> impl Iterator<Item = &'a Bytes> + 'a {
    shard_steps(step, queue, shard).filter_map(|s| match s {
        Step::QueuePush(kind::QueuePush { message, .. }) => Some(message),
        _ => None,
    })
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
    let cached = |a: &[u8]| ShardView::decode(a).ok();
    let relevant = |s: &Step| shard_steps(s, queue, shard).next().is_some();
    let (base, mut newer) = replay::since_view(core, ctx, book, tag, at, relevant, cached, false).await?;
    let mut view = base.unwrap_or_default();
    let mut newest = None;
    while let Some((r, step)) = newer.next(core, ctx, book).await? {
        view.popped = None;
        let mut place = 0;
        for step in shard_steps(&step, queue, shard) {
            match step {
                Step::QueuePush(kind::QueuePush { .. }) => {
                    view.head = view.head.or(Some((r.seqnum.0, place)));
                    view.pending += 1;
                    place += 1;
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
                _ => {}
            }
        }
        // A record's aux data is one view, named by nothing: a record in the streams of
        // two shards (a relay's push to another queue riding its pop, a producer's pushes
        // to two queues) keeps none, lest a reader of the other shard take it for its own
        // (the simulator found a relayed message lost that way).
        newest = match in_other_streams(&step, queue, shard) {
            false => Some(r.seqnum),
            true => None,
        };
    }
    if let Some(seqnum) = newest {
        replay::cache(core, ctx, book, seqnum, view.encode()).await;
    }
    Ok(view)
}

/// The first push of the shard after `head`, at or before seqnum `through` (there is
/// one: a push is pending).
async fn push_after(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    queue: &str,
    shard: u64,
    head: PushAt,
    through: u64,
) -> Result<PushAt, Abort> {
    let tag = core.tags.queue_shard(queue, shard);
    let mut at = head.0;
    while let Some(r) = core.log.read_next(ctx, shadow(book), tag, SeqNum(at)).await? {
        if r.seqnum.0 > through {
            break;
        }
        let step = record::decode::<Step>("step", &r.data)?;
        let first = if r.seqnum.0 == head.0 { head.1.saturating_add(1) } else { 0 };
        if (first as usize) < pushes(&step, queue, shard).count() {
            return Ok((r.seqnum.0, first));
        }
        match r.seqnum.0.checked_add(1) {
            Some(next) => at = next,
            None => break,
        }
    }
    Err(Abort::internal(format!("shard {shard} of {queue:?} counts a pending push after {head:?} that is not there")))
}

/// The message of the push at `at` of the shard.
pub(crate) async fn message_at(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    queue: &str,
    shard: u64,
    at: PushAt,
) -> Result<Bytes, Abort> {
    let tag = core.tags.queue_shard(queue, shard);
    match core.log.read_next(ctx, shadow(book), tag, SeqNum(at.0)).await? {
        Some(r) if r.seqnum.0 == at.0 => {
            let step = record::decode::<Step>("step", &r.data)?;
            let message = pushes(&step, queue, shard).nth(at.1 as usize).cloned();
            message.ok_or_else(|| Abort::internal(format!("a pop got {at:?} of queue {queue:?}, which holds no such push")))
        }
        _ => Err(Abort::internal(format!("the push at {at:?} of queue {queue:?} is gone"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_of_both_formats_decode() {
        let view = ShardView { pending: 3, head: Some((7, 2)), popped: Some((5, 1)) };
        assert_eq!(ShardView::decode(&view.encode()).unwrap(), view);
        // Written before records held several pushes: every place is 0.
        #[derive(Serialize)]
        struct Old {
            pending: u64,
            head: Option<u64>,
            popped: Option<u64>,
        }
        for (head, popped) in [(Some(7), Some(5)), (Some(7), None), (None, Some(5)), (None, None)] {
            let old = record::encode(&Old { pending: 3, head, popped });
            let expected = ShardView { pending: 3, head: head.map(|h| (h, 0)), popped: popped.map(|p| (p, 0)) };
            assert_eq!(ShardView::decode(&old).unwrap(), expected);
        }
        assert!(ShardView::decode(b"").is_err());
    }
}
