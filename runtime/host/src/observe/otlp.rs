//! The exporter: queued spans posted to `<endpoint>/v1/traces` as OTLP/HTTP protobuf
//! (`opentelemetry/proto/collector/trace/v1`, the protocol's default encoding), over one
//! kept HTTP/1.1 connection.
//!
//! The request is written straight into bytes, its lengths computed first: no message
//! objects in between, no text for IDs or numbers (what the exporter costs is what the
//! node pays for tracing).

use std::sync::Arc;
use std::time::Duration;

use bytes::BufMut;

use super::spans::{Attr, SpanRecord, Spans};

/// Spans in one export request at most (about 40 KB: a buffer the allocator reuses).
const BATCH_MAX: usize = 256;
/// How often the exporter posts what is queued.
const EXPORT_EVERY: Duration = Duration::from_millis(100);

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
    // once the request is sent.
    let mut buf = bytes::BytesMut::new();
    loop {
        tick.tick().await;
        spans.take_all(&mut taken);
        for batch in taken.chunks(BATCH_MAX) {
            let n = batch.len() as u64;
            encode(batch, &service, &mut buf);
            let body = buf.split().freeze();
            let posted = match &mut collector {
                Ok(c) => c.post(body).await,
                Err(e) => Err(e.clone()),
            };
            if let Err(e) = &posted {
                tracing::debug!("exporting {n} spans to {url}: {e}");
            }
            spans.count(n, posted.is_ok());
        }
        taken.clear();
        if Arc::strong_count(&spans) == 1 {
            return;
        }
    }
}

/// `spans` as an `ExportTraceServiceRequest` of one resource (`service.name` =
/// `service`) and one scope (`tally`), appended to `out` (which grows once, by the
/// request's size).
pub fn encode(spans: &[SpanRecord], service: &str, out: &mut bytes::BytesMut) {
    let scope = len_field(1, str_field(1, "tally"));
    let scope_spans = scope + spans.iter().map(|s| len_field(2, span_len(s))).sum::<usize>();
    let resource_spans = len_field(1, resource_len(service)) + len_field(2, scope_spans);
    out.reserve(len_field(1, resource_spans));
    // ExportTraceServiceRequest.resource_spans (1)
    header(out, 1, resource_spans);
    // ResourceSpans.resource (1): Resource.attributes (1)
    header(out, 1, resource_len(service));
    key_value(out, 1, "service.name", Value::Str(service));
    // ResourceSpans.scope_spans (2): ScopeSpans.scope (1) { name (1) }, spans (2)
    header(out, 2, scope_spans);
    header(out, 1, str_field(1, "tally"));
    string(out, 1, "tally");
    for s in spans {
        header(out, 2, span_len(s));
        span(out, s);
    }
}

fn resource_len(service: &str) -> usize {
    len_field(1, key_value_len("service.name", Value::Str(service)))
}

/// A `Span`'s fields: trace_id 1, span_id 2, parent_span_id 4, name 5, kind 6,
/// start_time_unix_nano 7, end_time_unix_nano 8 (fixed64), attributes 9, links 13.
fn span(out: &mut impl BufMut, s: &SpanRecord) {
    bytes_field(out, 1, &s.trace_id);
    bytes_field(out, 2, &s.span_id);
    if let Some(p) = &s.parent {
        bytes_field(out, 4, p);
    }
    string(out, 5, &s.name);
    if s.kind != 0 {
        tag(out, 6, VARINT);
        varint(out, u64::from(s.kind));
    }
    tag(out, 7, FIXED64);
    out.put_u64_le(s.start_unix_ns);
    tag(out, 8, FIXED64);
    out.put_u64_le(s.end_unix_ns.max(s.start_unix_ns));
    for (k, v) in &s.attributes {
        key_value(out, 9, k, v.into());
    }
    for l in &s.links {
        // Link: trace_id 1, span_id 2.
        header(out, 13, link_len());
        bytes_field(out, 1, &l.trace_id);
        bytes_field(out, 2, &l.span_id);
    }
}

fn span_len(s: &SpanRecord) -> usize {
    let parent = s.parent.map_or(0, |p| len_field(4, p.len()));
    let kind = if s.kind == 0 { 0 } else { 1 + varint_len(u64::from(s.kind)) };
    let attributes: usize = s.attributes.iter().map(|(k, v)| len_field(9, key_value_len(k, v.into()))).sum();
    len_field(1, s.trace_id.len())
        + len_field(2, s.span_id.len())
        + parent
        + str_field(5, &s.name)
        + kind
        + 2 * (1 + 8)
        + attributes
        + s.links.len() * len_field(13, link_len())
}

fn link_len() -> usize {
    len_field(1, 16) + len_field(2, 8)
}

/// An attribute's value, borrowed.
#[derive(Clone, Copy)]
enum Value<'a> {
    Str(&'a str),
    Int(u64),
}

impl<'a> From<&'a Attr> for Value<'a> {
    fn from(a: &'a Attr) -> Value<'a> {
        match a {
            Attr::Str(s) => Value::Str(s),
            Attr::Int(n) => Value::Int(*n),
        }
    }
}

/// A `KeyValue` (key 1, value 2: an `AnyValue` of string_value 1 or int_value 3) as
/// field `field`.
fn key_value(out: &mut impl BufMut, field: u32, key: &str, value: Value) {
    header(out, field, key_value_len(key, value));
    string(out, 1, key);
    header(out, 2, any_value_len(value));
    match value {
        Value::Str(s) => string(out, 1, s),
        Value::Int(n) => {
            tag(out, 3, VARINT);
            varint(out, n);
        }
    }
}

fn key_value_len(key: &str, value: Value) -> usize {
    str_field(1, key) + len_field(2, any_value_len(value))
}

fn any_value_len(value: Value) -> usize {
    match value {
        Value::Str(s) => str_field(1, s),
        Value::Int(n) => 1 + varint_len(n),
    }
}

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

fn tag(out: &mut impl BufMut, field: u32, wire: u8) {
    varint(out, u64::from(field) << 3 | u64::from(wire));
}

/// A length-delimited field's tag and length (its bytes follow).
fn header(out: &mut impl BufMut, field: u32, len: usize) {
    tag(out, field, LEN);
    varint(out, len as u64);
}

fn bytes_field(out: &mut impl BufMut, field: u32, bytes: &[u8]) {
    header(out, field, bytes.len());
    out.put_slice(bytes);
}

fn string(out: &mut impl BufMut, field: u32, s: &str) {
    bytes_field(out, field, s.as_bytes());
}

/// The bytes of a length-delimited field of `len` bytes (field numbers below 16).
fn len_field(_field: u32, len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

fn str_field(field: u32, s: &str) -> usize {
    len_field(field, s.len())
}

fn varint(out: &mut impl BufMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8(v as u8 | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
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
                .header(http::header::CONTENT_TYPE, "application/x-protobuf")
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
    use tally_durable::TraceRef;

    use super::*;

    /// A protobuf message read as its fields in order: (number, varint or bytes).
    fn fields(mut b: &[u8]) -> Vec<(u64, Result<u64, Vec<u8>>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let byte = b[0];
                *b = &b[1..];
                v |= u64::from(byte & 0x7f) << shift;
                shift += 7;
                if byte < 0x80 {
                    return v;
                }
            }
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            let value = match key & 7 {
                0 => Ok(varint(&mut b)),
                1 => {
                    let v = u64::from_le_bytes(b[..8].try_into().unwrap());
                    b = &b[8..];
                    Ok(v)
                }
                2 => {
                    let n = varint(&mut b) as usize;
                    let v = b[..n].to_vec();
                    b = &b[n..];
                    Err(v)
                }
                w => panic!("wire type {w}"),
            };
            out.push((key >> 3, value));
        }
        out
    }

    fn bytes_of(f: &[(u64, Result<u64, Vec<u8>>)], n: u64) -> Vec<Vec<u8>> {
        f.iter().filter(|(k, _)| *k == n).map(|(_, v)| v.clone().expect_err("bytes")).collect()
    }

    fn number(f: &[(u64, Result<u64, Vec<u8>>)], n: u64) -> Option<u64> {
        f.iter().find(|(k, _)| *k == n).map(|(_, v)| *v.as_ref().expect("a number"))
    }

    #[test]
    fn the_export_is_otlp_protobuf() {
        let span = |links: Vec<TraceRef>, parent| SpanRecord {
            trace_id: [0xab; 16],
            span_id: [1, 2, 3, 4, 5, 6, 7, 0xff],
            parent,
            name: "POST /v1/\"quoted\"\n".into(),
            kind: 2,
            start_unix_ns: 1_796_486_742_863_000_001,
            end_unix_ns: 5,
            attributes: vec![("tally.function", "bank".into()), ("odd", "\u{0}é\\".into()), ("n", (1u64 << 40).into())],
            links,
        };
        let link = TraceRef { trace_id: [3; 16], span_id: [4; 8] };
        let long = "x".repeat(300);
        let mut body = bytes::BytesMut::new();
        encode(&[span(vec![], None), span(vec![link, link], Some([9; 8]))], &long, &mut body);
        assert_eq!(body.capacity(), body.len(), "the reserved size is the encoded size");
        let request = fields(&body);
        assert_eq!(request.len(), 1);
        let resource_spans = fields(&bytes_of(&request, 1)[0]);
        let resource = fields(&bytes_of(&resource_spans, 1)[0]);
        let service = fields(&bytes_of(&resource, 1)[0]);
        assert_eq!(bytes_of(&service, 1), vec![b"service.name".to_vec()]);
        assert_eq!(bytes_of(&fields(&bytes_of(&service, 2)[0]), 1), vec![long.as_bytes().to_vec()]);
        let scope_spans = fields(&bytes_of(&resource_spans, 2)[0]);
        assert_eq!(bytes_of(&fields(&bytes_of(&scope_spans, 1)[0]), 1), vec![b"tally".to_vec()]);
        let spans: Vec<_> = bytes_of(&scope_spans, 2).iter().map(|s| fields(s)).collect();
        assert_eq!(spans.len(), 2);
        let s = &spans[0];
        assert_eq!(bytes_of(s, 1), vec![vec![0xab; 16]]);
        assert_eq!(bytes_of(s, 2), vec![vec![1, 2, 3, 4, 5, 6, 7, 0xff]]);
        assert!(bytes_of(s, 4).is_empty() && bytes_of(s, 13).is_empty());
        assert_eq!(bytes_of(s, 5), vec![b"POST /v1/\"quoted\"\n".to_vec()]);
        assert_eq!(number(s, 6), Some(2));
        assert_eq!(number(s, 7), Some(1_796_486_742_863_000_001));
        assert_eq!(number(s, 8), Some(1_796_486_742_863_000_001), "never before the start");
        let attributes: Vec<_> = bytes_of(s, 9).iter().map(|a| fields(a)).collect();
        assert_eq!(bytes_of(&attributes[1], 1), vec![b"odd".to_vec()]);
        assert_eq!(bytes_of(&fields(&bytes_of(&attributes[1], 2)[0]), 1), vec!["\u{0}é\\".as_bytes().to_vec()]);
        assert_eq!(number(&fields(&bytes_of(&attributes[2], 2)[0]), 3), Some(1 << 40));
        let s = &spans[1];
        assert_eq!(bytes_of(s, 4), vec![vec![9; 8]]);
        let links: Vec<_> = bytes_of(s, 13).iter().map(|l| fields(l)).collect();
        assert_eq!(links.len(), 2);
        assert_eq!((bytes_of(&links[1], 1), bytes_of(&links[1], 2)), (vec![vec![3; 16]], vec![vec![4; 8]]));
    }

    #[test]
    fn varint_lengths_match_the_encoding() {
        for v in [0, 1, 127, 128, 16_383, 16_384, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v), "{v}");
        }
    }
}
