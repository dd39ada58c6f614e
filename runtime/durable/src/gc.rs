//! Garbage collection (Halfmoon §4.5), per book, on the recovery scan's schedule.
//!
//! With `t̄` the scan's horizon (every root that started before it has finished, so no
//! instance reads below it; a late peer of a finished root stops instead, see
//! `instance/mod.rs`):
//! - the step log of a finished instance whose result precedes `t̄` is trimmed once
//!   `results_kept_ms` have passed, or once the book keeps more than [`FINISHED_MAX`]
//!   finished step logs (until then a client retrying its idempotency key gets the
//!   logged result; after, the key is refused as expired: 409);
//! - with a step log whose result carries APPENDED, the instance's marks in the user
//!   book are retired (trimmed whole: the index keeps only their counts);
//! - with a step log, the instance's cancel and retry streams (the scan noted them from
//!   their records in INSTANCES); a completed promise's stream and its waiters' stream go
//!   once its creator's root is collected, `results_kept_ms` after the completion, once
//!   every root that started before the completion has finished (the completion is
//!   below `t̄`), and when no invocation that waited for it is still kept, so a value
//!   outlives every invocation that could have awaited it before it was completed (a
//!   promise never completed stays; awaiting or completing a collected one finds no
//!   promise);
//! - the INSTANCES stream (and APPENDED) is trimmed below `t̄` and below every step log
//!   still kept;
//! - for each object of each table: the write-log record visible at `t̄` is kept with
//!   everything after it; the versions named by older records are deleted (without a
//!   sync each: one store sync for a page of objects), then those records trimmed. So
//!   each object keeps at most one version no reader needs, and storage stays bounded
//!   under a steady workload. A write log is trimmed only up to the first record of
//!   another object, should two objects ever share a tag.
//!
//! Versions are deleted `DELETES_MAX` to a store call (`StateStore::delete_versions`),
//! without a sync; one `StateStore::sync` covers a page of objects, and only then are their
//! records trimmed: a machine crash may undo an unsynced delete, and a version that no
//! record names would never be found again. Objects are found by paging through the store's
//! keys, one seek past each key's versions.
//!
//! The libraries' streams (Boki §5.5): every record of an object's, a queue shard's or a
//! lock's stream is also in the book's LIBRARIES stream, which the collection walks to
//! learn what changed, reading only what is new each round (the owner keeps what it read
//! and did not collect yet, so a root open for days, which holds the horizon back, costs no
//! rereading). It picks a point `x` at or below the horizon that no transaction's conflict
//! window straddles (every commit at or after `x` began at or after it), appends each changed
//! stream's state at `x` to that stream's checkpoint stream (`Step::Checkpoint`, as many
//! streams a record as its tags allow), then trims the stream below `x` (a queue shard
//! below its oldest pending push, if that is older) and the checkpoint stream below its
//! newest checkpoint. A reader whose stream runs out before it finds an aux-data view
//! starts from the checkpoint (`replay.rs`).

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use tally_log_core::{BookId, Context, SeqNum, Tag};

use crate::abort::{Abort, PAYLOAD_MAX};
use crate::node::Durable;
use crate::objects::AuxView;
use crate::record::kind;
use crate::record::{self, LockId, Step, Written};
use crate::store::{Family, VersionPut};
use crate::table::{store_table, visible_write};
use crate::tags::{shadow, APPENDED, HISTORY, INSTANCES, LIBRARIES};

/// Keys per page when walking a table.
const PAGE: usize = 512;
/// Versions of one object deleted together.
pub(crate) const DELETES_MAX: usize = 32;
/// Finished step logs a book keeps at most, whatever `results_kept_ms` says.
pub const FINISHED_MAX: usize = 1_000_000;

/// What one collection did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Collected {
    pub step_logs: u64,
    pub write_logs: u64,
    pub versions: u64,
    /// Streams of objects, queue shards and locks checkpointed and trimmed.
    pub streams: u64,
    /// Completed promises whose streams were trimmed.
    pub promises: u64,
    /// Single-version entries that newer ones replaced below the history floor.
    pub replaced: u64,
}

/// What the recovery scan saw finish in one book, for garbage collection to collect.
#[derive(Default)]
pub(crate) struct Collectable {
    /// Finished instances whose step logs are still there, in result order.
    pub finished: VecDeque<Finished>,
    /// Init seqnums of the instances whose step logs are still there.
    pub inits: BTreeMap<Tag, u64>,
    /// Where garbage collection last trimmed the INSTANCES stream.
    pub instances_trimmed: u64,
    /// What garbage collection read of the LIBRARIES stream and has not collected yet.
    pub libraries: LibraryWalk,
    /// Streams that go with an instance's step log, by its step tag: its cancel,
    /// retry and outgoing calls' streams.
    pub with_step_log: BTreeMap<Tag, Vec<Tag>>,
    /// Completed promises, oldest first: each with its creator's root (by step tag) and
    /// when the completion was seen.
    pub promises: VecDeque<CompletedPromise>,
    /// (when, the scan's position then), one per collection: what `history_kept_ms`
    /// ago was in seqnums.
    pub samples: VecDeque<(u64, u64)>,
    /// The history floor this node last logged (HISTORY), and how many it logged since
    /// it last trimmed that stream.
    pub floor: u64,
    pub floors: u32,
}

/// Floors logged between two trims of the HISTORY stream.
const FLOORS_PER_TRIM: u32 = 16;

/// Samples of [`Collectable::samples`] kept at most.
const SAMPLES_MAX: usize = 4096;

impl Collectable {
    /// The oldest position whose past must stay readable: where the scan was
    /// `history_kept_ms` ago (0 until this node has looked after the book that long).
    fn history_floor(&mut self, now_ms: u64, next: u64, kept_ms: u64) -> u64 {
        self.samples.push_back((now_ms, next));
        let old_enough = |&(t, _): &(u64, u64)| now_ms.saturating_sub(t) >= kept_ms;
        // The newest sample old enough decides; older ones are no longer needed.
        while self.samples.len() > 1 && self.samples.get(1).is_some_and(old_enough) {
            self.samples.pop_front();
        }
        while self.samples.len() > SAMPLES_MAX {
            self.samples.pop_front();
        }
        self.samples.front().filter(|s| old_enough(s)).map_or(0, |&(_, n)| n)
    }
}

/// A completed promise, to collect once its creator's root is collected and no
/// invocation that waited for it is left.
pub(crate) struct CompletedPromise {
    pub promise: String,
    pub creator: Tag,
    /// The completion's seqnum, and when the scan saw it.
    pub seqnum: u64,
    pub seen_ms: u64,
}

/// An instance (root or child) whose result the scan has seen.
pub(crate) struct Finished {
    pub step_tag: Tag,
    pub result: u64,
    pub seen_ms: u64,
    /// Its result says it may have appended to the user book under its mark.
    pub appended: bool,
}

/// Collects the completed promises of `book` whose creator's root is collected, that
/// were completed `results_kept_ms` ago and below the horizon (every root that started
/// before the completion has finished), and that no invocation still kept waited for:
/// their streams and their waiters' streams. Looks at each promise once a round.
async fn collect_promises(
    d: &Durable,
    ctx: &mut Context,
    book: BookId,
    now: u64,
    horizon: u64,
    scan: &mut Collectable,
) -> Result<u64, Abort> {
    let sb = shadow(book);
    let mut collected = 0;
    for _ in 0..scan.promises.len() {
        let Some(p) = scan.promises.pop_front() else { break };
        if now.saturating_sub(p.seen_ms) < d.core.config.results_kept_ms || p.seqnum >= horizon {
            // The rest were completed later.
            scan.promises.push_front(p);
            break;
        }
        let waiters = d.core.tags.promise_waiters(&p.promise);
        let mut kept = scan.inits.contains_key(&p.creator);
        let mut at = SeqNum(0);
        while !kept {
            let Some(r) = d.core.log.read_next(ctx, sb, waiters, at).await? else { break };
            at = SeqNum(r.seqnum.0.saturating_add(1));
            if let Ok(Step::Sleep(kind::Sleep { root, .. })) = record::decode::<Step>("step", &r.data) {
                kept = scan.inits.contains_key(&d.core.tags.step(&root));
            }
        }
        if kept {
            scan.promises.push_back(p);
            continue;
        }
        d.core.log.trim(ctx, sb, waiters, SeqNum::MAX).await?;
        d.core.log.trim(ctx, sb, d.core.tags.promise(&p.promise), SeqNum::MAX).await?;
        collected += 1;
    }
    Ok(collected)
}

/// Collects in `book` what is below `horizon` (the scan's t̄; `next`, the next seqnum of
/// INSTANCES it will read) and what `scan` saw finish long enough ago.
pub(crate) async fn collect(
    d: &Durable,
    book: BookId,
    horizon: u64,
    next: u64,
    ctx: &Context,
    scan: &mut Collectable,
) -> Result<Collected, Abort> {
    let now = d.core.clock.now_ms();
    let mut done = Collected::default();
    let mut ctx = ctx.clone();
    let sb = shadow(book);
    while let Some(f) = scan.finished.front() {
        let expired = now.saturating_sub(f.seen_ms) >= d.core.config.results_kept_ms || scan.finished.len() > FINISHED_MAX;
        if f.result >= horizon || !expired {
            break;
        }
        // Before the step log, as the marks: a crash in between trims them again.
        for stream in scan.with_step_log.remove(&f.step_tag).into_iter().flatten() {
            d.core.log.trim(&mut ctx, sb, stream, SeqNum::MAX).await?;
        }
        if f.appended {
            // Before the step log: a crash in between retires the marks again, harmlessly.
            for mark in d.core.tags.marks(f.step_tag) {
                d.core.log.trim(&mut ctx, book, mark, SeqNum::MAX).await?;
            }
        }
        d.core.log.trim(&mut ctx, sb, f.step_tag, SeqNum(f.result + 1)).await?;
        scan.inits.remove(&f.step_tag);
        scan.finished.pop_front();
        done.step_logs += 1;
    }
    // Streams of instances collected before the scan saw them (a cancellation that
    // raced the result); each is one trim.
    let gone: Vec<Tag> = scan.with_step_log.keys().filter(|t| !scan.inits.contains_key(t)).copied().collect();
    for tag in gone {
        for stream in scan.with_step_log.remove(&tag).into_iter().flatten() {
            d.core.log.trim(&mut ctx, sb, stream, SeqNum::MAX).await?;
        }
    }
    done.promises = collect_promises(d, &mut ctx, book, now, horizon, scan).await?;
    // Each trim is a metalog command: only when the point moved.
    let below = scan.inits.values().copied().min().unwrap_or(u64::MAX).min(horizon);
    if below > scan.instances_trimmed {
        d.core.log.trim(&mut ctx, sb, INSTANCES, SeqNum(below)).await?;
        // The results that carry APPENDED go with the INSTANCES stream.
        d.core.log.trim(&mut ctx, sb, APPENDED, SeqNum(below)).await?;
        scan.instances_trimmed = below;
    }
    // The past stays readable for `history_kept_ms`: the floor is logged before
    // anything below it goes, so a read as of an older seqnum is refused, not wrong.
    let floor = scan.history_floor(now, next, d.core.config.history_kept_ms).min(horizon);
    if floor > scan.floor {
        let at = d.core.log.append(&mut ctx, sb, &[HISTORY], record::encode(&floor)).await?;
        scan.floor = floor;
        // Only the newest floor counts: the stream is trimmed below it now and then
        // (each trim is a metalog command).
        scan.floors += 1;
        if scan.floors >= FLOORS_PER_TRIM {
            d.core.log.trim(&mut ctx, sb, HISTORY, at).await?;
            scan.floors = 0;
        }
    }
    for table in d.core.tables(book).await? {
        collect_table(d, &mut ctx, book, &table, floor, &mut done).await?;
        // What write-optimized and symmetric writes replaced, kept for reads as of a
        // seqnum (`inspect/state.rs`): only the floor needs it.
        done.replaced += d.core.store.trim_replaced(&store_table(book, &table), floor).await?;
    }
    collect_libraries(d, &mut ctx, book, floor, next, &mut scan.libraries, &mut done).await?;
    if done != Collected::default() {
        tracing::debug!(book = book.0, ?done, "collected");
    }
    Ok(done)
}

/// A future that is pending once (waking its task at once), so that a long loop of
/// calls that do not wait lets other tasks run: any executor's `yield_now`.
struct YieldNow(bool);

impl std::future::Future for YieldNow {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// An object's store table, key and write log.
struct Object<'a> {
    st: &'a str,
    key: &'a [u8],
    tag: Tag,
}

/// Deletes `versions` of `object` (and empties the list). Before the first delete of
/// an object (`remarked` says whether it came), stores the marker of `keep`, the write
/// that stays visible, if the record carries the value: only an object's first write
/// on a node stores a marker (`Instance::store_pending`), so `keep` most likely has
/// none, and deleting the versions before it would leave the object none, invisible to
/// the next collection and to a switch's migration. The page's sync makes it durable
/// with the deletes (a machine crash before it loses the deletes too).
async fn delete(
    d: &Durable,
    object: &Object<'_>,
    keep: &Written,
    remarked: &mut bool,
    versions: &mut Vec<u64>,
    done: &mut Collected,
) -> Result<(), Abort> {
    if versions.is_empty() {
        return Ok(());
    }
    if let (false, Some(value)) = (*remarked, &keep.value) {
        let marker = VersionPut {
            table: object.st.to_string(),
            key: Bytes::copy_from_slice(object.key),
            version: keep.version,
            value: value.clone(),
            marker: true,
        };
        d.core.store.put_versions(vec![marker], false).await?;
    }
    *remarked = true;
    done.versions += d.core.store.delete_versions(object.st, object.key, std::mem::take(versions)).await?;
    Ok(())
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
        let keys = d.core.store.list_keys(&st, Family::Versions, after.as_deref(), PAGE).await?;
        // Where each write log of the page is trimmed to, once its versions are gone.
        let mut trims = Vec::new();
        for key in &keys {
            let Some(keep) = visible_write(&d.core, ctx, book, table, key, horizon).await? else { continue };
            // `keep` is the last record at or before the horizon, or the write that a
            // voided migration record just after it defers to: either way, what
            // follows it stays, so every reader at or past the horizon reads as before.
            // The records before it go, with the versions they name (each record names
            // a version of its own), up to the first record of another object.
            // The versions go in batches of `DELETES_MAX` (one store write a batch, not
            // one a version), all before the one trim of the records that name them.
            let object = Object { st: &st, key, tag: d.core.tags.object(table, key) };
            let mut at = SeqNum(0);
            let (mut versions, mut trim_to, mut remarked) = (Vec::new(), None, false);
            loop {
                let written = match d.core.log.read_next(ctx, shadow(book), object.tag, at).await? {
                    Some(r) if r.seqnum.0 < keep.seqnum => record::write_in(&r.data, table, key)?.map(|w| (r.seqnum.0, w)),
                    _ => None,
                };
                let Some((seqnum, w)) = written else { break };
                if w.version != keep.written.version {
                    versions.push(w.version);
                }
                trim_to = Some(seqnum + 1);
                at = SeqNum(seqnum + 1);
                if versions.len() >= DELETES_MAX {
                    delete(d, &object, &keep.written, &mut remarked, &mut versions, done).await?;
                } else if versions.len() % 64 == 0 {
                    // Reads that the index and the record cache answer in place never
                    // wait: let the invocations sharing this thread run.
                    YieldNow(false).await;
                }
            }
            delete(d, &object, &keep.written, &mut remarked, &mut versions, done).await?;
            if let Some(point) = trim_to {
                trims.push((object.tag, point));
            }
        }
        // The deletes become durable, with one sync for the page, before any record
        // naming them goes: a machine crash in between would bring back versions that
        // no record names, which no collection would find again.
        if !trims.is_empty() {
            d.core.store.sync().await?;
        }
        for (tag, point) in trims {
            d.core.log.trim(ctx, shadow(book), tag, SeqNum(point)).await?;
            done.write_logs += 1;
        }
        match keys.last() {
            Some(last) => after = Some(last.clone()),
            None => return Ok(()),
        }
    }
}

/// Streams one collection checkpoints at most; the others wait for the next one.
const STREAMS_MAX: usize = 10_000;

/// A stream of the libraries, as its records name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stream {
    Object(String),
    Shard(String, u64),
    Lock(LockId),
}

impl Stream {
    fn of(step: &Step) -> Vec<Stream> {
        match step {
            Step::ObjectWrite(kind::ObjectWrite { object, .. }) => vec![Stream::Object(object.clone())],
            Step::TxnCommit(kind::TxnCommit { writes, .. }) => writes.iter().map(|(o, _)| Stream::Object(o.clone())).collect(),
            Step::QueuePush(kind::QueuePush { queue, shard, .. })
            | Step::QueuePop(kind::QueuePop { queue, shard, .. })
            | Step::QueuePopMany(kind::QueuePopMany { queue, shard, .. }) => {
                vec![Stream::Shard(queue.clone(), *shard)]
            }
            Step::LockTry(kind::LockTry { lock, .. }) | Step::LockRelease(kind::LockRelease { lock, .. }) => {
                vec![Stream::Lock(lock.clone())]
            }
            // Small pushes ride a record of their pusher's step log.
            Step::Group(kind::Group { steps }) => steps.iter().flat_map(Stream::of).collect(),
            _ => Vec::new(),
        }
    }

    fn tag(&self, d: &Durable) -> Tag {
        match self {
            Stream::Object(o) => d.core.tags.bokistore(o),
            Stream::Shard(q, s) => d.core.tags.queue_shard(q, *s),
            Stream::Lock(l) => d.core.tags.lock(l),
        }
    }

    /// The stream's state after its records at or below `x`, encoded as its aux-data
    /// views are, and where the stream may be trimmed to.
    async fn checkpoint(&self, d: &Durable, ctx: &mut Context, book: BookId, x: u64) -> Result<(Bytes, u64), Abort> {
        match self {
            Stream::Object(o) => {
                let view = crate::objects::view_at(&d.core, ctx, book, o, x).await?;
                let views = vec![(o.clone(), view.text().to_owned())];
                Ok((record::encode(&AuxView { committed: None, views }), x + 1))
            }
            Stream::Shard(q, s) => {
                let view = crate::queues::shard_at(&d.core, ctx, book, q, *s, x).await?;
                // A pop takes the oldest pending push, and finds the next one after it.
                let below = view.head.map_or(x + 1, |(head, _)| head.min(x + 1));
                Ok((crate::queues::ShardView { popped: None, ..view }.encode(), below))
            }
            Stream::Lock(l) => Ok((crate::locks::checkpoint_at(&d.core, ctx, book, l, x).await?, x + 1)),
        }
    }
}

/// What a book's collections read of its LIBRARIES stream and did not collect yet, so
/// that each reads only what is new (a root that stays open a long time holds the
/// horizon, and with it `x`, back; without this every collection would read everything
/// since). Lost with the node or the book, and then read again from the stream's start.
#[derive(Default)]
pub(crate) struct LibraryWalk {
    /// The next seqnum to read for commits.
    commits_at: u64,
    /// Commits read and not collected: their seqnum and start.
    commits: Vec<(u64, u64)>,
    /// The next seqnum to read for streams (behind `commits_at` once `streams` was full).
    streams_at: u64,
    /// The last record whose streams are in `streams`.
    taken: Option<u64>,
    /// Each stream named by a record taken and not collected: a seqnum at or below the
    /// first such record, and the last one.
    streams: BTreeMap<Stream, (u64, u64)>,
    /// Where LIBRARIES was trimmed to (each trim is a metalog command: only when it moves).
    trimmed: u64,
}

/// Checkpoints and trims the streams of objects, queue shards and locks (module doc).
/// `next` is the scan's position in INSTANCES: every root that finished, finished below it.
async fn collect_libraries(
    d: &Durable,
    ctx: &mut Context,
    book: BookId,
    horizon: u64,
    next: u64,
    walk: &mut LibraryWalk,
    done: &mut Collected,
) -> Result<(), Abort> {
    let sb = shadow(book);
    // The commits up to `next`, and the streams of the records up to `next` as far as
    // [`STREAMS_MAX`] allows (a prefix: past the first record that would name too
    // many, none is taken).
    let mut full = false;
    let mut at = walk.commits_at.min(walk.streams_at);
    while let Some(r) = d.core.log.read_next(ctx, sb, LIBRARIES, SeqNum(at)).await? {
        let seqnum = r.seqnum.0;
        if seqnum >= next {
            break;
        }
        let step: Step = record::decode("library record", &r.data)?;
        if seqnum >= walk.commits_at {
            // A commit may ride its invocation's deferred Init (`instance/snapshot.rs`).
            for s in step.as_steps() {
                if let Step::TxnCommit(kind::TxnCommit { start, .. }) = s {
                    walk.commits.push((seqnum, *start));
                }
            }
            walk.commits_at = seqnum + 1;
        }
        if seqnum >= walk.streams_at && !full {
            let named = Stream::of(&step);
            let new = named.iter().filter(|s| !walk.streams.contains_key(s)).count();
            full = walk.streams.len() + new > STREAMS_MAX;
            if !full {
                for stream in named {
                    walk.streams.entry(stream).or_insert((seqnum, seqnum)).1 = seqnum;
                }
                walk.streams_at = seqnum + 1;
                walk.taken = Some(seqnum);
            }
        }
        at = seqnum + 1;
    }
    // The point: at or below the horizon and the last record taken, and no commit at or
    // after it began before it (a re-execution of a root whose commit rode its Init
    // begins that transaction at its start: `instance/snapshot.rs`).
    let Some(mut x) = walk.taken.map(|taken| taken.min(horizon)) else { return Ok(()) };
    loop {
        let earliest = walk.commits.iter().filter(|(c, _)| *c >= x).map(|(_, start)| *start).min();
        match earliest {
            Some(start) if start < x => x = start,
            _ => break,
        }
    }
    let due: Vec<Stream> = walk.streams.iter().filter(|(_, (first, _))| *first <= x).map(|(s, _)| s.clone()).collect();
    let mut batch: Vec<(Tag, Bytes, u64)> = Vec::new();
    let mut bytes = 0;
    for stream in due {
        let (view, below) = stream.checkpoint(d, ctx, book, x).await?;
        if batch.len() + 1 > crate::env::TAGS_MAX || bytes + view.len() > PAYLOAD_MAX - 64 * 1024 {
            checkpoint(d, ctx, book, x, std::mem::take(&mut batch), done).await?;
            bytes = 0;
        }
        bytes += view.len();
        batch.push((stream.tag(d), view, below));
    }
    checkpoint(d, ctx, book, x, batch, done).await?;
    if x + 1 > walk.trimmed {
        d.core.log.trim(ctx, sb, LIBRARIES, SeqNum(x + 1)).await?;
        walk.trimmed = x + 1;
    }
    // A stream collected at `x` with records after it stays, as first named just
    // after `x` (at worst one checkpoint too many later).
    walk.streams.retain(|_, (first, last)| {
        *first = (*first).max(x + 1);
        *last > x
    });
    walk.commits.retain(|(c, _)| *c > x);
    Ok(())
}

/// Appends one checkpoint record of `batch`'s streams at `x`, then trims each stream and
/// its checkpoint stream.
async fn checkpoint(
    d: &Durable,
    ctx: &mut Context,
    book: BookId,
    x: u64,
    batch: Vec<(Tag, Bytes, u64)>,
    done: &mut Collected,
) -> Result<(), Abort> {
    if batch.is_empty() {
        return Ok(());
    }
    let sb = shadow(book);
    let tags: Vec<Tag> = batch.iter().map(|(tag, _, _)| d.core.tags.checkpoint(*tag)).collect();
    let views = batch.iter().map(|(tag, view, _)| (tag.0, view.clone())).collect();
    d.core.log.append(ctx, sb, &tags, record::encode(&Step::Checkpoint(kind::Checkpoint { covers: x, views }))).await?;
    for ((tag, _, below), checkpoints) in batch.into_iter().zip(tags) {
        d.core.log.trim(ctx, sb, tag, SeqNum(below)).await?;
        // Keep the checkpoint that covers most (another collection may have raced this one).
        let kept = crate::replay::checkpoints(&d.core, ctx, book, tag).await?;
        if let Some(best) = kept.iter().max_by_key(|c| c.covers) {
            if kept.first().is_some_and(|c| c.seqnum < best.seqnum) {
                d.core.log.trim(ctx, sb, checkpoints, SeqNum(best.seqnum)).await?;
            }
        }
        done.streams += 1;
    }
    Ok(())
}
