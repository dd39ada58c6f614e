//! Spans for export over OTLP/HTTP (JSON), when `[observe] otlp_endpoint` is set.
//!
//! A probe's frames become spans as they close, its execution one span when it ends
//! (`mod.rs`); they wait in a bounded queue (full: new spans are dropped and counted) for
//! the exporter task, which posts them in batches to `<endpoint>/v1/traces`. Spans hold
//! what was measured and names (functions, tables, callees), never keys or values.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tally_durable::TraceRef;

use super::probe::{Part, Probe};

pub type SpanId = [u8; 8];

/// Spans kept for export at most; more are dropped until the exporter catches up.
pub const QUEUED_MAX: usize = 65_536;
/// Spans in one export request at most (about 100 KB of JSON: a buffer the allocator
/// reuses, where a larger one came fresh from the kernel, zeroed, every time).
const BATCH_MAX: usize = 256;
/// How often the exporter posts what is queued.
const EXPORT_EVERY: Duration = Duration::from_millis(100);

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
#[derive(Default)]
pub struct Spans {
    /// The exporter swaps it with an empty one of the same capacity (no span moved).
    queue: Mutex<Vec<SpanRecord>>,
    dropped: AtomicU64,
    exported: AtomicU64,
}

impl Spans {
    pub fn push(&self, span: SpanRecord) {
        let mut q = self.queue.lock().expect("not poisoned");
        if q.len() >= QUEUED_MAX {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.push(span);
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

    /// Swaps every queued span into `into` (empty; its capacity serves the queue next).
    pub fn take_all(&self, into: &mut Vec<SpanRecord>) {
        std::mem::swap(&mut *self.queue.lock().expect("not poisoned"), into);
    }

    /// Spans dropped because the queue was full or an export failed.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
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

/// `spans` as an OTLP/HTTP JSON export request, written straight into bytes (the
/// exporter's cost is what the node pays for tracing: no tree of values in between).
pub fn otlp_json(spans: &[SpanRecord], service: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + spans.len() * 400);
    write_otlp_json(spans, service, &mut out).expect("a Vec takes every write");
    out
}

/// [`otlp_json`] into `out`.
fn write_otlp_json<W: std::io::Write>(spans: &[SpanRecord], service: &str, out: &mut W) -> std::io::Result<()> {
    // Strings go through serde_json, which escapes them.
    fn string<W: std::io::Write>(out: &mut W, s: &str) -> std::io::Result<()> {
        serde_json::to_writer(&mut *out, s).map_err(std::io::Error::other)
    }
    fn id<W: std::io::Write>(out: &mut W, key: &str, bytes: &[u8]) -> std::io::Result<()> {
        let mut digits = [0u8; 32];
        write!(out, r#","{key}":""#)?;
        out.write_all(hex_into(&mut digits, bytes))?;
        out.write_all(b"\"")
    }
    out.write_all(br#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"#)?;
    string(out, service)?;
    out.write_all(br#"}}]},"scopeSpans":[{"scope":{"name":"tally"},"spans":["#)?;
    for (i, s) in spans.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        out.write_all(br#"{"name":"#)?;
        string(out, &s.name)?;
        id(out, "traceId", &s.trace_id)?;
        id(out, "spanId", &s.span_id)?;
        if let Some(p) = s.parent {
            id(out, "parentSpanId", &p)?;
        }
        let end = s.end_unix_ns.max(s.start_unix_ns);
        write!(out, r#","kind":{},"startTimeUnixNano":"{}","endTimeUnixNano":"{end}","attributes":["#, s.kind, s.start_unix_ns)?;
        for (j, (k, v)) in s.attributes.iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            out.write_all(br#"{"key":"#)?;
            string(out, k)?;
            match v {
                Attr::Str(v) => {
                    out.write_all(br#","value":{"stringValue":"#)?;
                    string(out, v)?;
                }
                // OTLP's JSON has 64-bit integers as decimal strings.
                Attr::Int(n) => write!(out, r#","value":{{"intValue":"{n}""#)?,
            }
            out.write_all(b"}}")?;
        }
        out.write_all(b"]")?;
        if !s.links.is_empty() {
            out.write_all(br#","links":["#)?;
            for (j, l) in s.links.iter().enumerate() {
                if j > 0 {
                    out.write_all(b",")?;
                }
                let mut digits = [0u8; 32];
                out.write_all(br#"{"traceId":""#)?;
                out.write_all(hex_into(&mut digits, &l.trace_id))?;
                out.write_all(br#"","spanId":""#)?;
                out.write_all(hex_into(&mut digits, &l.span_id))?;
                out.write_all(br#""}"#)?;
            }
            out.write_all(b"]")?;
        }
        out.write_all(b"}")?;
    }
    out.write_all(b"]}]}]}")
}

/// `bytes` (at most 16) in lowercase hex, in `digits`.
fn hex_into<'d>(digits: &'d mut [u8; 32], bytes: &[u8]) -> &'d [u8] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in bytes.iter().take(16).enumerate() {
        digits[2 * i] = DIGITS[usize::from(b >> 4)];
        digits[2 * i + 1] = DIGITS[usize::from(b & 0xf)];
    }
    &digits[..2 * bytes.len().min(16)]
}

/// Posts queued spans to `endpoint` (an `http://host:port[/path]` base; `/v1/traces` is
/// added) until `spans` is the last reference to the queue. A failed export drops its
/// batch (counted): telemetry never holds up or grows the node.
pub async fn export(spans: Arc<Spans>, endpoint: String, service: String) {
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    let mut collector = Collector::new(&url);
    let mut tick = tokio::time::interval(EXPORT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut taken = Vec::new();
    // One buffer for every request: each body is split off it, and its memory comes back
    // once the request is sent (freed and allocated anew, a body this size came from the
    // kernel, zeroed, every time).
    let mut buf = bytes::BytesMut::new();
    loop {
        tick.tick().await;
        spans.take_all(&mut taken);
        for batch in taken.chunks(BATCH_MAX) {
            let n = batch.len() as u64;
            buf.reserve(256 + batch.len() * 400);
            write_otlp_json(batch, &service, &mut bytes::BufMut::writer(&mut buf)).expect("a buffer takes every write");
            let body = buf.split().freeze();
            let posted = match &mut collector {
                Ok(c) => c.post(body).await,
                Err(e) => Err(e.clone()),
            };
            match posted {
                Ok(()) => spans.exported.fetch_add(n, Ordering::Relaxed),
                Err(e) => {
                    tracing::debug!("exporting {n} spans to {url}: {e}");
                    spans.dropped.fetch_add(n, Ordering::Relaxed)
                }
            };
        }
        taken.clear();
        if Arc::strong_count(&spans) == 1 {
            return;
        }
    }
}

/// An OTLP/HTTP collector at a plain `http://` URL, over one kept HTTP/1.1 connection.
struct Collector {
    host: String,
    port: u16,
    authority: String,
    path: String,
    sender: Option<hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>>>,
}

/// How an export failed: before any answer on a kept connection (which the collector
/// may have closed meanwhile: worth one more try on a new one), or otherwise.
enum Failed {
    Stale(String),
    Other(String),
}

impl Collector {
    fn new(url: &str) -> Result<Collector, String> {
        let uri: http::Uri = url.parse().map_err(|e| format!("{e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err("only http:// OTLP endpoints are supported".into());
        }
        let host = uri.host().ok_or("no host")?.to_string();
        let port = uri.port_u16().unwrap_or(80);
        let authority = uri.authority().map_or(host.clone(), |a| a.to_string());
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        Ok(Collector { host, port, authority, path, sender: None })
    }

    /// One POST of `body`, bounded to 5 s.
    async fn post(&mut self, body: bytes::Bytes) -> Result<(), String> {
        match self.send(body.clone()).await {
            Ok(()) => Ok(()),
            Err(Failed::Stale(_)) => self.send(body).await.map_err(|(Failed::Stale(e) | Failed::Other(e))| e),
            Err(Failed::Other(e)) => Err(e),
        }
    }

    async fn send(&mut self, body: bytes::Bytes) -> Result<(), Failed> {
        use http_body_util::{BodyExt, Full};
        let kept = self.sender.is_some();
        let exchange = async {
            if self.sender.is_none() {
                let stream = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
                    .await
                    .map_err(|e| Failed::Other(e.to_string()))?;
                let (sender, conn) = hyper::client::conn::http1::handshake(wasmtime_wasi_http::io::TokioIo::new(stream))
                    .await
                    .map_err(|e| Failed::Other(e.to_string()))?;
                // Task otlp.connection: ends when the connection closes (the sender
                // dropped, or the collector hung up).
                tokio::spawn(conn);
                self.sender = Some(sender);
            }
            let sender = self.sender.as_mut().expect("connected above");
            let unanswered = |e: hyper::Error| if kept { Failed::Stale(e.to_string()) } else { Failed::Other(e.to_string()) };
            sender.ready().await.map_err(unanswered)?;
            let req = http::Request::post(self.path.as_str())
                .header(http::header::HOST, self.authority.as_str())
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(body))
                .map_err(|e| Failed::Other(e.to_string()))?;
            let resp = sender.send_request(req).await.map_err(unanswered)?;
            let status = resp.status();
            let _ = resp.into_body().collect().await;
            if status.is_success() {
                Ok(())
            } else {
                Err(Failed::Other(format!("the collector answered {status}")))
            }
        };
        let result = tokio::time::timeout(Duration::from_secs(5), exchange)
            .await
            .unwrap_or_else(|_| Err(Failed::Other("timed out".to_string())));
        if result.is_err() {
            self.sender = None;
        }
        result
    }
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
    fn the_export_is_otlp_json() {
        let span = |links: Vec<TraceRef>, parent| SpanRecord {
            trace_id: [0xab; 16],
            span_id: [1, 2, 3, 4, 5, 6, 7, 0xff],
            parent,
            name: "POST /v1/\"quoted\"\n".into(),
            kind: 2,
            start_unix_ns: 10,
            end_unix_ns: 5,
            attributes: vec![("tally.function", "bank".into()), ("odd", "\u{0}é\\".into()), ("n", 7u64.into())],
            links,
        };
        let link = TraceRef { trace_id: [3; 16], span_id: [4; 8] };
        let body = otlp_json(&[span(vec![], None), span(vec![link, link], Some([9; 8]))], "tally \"x\"");
        let v: serde_json::Value = serde_json::from_slice(&body).expect("valid JSON");
        let rs = &v["resourceSpans"][0];
        assert_eq!(rs["resource"]["attributes"][0]["value"]["stringValue"], "tally \"x\"");
        let spans = rs["scopeSpans"][0]["spans"].as_array().unwrap();
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0]["name"], "POST /v1/\"quoted\"\n");
        assert_eq!(spans[0]["traceId"], "abababababababababababababababab");
        assert_eq!(spans[0]["spanId"], "01020304050607ff");
        assert!(spans[0].get("parentSpanId").is_none() && spans[0].get("links").is_none());
        assert_eq!((spans[0]["kind"].as_u64(), spans[0]["startTimeUnixNano"].as_str()), (Some(2), Some("10")));
        assert_eq!(spans[0]["endTimeUnixNano"], "10", "never before the start");
        assert_eq!(spans[0]["attributes"][1]["value"]["stringValue"], "\u{0}é\\");
        assert_eq!(spans[0]["attributes"][2]["value"]["intValue"], "7");
        assert_eq!(spans[1]["parentSpanId"], "0909090909090909");
        assert_eq!(spans[1]["links"][1]["spanId"], "0404040404040404");
        assert_eq!(spans[1]["links"][0]["traceId"], "03030303030303030303030303030303");
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
        for _ in 0..QUEUED_MAX + 10 {
            spans.push(span.clone());
        }
        assert_eq!(spans.dropped(), 10);
        let mut taken = Vec::new();
        spans.take_all(&mut taken);
        assert_eq!(taken.len(), QUEUED_MAX);
        spans.push(span.clone());
        let mut again = Vec::new();
        spans.take_all(&mut again);
        assert_eq!(again.len(), 1, "room again once taken");
        let json: serde_json::Value = serde_json::from_slice(&otlp_json(&[span], "tally")).expect("json");
        assert_eq!(json["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"], "01".repeat(16));
    }
}
