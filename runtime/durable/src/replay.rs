//! Replicated state machines over one stream of a book's shadow (Boki §3, §5): the
//! durable objects, queue shards and locks of `objects.rs`, `queues.rs` and
//! `locks.rs` are each a fold of their stream's records, and a reader starts from the
//! newest state some reader cached in a record's aux data (Boki §5.4), so it replays
//! only what is newer.

use bytes::Bytes;
use tally_log_core::{BookId, Context, LogRecord, SeqNum, Tag};

use crate::node::{Abort, Durable};
use crate::record::{self, Step};
use crate::tags::shadow;

/// The seqnums of the records of `tag`'s stream at or below `at` that `relevant` keeps,
/// newest first, back to the newest one whose aux data `cached` reads a state from, and
/// that state (`None`: the stream's start was reached). Only seqnums are kept, so a
/// long history costs memory by its length, not by its records' size: [`Replay`]
/// reads the records again one at a time.
pub(crate) async fn since_view<V>(
    svc: &Durable,
    ctx: &mut Context,
    book: BookId,
    tag: Tag,
    at: u64,
    relevant: impl Fn(&Step) -> bool,
    cached: impl Fn(&LogRecord) -> Option<V>,
) -> Result<(Option<V>, Replay), Abort> {
    let mut newer = Vec::new();
    let mut cursor = at;
    loop {
        let Some(r) = svc.log.read_prev(ctx, shadow(book), tag, SeqNum(cursor)).await? else { break };
        let step: Step = record::decode("step", &r.data)?;
        if relevant(&step) {
            if let Some(view) = cached(&r).filter(|_| svc.config.aux_views) {
                return Ok((Some(view), Replay { tag, newer }));
            }
            newer.push(r.seqnum.0);
        }
        match r.seqnum.0.checked_sub(1) {
            Some(prev) => cursor = prev,
            None => break,
        }
    }
    Ok((None, Replay { tag, newer }))
}

/// The records to replay on top of a cached state, oldest first.
pub(crate) struct Replay {
    tag: Tag,
    /// Newest first.
    newer: Vec<u64>,
}

impl Replay {
    /// The next record to apply, read again.
    pub(crate) async fn next(
        &mut self,
        svc: &Durable,
        ctx: &mut Context,
        book: BookId,
    ) -> Result<Option<(LogRecord, Step)>, Abort> {
        let Some(seqnum) = self.newer.pop() else { return Ok(None) };
        match svc.log.read_next(ctx, shadow(book), self.tag, SeqNum(seqnum)).await? {
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
pub(crate) async fn cache(svc: &Durable, ctx: &mut Context, book: BookId, seqnum: SeqNum, aux: Bytes) {
    if !svc.config.aux_views {
        return;
    }
    let _ = svc.log.set_aux_data(ctx, shadow(book), seqnum, aux).await;
}
