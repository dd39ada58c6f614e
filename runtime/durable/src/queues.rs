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
//! push and the clock reading before it). A pop of many ([`kind::QueuePopMany`]) takes
//! up to its `max` oldest messages in one record, so a consumer of eight messages
//! appends one record too.
//!
//! An instance pushes to one shard (a hash of its ID), so one invocation's messages
//! stay in order; a popper looks at its own shard first and then at the others, and
//! appends a pop only where it saw a message (or when its wait is up), so consumers
//! waiting on an empty queue append nothing. They wait on this node's pushes and look
//! at the log every [`POLL_MS`] for others'; a pop claims the messages it saw
//! (`claims.rs`), so that of the pops a push wakes, only as many append as it gave
//! messages.

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

mod claims;
pub(crate) use claims::Claims;

/// Shards per queue.
pub const SHARDS: u64 = 4;
/// The longest queue name, in bytes.
pub const QUEUE_NAME_MAX: usize = 256;
/// How often a waiting pop looks at the log for other nodes' pushes.
pub const POLL_MS: u64 = 20;
/// The most messages one pop of many takes.
pub const POP_MANY_MAX: u32 = 100;

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
/// them, and what that record popped (for a pop): the first push it got and how many
/// (the pushes after it, in the shard's order). Cached in the record's aux data; its
/// size does not grow with the backlog (the next push after the head is found in the
/// stream when a pop takes the head).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardView {
    pub pending: u64,
    pub head: Option<PushAt>,
    pub popped: Option<(PushAt, u32)>,
}

/// A view as aux data and checkpoints hold it. Earlier formats are prefixes of it: the
/// first three fields are that of views written before records held several pushes
/// (which decode with places 0), the first five that of views written before pops of
/// many (which popped one).
#[derive(Serialize, Deserialize)]
struct ViewWire {
    pending: u64,
    head: Option<u64>,
    popped: Option<u64>,
    head_place: u32,
    popped_place: u32,
    popped_count: u32,
}

#[derive(Deserialize)]
struct ViewWireV2 {
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
            popped: self.popped.map(|p| p.0 .0),
            head_place: self.head.map_or(0, |h| h.1),
            popped_place: self.popped.map_or(0, |p| p.0 .1),
            popped_count: self.popped.map_or(0, |p| p.1),
        })
    }

    /// A view [`ShardView::encode`] wrote, or one of an earlier format (a strict
    /// prefix of it, so never mistaken for it: the newest is tried first).
    pub fn decode(bytes: &[u8]) -> Result<ShardView, Error> {
        let view = |pending, head: Option<PushAt>, popped: Option<PushAt>, count: u32| ShardView {
            pending,
            head,
            popped: popped.map(|p| (p, count.max(1))),
        };
        if let Ok(w) = record::decode::<ViewWire>("queue view", bytes) {
            return Ok(view(w.pending, w.head.map(|h| (h, w.head_place)), w.popped.map(|p| (p, w.popped_place)), w.popped_count));
        }
        match record::decode::<ViewWireV2>("queue view", bytes) {
            Ok(w) => Ok(view(w.pending, w.head.map(|h| (h, w.head_place)), w.popped.map(|p| (p, w.popped_place)), 1)),
            Err(e) => match record::decode::<ViewWireV1>("queue view", bytes) {
                Ok(w) => Ok(view(w.pending, w.head.map(|h| (h, 0)), w.popped.map(|p| (p, 0)), 1)),
                Err(_) => Err(e),
            },
        }
    }
}

/// The queue and shard of a push or pop.
fn stream_of(step: &Step) -> Option<(&str, u64)> {
    match step {
        Step::QueuePush(kind::QueuePush { queue, shard, .. })
        | Step::QueuePop(kind::QueuePop { queue, shard, .. })
        | Step::QueuePopMany(kind::QueuePopMany { queue, shard, .. }) => Some((queue, *shard)),
        _ => None,
    }
}

fn concerns(step: &Step, queue: &str, shard: u64) -> bool {
    stream_of(step) == Some((queue, shard))
}

/// How many messages a pop takes at most (none for another step).
fn pop_max(step: &Step) -> Option<u32> {
    match step {
        Step::QueuePop(kind::QueuePop { .. }) => Some(1),
        Step::QueuePopMany(kind::QueuePopMany { max, .. }) => Some(*max),
        _ => None,
    }
}

/// The pushes to and pops of the shard that a record's step holds, in order (a group
/// may hold several pushes).
fn shard_steps<'a>(step: &'a Step, queue: &'a str, shard: u64) -> impl Iterator<Item = &'a Step> + 'a {
    step.as_steps().iter().filter(move |s| concerns(s, queue, shard))
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
    let (base, mut newer) = replay::since_view(core, ctx, book, tag, at, relevant, cached, false, None).await?;
    let mut view = base.unwrap_or_default();
    let mut newest = None;
    while let Some((r, step)) = newer.next(core, ctx, book).await? {
        view.popped = None;
        let mut place = 0;
        for step in shard_steps(&step, queue, shard) {
            match pop_max(step) {
                None => {
                    view.head = view.head.or(Some((r.seqnum.0, place)));
                    view.pending += 1;
                    place += 1;
                }
                Some(max) if view.pending > 0 => {
                    let head = view.head.ok_or_else(|| Abort::internal(format!("shard {shard} of {queue:?} has no head")))?;
                    let took = u64::from(max.max(1)).min(view.pending);
                    view.popped = Some((head, took as u32));
                    view.pending -= took;
                    view.head = match view.pending {
                        0 => None,
                        _ => Some(push_after(core, ctx, book, queue, shard, head, took, r.seqnum.0).await?),
                    };
                }
                Some(_) => {}
            }
        }
        // A record's aux data is one view, named by nothing: a record in the streams of
        // two shards (a relay's push to another queue riding its pop, a producer's pushes
        // to two queues) or of a shard and a lock keeps none.
        newest = match step.in_other_library_streams(|s| concerns(s, queue, shard)) {
            false => Some(r.seqnum),
            true => None,
        };
    }
    if let Some(seqnum) = newest {
        replay::cache(core, ctx, book, seqnum, view.encode()).await;
    }
    Ok(view)
}

/// The `n`th push of the shard after `head` (from 1), at or before seqnum `through`
/// (there is one: that many pushes are pending after it).
#[allow(clippy::too_many_arguments)]
async fn push_after(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    queue: &str,
    shard: u64,
    head: PushAt,
    n: u64,
    through: u64,
) -> Result<PushAt, Abort> {
    let mut left = n;
    let mut found = None;
    walk_pushes(core, ctx, book, queue, shard, Start::After(head), through, |at, _| {
        left -= 1;
        found = Some(at);
        left > 0
    })
    .await?;
    match found {
        Some(at) if left == 0 => Ok(at),
        _ => Err(Abort::internal(format!(
            "shard {shard} of {queue:?} counts {n} pending pushes after {head:?} that are not there"
        ))),
    }
}

/// Where a walk over a shard's pushes starts: just after a push, or at one.
#[derive(Clone, Copy, Debug)]
enum Start {
    After(PushAt),
    At(PushAt),
}

/// Walks the shard's pushes from `start`, at or before seqnum `through`, in order,
/// while `each` (given where a push is and its message) says to go on. A walk that
/// starts at a push whose record is gone is an error.
#[allow(clippy::too_many_arguments)]
async fn walk_pushes(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    queue: &str,
    shard: u64,
    start: Start,
    through: u64,
    mut each: impl FnMut(PushAt, &Bytes) -> bool,
) -> Result<(), Abort> {
    let tag = core.tags.queue_shard(queue, shard);
    let (from, skip) = match start {
        Start::After(at) => (at, at.1.saturating_add(1)),
        Start::At(at) => (at, at.1),
    };
    let mut at = from.0;
    while let Some(r) = core.log.read_next(ctx, shadow(book), tag, SeqNum(at)).await? {
        if matches!(start, Start::At(_)) && at == from.0 && r.seqnum.0 != from.0 {
            return Err(Abort::internal(format!("the push at {from:?} of queue {queue:?} is gone")));
        }
        if r.seqnum.0 > through {
            break;
        }
        let step = record::decode::<Step>("step", &r.data)?;
        let first = if r.seqnum.0 == from.0 { skip } else { 0 };
        for (place, message) in pushes(&step, queue, shard).enumerate().skip(first as usize) {
            if !each((r.seqnum.0, place as u32), message) {
                return Ok(());
            }
        }
        match r.seqnum.0.checked_add(1) {
            Some(next) => at = next,
            None => break,
        }
    }
    Ok(())
}

/// The messages of the `count` pushes of the shard from `first` on: what a pop got.
pub(crate) async fn messages_from(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    queue: &str,
    shard: u64,
    (first, count): (PushAt, u32),
) -> Result<Vec<Bytes>, Abort> {
    let mut messages = Vec::new();
    let mut starts_at = None;
    walk_pushes(core, ctx, book, queue, shard, Start::At(first), u64::MAX, |at, message| {
        starts_at = starts_at.or(Some(at));
        messages.push(message.clone());
        messages.len() < count as usize
    })
    .await?;
    if starts_at != Some(first) {
        return Err(Abort::internal(format!("a pop got {first:?} of queue {queue:?}, which holds no such push")));
    }
    match messages.len() == count as usize {
        true => Ok(messages),
        false => Err(Abort::internal(format!(
            "a pop got {count} messages of queue {queue:?} from {first:?}, and {} are there",
            messages.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_of_both_formats_decode() {
        for popped in [Some(((5, 1), 1)), Some(((5, 1), 8)), None] {
            let view = ShardView { pending: 3, head: Some((7, 2)), popped };
            assert_eq!(ShardView::decode(&view.encode()).unwrap(), view);
        }
        // Written before pops of many: a pop got one.
        #[derive(Serialize)]
        struct V2 {
            pending: u64,
            head: Option<u64>,
            popped: Option<u64>,
            head_place: u32,
            popped_place: u32,
        }
        let v2 = record::encode(&V2 { pending: 3, head: Some(7), popped: Some(5), head_place: 2, popped_place: 1 });
        let expected = ShardView { pending: 3, head: Some((7, 2)), popped: Some(((5, 1), 1)) };
        assert_eq!(ShardView::decode(&v2).unwrap(), expected);
        // Written before records held several pushes: every place is 0.
        #[derive(Serialize)]
        struct Old {
            pending: u64,
            head: Option<u64>,
            popped: Option<u64>,
        }
        for (head, popped) in [(Some(7), Some(5)), (Some(7), None), (None, Some(5)), (None, None)] {
            let old = record::encode(&Old { pending: 3, head, popped });
            let expected = ShardView { pending: 3, head: head.map(|h| (h, 0)), popped: popped.map(|p| ((p, 0), 1)) };
            assert_eq!(ShardView::decode(&old).unwrap(), expected);
        }
        assert!(ShardView::decode(b"").is_err());
    }
}
