//! The async client API of the shared log, over an engine driver in the same process.
//!
//! Every call takes the caller's [`Context`] (its metalog position per physical log),
//! sends that position with the request, and moves the context to the position the
//! request completed at.
//!
//! A user client ([`LogClient::user`]) refuses the platform's reserved tags before
//! anything is sent; the platform's own client ([`LogClient::platform`]) allows them.

use bytes::Bytes;
use tally_log_core::{
    BookId, BoxFuture, Cond, Context, Error, LogBook, LogId, LogRecord, LogResult, MetalogPosition, Reply, Request, Result,
    SeqNum, Tag,
};
use tokio::sync::oneshot;

use crate::driver::{EngineCall, EngineLink};

/// Whether a client may use reserved tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Privilege {
    User,
    Platform,
}

/// A handle to one engine. Cheap to clone; clones share the engine.
#[derive(Clone, Debug)]
pub struct LogClient {
    link: EngineLink,
    privilege: Privilege,
}

impl LogClient {
    /// A client for guest code: reserved tags are refused with `InvalidArgument`.
    pub fn user(link: EngineLink) -> LogClient {
        LogClient { link, privilege: Privilege::User }
    }

    /// A client for the platform itself, which may use reserved tags.
    pub fn platform(link: EngineLink) -> LogClient {
        LogClient { link, privilege: Privilege::Platform }
    }

    fn check_tags<'a>(&self, tags: impl IntoIterator<Item = &'a Tag>) -> Result<()> {
        if self.privilege == Privilege::Platform {
            return Ok(());
        }
        match tags.into_iter().find(|t| t.is_reserved()) {
            Some(t) => Err(Error::InvalidArgument(format!("tag {:#x} is reserved for the platform", t.0))),
            None => Ok(()),
        }
    }

    fn admit(&self, request: &Request) -> Result<()> {
        match self.privilege == Privilege::User && request.book().is_reserved() {
            true => Err(Error::InvalidArgument(format!("book {:#x} is reserved for the platform", request.book().0))),
            false => Ok(()),
        }
    }

    async fn call(&self, ctx: &mut Context, request: Request) -> Result<Reply> {
        self.admit(&request)?;
        if let Some(done) = self.call_now(ctx, &request) {
            return done;
        }
        let (reply, rx) = oneshot::channel();
        let trace = crate::trace::caller();
        self.link.call(EngineCall { request, context: ctx.clone(), reply, trace }).await?;
        let (result, log, position) = rx.await.map_err(|_| Error::Stopped)?;
        settled(ctx, result, log, position)
    }

    /// A read (or aux data) the engine can answer at once, answered here, in place.
    fn call_now(&self, ctx: &mut Context, request: &Request) -> Option<Result<Reply>> {
        let (result, log, position) = self.link.read_now(ctx, request)?;
        Some(settled(ctx, result, log, position))
    }

    /// A read of `tag` answered in place with no future of its own to make (the
    /// [`LogBook`] methods' fast path); `None` if it takes the usual path, which also
    /// says why it is refused.
    fn read_in_place(&self, ctx: &mut Context, tag: Tag, request: Request) -> Option<Result<Option<LogRecord>>> {
        self.may_read_in_place(tag, &request).then_some(())?;
        Some(self.call_now(ctx, &request)?.and_then(expect_read).map(|r| self.shown(r)))
    }

    /// Whether a read of `tag` may take the in-place path: refused ones take the usual
    /// one, which says why.
    fn may_read_in_place(&self, tag: Tag, request: &Request) -> bool {
        self.check_tags([&tag]).and_then(|()| self.admit(request)).is_ok()
    }

    /// Partial mode (INDILOG): the engine's reads per path and its local indexes'
    /// bytes per log (suffix, tag cache, popularity cache); `None` in complete mode.
    pub fn partial_stats(&self) -> Option<crate::driver::PartialReport> {
        self.link.partial_stats()
    }

    #[tracing::instrument(name = "log.append", level = "debug", skip_all, fields(book = book.0))]
    pub async fn append(&self, ctx: &mut Context, book: BookId, tags: &[Tag], data: Bytes) -> Result<SeqNum> {
        self.check_tags(tags)?;
        let request = Request::Append { book, tags: tags.to_vec(), data, cond: None, unchanged: vec![] };
        expect_appended(self.call(ctx, request).await?)
    }

    /// Appends only if the record lands at offset `cond_position` of `cond_tag`'s
    /// stream; otherwise fails with [`Error::Conflict`] naming the record there.
    pub async fn cond_append(
        &self,
        ctx: &mut Context,
        book: BookId,
        tags: &[Tag],
        data: Bytes,
        cond_tag: Tag,
        cond_position: u64,
    ) -> Result<SeqNum> {
        self.cond_append_if(ctx, book, tags, data, cond_tag, cond_position, &[]).await
    }

    /// [`LogClient::cond_append`], also only if each of the streams `unchanged` names
    /// (which the record does not join) holds exactly that many records: nothing joined
    /// them since the caller counted. Any failed condition fails with
    /// [`Error::Conflict`] (naming the record at the offset of the first that failed).
    #[allow(clippy::too_many_arguments)]
    #[tracing::instrument(name = "log.cond_append", level = "debug", skip_all, fields(book = book.0, cond_tag = cond_tag.0, cond_position))]
    pub async fn cond_append_if(
        &self,
        ctx: &mut Context,
        book: BookId,
        tags: &[Tag],
        data: Bytes,
        cond_tag: Tag,
        cond_position: u64,
        unchanged: &[Cond],
    ) -> Result<SeqNum> {
        self.check_tags(tags.iter().chain([&cond_tag]).chain(unchanged.iter().map(|c| &c.tag)))?;
        let cond = Some(Cond { tag: cond_tag, position: cond_position });
        let request = Request::Append { book, tags: tags.to_vec(), data, cond, unchanged: unchanged.to_vec() };
        expect_appended(self.call(ctx, request).await?)
    }

    /// The first record of `tag`'s stream with a seqnum at or above `min`.
    #[tracing::instrument(name = "log.read_next", level = "debug", skip_all, fields(book = book.0, tag = tag.0))]
    pub async fn read_next(&self, ctx: &mut Context, book: BookId, tag: Tag, min: SeqNum) -> Result<Option<LogRecord>> {
        self.check_tags([&tag])?;
        Ok(self.shown(expect_read(self.call(ctx, Request::ReadNext { book, tag, min }).await?)?))
    }

    /// The last record of `tag`'s stream with a seqnum at or below `max`.
    #[tracing::instrument(name = "log.read_prev", level = "debug", skip_all, fields(book = book.0, tag = tag.0))]
    pub async fn read_prev(&self, ctx: &mut Context, book: BookId, tag: Tag, max: SeqNum) -> Result<Option<LogRecord>> {
        self.check_tags([&tag])?;
        Ok(self.shown(expect_read(self.call(ctx, Request::ReadPrev { book, tag, max }).await?)?))
    }

    /// A record as this client may see it: a user never sees the platform's marks (the
    /// tags an exactly-once invocation's appends carry besides the guest's own).
    fn shown(&self, record: Option<LogRecord>) -> Option<LogRecord> {
        let mut record = record?;
        if self.privilege == Privilege::User {
            record.tags.retain(|t| !t.is_mark());
        }
        Some(record)
    }

    /// The last record of `tag`'s stream.
    pub async fn check_tail(&self, ctx: &mut Context, book: BookId, tag: Tag) -> Result<Option<LogRecord>> {
        self.read_prev(ctx, book, tag, SeqNum::MAX).await
    }

    /// Removes the records of `tag`'s stream below `seqnum` (every stream, for
    /// [`Tag::ALL`]).
    #[tracing::instrument(name = "log.trim", level = "debug", skip_all, fields(book = book.0, tag = tag.0, %seqnum))]
    pub async fn trim(&self, ctx: &mut Context, book: BookId, tag: Tag, seqnum: SeqNum) -> Result<()> {
        self.check_tags([&tag])?;
        match self.call(ctx, Request::Trim { book, tag, seqnum }).await? {
            Reply::Trimmed => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// Attaches best-effort cache data to a record, which later reads of the record may
    /// return. Only a live record of `book` takes aux data: once the log has reached the
    /// caller's position, any other seqnum (another book's record, a trimmed one, one
    /// never written) fails with [`Error::InvalidArgument`].
    #[tracing::instrument(name = "log.set_aux_data", level = "debug", skip_all, fields(book = book.0, %seqnum))]
    pub async fn set_aux_data(&self, ctx: &mut Context, book: BookId, seqnum: SeqNum, aux: Bytes) -> Result<()> {
        match self.call(ctx, Request::SetAux { book, seqnum, aux }).await? {
            Reply::AuxSet => Ok(()),
            other => Err(unexpected(&other)),
        }
    }
}

/// The engine's client is the real LogBook: the trait's methods are its own.
impl LogBook for LogClient {
    fn append<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
    ) -> BoxFuture<'a, LogResult<SeqNum>> {
        Box::pin(LogClient::append(self, ctx, book, tags, data))
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
        Box::pin(LogClient::cond_append(self, ctx, book, tags, data, cond_tag, cond_position))
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
        Box::pin(LogClient::cond_append_if(self, ctx, book, tags, data, cond.tag, cond.position, unchanged))
    }

    fn read_next<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        min: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>> {
        match self.read_in_place(ctx, tag, Request::ReadNext { book, tag, min }) {
            Some(done) => Box::pin(std::future::ready(done)),
            None => Box::pin(LogClient::read_next(self, ctx, book, tag, min)),
        }
    }

    fn read_prev<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>> {
        match self.read_in_place(ctx, tag, Request::ReadPrev { book, tag, max }) {
            Some(done) => Box::pin(std::future::ready(done)),
            None => Box::pin(LogClient::read_prev(self, ctx, book, tag, max)),
        }
    }

    fn read_prev_seqnum<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<SeqNum>>> {
        let in_place = self.may_read_in_place(tag, &Request::ReadPrev { book, tag, max });
        if let Some((seqnum, log, position)) = in_place.then(|| self.link.read_prev_seqnum_now(ctx, book, tag, max)).flatten() {
            ctx.advance(log, position);
            return Box::pin(std::future::ready(Ok(seqnum)));
        }
        Box::pin(async move { Ok(LogClient::read_prev(self, ctx, book, tag, max).await?.map(|r| r.seqnum)) })
    }

    fn trim<'a>(&'a self, ctx: &'a mut Context, book: BookId, tag: Tag, seqnum: SeqNum) -> BoxFuture<'a, LogResult<()>> {
        Box::pin(LogClient::trim(self, ctx, book, tag, seqnum))
    }

    fn set_aux_data<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        seqnum: SeqNum,
        aux: Bytes,
    ) -> BoxFuture<'a, LogResult<()>> {
        Box::pin(LogClient::set_aux_data(self, ctx, book, seqnum, aux))
    }
}

fn expect_appended(reply: Reply) -> Result<SeqNum> {
    match reply {
        Reply::Appended(s) => Ok(s),
        other => Err(unexpected(&other)),
    }
}

/// A reply as the caller takes it. A conflict is an outcome of the log like a success:
/// the caller saw the record that holds the offset, so its view moves forward as well.
fn settled(ctx: &mut Context, result: Result<Reply>, log: LogId, position: MetalogPosition) -> Result<Reply> {
    if result.is_ok() || matches!(result, Err(Error::Conflict { .. })) {
        ctx.advance(log, position);
    }
    result
}

fn expect_read(reply: Reply) -> Result<Option<LogRecord>> {
    match reply {
        Reply::Read(r) => Ok(r),
        other => Err(unexpected(&other)),
    }
}

/// The engine answered a request with another request's reply: a bug in the engine,
/// reported as an error rather than a panic in the caller.
fn unexpected(reply: &Reply) -> Error {
    Error::Unavailable(format!("the engine answered with an unexpected reply: {reply:?}"))
}
