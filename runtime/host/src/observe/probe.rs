//! A probe measures one execution: where its wall time went, part by part.
//!
//! Measuring is *frames*: code that waits on something (a permit, the guest, a host
//! call, the log, the state store, a child, a request out) opens a [`Frame`] of its
//! [`Part`] and the frame closes when dropped. A frame's part gets the frame's time less
//! the time of the frames opened inside it, so nested frames never count twice, and
//! what no frame covers is `platform`: the parts add up to the probe's wall time by
//! construction. The probe of the running execution is a task-local ([`current`]),
//! so the wrappers of the log and the store (`timed.rs`) and the host's imports find it
//! without being handed it; code outside any execution (background work) opens frames
//! that measure nothing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tally_durable::{InstanceId, TraceRef};

use super::spans::{SpanId, Spans};

/// What an execution's time went to. The names are those of `Server-Timing`, the
/// records' breakdowns and the metrics' `part` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Part {
    /// Waiting to be admitted: the book's fair share, the function's permits.
    Queue,
    /// Making the instance.
    Instantiate,
    /// The guest's own code.
    Guest,
    /// Host calls, by interface (their own time: the log, the store, children and
    /// requests out inside them are counted apart).
    HostState,
    HostLog,
    HostObjects,
    HostQueues,
    HostLocks,
    HostContext,
    HostConfig,
    /// Child invocations, whole.
    Children,
    /// Requests out, from the send to the answer.
    Outgoing,
    /// Waiting for the shared log (appends, their group commit and fsync, reads).
    LogWait,
    /// Waiting for the state store.
    Store,
    /// Everything else: the platform's own work.
    Platform,
}

impl Part {
    pub const ALL: [Part; 15] = [
        Part::Queue,
        Part::Instantiate,
        Part::Guest,
        Part::HostState,
        Part::HostLog,
        Part::HostObjects,
        Part::HostQueues,
        Part::HostLocks,
        Part::HostContext,
        Part::HostConfig,
        Part::Children,
        Part::Outgoing,
        Part::LogWait,
        Part::Store,
        Part::Platform,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Part::Queue => "queue",
            Part::Instantiate => "instantiate",
            Part::Guest => "guest",
            Part::HostState => "host-state",
            Part::HostLog => "host-log",
            Part::HostObjects => "host-objects",
            Part::HostQueues => "host-queues",
            Part::HostLocks => "host-locks",
            Part::HostContext => "host-context",
            Part::HostConfig => "host-config",
            Part::Children => "children",
            Part::Outgoing => "outgoing",
            Part::LogWait => "log",
            Part::Store => "store",
            Part::Platform => "platform",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

const PARTS: usize = Part::ALL.len();

/// The measurements of one execution (or of one request before its execution claims it).
pub struct Probe {
    started: Instant,
    started_wall_ms: u64,
    trace: TraceRef,
    /// The span that made this execution (a `traceparent`'s, a parent's call), if any.
    parent: Option<SpanId>,
    inner: Mutex<Inner>,
    /// The spans to export, when a trace exporter is on.
    spans: Option<Arc<Spans>>,
}

struct Inner {
    /// The execution this probe measures, once one claimed it.
    owner: Option<InstanceId>,
    /// Nanoseconds per part, each frame's own time.
    parts: [u64; PARTS],
    open: Vec<Open>,
    next: u32,
    /// Earlier executions' traces of the same instance (re-executions link to them).
    links: Vec<TraceRef>,
    /// What the execution's span says (only kept when spans are exported).
    attributes: Vec<(&'static str, String)>,
}

struct Open {
    id: u32,
    part: Part,
    started: Instant,
    /// Time of the frames opened inside it.
    nested: Duration,
    /// Its time that a frame it was opened in, closed before it, counted already.
    covered: Duration,
    span: SpanId,
    detail: Option<String>,
}

impl Probe {
    /// A probe starting now, in trace `trace_id` (a fresh one if `None`), under span
    /// `parent`; `spans` collects its spans for export.
    pub fn new(trace_id: Option<[u8; 16]>, parent: Option<SpanId>, spans: Option<Arc<Spans>>) -> Arc<Probe> {
        let trace = TraceRef { trace_id: trace_id.unwrap_or_else(super::spans::trace_id), span_id: super::spans::span_id() };
        Arc::new(Probe {
            started: Instant::now(),
            started_wall_ms: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
            trace,
            parent,
            inner: Mutex::new(Inner {
                owner: None,
                parts: [0; PARTS],
                open: Vec::new(),
                next: 0,
                links: Vec::new(),
                attributes: Vec::new(),
            }),
            spans,
        })
    }

    /// The probe's trace: its trace ID and the execution's span.
    pub fn trace(&self) -> TraceRef {
        self.trace
    }

    /// The span open innermost now (a child's call), else the execution's own.
    pub fn innermost_span(&self) -> SpanId {
        let inner = self.inner.lock().expect("not poisoned");
        inner.open.last().map_or(self.trace.span_id, |o| o.span)
    }

    /// Makes this the probe of execution `id`; false if another execution has it.
    pub(super) fn claim(&self, id: &InstanceId) -> bool {
        let mut inner = self.inner.lock().expect("not poisoned");
        match &inner.owner {
            Some(owner) => owner == id,
            None => {
                inner.owner = Some(id.clone());
                true
            }
        }
    }

    pub(super) fn link(&self, first: TraceRef) {
        let mut inner = self.inner.lock().expect("not poisoned");
        if first != self.trace && !inner.links.contains(&first) && inner.links.len() < 8 {
            inner.links.push(first);
        }
    }

    /// Opens a frame of `part` on this probe; `detail` names what it waits on (a
    /// table, a callee) in its span.
    pub fn frame(self: &Arc<Probe>, part: Part, detail: Option<String>) -> Frame {
        let mut inner = self.inner.lock().expect("not poisoned");
        let id = inner.next;
        inner.next = inner.next.wrapping_add(1);
        // A span ID only for a span that will be exported.
        let span = if self.spans.is_some() { super::spans::span_id() } else { [0; 8] };
        inner.open.push(Open {
            id,
            part,
            started: Instant::now(),
            nested: Duration::ZERO,
            covered: Duration::ZERO,
            span,
            detail,
        });
        Frame { probe: Some(self.clone()), id }
    }

    fn close(&self, id: u32) {
        let ended = Instant::now();
        let mut inner = self.inner.lock().expect("not poisoned");
        let Some(at) = inner.open.iter().rposition(|o| o.id == id) else { return };
        let open = inner.open.remove(at);
        let took = ended.saturating_duration_since(open.started);
        let mut inside = open.nested;
        // A frame opened inside this one and still open (closed out of order): its time
        // so far is its, not this one's, and the frame below no longer counts it.
        if let Some(child) = inner.open.get_mut(at) {
            let so_far = ended.saturating_duration_since(child.started).saturating_sub(child.covered);
            inside += so_far;
            child.covered += so_far;
        }
        let own = took.saturating_sub(inside);
        inner.parts[open.part.index()] = inner.parts[open.part.index()].saturating_add(own.as_nanos() as u64);
        let parent = match at.checked_sub(1) {
            Some(below) => {
                inner.open[below].nested += took.saturating_sub(open.covered);
                inner.open[below].span
            }
            None => self.trace.span_id,
        };
        drop(inner);
        if let Some(spans) = &self.spans {
            spans.frame(self, open.part, open.detail, open.span, parent, open.started, ended);
        }
    }

    /// Where the time went so far, in microseconds per part (parts with none left
    /// out), `platform` being what no frame covered; they add up to the wall time.
    pub fn parts(&self) -> Vec<(Part, u64)> {
        let total = self.started.elapsed().as_nanos() as u64;
        let inner = self.inner.lock().expect("not poisoned");
        let covered = inner.parts.iter().fold(0u64, |t, p| t.saturating_add(*p));
        let mut out: Vec<(Part, u64)> = Part::ALL
            .iter()
            .filter(|p| **p != Part::Platform)
            .map(|p| (*p, inner.parts[p.index()] / 1000))
            .filter(|(_, us)| *us > 0)
            .collect();
        out.push((Part::Platform, total.saturating_sub(covered) / 1000));
        out
    }

    /// [`Probe::parts`] as a record's trailer keeps them.
    pub fn named_parts(&self) -> Vec<(String, u64)> {
        self.parts().into_iter().map(|(p, us)| (p.name().to_string(), us)).collect()
    }

    /// The breakdown `parts` (this probe's [`Probe::parts`]) as a `Server-Timing` header
    /// value (milliseconds), ending with `total`.
    pub fn server_timing(&self, parts: &[(Part, u64)]) -> String {
        use std::fmt::Write;
        let mut out = String::with_capacity(160);
        for &(part, us) in parts {
            let _ = write!(out, "{};dur={}.{:03}, ", part.name(), us / 1000, us % 1000);
        }
        let total = self.started.elapsed().as_micros();
        let _ = write!(out, "total;dur={}.{:03}", total / 1000, total % 1000);
        out
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    pub(super) fn started_at(&self) -> (Instant, u64) {
        (self.started, self.started_wall_ms)
    }

    pub(super) fn parent(&self) -> Option<SpanId> {
        self.parent
    }

    /// The execution that claimed the probe, the traces it links to and what its span
    /// says.
    pub(super) fn span_parts(&self) -> (Option<InstanceId>, Vec<TraceRef>, Vec<(&'static str, String)>) {
        let inner = self.inner.lock().expect("not poisoned");
        (inner.owner.clone(), inner.links.clone(), inner.attributes.clone())
    }

    /// Sets `key` of the execution's span to `value` (made only if spans are exported).
    pub fn annotate(&self, key: &'static str, value: impl FnOnce() -> String) {
        if self.spans.is_none() {
            return;
        }
        let value = value();
        let mut inner = self.inner.lock().expect("not poisoned");
        if let Some(slot) = inner.attributes.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else if inner.attributes.len() < 32 {
            inner.attributes.push((key, value));
        }
    }
}

/// An open measurement; it closes when dropped.
#[must_use = "a frame measures until it is dropped"]
pub struct Frame {
    probe: Option<Arc<Probe>>,
    id: u32,
}

impl Frame {
    /// A frame that measures nothing.
    pub fn none() -> Frame {
        Frame { probe: None, id: 0 }
    }

    /// The W3C `traceparent` naming this frame's span, for a request it sends.
    /// Without an exporter frames have no span of their own: the execution's is named.
    pub fn traceparent(&self) -> Option<String> {
        let probe = self.probe.as_ref()?;
        let span = probe.inner.lock().expect("not poisoned").open.iter().find(|o| o.id == self.id)?.span;
        let span_id = if span == [0; 8] { probe.trace.span_id } else { span };
        Some(super::spans::traceparent(&TraceRef { trace_id: probe.trace.trace_id, span_id }))
    }

    /// This frame's span, if its probe exports spans: what the log's own spans nest
    /// under (`tally_logsvc::trace`).
    pub fn log_parent(&self) -> Option<tally_logsvc::trace::SpanRef> {
        let probe = self.probe.as_ref()?;
        probe.spans.as_ref()?;
        let span = probe.inner.lock().expect("not poisoned").open.iter().find(|o| o.id == self.id)?.span;
        Some(tally_logsvc::trace::SpanRef { trace: probe.trace.trace_id, span })
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        if let Some(p) = &self.probe {
            p.close(self.id);
        }
    }
}

tokio::task_local! {
    static CURRENT: Arc<Probe>;
}

/// Whether measurements are compiled in (the `unobserved` feature takes them out).
pub const ENABLED: bool = !cfg!(feature = "unobserved");

/// The probe of the execution running on this task, if any.
pub fn current() -> Option<Arc<Probe>> {
    if !ENABLED {
        return None;
    }
    CURRENT.try_with(Arc::clone).ok()
}

/// Opens a frame of `part` on the current probe (one that measures nothing outside an
/// execution).
pub fn enter(part: Part) -> Frame {
    if !ENABLED {
        return Frame::none();
    }
    match CURRENT.try_with(|p| p.frame(part, None)) {
        Ok(frame) => frame,
        Err(_) => Frame::none(),
    }
}

/// [`enter`] with a detail for the frame's span, made only when spans are exported.
pub fn enter_with(part: Part, detail: impl FnOnce() -> String) -> Frame {
    if !ENABLED {
        return Frame::none();
    }
    match CURRENT.try_with(|p| p.frame(part, p.spans.is_some().then(detail))) {
        Ok(frame) => frame,
        Err(_) => Frame::none(),
    }
}

/// `fut` with `probe` as the current probe: the task-local's own future, not an async
/// function around it, so that an invocation's (large) future is moved once less. Its
/// callers hold a probe only when measurements are compiled in.
pub fn within<F: std::future::Future>(probe: Arc<Probe>, fut: F) -> tokio::task::futures::TaskLocalFuture<Arc<Probe>, F> {
    CURRENT.scope(probe, fut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(parts: &[(Part, u64)], part: Part) -> u64 {
        parts.iter().find(|(p, _)| *p == part).map_or(0, |(_, us)| *us)
    }

    #[test]
    fn nested_frames_count_once_and_the_parts_add_up_to_the_wall_time() {
        let probe = Probe::new(None, None, None);
        {
            let _guest = probe.frame(Part::Guest, None);
            std::thread::sleep(Duration::from_millis(20));
            {
                let _call = probe.frame(Part::HostState, None);
                std::thread::sleep(Duration::from_millis(5));
                let _log = probe.frame(Part::LogWait, None);
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        std::thread::sleep(Duration::from_millis(3));
        let parts = probe.parts();
        let wall = probe.elapsed().as_micros() as u64;
        let sum: u64 = parts.iter().map(|(_, us)| us).sum();
        assert!(us(&parts, Part::Guest) >= 20_000 && us(&parts, Part::Guest) < 25_000, "{parts:?}");
        assert!(us(&parts, Part::HostState) >= 5_000 && us(&parts, Part::HostState) < 10_000, "{parts:?}");
        assert!(us(&parts, Part::LogWait) >= 10_000, "{parts:?}");
        assert!(us(&parts, Part::Platform) >= 3_000, "{parts:?}");
        assert!(sum <= wall && wall - sum < 100, "parts {sum} µs, wall {wall} µs");
        let timing = probe.server_timing(&probe.parts());
        assert!(timing.starts_with("guest;dur=") && timing.contains("log;dur=") && timing.contains(", total;dur="), "{timing}");
    }

    #[test]
    fn frames_closed_out_of_order_still_count_once() {
        let probe = Probe::new(None, None, None);
        let a = probe.frame(Part::Guest, None);
        let b = probe.frame(Part::Store, None);
        std::thread::sleep(Duration::from_millis(5));
        drop(a);
        std::thread::sleep(Duration::from_millis(5));
        drop(b);
        let parts = probe.parts();
        let sum: u64 = parts.iter().map(|(_, us)| us).sum();
        assert!(sum <= probe.elapsed().as_micros() as u64, "{parts:?}");
        assert!(us(&parts, Part::Store) >= 10_000, "{parts:?}");
    }

    #[test]
    fn a_probe_is_claimed_by_one_execution() {
        let probe = Probe::new(None, None, None);
        let a = InstanceId::generated("00ff");
        assert!(probe.claim(&a));
        assert!(probe.claim(&a), "a retry of the same execution keeps it");
        assert!(!probe.claim(&a.child(1)), "a child has a probe of its own");
    }

    #[tokio::test]
    async fn frames_outside_an_execution_measure_nothing() {
        assert!(current().is_none());
        drop(enter(Part::LogWait));
        let probe = Probe::new(None, None, None);
        within(probe.clone(), async {
            let _f = enter(Part::Store);
            tokio::time::sleep(Duration::from_millis(2)).await;
        })
        .await;
        assert!(us(&probe.parts(), Part::Store) >= 2_000);
    }
}
