//! The exactly-once core's `Log` on the real thing: the engine's platform log client.
//! (Its `Functions` on wasmtime and its `Clock` and `Spawn` on tokio are `tally-host`'s.)

use bytes::Bytes;
use tally_durable::{BoxFuture, Log, LogResult};
use tally_logsvc::{BookId, Cond, Context, LogClient, LogRecord, SeqNum, Tag};

/// The log with the platform's privileges, as the core sees it.
pub struct PlatformLog(pub LogClient);

impl Log for PlatformLog {
    fn append<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
    ) -> BoxFuture<'a, LogResult<SeqNum>> {
        Box::pin(self.0.append(ctx, book, tags, data))
    }

    fn cond_append<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
        cond_tag: Tag,
        cond_position: u64,
    ) -> BoxFuture<'a, LogResult<SeqNum>> {
        Box::pin(self.0.cond_append(ctx, book, tags, data, cond_tag, cond_position))
    }

    fn cond_append_if<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
        cond: Cond,
        unchanged: &'a [Cond],
    ) -> BoxFuture<'a, LogResult<SeqNum>> {
        Box::pin(self.0.cond_append_if(ctx, book, tags, data, cond.tag, cond.position, unchanged))
    }

    fn read_next<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        min: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>> {
        Box::pin(self.0.read_next(ctx, book, tag, min))
    }

    fn read_prev<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>> {
        Box::pin(self.0.read_prev(ctx, book, tag, max))
    }

    fn trim<'a>(&'a self, ctx: &'a mut Context, book: BookId, tag: Tag, seqnum: SeqNum) -> BoxFuture<'a, LogResult<()>> {
        Box::pin(self.0.trim(ctx, book, tag, seqnum))
    }

    fn set_aux_data<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        seqnum: SeqNum,
        aux: Bytes,
    ) -> BoxFuture<'a, LogResult<()>> {
        Box::pin(self.0.set_aux_data(ctx, book, seqnum, aux))
    }
}
