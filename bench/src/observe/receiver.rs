//! The OTLP/HTTP receiver of the `observe` suite: answers every export and counts its
//! requests, bytes and spans.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::{OTLP_BODY_BYTES_MAX, SETTLE_MAX, SETTLE_QUIET};

/// What the receiver got so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Received {
    pub(super) posts: u64,
    /// Bytes of the request bodies.
    pub(super) bytes: u64,
    pub(super) spans: u64,
}

#[derive(Default)]
pub(super) struct Counts {
    pub(super) posts: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) spans: AtomicU64,
}

/// An OTLP/HTTP collector on loopback: answers 200 to every `POST /v1/traces` and
/// counts the requests, their bodies' bytes and their spans. It serves one connection
/// at a time on a thread of its own, which is all an exporter that posts one batch at a
/// time needs; a connection idle for 10 s is closed. Stopped when dropped.
pub(super) struct Receiver {
    pub(super) addr: SocketAddr,
    pub(super) counts: Arc<Counts>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) thread: Option<JoinHandle<()>>,
}

impl Receiver {
    pub(super) fn start() -> anyhow::Result<Receiver> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding the OTLP receiver")?;
        let addr = listener.local_addr()?;
        let (counts, stop) = (Arc::new(Counts::default()), Arc::new(AtomicBool::new(false)));
        let thread = {
            let (counts, stop) = (counts.clone(), stop.clone());
            std::thread::Builder::new()
                .name("otlp-receiver".into())
                .spawn(move || {
                    for stream in listener.incoming() {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        // A broken connection costs the exporter that batch, which the
                        // counts then miss: the node counts it as dropped.
                        if let Err(e) = stream.and_then(|s| serve_otlp(s, &counts)) {
                            eprintln!("observe: OTLP receiver: {e}");
                        }
                    }
                })
                .context("spawning the OTLP receiver")?
        };
        Ok(Receiver { addr, counts, stop, thread: Some(thread) })
    }

    pub(super) fn received(&self) -> Received {
        let c = &self.counts;
        Received {
            posts: c.posts.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            spans: c.spans.load(Ordering::Relaxed),
        }
    }

    /// The counts once nothing arrived for [`SETTLE_QUIET`]: everything finished before
    /// the call has been exported by then.
    pub(super) fn settle(&self) -> Received {
        let deadline = Instant::now() + SETTLE_MAX;
        let mut last = self.received();
        loop {
            std::thread::sleep(SETTLE_QUIET);
            let now = self.received();
            if now == last || Instant::now() > deadline {
                return now;
            }
            last = now;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serves the requests of one connection until it closes.
pub(super) fn serve_otlp(stream: TcpStream, counts: &Counts) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut words = line.split_whitespace();
        let (method, path) = (words.next().unwrap_or_default().to_owned(), words.next().unwrap_or_default().to_owned());
        let mut length = 0;
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().map_err(|_| std::io::Error::other(format!("a Content-Length {value:?}")))?;
                }
            }
        }
        if length > OTLP_BODY_BYTES_MAX {
            writer.write_all(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
            return Ok(());
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let answer: &[u8] = if method == "POST" && path == "/v1/traces" {
            counts.posts.fetch_add(1, Ordering::Relaxed);
            counts.bytes.fetch_add(length as u64, Ordering::Relaxed);
            counts.spans.fetch_add(spans_in(&body), Ordering::Relaxed);
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"
        } else {
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        };
        writer.write_all(answer)?;
    }
}

/// The spans of an OTLP/HTTP protobuf export request (`ExportTraceServiceRequest`:
/// `resource_spans` 1 → `scope_spans` 2 → `spans` 2), counted by walking the wire format
/// without decoding a span, so that the receiver takes little of the machine the nodes
/// are measured on. A malformed body counts the spans before the fault.
pub(super) fn spans_in(body: &[u8]) -> u64 {
    let mut spans = 0;
    for resource_spans in length_delimited(body, 1) {
        for scope_spans in length_delimited(resource_spans, 2) {
            spans += length_delimited(scope_spans, 2).count() as u64;
        }
    }
    spans
}

/// The length-delimited fields numbered `number` of a protobuf message, skipping the
/// others; it stops at the first malformed field.
fn length_delimited(mut message: &[u8], number: u64) -> impl Iterator<Item = &[u8]> {
    fn varint(b: &mut &[u8]) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (byte, rest) = b.split_first()?;
            *b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if *byte < 0x80 {
                return Some(v);
            }
        }
        None
    }
    std::iter::from_fn(move || loop {
        let key = varint(&mut message)?;
        let skip = match key & 7 {
            0 => {
                varint(&mut message)?;
                0
            }
            1 => 8,
            2 => usize::try_from(varint(&mut message)?).ok()?,
            5 => 4,
            _ => return None,
        };
        if skip > message.len() {
            return None;
        }
        let (value, rest) = message.split_at(skip);
        message = rest;
        if key & 7 == 2 && key >> 3 == number {
            return Some(value);
        }
    })
}
