//! Spans of the log's own work in a caller's trace: the engine's for each traced request
//! (`log.append`, `log.read`, ..., and `log.order`, from a record's replication until
//! the metalog entry that ordered it reached the engine: the storage nodes' progress and
//! the sequencers' commit) and the storage nodes' for each traced record (`log.store`:
//! its write, the group commit and the fsync that made it durable, with how many records
//! that commit covered).
//!
//! A caller traces its calls by running them in [`traced`]; the client sends the span
//! with the request, the engine's driver sends it with the records to the storage nodes
//! (`Message::Replicate::traces`, over QUIC between processes), and each driver hands its
//! finished spans to the node's [`SpanSink`] (set once the node has one: [`SpanSinks`]).
//! Drivers keep what they need in bounded maps beside the state machines, which neither
//! see nor decide anything of it. With no sink set a request carries no span and no
//! driver keeps anything.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

pub use tally_log_core::SpanRef;
use tally_log_core::{EngineAction, Location, Message, OpId, Record, Reply, Request};

/// One finished span of the log's work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSpan {
    pub name: &'static str,
    /// The span it nests under: the caller's, or the engine's for the storage nodes'.
    pub parent: SpanRef,
    pub span: [u8; 8],
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub attributes: Vec<(&'static str, u64)>,
}

/// Where a node's drivers hand their spans (the node's exporter).
pub trait SpanSink: Send + Sync {
    fn span(&self, span: LogSpan);
}

/// A node's sink, set once when it has one (a function node's exporter starts after its
/// log): clones share it.
#[derive(Clone, Default)]
pub struct SpanSinks(Arc<OnceLock<Arc<dyn SpanSink>>>);

impl SpanSinks {
    /// Sets the sink; a second call leaves the first.
    pub fn set(&self, sink: Arc<dyn SpanSink>) {
        let _ = self.0.set(sink);
    }

    pub fn get(&self) -> Option<&Arc<dyn SpanSink>> {
        self.0.get()
    }
}

impl std::fmt::Debug for SpanSinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "SpanSinks(set)" } else { "SpanSinks(unset)" })
    }
}

tokio::task_local! {
    static CALLER: SpanRef;
}

/// Runs `fut` with its log calls traced under `parent` (none: as they are).
pub async fn traced<F: Future>(parent: Option<SpanRef>, fut: F) -> F::Output {
    match parent {
        Some(parent) => CALLER.scope(parent, fut).await,
        None => fut.await,
    }
}

/// The span the current task's log calls nest under, if it traces them.
pub(crate) fn caller() -> Option<SpanRef> {
    CALLER.try_with(|c| *c).ok()
}

pub(crate) fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// A fresh random trace ID (never all zeros, which W3C reserves).
pub fn trace_id() -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&random_u64().to_be_bytes());
    out[8..].copy_from_slice(&random_u64().to_be_bytes());
    out
}

/// A fresh random span ID (never all zeros).
pub fn span_id() -> [u8; 8] {
    random_u64().to_be_bytes()
}

/// SplitMix64 over a per-thread state seeded at random: no lock, no shared cache line.
fn random_u64() -> u64 {
    use std::cell::Cell;
    use std::hash::{BuildHasher, RandomState};
    thread_local! {
        static STATE: Cell<u64> = Cell::new(RandomState::new().hash_one(std::thread::current().id()) | 1);
    }
    STATE.with(|s| {
        let x = s.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        s.set(x);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)).max(1)
    })
}

/// Entries a driver keeps for spans still open at most: past it, the oldest half goes
/// (their spans are never sent, as a full export queue drops them).
const OPEN_MAX: usize = 16_384;

/// A driver's open spans by key, bounded by [`OPEN_MAX`].
pub(crate) struct Open<K, V> {
    map: HashMap<K, (u64, V)>,
    next: u64,
}

impl<K: Hash + Eq, V> Default for Open<K, V> {
    fn default() -> Self {
        Open { map: HashMap::new(), next: 0 }
    }
}

impl<K: Hash + Eq, V> Open<K, V> {
    pub(crate) fn insert(&mut self, key: K, value: V) {
        if self.map.len() >= OPEN_MAX {
            let cut = self.next - (OPEN_MAX as u64) / 2;
            self.map.retain(|_, (at, _)| *at >= cut);
        }
        self.map.insert(key, (self.next, value));
        self.next += 1;
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        self.map.remove(key).map(|(_, v)| v)
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|(_, v)| v)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// What an engine's driver keeps for the spans of traced calls.
pub(crate) struct EngineTraces {
    sinks: SpanSinks,
    /// Traced calls in flight: the caller's span, the call's own, when it came, its name.
    calls: Open<OpId, (SpanRef, [u8; 8], u64, &'static str)>,
    /// Traced records replicated and not yet ordered: the call's span, since when.
    located: Open<Location, (SpanRef, u64)>,
}

impl EngineTraces {
    pub(crate) fn new(sinks: SpanSinks) -> EngineTraces {
        EngineTraces { sinks, calls: Open::default(), located: Open::default() }
    }

    /// A call the engine takes as `op`.
    pub(crate) fn submitted(&mut self, op: OpId, request: &Request, parent: Option<SpanRef>) {
        let (Some(parent), Some(_)) = (parent, self.sinks.get()) else { return };
        let name = match request {
            Request::Append { cond: None, unchanged, .. } if unchanged.is_empty() => "log.append",
            Request::Append { .. } => "log.cond_append",
            Request::ReadNext { .. } => "log.read_next",
            Request::ReadPrev { .. } => "log.read_prev",
            Request::Trim { .. } => "log.trim",
            Request::SetAux { .. } => "log.set_aux",
        };
        self.calls.insert(op, (parent, span_id(), unix_ns(), name));
    }

    /// The engine's actions, before the driver performs them: the traced records'
    /// spans go into the `Replicate` messages, and the spans that end here to the sink.
    pub(crate) fn acting(&mut self, actions: &mut [EngineAction]) {
        let Some(sink) = self.sinks.get().cloned() else { return };
        if self.calls.is_empty() && self.located.is_empty() {
            return;
        }
        let now = unix_ns();
        for action in actions.iter() {
            if let EngineAction::Assigned { op, location, .. } = action {
                if let Some((parent, span, ..)) = self.calls.get(op) {
                    self.located.insert(*location, (SpanRef { trace: parent.trace, span: *span }, now));
                }
            }
        }
        for action in actions.iter_mut() {
            match action {
                EngineAction::Send(_, Message::Replicate { shard, records, traces }) if !self.located.is_empty() => {
                    let traced = records.iter().filter_map(|(local_id, _)| {
                        self.located.get(&Location { shard: *shard, local_id: *local_id }).map(|(r, _)| (*local_id, *r))
                    });
                    traces.extend(traced);
                }
                EngineAction::Indexed { records, .. } if !self.located.is_empty() => {
                    for r in records.iter() {
                        let Some((parent, since)) = self.located.remove(&r.location) else { continue };
                        let attributes = vec![("tally.log.seqnum", r.seqnum.0)];
                        let span = LogSpan {
                            name: "log.order",
                            parent,
                            span: span_id(),
                            start_unix_ns: since,
                            end_unix_ns: now,
                            attributes,
                        };
                        sink.span(span);
                    }
                }
                EngineAction::Complete { op, result, log, .. } => {
                    let Some((parent, span, start, name)) = self.calls.remove(op) else { continue };
                    let mut attributes = vec![("tally.log.id", u64::from(log.0))];
                    if let Ok(Reply::Appended(seqnum)) = result {
                        attributes.push(("tally.log.seqnum", seqnum.0));
                    }
                    sink.span(LogSpan { name, parent, span, start_unix_ns: start, end_unix_ns: now, attributes });
                }
                _ => {}
            }
        }
    }
}

/// What a storage node's driver keeps for the spans of traced records.
pub(crate) struct StorageTraces {
    sinks: SpanSinks,
    /// Traced records received and not yet written.
    records: Open<Location, SpanRef>,
    /// Writes of traced records in group commit: their spans, since when, records.
    writes: Open<u64, (Vec<SpanRef>, u64, u64)>,
}

impl StorageTraces {
    pub(crate) fn new(sinks: SpanSinks) -> StorageTraces {
        StorageTraces { sinks, records: Open::default(), writes: Open::default() }
    }

    pub(crate) fn received(&mut self, msg: &Message) {
        let Message::Replicate { shard, traces, .. } = msg else { return };
        if traces.is_empty() || self.sinks.get().is_none() {
            return;
        }
        for (local_id, span) in traces {
            self.records.insert(Location { shard: *shard, local_id: *local_id }, *span);
        }
    }

    /// The node writes `records` as `batch`.
    pub(crate) fn writing(&mut self, batch: u64, records: &[(Location, Record)]) {
        if self.records.is_empty() {
            return;
        }
        let spans: Vec<SpanRef> = records.iter().filter_map(|(location, _)| self.records.remove(location)).collect();
        if !spans.is_empty() {
            self.writes.insert(batch, (spans, unix_ns(), records.len() as u64));
        }
    }

    /// `batches` are durable.
    pub(crate) fn written(&mut self, batches: &[u64]) {
        let Some(sink) = self.sinks.get() else { return };
        if self.writes.is_empty() {
            return;
        }
        let now = unix_ns();
        for batch in batches {
            let Some((spans, since, records)) = self.writes.remove(batch) else { continue };
            for parent in spans {
                let attributes = vec![("tally.log.batch_records", records)];
                sink.span(LogSpan {
                    name: "log.store",
                    parent,
                    span: span_id(),
                    start_unix_ns: since,
                    end_unix_ns: now,
                    attributes,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_spans_stay_bounded_and_keep_the_newest() {
        let mut open = Open::default();
        for i in 0..(OPEN_MAX as u64 * 3) {
            open.insert(i, i);
        }
        assert!(open.map.len() <= OPEN_MAX);
        assert_eq!(open.get(&(OPEN_MAX as u64 * 3 - 1)), Some(&(OPEN_MAX as u64 * 3 - 1)));
        assert_eq!(open.get(&0), None);
    }

    #[test]
    fn span_ids_differ_and_are_never_zero() {
        let ids: std::collections::HashSet<[u8; 8]> = (0..10_000).map(|_| span_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(!ids.contains(&[0; 8]));
    }

    #[tokio::test]
    async fn a_traced_future_sees_its_parent_and_nothing_leaks_out() {
        let parent = SpanRef { trace: [1; 16], span: [2; 8] };
        assert_eq!(traced(Some(parent), async { caller() }).await, Some(parent));
        assert_eq!(traced(None, async { caller() }).await, None);
        assert_eq!(caller(), None);
    }
}
