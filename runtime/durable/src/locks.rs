//! Locks (BokiFlow, Boki §5.1, Figure 7): a lock is a register over its stream, holding
//! an instance ID or nothing. Every try and release names `prev`, the last effective
//! record its maker saw; replaying the stream, a record is effective only if its `prev`
//! is the last effective record so far, so of tries made concurrently on the same
//! state the first in the log wins, and the `prev` pointers form one linearizable chain
//! of alternating takes and releases.
//!
//! Tries and releases are steps of the holder's step log, so a re-execution finds them
//! and their outcomes; the holder is the instance, which holds its locks across crashes
//! and re-executions and releases the ones it still holds before its result
//! (`Instance::log_result`). A release rides the holder's next record (often its
//! Result), so a lock's stream may hold groups. A record in two locks' streams keeps a
//! view of each in its aux data (`LockViews`), one also in a queue shard's none
//! (`Step::in_other_library_streams`). A try is appended only when its maker saw the
//! lock free (or its wait is up), so waiters append nothing. One made on a lock seen
//! free rides the holder's next record, as a release does (a guest's tries in a row are
//! one append, with what that record holds), on the condition that the lock's stream
//! still holds the records its view counted (`LockView::records`): so it is effective
//! where it lands. A failed condition ends the attempt (`Superseded`: its guest went on
//! holding a lock it may not get), and the next one logs each try at once
//! (`Instance::take_locks_eagerly`). Waiters wait on this node's releases and look at
//! the log every [`POLL_MS`] for others'. A waiter whose whole wait saw one holder runs
//! the holder's root again here (at most every `reexecute_after_ms` per holder and
//! node): should its node have died, the recovery scan may not get to it soon (it
//! tracks the oldest unfinished roots first, which may be the waiters), and a live
//! holder's run is a peer like any other.
//!
//! Keyed invocations use these locks too: an invocation addressed to a key (its `InitKeyed`
//! record carries the key) runs under `LockId::Key` of its function and key, unless it is
//! shared. It takes the lock before its guest runs, waiting in place a while and then
//! suspending to try again (`Instance::enter_key`).

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tally_log_core::{BookId, Context, Tag};

use crate::abort::Abort;
use crate::core::Core;
use crate::error::Error;
use crate::id::InstanceId;
use crate::record::kind;
use crate::record::{self, LockId, Step};
use crate::replay;

/// The longest lock name, in bytes.
pub const LOCK_NAME_MAX: usize = 256;
/// How often a waiting try looks at the log for other nodes' releases.
pub const POLL_MS: u64 = 20;

pub fn check_name(lock: &str) -> Result<(), Error> {
    crate::objects::check_library_name("a lock", lock, LOCK_NAME_MAX)
}

/// The key under which this node's waiting tries of a lock are woken by its releases.
pub(crate) fn wake_key(book: BookId, lock: &LockId) -> String {
    match lock {
        LockId::Named(name) => format!("lock/{}/{name}", book.0),
        LockId::Key { function, key } => format!("key/{}/{}/{function}/{key}", book.0, function.len()),
    }
}

/// A lock after one of its records: the last effective record (0: none) and the holder.
/// Cached in the record's aux data (as one of its [`LockViews`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockView {
    pub tail: u64,
    pub holder: Option<String>,
    /// The holder's root invocation.
    pub root: Option<InstanceId>,
    /// The records of the lock's stream up to this one, trimmed ones included: a try
    /// made on this view may ride a later record on the condition that the stream still
    /// holds exactly as many (`Instance::lock_acquire`). `None` from a view an earlier
    /// version cached, which did not count.
    pub records: Option<u64>,
}

/// What a record of locks' streams caches in its aux data, and a checkpoint of a lock's
/// stream holds: the view of each lock (by its stream's tag) after the record. A record
/// in two locks' streams (two tries, two releases) keeps both, each added by a reader
/// of its lock.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockViews {
    pub views: Vec<(u64, LockView)>,
}

/// [`LockView`] as versions before `records` cached it, alone in a record's aux data
/// (only a record in one lock's stream kept one) and in checkpoints.
#[derive(Deserialize)]
struct LockViewV1 {
    tail: u64,
    holder: Option<String>,
    root: Option<InstanceId>,
}

impl LockViews {
    /// The view of the lock of stream `tag` in `bytes` (aux data or a checkpoint).
    fn view_of(bytes: &[u8], tag: Tag) -> Option<LockView> {
        match record::decode::<LockViews>("lock views", bytes) {
            Ok(views) => views.views.into_iter().find(|(t, _)| *t == tag.0).map(|(_, v)| v),
            Err(_) => record::decode::<LockViewV1>("lock view", bytes).ok().map(|v| LockView {
                tail: v.tail,
                holder: v.holder,
                root: v.root,
                records: None,
            }),
        }
    }

    /// `aux` (a record's aux data, if any) with `view` as the view of `tag`'s lock.
    fn with(aux: Option<&[u8]>, tag: Tag, view: LockView) -> Bytes {
        let mut views = aux.and_then(|a| record::decode::<LockViews>("lock views", a).ok()).unwrap_or_default();
        views.views.retain(|(t, _)| *t != tag.0);
        views.views.push((tag.0, view));
        record::encode(&views)
    }
}

/// Whether a record's step is or holds a try or a release of `lock` (a release rides
/// its holder's next record, in a group: `Instance::lock_release`).
fn concerns(step: &Step, lock: &LockId) -> bool {
    match step {
        Step::Group(kind::Group { steps }) => steps.iter().any(|s| concerns(s, lock)),
        Step::LockTry(kind::LockTry { lock: l, .. }) | Step::LockRelease(kind::LockRelease { lock: l, .. }) => l == lock,
        _ => false,
    }
}

/// Whether `step` is a try or a release of any lock.
fn is_lock_step(step: &Step) -> bool {
    matches!(step, Step::LockTry(kind::LockTry { .. }) | Step::LockRelease(kind::LockRelease { .. }))
}

/// The lock after its last record at or below `at`.
pub(crate) async fn lock_at(core: &Core, ctx: &mut Context, book: BookId, lock: &LockId, at: u64) -> Result<LockView, Abort> {
    let tag = core.tags.lock(lock);
    let cached = |a: &[u8]| LockViews::view_of(a, tag);
    let (base, mut newer) = replay::since_view(core, ctx, book, tag, at, |s| concerns(s, lock), cached, false, None).await?;
    let mut view = base.unwrap_or_else(|| LockView { records: Some(0), ..LockView::default() });
    let mut newest = None;
    while let Some((r, step)) = newer.next(core, ctx, book).await? {
        // Every record of the stream concerns the lock (its tag is the lock's alone).
        view.records = view.records.map(|n| n + 1);
        // A record also in a queue shard's stream keeps no view; one in other locks'
        // streams keeps theirs beside this one's.
        let alone = !step.in_other_library_streams(is_lock_step);
        for step in step.into_steps().into_iter().filter(|s| concerns(s, lock)) {
            view = after(view, r.seqnum.0, step);
        }
        newest = alone.then_some((r.seqnum, r.aux));
    }
    if let Some((seqnum, aux)) = newest {
        replay::cache(core, ctx, book, seqnum, LockViews::with(aux.as_deref(), tag, view.clone())).await;
    }
    Ok(view)
}

/// The checkpoint of `lock`'s stream at `at` (`gc.rs`).
pub(crate) async fn checkpoint_at(core: &Core, ctx: &mut Context, book: BookId, lock: &LockId, at: u64) -> Result<Bytes, Abort> {
    let view = lock_at(core, ctx, book, lock, at).await?;
    Ok(LockViews::with(None, core.tags.lock(lock), view))
}

/// The lock after `step`, a try or a release of it in the record `seqnum`: effective
/// only if it names the last effective record, and a try only of a free lock, a
/// release only by the holder.
fn after(view: LockView, seqnum: u64, step: Step) -> LockView {
    match step {
        Step::LockTry(kind::LockTry { holder, root, prev, .. }) if prev == view.tail && view.holder.is_none() => {
            LockView { tail: seqnum, holder: Some(holder), root: Some(root), records: view.records }
        }
        Step::LockRelease(kind::LockRelease { holder, prev, .. })
            if prev == view.tail && view.holder.as_ref() == Some(&holder) =>
        {
            LockView { tail: seqnum, holder: None, root: None, records: view.records }
        }
        _ => view,
    }
}
