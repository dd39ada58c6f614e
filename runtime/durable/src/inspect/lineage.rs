//! Lineage: who wrote a value. Every write is a record of the log or names one: a
//! read-optimized write's record in the key's write log, a symmetric write's logged
//! record (its version), a write-optimized write's version cursor (the writer's own last
//! record when it wrote), an object's write in its stream. That record is in its
//! writer's step log: its tags name the step log, and the writer's Init (in INSTANCES,
//! before it) names the instance. A migration record (a switch carrying a value over)
//! names the cursor of the value it carried: its first writer is that one's.

use bytes::Bytes;
use serde::Serialize;
use tally_log_core::{BookId, Context, SeqNum, Tag};

use super::steps::History;
use crate::core::Core;
use crate::error::Result;
use crate::id::InstanceId;
use crate::node::{Libraries, Tables};
use crate::record::meta::meta_of;
use crate::record::{self, kind, Step};
use crate::tags::{shadow, INSTANCES};

/// INSTANCES records read back from a write to find its writer's Init at most.
const INIT_SCAN_MAX: usize = 100_000;

/// The invocation that wrote a value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Writer {
    pub invocation_id: String,
    pub function: String,
    /// The number of its step that wrote (`None` for a write-optimized write, which
    /// is not a step: its record is the writer's last before the write).
    pub step: Option<u64>,
    pub attempt: u32,
    /// The writer's input, and its key (`?key=`) if it had one.
    pub input: Bytes,
    pub key: Option<String>,
    pub trace_id: Option<String>,
    /// The seqnum of the writer's Init.
    pub init_seqnum: u64,
}

/// Why a value is what it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lineage {
    pub value: Option<Bytes>,
    pub protocol: String,
    /// The seqnum the value was written at.
    pub written_at: Option<u64>,
    /// A value a switch carried over: the seqnum of the write it carried.
    pub migrated_from: Option<u64>,
    pub writer: Option<Writer>,
    /// The value just before this write (`None` inside: there was none), if still kept.
    pub previous: Option<Option<Bytes>>,
}

impl Core {
    /// The instance whose step log holds record `r` of `book`'s shadow (at its seqnum),
    /// read back through INSTANCES for the Init whose step tag `r` carries.
    async fn writer_of(&self, ctx: &mut Context, book: BookId, seqnum: u64, tags: &[Tag]) -> Result<Option<(InstanceId, u64)>> {
        let mut at = seqnum;
        for _ in 0..INIT_SCAN_MAX {
            let Some(r) = self.log.read_prev(ctx, shadow(book), INSTANCES, SeqNum(at)).await? else { return Ok(None) };
            if let Ok((Some(init), _)) = record::decode_steps("step", &r.data).map(Step::into_init_and_last) {
                let id = match init {
                    Step::Init(kind::Init { id, .. }) | Step::InitKeyed(kind::InitKeyed { id, .. }) => id,
                    _ => unreachable!("into_init_and_last gives an Init"),
                };
                if tags.contains(&self.tags.step(&id)) {
                    return Ok(Some((id, r.seqnum.0)));
                }
            }
            match r.seqnum.0.checked_sub(1) {
                Some(prev) => at = prev,
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    /// The record of `book`'s shadow at exactly `seqnum`.
    async fn record_at(&self, ctx: &mut Context, book: BookId, seqnum: u64) -> Result<Option<tally_log_core::LogRecord>> {
        let r = self.log.read_next(ctx, shadow(book), Tag::ALL, SeqNum(seqnum)).await?;
        Ok(r.filter(|r| r.seqnum.0 == seqnum))
    }

    /// The writer of the record at `seqnum`, and the step of it that `wrote` picks.
    async fn writer_at(
        &self,
        ctx: &mut Context,
        book: BookId,
        seqnum: u64,
        wrote: impl Fn(&Step) -> bool,
    ) -> Result<Option<Writer>> {
        let Some(r) = self.record_at(ctx, book, seqnum).await? else { return Ok(None) };
        let Some((id, init_seqnum)) = self.writer_of(ctx, book, seqnum, &r.tags).await? else { return Ok(None) };
        let Some(init) = self.record_at(ctx, book, init_seqnum).await? else { return Ok(None) };
        let (function, input, key) = match record::decode_steps("step", &init.data)?.into_init_and_last().0 {
            Some(Step::Init(kind::Init { function, input, .. })) => (function, input, None),
            Some(Step::InitKeyed(kind::InitKeyed { function, input, key, .. })) => (function, input, Some(key.key)),
            _ => return Ok(None),
        };
        let trace_id = meta_of::<Step>(&init.data).and_then(|m| m.trace).map(|t| t.trace_hex());
        // The step: count the steps of the step log up to the record.
        let mut n = 0u64;
        let mut step = None;
        let mut from = 0;
        while let Some(s) = self.log.read_next(ctx, shadow(book), self.tags.step(&id), SeqNum(from)).await? {
            if s.seqnum.0 > seqnum {
                break;
            }
            for st in record::decode_steps("step", &s.data)?.into_steps() {
                if s.seqnum.0 == seqnum && wrote(&st) {
                    step = Some(n);
                }
                n += 1;
            }
            from = s.seqnum.0.saturating_add(1);
        }
        let attempt = self.attempt_at(ctx, book, &id, seqnum).await?;
        Ok(Some(Writer { invocation_id: id.to_string(), function, step, attempt, input, key, trace_id, init_seqnum }))
    }

    /// The attempt of instance `id` that was running at `seqnum` (its retry stream).
    async fn attempt_at(&self, ctx: &mut Context, book: BookId, id: &InstanceId, seqnum: u64) -> Result<u32> {
        let mut attempt = 1;
        let mut from = 0;
        while let Some(r) = self.log.read_next(ctx, shadow(book), self.tags.retry(id), SeqNum(from)).await? {
            if r.seqnum.0 >= seqnum {
                break;
            }
            if let Ok(Step::Retry(kind::Retry { id: of, attempt: a, .. })) = record::decode::<Step>("retry", &r.data) {
                if of == *id {
                    attempt = attempt.max(a);
                }
            }
            from = r.seqnum.0.saturating_add(1);
        }
        Ok(attempt)
    }
}

/// Whether `step` writes `(table, key)`.
fn writes(step: &Step, table: &str, key: &[u8]) -> bool {
    match step {
        Step::Write(kind::Write { table: t, key: k, .. })
        | Step::Put(kind::Put { table: t, key: k, .. })
        | Step::LoggedWrite(kind::LoggedWrite { table: t, key: k, .. }) => t == table && k == key,
        _ => false,
    }
}

impl Tables<'_> {
    /// Who wrote the value of `key` in `table` of `book`, now or as of seqnum `at`.
    pub async fn why(
        &self,
        ctx: &mut Context,
        book: BookId,
        table: &str,
        history: &History,
        key: &[u8],
        at: Option<u64>,
    ) -> Result<Lineage> {
        let core = &self.0.core;
        let now = self.value_at(ctx, book, table, history, key, at).await?;
        let mut lineage = Lineage {
            value: now.value,
            protocol: now.protocol,
            written_at: now.written_at,
            migrated_from: None,
            writer: None,
            previous: None,
        };
        let Some(mut written) = now.written_at else { return Ok(lineage) };
        // A migration record is no step: its value's first writer wrote at the cursor
        // it names.
        for _ in 0..16 {
            let Some(r) = core.record_at(ctx, book, written).await? else { break };
            let migrated = record::write_in(&r.data, table, key)?.and_then(|w| w.migrated_from);
            match migrated {
                Some(from) if lineage.migrated_from.is_none() => {
                    lineage.migrated_from = Some(from);
                    written = from;
                }
                _ => break,
            }
        }
        lineage.writer = core.writer_at(ctx, book, written, |s| writes(s, table, key)).await?;
        if let Some(before) = now.written_at.and_then(|w| w.checked_sub(1)) {
            lineage.previous = self.value_at(ctx, book, table, history, key, Some(before)).await.ok().map(|v| v.value);
        }
        Ok(lineage)
    }
}

impl Libraries<'_> {
    /// Who last wrote object `object` of `book` (a plain write or a committed
    /// transaction), now or as of seqnum `at`, and its value then.
    pub async fn why_object(&self, ctx: &mut Context, book: BookId, object: &str, at: Option<u64>) -> Result<Lineage> {
        let core = self.0;
        crate::abort::check_book(book)?;
        crate::objects::check_name(object)?;
        let seqnum = at.unwrap_or(u64::MAX);
        let value = self.object_at(ctx, book, object, "", seqnum).await?.map(Bytes::from);
        let names = |s: &Step| match s {
            Step::ObjectWrite(kind::ObjectWrite { object: o, .. }) => o == object,
            Step::TxnCommit(kind::TxnCommit { writes, .. }) => writes.iter().any(|(o, _)| o == object),
            _ => false,
        };
        let tag = core.tags.bokistore(object);
        let mut from = seqnum;
        let mut written = None;
        for _ in 0..INIT_SCAN_MAX {
            let Some(r) = core.log.read_prev(ctx, shadow(book), tag, SeqNum(from)).await? else { break };
            let hit = record::decode_steps("object", &r.data).is_ok_and(|s| s.into_steps().iter().any(names));
            if hit && !self.aborted(ctx, book, &r).await? {
                written = Some(r.seqnum.0);
                break;
            }
            match r.seqnum.0.checked_sub(1) {
                Some(prev) => from = prev,
                None => break,
            }
        }
        let mut lineage = Lineage {
            value,
            protocol: "object".to_string(),
            written_at: written,
            migrated_from: None,
            writer: None,
            previous: None,
        };
        if let Some(w) = written {
            lineage.writer = core.writer_at(ctx, book, w, names).await?;
            if let Some(before) = w.checked_sub(1) {
                lineage.previous = Some(self.object_at(ctx, book, object, "", before).await?.map(Bytes::from));
            }
        }
        Ok(lineage)
    }

    /// Whether `r`, an object stream's record, is a transaction's commit that failed.
    async fn aborted(&self, ctx: &mut Context, book: BookId, r: &tally_log_core::LogRecord) -> Result<bool> {
        match record::decode_steps("object", &r.data)?.into_last() {
            Step::TxnCommit(kind::TxnCommit { start, reads, .. }) => {
                let committed = crate::objects::decide(self.0, ctx, book, r.seqnum.0, start, &reads, None).await;
                Ok(!committed.map_err(|a| a.into_error())?)
            }
            _ => Ok(false),
        }
    }
}
