//! Garbage collection (Halfmoon §4.5), per book, on the recovery scan's schedule.
//!
//! With `t̄` the scan's horizon (every root that started before it has finished, so no
//! instance reads below it):
//! - the step log of a finished instance whose result precedes `t̄` is trimmed once
//!   `results_kept_ms` have passed (until then a client retrying its idempotency key
//!   gets the logged result; after, the key is refused as expired: 409);
//! - the INSTANCES stream is trimmed below `t̄` and below every step log still kept;
//! - for each object of each table: the write-log record visible at `t̄` is kept with
//!   everything after it; the versions named by older records are deleted, then those
//!   records trimmed. So each object keeps at most one version no reader needs, and
//!   storage stays bounded under a steady workload.

use std::time::Duration;

use bytes::Bytes;
use tally_logsvc::{BookId, Context, SeqNum};

use super::record::{self, instances_tag, object_tag, Step};
use super::recovery::BookScan;
use super::{visible_write, Abort, Durable};
use crate::runtime::Runtime;
use crate::state::Family;

/// Keys per page when walking a table.
const PAGE: usize = 512;

/// What one collection did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Collected {
    pub step_logs: u64,
    pub write_logs: u64,
    pub versions: u64,
}

pub async fn collect(rt: &Runtime, book: BookId, scan: &mut BookScan) -> Result<Collected, Abort> {
    let d = &*rt.durable;
    let horizon = scan.horizon();
    let kept = Duration::from_millis(d.config.results_kept_ms);
    let mut done = Collected::default();
    let mut ctx = scan.ctx.clone();
    while let Some(f) = scan.finished.front() {
        if f.result >= horizon || f.seen.elapsed() < kept {
            break;
        }
        d.log.trim(&mut ctx, book, f.step_tag, SeqNum(f.result + 1)).await?;
        scan.inits.remove(&f.step_tag);
        scan.finished.pop_front();
        done.step_logs += 1;
    }
    // Each trim is a metalog command: only when the point moved.
    let below = scan.inits.values().copied().min().unwrap_or(u64::MAX).min(horizon);
    if below > scan.instances_trimmed {
        d.log.trim(&mut ctx, book, instances_tag(), SeqNum(below)).await?;
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
    let st = format!("{:x}/{table}", book.0);
    let mut after: Option<Bytes> = None;
    loop {
        let keys = d.store.list_keys(&st, Family::Versions, after.as_deref(), PAGE).await?;
        for key in &keys {
            let Some(keep) = visible_write(&d.log, ctx, book, table, key, horizon).await? else { continue };
            // `keep` is the last record at or before the horizon, or the write that a
            // voided migration record just after it defers to: either way, what
            // follows it stays, so every reader at or past the horizon reads as before.
            // The records before it go, with the versions they name (each record names
            // a version of its own).
            let tag = object_tag(table, key);
            let mut at = SeqNum(0);
            let mut older = false;
            while let Some(r) = d.log.read_next(ctx, book, tag, at).await? {
                if r.seqnum.0 >= keep.seqnum {
                    break;
                }
                at = SeqNum(r.seqnum.0 + 1);
                older = true;
                if let Step::Write { table: t, key: k, version, .. } = record::decode("write-log", &r.data)? {
                    if t == table && k == key && version != keep.version && d.store.delete_version(&st, key, version).await? {
                        done.versions += 1;
                    }
                }
            }
            if older {
                d.log.trim(ctx, book, tag, SeqNum(keep.seqnum)).await?;
                done.write_logs += 1;
            }
        }
        match keys.last() {
            Some(last) => after = Some(last.clone()),
            None => return Ok(()),
        }
    }
}
