//! The LogBook contract: the shared log as its users see it (Boki §3, with Halfmoon's
//! conditional append), the one trait that the exactly-once core (`tally-durable`)
//! calls and every log implements: the engine's client (`tally-logsvc`'s `LogClient`),
//! the exactly-once simulator's log (`tally-durable`), and the log simulator's engines
//! (`SimLog`, with the `sim` feature). `conformance` (with the `testing` feature) checks
//! an implementation against this contract; every implementation runs it.
//!
//! ```text
//!   a tag's stream:  [trimmed ...) r0  r1  r2 ... rN      (offsets 0..=N count every record
//!                    ^ trim point                ^ tail    ever in the stream, trimmed or not)
//! ```

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

use crate::{BookId, Cond, Context, Error, LogRecord, SeqNum, Tag};

/// The future every method returns: boxed, so the trait stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub type LogResult<T> = std::result::Result<T, Error>;

/// The shared log, as its users see it.
///
/// - **Context.** Every call takes the caller's [`Context`] and, once the log served it
///   (a success, or a conditional append that failed with [`Error::Conflict`]), moves it
///   to the position it was served at: a later call with the same context sees every
///   record an earlier one saw or appended (read-your-writes, monotonic reads), on any
///   node. Positions never move back.
/// - **Appends.** A record joins the stream of each of its tags (and [`Tag::ALL`]'s,
///   the whole book's); its seqnum is unique and grows within a book. An acknowledged
///   append is durable. A failed call (`Timeout`, `Unavailable`) may or may not have
///   taken effect.
/// - **Conditional appends.** A record appended with a condition lands only at offset
///   `cond_position` of `cond_tag`'s stream (offsets count every record the stream ever
///   had, trimmed ones too) and, for `cond_append_if`, only if each stream `unchanged`
///   names still holds exactly that many records; otherwise it is in no stream, and the
///   call fails with `Conflict { holder }`: the record at that offset, `None` if it was
///   trimmed (or, for an offset past the stream's end, if none is there yet). Every
///   reader agrees on the outcome, since it depends only on the log before the record.
/// - **Reads.** `read_next` / `read_prev` return the first live record of a stream at or
///   above / the last at or below a seqnum, as of at least the caller's context;
///   `read_prev_seqnum` the seqnum `read_prev` would.
/// - **Trims.** `trim(tag, s)` removes the stream's records below `s` (every stream of the
///   book for [`Tag::ALL`]); reads never return them again; offsets stay counted.
/// - **Aux data.** Best-effort cache data on a live record of the caller's book, which
///   later reads of that record may return; never needed for correctness. Any other
///   seqnum is refused with `InvalidArgument` once the log has reached the caller's
///   context.
/// - **Limits.** A record carries at most the log's `tags_max` tags and
///   `record_bytes_max` bytes (`TooLarge` past it); a call not served within the log's
///   operation timeout fails with `Timeout`; a context naming a term the log never
///   reaches is refused with `InvalidArgument`.
pub trait LogBook: Send + Sync {
    fn append<'a>(&'a self, ctx: &'a mut Context, book: BookId, tags: &'a [Tag], data: Bytes)
        -> BoxFuture<'a, LogResult<SeqNum>>;

    fn cond_append<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
        cond_tag: Tag,
        cond_position: u64,
    ) -> BoxFuture<'a, LogResult<SeqNum>>;

    /// [`LogBook::cond_append`] at `cond`, also only if each stream `unchanged` names
    /// (which the record does not join) holds exactly that many records when the record
    /// is ordered; a failed condition fails with [`Error::Conflict`] (the holder of
    /// the first that failed).
    fn cond_append_if<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
        cond: Cond,
        unchanged: &'a [Cond],
    ) -> BoxFuture<'a, LogResult<SeqNum>>;

    /// The first live record of `tag`'s stream at or above `min`.
    fn read_next<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        min: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>>;

    /// The last live record of `tag`'s stream at or below `max`.
    fn read_prev<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>>;

    /// The seqnum of the record [`LogBook::read_prev`] returns, without the record: a
    /// log may answer it from its index alone (a caller that keeps what it derived from
    /// records by seqnum needs no more).
    fn read_prev_seqnum<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<SeqNum>>> {
        Box::pin(async move { Ok(self.read_prev(ctx, book, tag, max).await?.map(|r| r.seqnum)) })
    }

    /// Removes the records of `tag`'s stream below `seqnum`.
    fn trim<'a>(&'a self, ctx: &'a mut Context, book: BookId, tag: Tag, seqnum: SeqNum) -> BoxFuture<'a, LogResult<()>>;

    /// Attaches best-effort cache data to a live record of `book` (Boki §3).
    fn set_aux_data<'a>(&'a self, ctx: &'a mut Context, book: BookId, seqnum: SeqNum, aux: Bytes)
        -> BoxFuture<'a, LogResult<()>>;
}

#[cfg(any(test, feature = "testing"))]
pub mod conformance;
