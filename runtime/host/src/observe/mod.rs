//! What the node sees of its executions: a latency breakdown of each (always on), and
//! traces over OTLP (when an endpoint is set).
//!
//! ```text
//!  gateway: Probe::new (traceparent in) ─ within(probe, invoke) ─► Server-Timing, trace ID out
//!     Durable::run ─ Observe::scope(id) ─► claims the request's probe, or a new one (a child,
//!                                          background work) under the current span
//!     frames (probe.rs): queue, instantiate, guest, host calls (host/), log and store
//!                        (timed.rs wraps the core's LogBook and StateStore), children, outgoing
//!     Result record ◄─ Observe::parts (the breakdown so far) and ::trace, kept in its trailer
//!     spans.rs: closed frames and ended executions → otlp.rs: the exporter task → <endpoint>/v1/traces
//! ```
//!
//! Frames cost a lock and two clock reads each; without an exporter no span is made.

mod histogram;
mod otlp;
pub mod probe;
pub mod spans;
mod timed;

use std::sync::Arc;

use tally_durable::{BoxFuture, InstanceId, Observe, TraceRef};

pub use histogram::PartHistograms;
pub use probe::{current, enter, enter_with, within, Frame, Part, Probe, ENABLED};
pub use spans::{parse_traceparent, traceparent, Attr, SpanRecord, Spans};
pub use timed::{TimedLog, TimedStore};

/// The node's observer: the core's [`Observe`] on probes, the metrics' histograms and the
/// span queue (if traces are exported).
#[derive(Clone)]
pub struct Observer {
    pub histograms: Arc<PartHistograms>,
    pub spans: Option<Arc<Spans>>,
}

impl Observer {
    /// An observer that exports spans to `otlp_endpoint` if one is given (the exporter
    /// runs on the current tokio runtime until the observer is dropped).
    pub fn start(otlp_endpoint: Option<&str>, histograms: Arc<PartHistograms>) -> Observer {
        let spans = otlp_endpoint.map(|endpoint| {
            let spans = Arc::new(Spans::default());
            tokio::spawn(otlp::export(spans.clone(), endpoint.to_string(), "tally".to_string()));
            spans
        });
        Observer { histograms, spans }
    }

    /// A probe for a request arriving now with the `traceparent` header `parent`
    /// (ignored unless well formed).
    pub fn request(&self, parent: Option<&str>) -> Arc<Probe> {
        let parent = parent.and_then(parse_traceparent);
        Probe::new(parent.map(|p| p.0), parent.map(|p| p.1), self.spans.clone())
    }

    /// Ends a probe made by [`Observer::request`] or a scope, whose breakdown is `parts`:
    /// the breakdown to the histograms, its span (named `name`, with `attributes`, made
    /// only then) to the exporter.
    pub fn finish(
        &self,
        probe: &Probe,
        parts: &[(Part, u64)],
        name: &str,
        kind: u8,
        attributes: impl FnOnce() -> Vec<(&'static str, String)>,
    ) {
        self.histograms.record(parts);
        if let Some(spans) = &self.spans {
            let (owner, links, own) = probe.span_parts();
            let mut attributes: Vec<(&'static str, Attr)> =
                attributes().into_iter().chain(own).map(|(k, v)| (k, Attr::from(v))).collect();
            if let Some(id) = owner {
                attributes.push(("tally.invocation_id", Attr::from(id.to_string())));
            }
            for (part, us) in parts {
                attributes.push((part_attribute(*part), Attr::Int(*us)));
            }
            let (started, _) = probe.started_at();
            spans.push(SpanRecord {
                trace_id: probe.trace().trace_id,
                span_id: probe.trace().span_id,
                parent: probe.parent(),
                name: name.to_string().into(),
                kind,
                start_unix_ns: spans::unix_ns(probe, started),
                end_unix_ns: spans::unix_ns(probe, started + probe.elapsed()),
                attributes,
                links,
            });
        }
    }
}

/// The span attribute of a part's microseconds.
fn part_attribute(part: Part) -> &'static str {
    match part {
        Part::Queue => "tally.us.queue",
        Part::Instantiate => "tally.us.instantiate",
        Part::Guest => "tally.us.guest",
        Part::HostState => "tally.us.host-state",
        Part::HostLog => "tally.us.host-log",
        Part::HostObjects => "tally.us.host-objects",
        Part::HostQueues => "tally.us.host-queues",
        Part::HostLocks => "tally.us.host-locks",
        Part::HostContext => "tally.us.host-context",
        Part::HostConfig => "tally.us.host-config",
        Part::Children => "tally.us.children",
        Part::Outgoing => "tally.us.outgoing",
        Part::LogWait => "tally.us.log",
        Part::Store => "tally.us.store",
        Part::Platform => "tally.us.platform",
    }
}

impl Observe for Observer {
    fn scope<'a>(&self, id: &InstanceId, run: BoxFuture<'a, ()>) -> BoxFuture<'a, ()> {
        if !probe::ENABLED {
            return run;
        }
        let current = probe::current();
        if let Some(p) = &current {
            if p.claim(id) {
                return run;
            }
        }
        // A child (under its parent's call), or work no request waits for.
        let probe =
            Probe::new(current.as_ref().map(|p| p.trace().trace_id), current.map(|p| p.innermost_span()), self.spans.clone());
        probe.claim(id);
        let this = self.clone();
        let name = if id.is_root() { "execute" } else { "child" };
        Box::pin(async move {
            probe::within(probe.clone(), run).await;
            this.finish(&probe, &probe.parts(), name, 1, Vec::new);
        })
    }

    fn claims(&self, id: &InstanceId) -> bool {
        probe::current().is_some_and(|p| p.claim(id))
    }

    fn trace(&self) -> Option<TraceRef> {
        probe::current().map(|p| p.trace())
    }

    fn parts(&self) -> Vec<(String, u64)> {
        probe::current().map(|p| p.named_parts()).unwrap_or_default()
    }

    fn recorded(&self, first: &TraceRef) {
        if let Some(p) = probe::current() {
            p.link(*first);
        }
    }
}

/// This thread's shard of `shards` (threads take shards in turn, so that the few threads
/// of a node's runtime each have one of their own).
fn thread_shard(shards: usize) -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SHARD.with(|s| *s) % shards
}

/// Adds `key = value` to what the span of the current execution will say.
pub fn annotate(key: &'static str, value: impl FnOnce() -> String) {
    if let Some(p) = probe::current() {
        p.annotate(key, value);
    }
}
