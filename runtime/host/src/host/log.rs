//! `tally:platform/log`: the LogBook API on the invocation's book. The book is the
//! invocation's; tags the platform reserves are refused. Appends and reads go through
//! the exactly-once core (`Attempt`): an append (conditional or not) takes effect once
//! across re-executions and peers, and a read returns in every execution what it
//! returned in the first. Trims (idempotent) and aux data (a cache) go to the log
//! directly.

use bytes::Bytes;
use tally_durable::Abort;
use tally_logsvc::{LogRecord, SeqNum, Tag};

use super::tally::platform::log::{Host, LogRecord as GuestRecord};
use super::{aborted, guest_error, GuestError, HostState};

type Outcome<T> = wasmtime::Result<Result<T, GuestError>>;

fn tags(raw: Vec<u64>) -> Vec<Tag> {
    raw.into_iter().map(Tag).collect()
}

fn record(r: LogRecord) -> GuestRecord {
    GuestRecord {
        seqnum: r.seqnum.0,
        tags: r.tags.into_iter().map(|t| t.0).collect(),
        data: r.data.to_vec(),
        aux_data: r.aux.map(|a| a.to_vec()),
    }
}

/// A read as the guest gets it; an abort ends the attempt.
fn read(r: Result<tally_logsvc::Result<Option<LogRecord>>, Abort>) -> Outcome<Option<GuestRecord>> {
    match r {
        Ok(r) => Ok(r.map(|o| o.map(record)).map_err(guest_error)),
        Err(abort) => aborted(abort),
    }
}

impl Host for HostState {
    #[tracing::instrument(name = "log.append", level = "debug", skip_all)]
    async fn append(&mut self, tags_: Vec<u64>, data: Vec<u8>) -> Outcome<u64> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostLog, || "append".to_string());
        match self.inv().attempt.append(&tags(tags_), Bytes::from(data)).await {
            Ok(r) => Ok(r.map(|s| s.0).map_err(guest_error)),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "log.cond-append", level = "debug", skip_all)]
    async fn cond_append(&mut self, tags_: Vec<u64>, data: Vec<u8>, cond_tag: u64, cond_pos: u64) -> Outcome<u64> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostLog, || "cond_append".to_string());
        match self.inv().attempt.cond_append(&tags(tags_), Bytes::from(data), Tag(cond_tag), cond_pos).await {
            Ok(r) => Ok(r.map(|s| s.0).map_err(guest_error)),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "log.read-next", level = "debug", skip_all)]
    async fn read_next(&mut self, tag: u64, min_seqnum: u64) -> Outcome<Option<GuestRecord>> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostLog, || "read_next".to_string());
        read(self.inv().attempt.read_next(Tag(tag), SeqNum(min_seqnum)).await)
    }

    #[tracing::instrument(name = "log.read-prev", level = "debug", skip_all)]
    async fn read_prev(&mut self, tag: u64, max_seqnum: u64) -> Outcome<Option<GuestRecord>> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostLog, || "read_prev".to_string());
        read(self.inv().attempt.read_prev(Tag(tag), SeqNum(max_seqnum)).await)
    }

    #[tracing::instrument(name = "log.check-tail", level = "debug", skip_all)]
    async fn check_tail(&mut self, tag: u64) -> Outcome<Option<GuestRecord>> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostLog, || "check_tail".to_string());
        read(self.inv().attempt.read_prev(Tag(tag), SeqNum::MAX).await)
    }

    #[tracing::instrument(name = "log.trim", level = "debug", skip_all)]
    async fn trim(&mut self, tag: u64, seqnum: u64) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostLog, || "trim".to_string());
        let inv = self.inv();
        if inv.attempt.instance.is_shared() {
            let why = "a trim: a shared keyed invocation (key=K&shared=true) only reads";
            return Ok(Err(guest_error(tally_logsvc::Error::InvalidArgument(why.into()))));
        }
        let (ctx, book) = (&mut inv.attempt.ctx, inv.attempt.book);
        let r = inv.log.trim(ctx, book, Tag(tag), SeqNum(seqnum)).await;
        Ok(r.map_err(guest_error))
    }

    #[tracing::instrument(name = "log.set-aux-data", level = "debug", skip_all)]
    async fn set_aux_data(&mut self, seqnum: u64, data: Vec<u8>) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostLog, || "set_aux_data".to_string());
        let inv = self.inv();
        let (ctx, book) = (&mut inv.attempt.ctx, inv.attempt.book);
        let r = inv.log.set_aux_data(ctx, book, SeqNum(seqnum), Bytes::from(data)).await;
        Ok(r.map_err(guest_error))
    }
}

impl super::tally::platform::types::Host for HostState {}
