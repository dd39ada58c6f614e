//! The core's log and state store, timed: each call is a frame of the calling
//! execution's probe (`log` and `store` in the breakdown). Outside an execution a call
//! costs one task-local lookup more.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use tally_durable::store::{Family, LatestPut, StateFuture, StateStore, Value, Version, VersionPut};
use tally_durable::{BoxFuture, LogBook, LogResult};
use tally_logsvc::{BookId, Cond, Context, LogRecord, SeqNum, Tag};

use super::probe::{self, Part};

type Pinned<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// `fut` as a frame of `part` of the current execution, from now until it completes.
fn timed<'a, T: 'a>(part: Part, fut: Pinned<'a, T>) -> Pinned<'a, T> {
    match probe::current() {
        None => fut,
        Some(p) => {
            let frame = p.frame(part, None);
            Box::pin(async move {
                let out = fut.await;
                drop(frame);
                out
            })
        }
    }
}

/// `fut`, a log call, as a `log` frame whose span the log's own spans (the engine's,
/// the storage nodes') nest under when traces are exported.
fn timed_log<'a, T: 'a>(fut: Pinned<'a, T>) -> Pinned<'a, T> {
    match probe::current() {
        None => fut,
        Some(p) => {
            let frame = p.frame(Part::LogWait, None);
            let parent = frame.log_parent();
            Box::pin(async move {
                let out = tally_logsvc::trace::traced(parent, fut).await;
                drop(frame);
                out
            })
        }
    }
}

/// A [`LogBook`] whose calls are `log` frames.
pub struct TimedLog(pub Arc<dyn LogBook>);

impl LogBook for TimedLog {
    fn append<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
    ) -> BoxFuture<'a, LogResult<SeqNum>> {
        timed_log(self.0.append(ctx, book, tags, data))
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
        timed_log(self.0.cond_append(ctx, book, tags, data, cond_tag, cond_position))
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
        timed_log(self.0.cond_append_if(ctx, book, tags, data, cond, unchanged))
    }

    fn read_next<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        min: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>> {
        timed_log(self.0.read_next(ctx, book, tag, min))
    }

    fn read_prev<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>> {
        timed_log(self.0.read_prev(ctx, book, tag, max))
    }

    fn read_prev_seqnum<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<SeqNum>>> {
        timed_log(self.0.read_prev_seqnum(ctx, book, tag, max))
    }

    fn trim<'a>(&'a self, ctx: &'a mut Context, book: BookId, tag: Tag, seqnum: SeqNum) -> BoxFuture<'a, LogResult<()>> {
        timed_log(self.0.trim(ctx, book, tag, seqnum))
    }

    fn set_aux_data<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        seqnum: SeqNum,
        aux: Bytes,
    ) -> BoxFuture<'a, LogResult<()>> {
        timed_log(self.0.set_aux_data(ctx, book, seqnum, aux))
    }
}

/// A [`StateStore`] whose calls are `store` frames.
pub struct TimedStore(pub Arc<dyn StateStore>);

impl StateStore for TimedStore {
    fn put_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64, value: Value) -> StateFuture<'a, bool> {
        timed(Part::Store, self.0.put_version(table, key, version, value))
    }

    fn put_versions<'a>(&'a self, puts: Vec<VersionPut>, durable: bool) -> StateFuture<'a, Vec<bool>> {
        timed(Part::Store, self.0.put_versions(puts, durable))
    }

    fn get_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(u64, Value)>> {
        timed(Part::Store, self.0.get_at(table, key, at))
    }

    fn get_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64) -> StateFuture<'a, Option<Value>> {
        timed(Part::Store, self.0.get_version(table, key, version))
    }

    fn delete_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64) -> StateFuture<'a, bool> {
        timed(Part::Store, self.0.delete_version(table, key, version))
    }

    fn delete_versions<'a>(&'a self, table: &'a str, key: &'a [u8], versions: Vec<u64>) -> StateFuture<'a, u64> {
        timed(Part::Store, self.0.delete_versions(table, key, versions))
    }

    fn sync(&self) -> StateFuture<'_, ()> {
        timed(Part::Store, self.0.sync())
    }

    fn put_if_newer<'a>(&'a self, table: &'a str, key: &'a [u8], version: Version, value: Value) -> StateFuture<'a, bool> {
        timed(Part::Store, self.0.put_if_newer(table, key, version, value))
    }

    fn put_if_newer_all<'a>(&'a self, puts: &'a [LatestPut]) -> StateFuture<'a, ()> {
        timed(Part::Store, self.0.put_if_newer_all(puts))
    }

    fn put_latest<'a>(&'a self, table: &'a str, key: &'a [u8], value: Value) -> StateFuture<'a, ()> {
        timed(Part::Store, self.0.put_latest(table, key, value))
    }

    fn get_latest<'a>(&'a self, table: &'a str, key: &'a [u8]) -> StateFuture<'a, Option<(Version, Value)>> {
        timed(Part::Store, self.0.get_latest(table, key))
    }

    fn get_latest_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(Version, Value)>> {
        timed(Part::Store, self.0.get_latest_at(table, key, at))
    }

    fn trim_replaced<'a>(&'a self, table: &'a str, floor: u64) -> StateFuture<'a, u64> {
        timed(Part::Store, self.0.trim_replaced(table, floor))
    }

    fn list_keys<'a>(
        &'a self,
        table: &'a str,
        family: Family,
        after: Option<&'a [u8]>,
        limit: usize,
    ) -> StateFuture<'a, Vec<Bytes>> {
        timed(Part::Store, self.0.list_keys(table, family, after, limit))
    }
}
