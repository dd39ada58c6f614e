//! The simulated shared log: one physical log, totally ordered, with one index replica
//! per node built on the real [`Index`] (the same code every engine runs), so
//! conditional appends and trims are decided exactly as in a cluster.
//!
//! A request crosses a simulated network (a delay drawn from the seed) before it is
//! ordered; its reply waits until the calling node's replica has applied its position,
//! and reads wait until the replica reaches the caller's context, as the engine's do.
//! Replicas lag behind the log by amounts the harness draws. A request may fail before
//! it takes effect or after (the caller cannot tell), and a crash drops requests still
//! on the network. A restarted node's replica serves no read until it has caught up
//! with the log as it was at the restart (the engine's read floor).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Waker};

use bytes::Bytes;
use tally_log_core::{
    BookId, Cond, Context, Error as LogError, Index, Location, LogId, LogRecord, MetalogPosition, Placement, RecordMeta, SeqNum,
    ShardId, Tag, Term,
};

use crate::env::{BoxFuture, Clock, LogBook, LogResult};

use super::exec::Handle;
use super::Rng;

/// One event of the log, at its position.
#[derive(Clone)]
enum Event {
    Record { seqnum: SeqNum, meta: RecordMeta },
    Trim { book: BookId, tag: Tag, seqnum: SeqNum },
}

struct Replica {
    index: Index,
    /// Events applied.
    applied: usize,
    /// Reads are served only from here on (a restarted node's catch-up).
    floor: usize,
    /// Placements of the records applied, by position (for the appenders' replies).
    placements: BTreeMap<usize, Placement>,
    waiters: Vec<Waker>,
    /// Aux data set on this node (the engine's record cache): lost with the node.
    aux: std::collections::HashMap<SeqNum, Bytes>,
}

impl Replica {
    fn new(floor: usize) -> Replica {
        Replica {
            index: Index::new(),
            applied: 0,
            floor,
            placements: BTreeMap::new(),
            waiters: Vec::new(),
            aux: Default::default(),
        }
    }
}

/// Faults the log injects, per request.
#[derive(Clone, Copy, Debug)]
pub struct LogFaults {
    /// Chance that a request fails before it is ordered.
    pub fail_before: f64,
    /// Chance that a request that took effect reports a failure.
    pub fail_after: f64,
    pub delay_max_ms: u64,
}

pub struct LogState {
    events: Vec<Event>,
    records: BTreeMap<SeqNum, (Vec<Tag>, Bytes)>,
    replicas: BTreeMap<usize, Replica>,
    /// Nodes whose reads are held back, as a partial index's may be (`hold_reads`).
    held: BTreeMap<usize, Held>,
    rng: Rng,
    pub faults: LogFaults,
    /// Requests failed on purpose, and trims ordered.
    pub failures: u64,
    pub appends: u64,
}

/// An index of everything ordered so far; `placed` sees each record that took its place.
fn index_all(s: &LogState, mut placed: impl FnMut(SeqNum, &RecordMeta)) -> Index {
    let mut index = Index::new();
    for (position, event) in s.events.iter().enumerate() {
        if let (Some(Placement::Placed), Event::Record { seqnum, meta }) = (apply_event(&mut index, position, event), event) {
            placed(*seqnum, meta);
        }
    }
    index
}

/// Applies the event at `position` to `index`; a record's placement.
fn apply_event(index: &mut Index, position: usize, event: &Event) -> Option<Placement> {
    match event {
        Event::Record { seqnum, meta } => {
            let location = Location { shard: ShardId(0), local_id: position as u64 };
            Some(index.apply_record(*seqnum, location, meta))
        }
        Event::Trim { book, tag, seqnum } => {
            index.apply_trim(*book, *tag, *seqnum);
            None
        }
    }
}

/// A node's reads held back (`SimLog::hold_reads`): an index at an older position,
/// moved only as far as a reader's context demands.
struct Held {
    index: Index,
    applied: usize,
}

/// The largest record (the engine's default `record_bytes_max`), which this log enforces
/// as the engine does.
const RECORD_BYTES_MAX: usize = 1 << 20;

#[derive(Clone)]
pub struct SimLog {
    pub state: Arc<Mutex<LogState>>,
}

impl SimLog {
    pub fn new(seed: u64, faults: LogFaults) -> SimLog {
        SimLog {
            state: Arc::new(Mutex::new(LogState {
                events: Vec::new(),
                records: BTreeMap::new(),
                replicas: BTreeMap::new(),
                held: BTreeMap::new(),
                rng: Rng::new(seed ^ 0x10c),
                faults,
                failures: 0,
                appends: 0,
            })),
        }
    }

    /// A fresh replica for `node` (at its start or restart).
    pub fn open_replica(&self, node: usize) {
        let mut s = self.state.lock().expect("not poisoned");
        let floor = s.events.len();
        s.replicas.insert(node, Replica::new(floor));
        s.held.remove(&node);
    }

    /// From now on `node`'s reads are served at the position its replica has now, or at
    /// the caller's context if that is later, however far the log goes on: what a node
    /// in partial index mode may answer (its index tier lags behind the appends it
    /// acknowledged). A caller that has not seen an append in its context may not see it.
    #[cfg(test)]
    pub fn hold_reads(&self, node: usize) {
        let mut s = self.state.lock().expect("not poisoned");
        let LogState { events, replicas, held, .. } = &mut *s;
        let Some(r) = replicas.get(&node) else { return };
        let mut index = Index::new();
        for (position, event) in events.iter().enumerate().take(r.applied) {
            apply_event(&mut index, position, event);
        }
        held.insert(node, Held { index, applied: r.applied });
    }

    /// The next offset of `book`'s stream `tag` in everything ordered so far.
    pub fn next_offset(&self, book: BookId, tag: Tag) -> u64 {
        let s = self.state.lock().expect("not poisoned");
        index_all(&s, |_, _| {}).next_offset(book, tag)
    }

    /// Every record that took its place (its condition held), with its book and tags, in
    /// log order: what readers of the log could ever see.
    pub fn placed_records(&self) -> Vec<(BookId, Vec<Tag>, Bytes)> {
        let s = self.state.lock().expect("not poisoned");
        let mut placed = Vec::new();
        index_all(&s, |seqnum, meta| placed.push((meta.book, meta.tags.clone(), s.records[&seqnum].1.clone())));
        placed
    }

    /// The records of each of `streams` (book and tag) that a reader could still read
    /// (not trimmed), in log order, as everything ordered so far gives them.
    pub fn readable(&self, streams: &[(BookId, Tag)]) -> Vec<Vec<Bytes>> {
        let s = self.state.lock().expect("not poisoned");
        let index = index_all(&s, |_, _| {});
        let read = |&(book, tag): &(BookId, Tag)| {
            let mut records = Vec::new();
            let mut at = SeqNum(0);
            while let Some(found) = index.read_next(book, tag, at) {
                records.push(s.records[&found.seqnum].1.clone());
                match found.seqnum.0.checked_add(1) {
                    Some(next) => at = SeqNum(next),
                    None => break,
                }
            }
            records
        };
        streams.iter().map(read).collect()
    }

    /// Applies up to `count` more events on `node`'s replica (all with `usize::MAX`).
    pub fn apply(&self, node: usize, count: usize) {
        let mut s = self.state.lock().expect("not poisoned");
        let LogState { events, replicas, .. } = &mut *s;
        let Some(r) = replicas.get_mut(&node) else { return };
        let end = events.len().min(r.applied.saturating_add(count));
        if end == r.applied {
            return;
        }
        for (position, event) in events.iter().enumerate().take(end).skip(r.applied) {
            if let Some(placement) = apply_event(&mut r.index, position, event) {
                r.placements.insert(position, placement);
            }
        }
        r.applied = end;
        for w in r.waiters.drain(..) {
            w.wake();
        }
    }

    /// The log as `node` sees it, with the platform's privileges.
    pub fn node(&self, node: usize, handle: Handle) -> NodeLog {
        NodeLog { log: self.clone(), node, handle }
    }
}

fn position(ctx: &Context) -> usize {
    ctx.position(LogId(0)).index as usize
}

fn moved(ctx: &mut Context, position: usize) {
    ctx.advance(LogId(0), MetalogPosition::new(Term(1), position as u64));
}

/// A node's handle on the simulated log.
#[derive(Clone)]
pub struct NodeLog {
    log: SimLog,
    node: usize,
    handle: Handle,
}

/// Waits until `node`'s replica has applied `needed` events (and its floor).
struct Applied {
    log: SimLog,
    node: usize,
    needed: usize,
}

impl Future for Applied {
    type Output = LogResult<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<LogResult<()>> {
        let mut s = self.log.state.lock().expect("not poisoned");
        let Some(r) = s.replicas.get_mut(&self.node) else {
            return Poll::Ready(Err(LogError::Stopped));
        };
        if r.applied >= self.needed.max(r.floor) {
            return Poll::Ready(Ok(()));
        }
        r.waiters.push(cx.waker().clone());
        Poll::Pending
    }
}

enum Request {
    Append { book: BookId, tags: Vec<Tag>, data: Bytes, cond: Option<Cond>, unchanged: Vec<Cond> },
    Trim { book: BookId, tag: Tag, seqnum: SeqNum },
}

impl NodeLog {
    /// The network before the log, and the chance of failing there.
    async fn send(&self) -> LogResult<()> {
        let (delay, fail) = {
            let mut s = self.log.state.lock().expect("not poisoned");
            let max = s.faults.delay_max_ms;
            let fail = s.faults.fail_before;
            let delay = s.rng.below(max + 1);
            let fail = s.rng.chance(fail);
            if fail {
                s.failures += 1;
            }
            (delay, fail)
        };
        self.handle.sleep(delay).await;
        if fail {
            return Err(LogError::Unavailable("simulated: the request was lost".into()));
        }
        Ok(())
    }

    /// Orders a request; returns its position.
    fn order(&self, request: Request) -> usize {
        let mut s = self.log.state.lock().expect("not poisoned");
        let position = s.events.len();
        match request {
            Request::Append { book, mut tags, data, cond, unchanged } => {
                tags.retain(|&t| t != Tag::ALL);
                if let Some(c) = cond {
                    tags.push(c.tag);
                }
                tags.sort_unstable();
                tags.dedup();
                let seqnum = SeqNum::new(Term(1), LogId(0), position as u64);
                s.records.insert(seqnum, (tags.clone(), data.clone()));
                s.events.push(Event::Record { seqnum, meta: RecordMeta { book, tags, cond, unchanged } });
                s.appends += 1;
            }
            Request::Trim { book, tag, seqnum } => s.events.push(Event::Trim { book, tag, seqnum }),
        }
        position
    }

    /// The chance that a request that took effect reports a failure anyway.
    fn fail_after(&self) -> bool {
        let mut s = self.log.state.lock().expect("not poisoned");
        let p = s.faults.fail_after;
        let fail = s.rng.chance(p);
        if fail {
            s.failures += 1;
        }
        fail
    }

    async fn append_inner(&self, ctx: &mut Context, request: Request) -> LogResult<SeqNum> {
        if let Request::Append { tags, data, .. } = &request {
            if tags.len() > crate::env::TAGS_MAX {
                return Err(LogError::InvalidArgument(format!("{} tags, at most {} allowed", tags.len(), crate::env::TAGS_MAX)));
            }
            if data.len() > RECORD_BYTES_MAX {
                let limit = RECORD_BYTES_MAX;
                return Err(LogError::TooLarge { what: "record".into(), size: data.len(), limit });
            }
        }
        self.send().await?;
        let position = self.order(request);
        Applied { log: self.log.clone(), node: self.node, needed: position + 1 }.await?;
        let placement = {
            let s = self.log.state.lock().expect("not poisoned");
            s.replicas.get(&self.node).and_then(|r| r.placements.get(&position).copied())
        };
        if self.fail_after() {
            return Err(LogError::Unavailable("simulated: the reply was lost".into()));
        }
        moved(ctx, position + 1);
        match placement {
            Some(Placement::Placed) => Ok(SeqNum::new(Term(1), LogId(0), position as u64)),
            Some(Placement::CondFailed { holder }) => Err(LogError::Conflict { holder }),
            None => Err(LogError::Stopped),
        }
    }

    async fn read(&self, ctx: &mut Context, book: BookId, tag: Tag, at: SeqNum, next: bool) -> LogResult<Option<LogRecord>> {
        self.send().await?;
        let needed = position(ctx);
        Applied { log: self.log.clone(), node: self.node, needed }.await?;
        let mut s = self.log.state.lock().expect("not poisoned");
        let LogState { events, records, replicas, held, .. } = &mut *s;
        let r = replicas.get(&self.node).ok_or(LogError::Stopped)?;
        let (index, served_at) = match held.get_mut(&self.node) {
            Some(h) => {
                for (position, event) in events.iter().enumerate().take(needed).skip(h.applied) {
                    apply_event(&mut h.index, position, event);
                }
                h.applied = h.applied.max(needed);
                (&h.index, h.applied)
            }
            None => (&r.index, r.applied),
        };
        let found = if next { index.read_next(book, tag, at) } else { index.read_prev(book, tag, at) };
        let record = found.map(|f| {
            let (tags, data) = records.get(&f.seqnum).cloned().expect("indexed records are stored");
            LogRecord { seqnum: f.seqnum, tags, data, aux: r.aux.get(&f.seqnum).cloned() }
        });
        drop(s);
        moved(ctx, served_at);
        Ok(record)
    }
}

impl LogBook for NodeLog {
    fn append<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
    ) -> BoxFuture<'a, LogResult<SeqNum>> {
        Box::pin(self.append_inner(ctx, Request::Append { book, tags: tags.to_vec(), data, cond: None, unchanged: vec![] }))
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
        let cond = Some(Cond { tag: cond_tag, position: cond_position });
        Box::pin(self.append_inner(ctx, Request::Append { book, tags: tags.to_vec(), data, cond, unchanged: vec![] }))
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
        let (cond, unchanged) = (Some(cond), unchanged.to_vec());
        Box::pin(self.append_inner(ctx, Request::Append { book, tags: tags.to_vec(), data, cond, unchanged }))
    }

    fn read_next<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        min: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>> {
        Box::pin(self.read(ctx, book, tag, min, true))
    }

    fn read_prev<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>> {
        Box::pin(self.read(ctx, book, tag, max, false))
    }

    fn set_aux_data<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        seqnum: SeqNum,
        aux: Bytes,
    ) -> BoxFuture<'a, LogResult<()>> {
        Box::pin(async move {
            let needed = position(ctx);
            Applied { log: self.log.clone(), node: self.node, needed }.await?;
            if self.fail_after() {
                return Err(LogError::Unavailable("simulated: aux data dropped".into()));
            }
            let mut s = self.log.state.lock().expect("not poisoned");
            let live = s
                .replicas
                .get(&self.node)
                .is_some_and(|r| r.index.read_next(book, Tag::ALL, seqnum).is_some_and(|f| f.seqnum == seqnum));
            if !live {
                return Err(LogError::InvalidArgument("no live record of the book there".into()));
            }
            s.replicas.get_mut(&self.node).ok_or(LogError::Stopped)?.aux.insert(seqnum, aux);
            Ok(())
        })
    }

    fn trim<'a>(&'a self, ctx: &'a mut Context, book: BookId, tag: Tag, seqnum: SeqNum) -> BoxFuture<'a, LogResult<()>> {
        Box::pin(async move {
            self.send().await?;
            let position = self.order(Request::Trim { book, tag, seqnum });
            Applied { log: self.log.clone(), node: self.node, needed: position + 1 }.await?;
            if self.fail_after() {
                return Err(LogError::Unavailable("simulated: the reply was lost".into()));
            }
            moved(ctx, position + 1);
            Ok(())
        })
    }
}

/// What a guest's log client may do, as the real user client enforces: no platform
/// book, no platform tag.
pub fn user_trim<'a>(
    log: &'a NodeLog,
    ctx: &'a mut Context,
    book: BookId,
    tag: Tag,
    seqnum: SeqNum,
) -> BoxFuture<'a, LogResult<()>> {
    if book.is_reserved() || tag.is_reserved() {
        return Box::pin(std::future::ready(Err(LogError::InvalidArgument("reserved for the platform".into()))));
    }
    log.trim(ctx, book, tag, seqnum)
}
