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

/// The records of `tag`'s stream at or below `at` that `relevant` keeps, newest first,
/// back to the newest one whose aux data `cached` reads a state from, and that state
/// (`None`: the stream's start was reached, or its first live record).
pub(crate) async fn since_view<V>(
    svc: &Durable,
    ctx: &mut Context,
    book: BookId,
    tag: Tag,
    at: u64,
    relevant: impl Fn(&Step) -> bool,
    cached: impl Fn(&LogRecord) -> Option<V>,
) -> Result<(Option<V>, Vec<(LogRecord, Step)>), Abort> {
    let mut newer = Vec::new();
    let mut cursor = at;
    loop {
        let Some(r) = svc.log.read_prev(ctx, shadow(book), tag, SeqNum(cursor)).await? else { break };
        let step: Step = record::decode("step", &r.data)?;
        if relevant(&step) {
            if let Some(view) = cached(&r) {
                return Ok((Some(view), newer));
            }
            let prev = r.seqnum.0.checked_sub(1);
            newer.push((r, step));
            match prev {
                Some(prev) => cursor = prev,
                None => break,
            }
        } else {
            match r.seqnum.0.checked_sub(1) {
                Some(prev) => cursor = prev,
                None => break,
            }
        }
    }
    Ok((None, newer))
}

/// Caches a state in a record's aux data. Best effort: a failure only costs a later
/// reader a replay.
pub(crate) async fn cache(svc: &Durable, ctx: &mut Context, book: BookId, seqnum: SeqNum, aux: Bytes) {
    let _ = svc.log.set_aux_data(ctx, shadow(book), seqnum, aux).await;
}
