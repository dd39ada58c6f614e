//! Spans for export over OTLP (`otlp.rs` posts them), when `[observe] otlp_endpoint` is
//! set.
//!
//! A probe's frames become spans as they close, its execution one span when it ends
//! (`mod.rs`); they wait in a bounded queue (full: new spans are dropped and counted) for
//! the exporter task. Spans hold what was measured and names (functions, tables,
//! callees), never keys or values.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use tally_durable::TraceRef;

use super::probe::{Part, Probe};

pub type SpanId = [u8; 8];

/// Spans kept for export at most; more are dropped until the exporter catches up.
pub const QUEUED_MAX: usize = 65_536;
/// The queue's shards: each thread pushes to one, so that executions finishing at once
/// on several threads do not wait on one lock.
const SHARDS: usize = 8;

/// One finished span.
#[derive(Clone, Debug)]
pub struct SpanRecord {
    pub trace_id: [u8; 16],
    pub span_id: SpanId,
    pub parent: Option<SpanId>,
    pub name: Cow<'static, str>,
    /// OTLP's span kind: 1 internal, 2 server, 3 client.
    pub kind: u8,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub attributes: Vec<(&'static str, Attr)>,
    pub links: Vec<TraceRef>,
}

/// An attribute's value: text, or a number (no text made for it until it is encoded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attr {
    Str(Cow<'static, str>),
    Int(u64),
}

impl From<String> for Attr {
    fn from(s: String) -> Attr {
        Attr::Str(Cow::Owned(s))
    }
}

impl From<&'static str> for Attr {
    fn from(s: &'static str) -> Attr {
        Attr::Str(Cow::Borrowed(s))
    }
}

impl From<u64> for Attr {
    fn from(n: u64) -> Attr {
        Attr::Int(n)
    }
}

/// The queue of spans waiting for export.
pub struct Spans {
    shards: Vec<Shard>,
    /// Spans in the shards (bounded by [`QUEUED_MAX`] across them).
    queued: AtomicUsize,
    dropped: AtomicU64,
    exported: AtomicU64,
}

/// One shard of the queue, aligned so that no two shards share a cache line.
#[repr(align(128))]
#[derive(Default)]
struct Shard(Mutex<Vec<SpanRecord>>);

impl Default for Spans {
    fn default() -> Self {
        Spans {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            queued: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            exported: AtomicU64::new(0),
        }
    }
}

impl Spans {
    pub fn push(&self, span: SpanRecord) {
        if self.queued.fetch_add(1, Ordering::Relaxed) >= QUEUED_MAX {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.shards[super::thread_shard(SHARDS)].0.lock().expect("not poisoned").push(span);
    }

    /// The span of a frame of `probe` that just closed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn frame(
        &self,
        probe: &Probe,
        part: Part,
        detail: Option<String>,
        span: SpanId,
        parent: SpanId,
        started: Instant,
        ended: Instant,
    ) {
        // The span's name is the part's; a detail (a table, a callee) is its one attribute.
        let attributes = detail.map(|d| vec![("tally.detail", Attr::from(d))]).unwrap_or_default();
        let kind = if part == Part::Outgoing { 3 } else { 1 };
        self.push(SpanRecord {
            trace_id: probe.trace().trace_id,
            span_id: span,
            parent: Some(parent),
            name: Cow::Borrowed(part.name()),
            kind,
            start_unix_ns: unix_ns(probe, started),
            end_unix_ns: unix_ns(probe, ended),
            attributes,
            links: Vec::new(),
        });
    }

    /// Moves every queued span to the end of `into` (the shards keep their capacity).
    pub fn take_all(&self, into: &mut Vec<SpanRecord>) {
        for shard in &self.shards {
            let mut q = shard.0.lock().expect("not poisoned");
            self.queued.fetch_sub(q.len(), Ordering::Relaxed);
            into.append(&mut q);
        }
    }

    /// Spans dropped because the queue was full or an export failed.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }

    /// Counts `n` spans as exported, or as dropped (their export failed).
    pub(super) fn count(&self, n: u64, exported: bool) {
        let counter = if exported { &self.exported } else { &self.dropped };
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// The log's spans (the engine's, the storage nodes') join the node's export queue.
impl tally_logsvc::trace::SpanSink for Spans {
    fn span(&self, span: tally_logsvc::trace::LogSpan) {
        self.push(SpanRecord {
            trace_id: span.parent.trace,
            span_id: span.span,
            parent: Some(span.parent.span),
            name: Cow::Borrowed(span.name),
            kind: 1,
            start_unix_ns: span.start_unix_ns,
            end_unix_ns: span.end_unix_ns.max(span.start_unix_ns),
            attributes: span.attributes.into_iter().map(|(k, v)| (k, Attr::Int(v))).collect(),
            links: Vec::new(),
        });
    }
}

/// `at` on the wall clock, from the probe's start.
pub(super) fn unix_ns(probe: &Probe, at: Instant) -> u64 {
    let (started, wall_ms) = probe.started_at();
    let since = at.saturating_duration_since(started).as_nanos() as u64;
    wall_ms.saturating_mul(1_000_000).saturating_add(since)
}

pub use tally_logsvc::trace::{span_id, trace_id};

/// A W3C `traceparent` header's trace ID and parent span, if it is well formed
/// (version 00 or a later one's first four fields; IDs not all zeros).
pub fn parse_traceparent(value: &str) -> Option<([u8; 16], SpanId)> {
    let mut fields = value.trim().split('-');
    let version = fields.next()?;
    let (trace, span, flags) = (fields.next()?, fields.next()?, fields.next()?);
    if version.len() != 2 || version == "ff" || !hex_ok(version) || flags.len() != 2 || !hex_ok(flags) {
        return None;
    }
    if version == "00" && fields.next().is_some() {
        return None;
    }
    let trace: [u8; 16] = unhex(trace)?.try_into().ok()?;
    let span: SpanId = unhex(span)?.try_into().ok()?;
    (trace != [0; 16] && span != [0; 8]).then_some((trace, span))
}

fn hex_ok(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !hex_ok(s) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

fn hex(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    String::from_utf8(out).expect("hex digits are ASCII")
}

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 0xf)]);
    }
}

/// The `traceparent` header naming `trace` (sampled).
pub fn traceparent(trace: &TraceRef) -> String {
    format!("00-{}-{}-01", hex(&trace.trace_id), hex(&trace.span_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_parsed_as_w3c_says() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let (t, s) = parse_traceparent(ok).expect("valid");
        assert_eq!(hex(&t), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&s), "00f067aa0ba902b7");
        assert_eq!(traceparent(&TraceRef { trace_id: t, span_id: s }), ok);
        assert!(parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later").is_some());
        for bad in [
            "",
            "garbage",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47é6-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ids_are_random_and_never_zero() {
        let a = trace_id();
        let b = trace_id();
        assert_ne!(a, b);
        assert_ne!(a, [0; 16]);
        assert_ne!(span_id(), [0; 8]);
    }

    #[test]
    fn the_queue_is_bounded() {
        let spans = Spans::default();
        let span = SpanRecord {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent: None,
            name: "x".into(),
            kind: 1,
            start_unix_ns: 1,
            end_unix_ns: 2,
            attributes: vec![],
            links: vec![],
        };
        // Two threads fill the queue: the bound is the queue's, whichever shards they use.
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..QUEUED_MAX / 2 + 5 {
                        spans.push(span.clone());
                    }
                });
            }
        });
        assert_eq!(spans.dropped(), 10);
        let mut taken = Vec::new();
        spans.take_all(&mut taken);
        assert_eq!(taken.len(), QUEUED_MAX);
        spans.push(span.clone());
        let mut again = Vec::new();
        spans.take_all(&mut again);
        assert_eq!(again.len(), 1, "room again once taken");
    }
}
