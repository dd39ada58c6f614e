//! Replicated state machines over one stream of a book's shadow (Boki §3, §5): the
//! durable objects, queue shards and locks of `objects.rs`, `queues.rs` and
//! `locks.rs` are each a fold of their stream's records, and a reader starts from the
//! newest state some reader cached in a record's aux data (Boki §5.4), so it replays
//! only what is newer.
//!
//! Where garbage collection trimmed a stream, it checkpointed the stream first (`gc.rs`),
//! and a reader starts from the newest checkpoint. `aux_views = false` in `[state]` turns
//! the views off (Boki's Table 7 baseline), so that every reader replays from a checkpoint
//! or the stream's start.

use bytes::Bytes;
use tally_log_core::{BookId, Context, LogRecord, SeqNum, Tag};

use crate::abort::Abort;
use crate::core::Core;
use crate::record::kind;
use crate::record::{self, Step};
use crate::tags::shadow;

/// Records a walk reads before it looks for a checkpoint to stop at: a stream of a
/// queue with a long backlog keeps its pending pushes, which a cold reader (no view on
/// the node) would otherwise walk through.
const LOOK_AFTER: usize = 32;

/// The seqnums of the records of `tag`'s stream at or below `at` that `relevant` keeps,
/// newest first, back to the newest one whose aux data `cached` reads a state from, and
/// that state. Where the stream's records run out first, the state is its newest
/// checkpoint's (`gc.rs`) with only the records past it to replay, or, without one,
/// `None`: the stream's start. Only seqnums are kept, so a long history costs memory by
/// its length, not by its records' size: [`Replay`] reads the records again one at a
/// time.
///
/// A reader below a checkpoint can only be a late peer of a finished root (garbage
/// collection keeps everything at and past the horizon): it is `Superseded`.
///
/// `named`: a cached view names what it is a view of (an object's does), so a record
/// holding one concerns the reader, and the record's step is not decoded to find out
/// (an object's newest record is often a transaction's commit, many objects' worth).
/// `head`: the stream's newest record at or below `at` if the caller read it already.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn since_view<V>(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    tag: Tag,
    at: u64,
    relevant: impl Fn(&Step) -> bool,
    cached: impl Fn(&[u8]) -> Option<V>,
    named: bool,
    mut head: Option<LogRecord>,
) -> Result<(Option<V>, Replay), Abort> {
    let mut newer = Vec::new();
    let mut first = None;
    let mut cursor = at;
    let mut walked = 0;
    // A checkpoint looked at early, once the walk is long: the walk stops at it.
    let mut early = None;
    let mut reached = false;
    loop {
        if walked == LOOK_AFTER {
            early = checkpoint(core, ctx, book, tag).await?;
        }
        if early.as_ref().is_some_and(|(covers, _)| cursor <= *covers) {
            reached = true;
            break;
        }
        let r = match head.take() {
            Some(r) => r,
            None => match core.log.read_prev(ctx, shadow(book), tag, SeqNum(cursor)).await? {
                Some(r) => r,
                None => break,
            },
        };
        first = first.or(Some(r.seqnum.0));
        walked += 1;
        let view = || r.aux.as_deref().filter(|_| core.config.aux_views).and_then(&cached);
        if named {
            if let Some(view) = view() {
                return Ok((Some(view), Replay { tag, newer, first }));
            }
        }
        let step: Step = record::decode("step", &r.data)?;
        if relevant(&step) {
            if let Some(view) = view().filter(|_| !named) {
                return Ok((Some(view), Replay { tag, newer, first }));
            }
            newer.push(r.seqnum.0);
        }
        match r.seqnum.0.checked_sub(1) {
            Some(prev) => cursor = prev,
            None => break,
        }
    }
    // Where the stream ran out, a checkpoint looked at before may be older than the
    // trim that ended it: look again (a trim follows its checkpoint).
    let found = match reached {
        true => early,
        false => checkpoint(core, ctx, book, tag).await?,
    };
    let Some((covers, view)) = found else { return Ok((None, Replay { tag, newer, first })) };
    if covers > at {
        return Err(Abort::Superseded);
    }
    // Records at or below the checkpoint may still be there (a collection between its
    // checkpoint and its trim, or a queue shard's pending pushes): they are in it.
    newer.retain(|&s| s > covers);
    let view = cached(&view).ok_or_else(|| Abort::internal(format!("the checkpoint of stream {:#x} is unreadable", tag.0)))?;
    Ok((Some(view), Replay { tag, newer, first }))
}

/// The newest state checkpointed of `tag`'s stream: the one that covers most (two
/// collections may have raced), and what it covers.
pub(crate) async fn checkpoint(core: &Core, ctx: &mut Context, book: BookId, tag: Tag) -> Result<Option<(u64, Bytes)>, Abort> {
    Ok(checkpoints(core, ctx, book, tag).await?.into_iter().max_by_key(|c| c.covers).map(|c| (c.covers, c.view)))
}

/// One checkpoint of a stream, in its checkpoint stream.
pub(crate) struct Checkpoint {
    pub seqnum: u64,
    pub covers: u64,
    pub view: Bytes,
}

/// Every checkpoint still in `tag`'s checkpoint stream, oldest first (a collection
/// trims all but the newest, so there are few).
pub(crate) async fn checkpoints(core: &Core, ctx: &mut Context, book: BookId, tag: Tag) -> Result<Vec<Checkpoint>, Abort> {
    let stream = core.tags.checkpoint(tag);
    let mut found = Vec::new();
    let mut at = 0u64;
    while let Some(r) = core.log.read_next(ctx, shadow(book), stream, SeqNum(at)).await? {
        if let Step::Checkpoint(kind::Checkpoint { covers, views }) = record::decode("checkpoint", &r.data)? {
            if let Some((_, view)) = views.into_iter().find(|(t, _)| *t == tag.0) {
                found.push(Checkpoint { seqnum: r.seqnum.0, covers, view });
            }
        }
        match r.seqnum.0.checked_add(1) {
            Some(next) => at = next,
            None => break,
        }
    }
    Ok(found)
}

/// The records to replay on top of a cached state, oldest first.
pub(crate) struct Replay {
    tag: Tag,
    /// Newest first.
    newer: Vec<u64>,
    /// The newest record of the stream at or below the walk's start, if it found one.
    pub(crate) first: Option<u64>,
}

impl Replay {
    /// The next record to apply, read again.
    pub(crate) async fn next(
        &mut self,
        core: &Core,
        ctx: &mut Context,
        book: BookId,
    ) -> Result<Option<(LogRecord, Step)>, Abort> {
        let Some(seqnum) = self.newer.pop() else { return Ok(None) };
        match core.log.read_next(ctx, shadow(book), self.tag, SeqNum(seqnum)).await? {
            Some(r) if r.seqnum.0 == seqnum => {
                let step = record::decode("step", &r.data)?;
                Ok(Some((r, step)))
            }
            _ => Err(Abort::internal(format!("record {seqnum} left its stream during a replay"))),
        }
    }
}

/// Caches a state in a record's aux data. Best effort: a failure only costs a later
/// reader a replay.
pub(crate) async fn cache(core: &Core, ctx: &mut Context, book: BookId, seqnum: SeqNum, aux: Bytes) {
    if !core.config.aux_views {
        return;
    }
    let _ = core.log.set_aux_data(ctx, shadow(book), seqnum, aux).await;
}
