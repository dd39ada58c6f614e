//! Garbage collection (Halfmoon §4.5), per book, on the recovery scan's schedule.
//!
//! With `t̄` the scan's horizon (every root that started before it has finished, so no
//! instance reads below it; a late peer of a finished root stops instead, see
//! `instance.rs`):
//! - the step log of a finished instance whose result precedes `t̄` is trimmed once
//!   `results_kept_ms` have passed, or once the book keeps more than [`FINISHED_MAX`]
//!   finished step logs (until then a client retrying its idempotency key gets the
//!   logged result; after, the key is refused as expired: 409);
//! - with a step log whose result carries APPENDED, the instance's marks in the user
//!   book are retired (trimmed whole: the index keeps only their counts);
//! - the INSTANCES stream (and APPENDED) is trimmed below `t̄` and below every step log
//!   still kept;
//! - for each object of each table: the write-log record visible at `t̄` is kept with
//!   everything after it; the versions named by older records are deleted, then those
//!   records trimmed. So each object keeps at most one version no reader needs, and
//!   storage stays bounded under a steady workload. A write log is trimmed only up to
//!   the first record of another object, should two objects ever share a tag.

use bytes::Bytes;
use tally_log_core::{BookId, Context, SeqNum};

use crate::node::{store_table, visible_write, Abort, Durable};
use crate::record::{self, Step};
use crate::recovery::BookScan;
use crate::store::Family;
use crate::tags::{shadow, APPENDED, INSTANCES};

/// Keys per page when walking a table.
const PAGE: usize = 512;
/// Finished step logs a book keeps at most, whatever `results_kept_ms` says.
pub const FINISHED_MAX: usize = 1_000_000;

/// What one collection did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Collected {
    pub step_logs: u64,
    pub write_logs: u64,
    pub versions: u64,
}

pub(crate) async fn collect(d: &Durable, book: BookId, scan: &mut BookScan) -> Result<Collected, Abort> {
    let horizon = scan.horizon();
    let now = d.clock.now_ms();
    let mut done = Collected::default();
    let mut ctx = scan.ctx.clone();
    let sb = shadow(book);
    while let Some(f) = scan.finished.front() {
        let expired = now.saturating_sub(f.seen_ms) >= d.config.results_kept_ms || scan.finished.len() > FINISHED_MAX;
        if f.result >= horizon || !expired {
            break;
        }
        if f.appended {
            // Before the step log: a crash in between retires the marks again, harmlessly.
            for mark in d.tags.marks(f.step_tag) {
                d.log.trim(&mut ctx, book, mark, SeqNum::MAX).await?;
            }
        }
        d.log.trim(&mut ctx, sb, f.step_tag, SeqNum(f.result + 1)).await?;
        scan.inits.remove(&f.step_tag);
        scan.finished.pop_front();
        done.step_logs += 1;
    }
    // Each trim is a metalog command: only when the point moved.
    let below = scan.inits.values().copied().min().unwrap_or(u64::MAX).min(horizon);
    if below > scan.instances_trimmed {
        d.log.trim(&mut ctx, sb, INSTANCES, SeqNum(below)).await?;
        // The results that carry APPENDED go with the INSTANCES stream.
        d.log.trim(&mut ctx, sb, APPENDED, SeqNum(below)).await?;
        scan.instances_trimmed = below;
    }
    for table in d.tables(book).await? {
        collect_table(d, &mut ctx, book, &table, horizon, &mut done).await?;
    }
    if done != Collected::default() {
        tracing::debug!(book = book.0, ?done, "collected");
    }
    Ok(done)
}

async fn collect_table(
    d: &Durable,
    ctx: &mut Context,
    book: BookId,
    table: &str,
    horizon: u64,
    done: &mut Collected,
) -> Result<(), Abort> {
    let st = store_table(book, table);
    let mut after: Option<Bytes> = None;
    loop {
        let keys = d.store.list_keys(&st, Family::Versions, after.as_deref(), PAGE).await?;
        for key in &keys {
            let Some(keep) = visible_write(d, ctx, book, table, key, horizon).await? else { continue };
            // `keep` is the last record at or before the horizon, or the write that a
            // voided migration record just after it defers to: either way, what
            // follows it stays, so every reader at or past the horizon reads as before.
            // The records before it go, with the versions they name (each record names
            // a version of its own), up to the first record of another object.
            let tag = d.tags.object(table, key);
            let mut at = SeqNum(0);
            let mut trim_to = None;
            while let Some(r) = d.log.read_next(ctx, shadow(book), tag, at).await? {
                if r.seqnum.0 >= keep.seqnum {
                    break;
                }
                match record::decode::<Step>("write-log", &r.data)? {
                    Step::Write { table: t, key: k, version, .. } if t == table && k == key => {
                        if version != keep.version && d.store.delete_version(&st, key, version).await? {
                            done.versions += 1;
                        }
                        trim_to = Some(r.seqnum.0 + 1);
                    }
                    _ => break,
                }
                at = SeqNum(r.seqnum.0 + 1);
            }
            if let Some(point) = trim_to {
                d.log.trim(ctx, shadow(book), tag, SeqNum(point)).await?;
                done.write_logs += 1;
            }
        }
        match keys.last() {
            Some(last) => after = Some(last.clone()),
            None => return Ok(()),
        }
    }
}
